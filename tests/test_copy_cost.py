"""What a batch's copy costs (`analysis/copy_cost.py`): GPU102 names the pageable copy's cost where the code shows
the batch's bytes, GPU105 is silent where the code shows fewer than 16 MiB a batch (a blocking copy from pinned
memory then costs one drain and under ~0.3 ms), and a transform written as a lambda around `ToTensor()` counts
its bytes (the fifteenth corpus's MNIST autoencoder: 200 KB batches, GPU105 noise for both judges)."""

from __future__ import annotations

import libcst as cst
import pytest

from gpulint.analysis import SemanticModel
from gpulint.analysis.batch_bytes import batch_bytes
from tests.conftest import diagnostics, run_gpulint
from tests.projects_helper import found as found_at
from tests.projects_helper import lint, write

IMAGES = """\
import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms
from torchvision.transforms import ToTensor

device = torch.device("cuda")
transform = {transform}
train_ds = torchvision.datasets.{dataset}(root="data", train=True, transform=transform, download=True)
loader = DataLoader(train_ds, batch_size={batch}, shuffle=True, num_workers=2{pin})
for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        model(x, y).backward()
"""
FLATTEN = "lambda x: ToTensor()(x).view(28**2)"


def source(dataset="MNIST", batch=64, transform=FLATTEN, pin=False) -> str:
    return IMAGES.format(dataset=dataset, batch=batch, transform=transform, pin=", pin_memory=True" if pin else "")


UNPROVEN_COST = (("GPU105", (("unproven-cost", True),)),)
UNPROVEN_PINNING = (("GPU102", (("unproven-cost", True),)),)


def found(text: str, code: str, rule_options=()) -> list:
    return [d for d in diagnostics(text, rule_options=rule_options) if d.code == code]


def loader_bytes(text: str):
    model = SemanticModel(cst.parse_module(text), "m.py")
    return [batch_bytes(model, info.loader) for info in model.loader_flow.infos]


@pytest.mark.parametrize(
    "transform",
    [
        FLATTEN,
        "lambda img: transforms.ToTensor()(img).flatten()",
        "lambda x: ToTensor()(x).reshape(-1).contiguous()",
        "transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda x: x.view(-1))])",
    ],
)
def test_a_lambda_that_only_rearranges_the_converted_image_keeps_its_bytes(transform):
    assert loader_bytes(source(transform=transform)) == [64 * (28 * 28 * 4 + 8)]
    assert found(source(transform=transform), "GPU102") == []  # 200 KB: nothing measurable
    assert found(source(transform=transform, pin=True), "GPU105") == []


@pytest.mark.parametrize(
    "transform",
    [
        "lambda img: ToTensor()(img).expand_as(frame)",  # more elements
        "lambda img: ToTensor()(img).flatten().double()",  # another dtype
        "lambda img: ToTensor()(img).view(torch.float16)",  # reinterpreted as another dtype
        "lambda img: ToTensor()(img.resize((224, 224)))",  # another image
        "lambda img, size: ToTensor()(img)",
        "transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda img: img.repeat(3, 1, 1))])",
    ],
)
def test_a_lambda_that_changes_the_elements_leaves_the_bytes_unknown(transform):
    assert loader_bytes(source(transform=transform)) == [None]
    assert found(source(transform=transform), "GPU102") == []  # no evidence of a cost
    assert len(found(source(transform=transform), "GPU102", UNPROVEN_PINNING)) == 1
    assert found(source(transform=transform, pin=True), "GPU105") == []  # no evidence of a cost
    assert len(found(source(transform=transform, pin=True), "GPU105", UNPROVEN_COST)) == 2


def test_gpu102_names_the_pageable_copy_it_measured():
    (finding,) = found(source("CIFAR10", 512, "transforms.ToTensor()"), "GPU102")  # 512 x (3x32x32 float32 + label)
    assert finding.help.startswith("~6.3 MB a batch: ~0.45-0.79 ms a step pageable (8-14 GB/s, after a wait for the queue), ~0.12 ms pinned. ")
    assert "does not show a batch's bytes" not in finding.help


def test_gpu102_of_unknown_size_is_silent_by_default():
    # an ImageFolder's images: the code does not show their size (four corpora's judges: 1 such finding right for
    # both against 67 noise for both)
    assert found(source("ImageFolder", 64, "transforms.ToTensor()"), "GPU102") == []


