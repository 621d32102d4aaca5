"""Copies too small or too soon waited for to matter (issue 13, noise class N4): a batch size read from a W&B run's
configuration (`analysis/wandb_config.py`) lets `analysis/batch_bytes.py` size MNIST batches, so GPU102/GPU105 go
silent on them; a `torch.cuda.synchronize()` right after a copy (`analysis/step_waits.drained_after`) makes
`non_blocking` pointless (GPU105). ImageNet-size batches keep both findings."""

from __future__ import annotations

import libcst as cst
import pytest

from gpulint.analysis import SemanticModel
from gpulint.analysis.batch_bytes import batch_bytes
from tests.conftest import findings

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

RULES = {"select": ("GPU102", "GPU105")}

WANDB = """\
import torch
import wandb
from torch.utils.data import DataLoader
from torchvision import transforms
from torchvision.datasets import FashionMNIST

config = {{"learning_rate": 0.0001, "batch_size": {batch}, "epochs": 5}}
with wandb.init(config=config) as run:
    config = run.config
    device = torch.device("cuda")
    train_dataset = FashionMNIST("./data/", download=True, train=True, transform=transforms.ToTensor())
    train_loader = DataLoader(train_dataset, batch_size=config.batch_size, num_workers=2, pin_memory=True)
    {extra}
    for epoch in range(config.epochs):
        for images, labels in train_loader:
            images = images.to(device)
            labels = labels.to(device)
            loss = model(images, labels)
            loss.backward()
"""

HELPERS = """\
import torch
import torchvision
import wandb
from torchvision import transforms


def make_loader(dataset, batch_size):
    return torch.utils.data.DataLoader(dataset=dataset, batch_size=batch_size, shuffle=True, num_workers=2)


def make(config):
    train = torchvision.datasets.MNIST(root=".", train=True, transform=transforms.ToTensor(), download=True)
    subset = torch.utils.data.Subset(train, indices=range(0, len(train), 5))
    return make_loader(subset, batch_size=config.batch_size)


def pipeline(hyperparameters):
    with wandb.init(project="demo", config=hyperparameters):
        config = wandb.config
        loader = make(config)
        for epoch in range(config.epochs):
            for images, labels in loader:
                images, labels = images.to("cuda"), labels.to("cuda")
                model(images, labels).backward()


config = dict(epochs=5, batch_size={batch}, learning_rate=0.005)
pipeline(config)
"""


def sizes(source: str) -> list:
    model = SemanticModel(cst.parse_module(source), "m.py")
    return [batch_bytes(model, info.loader) for info in model.loader_flow.infos]


def test_a_wandb_config_batch_size_sizes_the_batch():
    assert sizes(WANDB.format(batch=32, extra="")) == [32 * (28 * 28 * 4 + 8)]  # 100 KB
    assert sizes(HELPERS.format(batch=128)) == [128 * (28 * 28 * 4 + 8)]  # 400 KB, through `make(config)`


def test_small_batches_from_a_wandb_config_are_silent():
    assert findings(WANDB.format(batch=32, extra=""), **RULES) == []
    assert findings(HELPERS.format(batch=128), **RULES) == []


@pytest.mark.parametrize(
    "extra",
    [
        "wandb.agent(sweep_id, train)",  # a sweep sets the keys it searches
        "config.update({'batch_size': 1024})",
        "config.batch_size = 1024",
    ],
)
def test_a_configuration_changed_after_the_start_is_unknown(extra):
    source = WANDB.format(batch=32, extra=extra)
    assert sizes(source) == [None]
    assert findings(source, **RULES) == ["16:22 GPU105", "17:22 GPU105"]


def test_large_batches_from_a_wandb_config_are_still_found():
    assert findings(WANDB.format(batch=8192, extra=""), **RULES) == ["16:22 GPU105", "17:22 GPU105"]  # 25.7 MB
    # 3.2 MB: blocking on a pinned batch costs one drain and ~0.06 ms of copy (`analysis/copy_cost.py`)
    assert findings(WANDB.format(batch=1024, extra=""), **RULES) == []
    assert findings(HELPERS.format(batch=256), **RULES) == ["8:12 GPU102"]  # 0.8 MB


def test_a_config_not_written_out_is_unknown():
    source = WANDB.format(batch=32, extra="").replace("wandb.init(config=config)", "wandb.init(config=vars(args))")
    assert sizes(source) == [None]


IMAGENET = """\
import torch
import torchvision
from torchvision import transforms

transform = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
train = torchvision.datasets.{dataset}({root}, transform=transform)
loader = torch.utils.data.DataLoader(train, batch_size={batch}, shuffle=True, num_workers=8{pin})
for epoch in range(90):
    for images, target in loader:
        images = images.cuda()
        target = target.cuda()
        model(images, target).backward()
"""


