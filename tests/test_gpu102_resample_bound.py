"""GPU102 is silent where a few workers resample every small image to a larger size for a light network
(`analysis/loader_bound.resample_bound`): 50 CIFAR images upscaled to 224 on 2 workers take ~12.5 ms a batch, more
than the pageable copy (~3.8 ms), a MobileNet's GPU work and its launch-bound floor together, so the loop waits on
the workers and the copy hides there. More workers, a smaller output, no resampling, a heavier network or a
count from a flag keep the finding."""

from __future__ import annotations

import pytest

from tests.conftest import findings
from tests.projects_helper import lint_written

UPSCALED = """\
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms
from torchvision.models import MobileNet_V3_Small_Weights, {network}

batch_size = {batch}
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
train_transform = transforms.Compose([
    {resize}
    transforms.RandomHorizontalFlip(),
    transforms.ToTensor(),
    transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
])
train_set = datasets.CIFAR10(root="data", train=True, download=True, transform=train_transform)
train_loader = DataLoader(dataset=train_set, batch_size=batch_size, shuffle=True, num_workers={workers})


def train(model, optimizer, loader):
    model.train()
    for inputs, labels in loader:
        inputs = inputs.to(device)
        labels = labels.to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()


def main():
    model = {network}(weights=MobileNet_V3_Small_Weights.IMAGENET1K_V1)
    model.classifier = torch.nn.Linear(576, 10)
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(5):
        train(model, optimizer, train_loader)


if __name__ == "__main__":
    main()
"""
LOADER_LINE = 15


def source(network="mobilenet_v3_small", batch=50, workers="2", resize="transforms.Resize(224),"):
    return UPSCALED.format(network=network, batch=batch, workers=workers, resize=resize)


def codes(text: str) -> list[str]:
    return findings(text, select=("GPU102",))


@pytest.mark.parametrize("resize", ["transforms.Resize(224),", "transforms.RandomResizedCrop(224),", "transforms.Resize((224, 224)),"])
@pytest.mark.parametrize("network", ["mobilenet_v3_small", "resnet18", "efficientnet_b0"])
def test_few_workers_upscaling_small_images_for_a_light_network_are_silent(resize, network):
    assert codes(source(network=network, resize=resize)) == []


def test_one_worker_at_a_smaller_batch_is_silent_too():
    # 16 x 224x224 x 10 ns on one worker: ~8 ms a batch, against ~1.2 ms of copy, 0.5 ms of GPU work and the 5 ms floor
    assert codes(source(batch=16, workers="1")) == []


def test_more_workers_keep_the_finding():
    # 4 workers: ~6.3 ms a batch, under the copy, the GPU work and the floor (~10.3 ms): the loader keeps up
    assert codes(source(workers="4")) == [f"{LOADER_LINE}:16 GPU102"]


def test_a_small_batch_keeps_the_finding():
    # 8 images on 2 workers: ~2 ms a batch, under the launch-bound floor of the step alone
    assert codes(source(batch=8)) == [f"{LOADER_LINE}:16 GPU102"]


def test_no_resampling_keeps_the_finding():
    # a crop only copies pixels: nothing is known to make the workers slower than the step (here below 512 KiB
    # at 32x32 it would be silent for size, so the batch is made large enough to be reported)
    assert codes(source(batch=512, resize="transforms.RandomCrop(32, padding=4),")) == [f"{LOADER_LINE}:16 GPU102"]


def test_a_downscale_to_a_small_size_keeps_the_finding():
    # 28x28 outputs: ~0.8 ms of worker time per 128-image batch, far under the floor
    assert codes(source(batch=128, resize="transforms.Resize(28),")) == [f"{LOADER_LINE}:16 GPU102"]


@pytest.mark.parametrize("network", ["resnet50", "vit_b_16"])
def test_a_heavier_network_keeps_the_finding(network):
    assert codes(source(network=network)) == [f"{LOADER_LINE}:16 GPU102"]


def test_a_count_from_a_flag_keeps_the_finding():
    text = source(workers="args.workers").replace(
        "batch_size = 50\n",
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--workers', type=int, default=2)\n"
        "args = parser.parse_args()\nbatch_size = 50\n",
    )
    assert codes(text) == [f"{LOADER_LINE + 4}:16 GPU102"]


def test_a_convolution_of_the_module_keeps_the_finding():
    text = source().replace("torch.nn.Linear(576, 10)", "torch.nn.Sequential(torch.nn.Conv2d(576, 576, 3), torch.nn.Linear(576, 10))")
    assert codes(text) == [f"{LOADER_LINE}:16 GPU102"]


DATA = """\
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

transform = transforms.Compose([transforms.Resize(224), transforms.ToTensor()])


def make_loader():
    train_set = datasets.CIFAR10(root="data", train=True, download=True, transform=transform)
    return DataLoader(train_set, batch_size=50, shuffle=True, num_workers=2)
"""

TRAIN = """\
import torch
from torchvision.models import mobilenet_v3_small

from data import make_loader


def main():
    device = torch.device("cuda")
    model = mobilenet_v3_small(num_classes=10).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    for inputs, labels in make_loader():
        inputs, labels = inputs.to(device), labels.to(device)
        loss = torch.nn.functional.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""


def test_across_modules_a_network_out_of_the_loaders_module_keeps_the_finding(tmp_path, monkeypatch):
    # The loader's module builds no network: what the step costs is not shown there, so the finding stays.
    assert lint_written(tmp_path, {"data.py": DATA, "train.py": TRAIN}, monkeypatch) == ["data.py:9 GPU102"]


def test_across_modules_the_loader_and_its_network_in_one_module_are_silent(tmp_path, monkeypatch):
    data = DATA.replace("from torchvision import datasets, transforms\n", "from torchvision import datasets, transforms\nfrom torchvision.models import mobilenet_v3_small\n")
    data += "\n\ndef make_model():\n    return mobilenet_v3_small(num_classes=10)\n"
    train = TRAIN.replace("from data import make_loader", "from data import make_loader, make_model").replace(
        "mobilenet_v3_small(num_classes=10)", "make_model()"
    ).replace("from torchvision.models import mobilenet_v3_small\n", "")
    assert [f for f in lint_written(tmp_path, {"data.py": data, "train.py": train}, monkeypatch) if "GPU102" in f] == []