def test_gpu102_says_when_the_bytes_are_not_shown():
    (finding,) = found(source("ImageFolder", 64, "transforms.ToTensor()"), "GPU102", UNPROVEN_PINNING)
    assert "MB a batch" not in finding.message
    assert "its cost is unproven (the code does not show a batch's bytes;" in finding.help


def test_gpu102_small_batch_stays_silent_with_the_option():
    # the option adds unknown sizes only: MNIST at 64 (~200 KB) is known cheap either way
    assert found(source(), "GPU102", UNPROVEN_PINNING) == []


def test_gpu105_is_silent_below_16_mib_a_batch():
    # 6.3 MB: one drain and ~0.12 ms of copy at 54 GB/s, under a measurable share of a step
    assert found(source("CIFAR10", 512, "transforms.ToTensor()", pin=True), "GPU105") == []


def test_gpu105_names_a_large_batch_it_reports():
    reported = found(source("CIFAR10", 2048, "transforms.ToTensor()", pin=True), "GPU105")  # 25.2 MB
    assert [d.location.column for d in reported] == [16, 30]
    assert reported[0].message == "`x.to(device)` copies a batch of a pinned `DataLoader` (line 10) and blocks"
    assert reported[0].help.startswith("~25.2 MB a batch: ~0.47 ms at 54 GB/s, after a drain of the queue. The host waits")


def test_gpu105_of_unknown_size_is_silent_by_default():
    # an ImageFolder's images: the code does not show their size, so nothing says the copy costs a measurable share
    # (both judges of the fourteenth and fifteenth corpora: every GPU105 finding noise, none right)
    assert found(source("ImageFolder", 64, "transforms.ToTensor()", pin=True), "GPU105") == []


def test_gpu105_of_unknown_size_with_the_option_says_what_it_costs():
    reported = found(source("ImageFolder", 64, "transforms.ToTensor()", pin=True), "GPU105", UNPROVEN_COST)
    assert [d.location.column for d in reported] == [16, 30]
    assert "MB a batch" not in reported[0].message
    assert "the code does not show the batch's bytes" in reported[0].help


def test_gpu105_small_batch_stays_silent_with_the_option():
    # the option adds unknown sizes only: a batch shown below 16 MiB is known cheap either way
    assert found(source("CIFAR10", 512, "transforms.ToTensor()", pin=True), "GPU105", UNPROVEN_COST) == []


SUBSET = """\
import torch
import torchvision
from torch.utils.data import DataLoader, Dataset, Subset
from torchvision import transforms

device = torch.device("cuda")
dataset = {base}


class SubsetWithTransform({parent}):
    def __init__(self, dataset, indices, transform=None):
        super().__init__(dataset, indices)
        self.transform = transform

    def __getitem__(self, idx):
        x, y = super().__getitem__(idx)
        return self.transform(x.convert("RGB")), y


train_set = SubsetWithTransform(dataset, list(range(1000)), transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()]))
loader = DataLoader(train_set, batch_size=64, shuffle=True)
model = torchvision.models.resnet18().to(device)
for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        model(x).sum().backward()
"""
CALTECH = 'torchvision.datasets.Caltech101(root="data", download=True)'


def test_a_subset_class_over_a_torchvision_dataset_makes_its_images_in_the_training_process():
    # GPU101 reports the loader (no workers, an image decoded and transformed per item); pinning there is one
    # more host copy in the same process: GPU102 leaves it to GPU101 (`loader_bound.loading_dominates`)
    codes = [d.code for d in diagnostics(SUBSET.format(base=CALTECH, parent="Subset"))]
    assert "GPU101" in codes and "GPU102" not in codes


@pytest.mark.parametrize(
    ("base", "parent"),
    [
        ("torch.load('images.pt')", "Subset"),  # items the code does not show
        (CALTECH, "Dataset"),  # not a Subset: its items are whatever its own `__getitem__` makes
    ],
)
def test_a_subset_class_over_other_data_keeps_gpu102(base, parent):
    source = SUBSET.format(base=base, parent=parent)
    if parent == "Dataset":
        source = source.replace("super().__init__(dataset, indices)", "self.dataset, self.indices = dataset, indices")
        source = source.replace("x, y = super().__getitem__(idx)", "x, y = self.dataset[self.indices[idx]]")
    assert "GPU102" in [d.code for d in diagnostics(source)]