def test_an_imagenet_size_loader_at_256_keeps_gpu102_and_gpu105():
    unpinned = IMAGENET.format(dataset="ImageFolder", root="'train'", batch=256, pin="")
    assert findings(unpinned, **RULES) == ["7:10 GPU102"]
    pinned = IMAGENET.format(dataset="ImageFolder", root="'train'", batch=256, pin=", pin_memory=True")
    assert findings(pinned, **RULES) == ["10:18 GPU105", "11:18 GPU105"]


def test_mnist_at_64_is_silent():
    mnist = IMAGENET.replace("RandomResizedCrop(224), ", "")
    for pin in ("", ", pin_memory=True"):
        assert findings(mnist.format(dataset="MNIST", root="'data'", batch=64, pin=pin), **RULES) == []  # 200 KB


EVALUATE = """\
import time
import torch


def evaluate(model, data_loader, device):
    model.eval()
    for images, targets in data_loader:
        images = list(img.to(device) for img in images)
{between}
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        model_time = time.time()
        outputs = model(images)
        model_time = time.time() - model_time


loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=4, pin_memory=True, collate_fn=collate)
for epoch in range(26):
    train_one_epoch(model, optimizer, loader, device)
    evaluate(model, loader, "cuda")
"""


def test_a_copy_the_host_waits_for_right_after_is_silent():
    assert findings(EVALUATE.format(between=""), select=("GPU105",)) == []
    between = '        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]'
    assert findings(EVALUATE.format(between=between), select=("GPU105",)) == []


def test_a_copy_followed_by_step_work_before_the_drain_is_still_found():
    between = "        features = model.backbone(images)"
    assert findings(EVALUATE.format(between=between), select=("GPU105",)) == ["8:23 GPU105"]


def test_a_drain_that_does_not_run_every_iteration_keeps_the_finding():
    source = EVALUATE.format(between="").replace("if torch.cuda.is_available():", "if args.timing:")
    assert findings(source, select=("GPU105",)) == ["8:23 GPU105"]


ONE = """\
import argparse
import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=1)
args = parser.parse_args()
test_loader = DataLoader(dataset=test_set, num_workers=4{size}{pin})
for test_data in test_loader:
    lq = test_data["L"].to("cuda")
{extra}
    output = model(lq)
    outputs.append(output)
"""


@pytest.mark.parametrize(
    ("size", "extra"),
    [
        (", batch_size=1", ""),
        (", batch_size=args.batch_size", ""),
        (", batch_size=1", '    folder = test_data["folder"]\n    name = folder[0]'),  # the one path of a batch of one
        (", batch_size=1", '    name = test_data["path"][0]'),
    ],
)
def test_one_sample_batches_are_silent(size, extra):
    assert findings(ONE.format(size=size, pin="", extra=extra), **RULES) == []
    assert findings(ONE.format(size=size, pin=", pin_memory=True", extra=extra), **RULES) == []


@pytest.mark.parametrize(
    ("size", "extra"),
    [
        ("", ""),  # the left-out default: datasets that hand out whole batches leave it out
        (", batch_size=None", ""),  # automatic batching off: each item is a batch
        (", batch_size=1", "    lq = lq.squeeze(0)"),  # items are batches already
        (", batch_size=1", "    lq = test_data[0]"),
        (", batch_size=1", "    lq = torch.squeeze(lq, 0)"),
        (", batch_size=1", "    frames = lq.view(-1, 3, 64, 64)"),
        (", batch_size=2", ""),
    ],
)
def test_batches_that_may_hold_more_than_one_sample_are_still_found(size, extra):
    assert findings(ONE.format(size=size, pin="", extra=extra), **RULES) == ["8:15 GPU102"]
    assert findings(ONE.format(size=size, pin=", pin_memory=True", extra=extra), **RULES) == ["10:10 GPU105"]


# simple-faster-rcnn's train.py: one image a batch; every `plot_every` steps the loop shows the first sample
# (`img[0]`), as a loop over batches of any size does: the step itself copies the batch as it comes.
PLOTTED = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=1, shuffle=True, num_workers=4)
for epoch in range(14):
    for ii, (img, bbox_, label_) in enumerate(loader):
        img, bbox, label = img.cuda().float(), bbox_.cuda(), label_.cuda()
        trainer.train_step(img, bbox, label)
{extra}
"""


def test_a_first_sample_shown_every_n_steps_keeps_one_sample_batches_silent():
    shown = "        if (ii + 1) % 100 == 0:\n            plot(img[0].cpu().numpy(), bbox_[0])"
    assert findings(PLOTTED.format(extra=shown), select=("GPU102",)) == []


def test_a_batch_taken_apart_every_step_is_still_found():
    # every step: the items may be batches already (`batch_size=1` over pre-batched chunks)
    taken = "        loss = trainer.loss(img[0], bbox)"
    assert findings(PLOTTED.format(extra=taken), select=("GPU102",)) == ["4:10 GPU102"]
    # an error branch is not periodic work either; a branch on another condition runs on any step
    branch = "        if bbox.numel() == 0:\n            img = img.squeeze(0)"
    assert findings(PLOTTED.format(extra=branch), select=("GPU102",)) == ["4:10 GPU102"]