# ---- GPU105's evidence: a batch shown at 16 MiB or more; an unknown size is silent unless `unproven-cost` -----------

HELPER = """\
import torch


def to_device(batch, device):
    return [t.to(device) for t in batch]
"""
HELPED = """\
import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms

from helpers import to_device

device = torch.device("cuda")
train_set = {dataset}
loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
for epoch in range(10):
    for batch in loader:
        images, labels = to_device(batch, device)
        model(images, labels).backward()
"""
UPSCALED = 'torchvision.datasets.CIFAR10(root="data", transform=transforms.Compose([transforms.Resize(224), transforms.ToTensor()]))'
FOLDER = 'torchvision.datasets.ImageFolder("data/train", transform=transforms.ToTensor())'


def helped(tmp_path, monkeypatch, dataset: str, rule_options=()):
    files = {"helpers.py": HELPER, "train.py": HELPED.format(dataset=dataset)}
    return lint(write(tmp_path, files), monkeypatch, select=("GPU105",), rule_options=rule_options)


def test_a_large_batch_copied_by_a_project_helper_names_its_estimate(tmp_path, monkeypatch):
    # 64 x 3 x 224 x 224 float32: ~38.5 MB a batch
    (finding,) = helped(tmp_path, monkeypatch, UPSCALED)
    assert (finding.location.row, finding.fix) == (13, None)
    assert "(line 10) at helpers.py:5" in finding.message
    assert finding.help.startswith("~38.5 MB a batch: ~0.71 ms at 54 GB/s, after a drain of the queue. The host waits")
    assert "does not show the batch's bytes" not in finding.help


def test_a_batch_of_unknown_size_copied_by_a_project_helper_is_silent_by_default(tmp_path, monkeypatch):
    assert helped(tmp_path, monkeypatch, FOLDER) == []
    (finding,) = helped(tmp_path, monkeypatch, FOLDER, UNPROVEN_COST)
    assert "MB a batch" not in finding.message
    assert "the code does not show the batch's bytes" in finding.help


def test_a_small_batch_copied_by_a_project_helper_stays_silent_with_the_option(tmp_path, monkeypatch):
    cifar = 'torchvision.datasets.CIFAR10(root="data", transform=transforms.ToTensor())'  # 0.8 MB at 64
    assert helped(tmp_path, monkeypatch, cifar, UNPROVEN_COST) == []


RETURNS_LOADER = """\
from torch.utils.data import DataLoader


def get_loader(dataset):
    return DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
"""
USES_LOADER = """\
import torch

from data import get_loader

device = torch.device("cuda")
loader = get_loader(make_dataset())
for epoch in range(10):
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        model(images, labels).backward()
"""


def test_a_loader_of_another_module_is_of_unknown_size_silent_by_default(tmp_path, monkeypatch):
    root = write(tmp_path, {"data.py": RETURNS_LOADER, "train.py": USES_LOADER})
    assert lint(root, monkeypatch, select=("GPU105",)) == []
    with_option = lint(root, monkeypatch, select=("GPU105",), rule_options=UNPROVEN_COST)
    assert found_at(with_option) == ["train.py:9 GPU105", "train.py:9 GPU105"]


def test_the_option_is_read_from_the_projects_configuration(tmp_path, monkeypatch):
    config = "[tool.gpulint]\n\n[tool.gpulint.rules.GPU105]\nunproven-cost = true\n"
    root = write(tmp_path, {"data.py": RETURNS_LOADER, "train.py": USES_LOADER, "pyproject.toml": config})
    result = run_gpulint("check", "--no-cache", "--select", "GPU105", "--output-format", "concise", ".", cwd=root)
    lines = result.stdout.decode().splitlines()
    assert [line.split(": GPU105")[0] for line in lines if "GPU105" in line] == ["train.py:9:26", "train.py:9:45"]


# GPU102 where the step already waits for the GPU before the next batch's copy (`copy_cost.drained_copy_cheap`):
# a CIFAR loop that reads `loss.item()` every step copies into an empty queue, so pinning saves only the bytes.
SYNCED_STEP = """\
import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms

device = torch.device("cuda")
train_ds = torchvision.datasets.CIFAR10(root="data", train=True, transform=transforms.ToTensor(), download=True)
loader = DataLoader(train_ds, batch_size={batch}, shuffle=True, num_workers=2)
for epoch in range(10):
    total = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
{read}
"""
EVERY_STEP = "        total += loss.item()"


def synced(batch=128, read=EVERY_STEP) -> str:
    return SYNCED_STEP.format(batch=batch, read=read)


def test_gpu102_is_silent_on_a_small_batch_copied_after_the_steps_own_read():
    assert loader_bytes(synced()) == [128 * (3 * 32 * 32 * 4 + 8)]  # ~1.6 MB
    assert found(synced(), "GPU102") == []


def test_gpu102_keeps_a_batch_over_2_mib_copied_after_a_read():
    (finding,) = found(synced(batch=256), "GPU102")  # ~3.1 MB: its bytes alone cost a share of the step
    assert finding.location.row == 8
    assert finding.message == "`DataLoader` has no `pin_memory` but its batches are copied to the GPU (`x.to(device)` at line 12)"


@pytest.mark.parametrize(
    "read",
    [
        "        total += loss.detach()",  # no read: the copy waits for the step's queue
        "        if epoch % 5 == 0:\n            total += loss.item()",  # a read of some steps only
        "        if (epoch + 1) % 100 == 0:\n            print(loss.item())",
    ],
)
def test_gpu102_keeps_a_small_batch_where_no_read_drains_the_queue_every_step(read):
    (finding,) = found(synced(read=read), "GPU102")
    assert finding.location.row == 8


def test_gpu102_keeps_a_small_batch_where_step_work_follows_the_read():
    # the read sits between the forward and the backward: the backward is still queued when the next copy starts
    text = synced(read="").replace("        loss.backward()\n", "        total += loss.item()\n        loss.backward()\n")
    (finding,) = found(text, "GPU102")
    assert finding.location.row == 8


def test_gpu102_is_silent_on_an_evaluation_that_reads_its_accuracy_every_batch():
    text = synced(read="").replace(
        "for epoch in range(10):",
        "test_ds = torchvision.datasets.CIFAR10(root='data', train=False, transform=transforms.ToTensor())\n"
        "test_loader = DataLoader(test_ds, batch_size=100, num_workers=2)\n"
        "for epoch in range(10):",
    ) + (
        "    with torch.no_grad():\n"
        "        for x, y in test_loader:\n"
        "            x, y = x.to(device), y.to(device)\n"
        "            correct += (model(x).argmax(1) == y).sum().item()\n"
    )
    assert [d.location.row for d in found(text, "GPU102")] == [8]  # the training loader (no read) only


# --- r24b102: pinning's saving against the step the model sizes (`copy_cost.saving_below_share`) ---------------

SIZED_STEP = """\
import torch
import torchvision
from torch import nn
from torch.utils.data import DataLoader
from torchvision import transforms

device = torch.device("cuda")
train_ds = torchvision.datasets.CIFAR10(root="data", train=True, transform=transforms.ToTensor(), download=True)
loader = DataLoader(train_ds, batch_size={batch}, shuffle=True, num_workers=8)
model = {model}.to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
"""


def stack(layers: int) -> str:
    """`nn.Sequential` of `layers` torch.nn layers (a flatten, then linear and ReLU pairs, a last linear)."""
    inner = ["nn.Flatten()", "nn.Linear(3072, 256)"] + ["nn.ReLU()", "nn.Linear(256, 256)"] * ((layers - 3) // 2) + ["nn.ReLU()"]
    inner = inner[: layers - 1] + ["nn.Linear(256, 10)"]
    return f"nn.Sequential({', '.join(inner)})"


def sized(batch: int, model: str) -> str:
    return SIZED_STEP.format(batch=batch, model=model)


def test_pinning_saves_the_measured_difference_of_the_two_copies():
    from gpulint.analysis.copy_cost import pinning_saving_ms

    assert pinning_saving_ms(512 * 1024) == pytest.approx(0.036)  # 61 µs pageable, 25 µs pinned (section 3)
    assert pinning_saving_ms(1024 * 1024) == pytest.approx(0.073)
    assert pinning_saving_ms(768 * 1024) == pytest.approx(0.0545)  # between two measured sizes: linear
    assert pinning_saving_ms(128 * 1024 * 1024) > pinning_saving_ms(64 * 1024 * 1024) == pytest.approx(6.783)


def test_gpu102_is_silent_where_the_saving_is_under_3_percent_of_the_sized_step():
    # 50 CIFAR images, ~0.61 MB: pinning saves ~42 µs, under 3 % of a 9-layer model's step of at least ~1.8 ms
    text = sized(50, stack(9))
    assert loader_bytes(text) == [50 * (3 * 32 * 32 * 4 + 8)]
    assert found(text, "GPU102") == []
    assert found(text, "GPU102", rule_options=UNPROVEN_PINNING) == []  # a shown saving too small: not unproven


def test_gpu102_keeps_the_same_batch_where_the_step_is_not_sized():
    # a model of another library: the step is at least the shortest measured (1 ms), ~4 % of which ~42 µs is
    text = sized(50, "torch.hub.load('pytorch/vision', 'resnet18')")
    (finding,) = found(text, "GPU102")
    assert finding.location.row == 9
    assert finding.help.startswith("~0.61 MB a batch: ")


def test_gpu102_keeps_the_same_batch_beside_a_shallow_model():
    # 3 layers: a step of at least 1.06 ms (the 1 ms floor), so ~42 µs is ~4 %
    (finding,) = found(sized(50, stack(3)), "GPU102")
    assert finding.location.row == 9


def test_gpu102_keeps_a_1_6_mb_batch_whatever_the_depth_of_the_model():
    # 128 CIFAR images, ~1.6 MB, ~105 µs saved: over 3 % of the deepest step floor measured (19 layers, ~3 ms);
    # a deeper model's floor is not taken beyond it
    (finding,) = found(sized(128, stack(41)), "GPU102")
    assert finding.location.row == 9
    assert finding.help.startswith("~1.6 MB a batch: ")


def test_a_large_batch_beside_a_short_step_stays_reported():
    # issue 14: large batches feeding a short training step are what pinning is for
    (finding,) = found(sized(1024, stack(3)), "GPU102")
    assert finding.help.startswith("~12.6 MB a batch: ")


# --- image sizes the code resolves (a command-line default) give the batch's bytes ---------------------------

FLAG_SIZED = """\
import argparse
import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms

parser = argparse.ArgumentParser()
parser.add_argument("--img-size", type=int{default})
parser.add_argument("--b", type=int, default=64)
args = parser.parse_args()
device = "cuda" if torch.cuda.is_available() else "cpu"
transform = transforms.Compose([
    transforms.Resize(args.img_size),
    transforms.RandomCrop(args.img_size, padding=args.img_size // 8),
    transforms.ToTensor(),
])
trainset = torchvision.datasets.CIFAR10(root="./data", train=True, download=True, transform=transform)
loader = DataLoader(trainset, batch_size=args.b, shuffle=True, num_workers=8)
for epoch in range(10):
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        model(inputs, targets).backward()
"""


def test_a_resize_to_a_command_line_default_gives_the_batch_its_bytes():
    text = FLAG_SIZED.format(default=", default=224")
    assert loader_bytes(text) == [64 * (3 * 224 * 224 * 4 + 8)]  # CIFAR upscaled to 224: ~38.5 MB
    (finding,) = found(text, "GPU102")
    assert finding.location.row == 18
    assert finding.help.startswith("~38.5 MB a batch: ")


def test_a_resize_to_a_size_chosen_at_run_time_leaves_the_bytes_unknown():
    text = FLAG_SIZED.format(default="")
    assert loader_bytes(text) == [None]
    assert found(text, "GPU102") == []


def test_a_resolved_size_is_no_evidence_that_the_workers_resample():
    # the loader-bound measure (`resample_bound`) needs the size written out: a flag may make it 32, no resampling
    from gpulint.analysis.batch_bytes import resampled_elements

    model = SemanticModel(cst.parse_module(FLAG_SIZED.format(default=", default=224")), "m.py")
    assert [resampled_elements(model, info.loader) for info in model.loader_flow.infos] == [None]
