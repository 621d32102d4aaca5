"""Loops whose pageable copy hides behind the loader (`analysis/loader_bound.py`): GPU102 is silent where workers
decode a photograph per item for a light network, and on a loader GPU101 reports (no workers, real per-item work),
whose help then names `pin_memory`. Issue 13, the fourteenth corpus's GPU102 noise (loader-bound SSL examples on
Pascal VOC, CIFAR augmented in the training process)."""

from __future__ import annotations

import pytest

from tests.conftest import diagnostics, findings

PHOTOS = """\
import torch
import torchvision
from torchvision import transforms

device = "cuda"
resnet = torchvision.models.{network}()
backbone = torch.nn.Sequential(*list(resnet.children())[:-1])
model = torch.nn.Sequential(backbone, torch.nn.Flatten(), torch.nn.Linear(512, 128)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
transform = transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()])
dataset = torchvision.datasets.{dataset}("data", download=True, transform=transform)
loader = torch.utils.data.DataLoader(dataset, batch_size=256, shuffle=True, num_workers={workers})
for epoch in range(10):
    for x, _ in loader:
        x = x.to(device)
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""

IN_PROCESS = """\
import torch
import torchvision
from torchvision import transforms


def main():
    device = torch.device("cuda")
    model = torchvision.models.resnet18(num_classes=10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    transform = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip(), transforms.ToTensor()])
    dataset = torchvision.datasets.CIFAR10("data", train=True, download=True, transform=transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=256, shuffle=True{workers})
    for epoch in range(10):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""


def codes(source: str) -> list[str]:
    return findings(source, select=("GPU101", "GPU102"))


@pytest.mark.parametrize("dataset", ["VOCDetection", "ImageNet", "CocoDetection", "Food101"])
@pytest.mark.parametrize("network", ["resnet18", "mobilenet_v2", "efficientnet_b0"])
def test_workers_decoding_photographs_for_a_light_network_are_silent(dataset, network):
    assert codes(PHOTOS.format(dataset=dataset, network=network, workers=8)) == []


@pytest.mark.parametrize("network", ["resnet50", "vit_b_32", "VisionTransformer"])
def test_a_heavier_or_unknown_network_keeps_the_finding(network):
    # ResNet-50 (4.1 GFLOP an image) or a transformer can keep the GPU busier than 8 decoding workers.
    assert codes(PHOTOS.format(dataset="VOCDetection", network=network, workers=8)) == ["12:10 GPU102"]


def test_a_network_of_another_library_keeps_the_finding():
    source = PHOTOS.format(dataset="VOCDetection", network="resnet18", workers=8).replace(
        "import torchvision\n", "import timm\nimport torchvision\n"
    ).replace("optimizer =", "teacher = timm.create_model('vit_base_patch16_224')\noptimizer =")
    assert codes(source) == ["14:10 GPU102"]


@pytest.mark.parametrize("dataset", ["ImageFolder", "CIFAR10"])
def test_images_that_may_be_small_keep_the_finding(dataset):
    # A folder may hold CIFAR's 32x32 PNGs (microseconds to decode); CIFAR is held in memory.
    assert codes(PHOTOS.format(dataset=dataset, network="resnet18", workers=8)) == ["12:10 GPU102"]


def test_more_workers_than_the_line_keep_the_finding():
    assert codes(PHOTOS.format(dataset="VOCDetection", network="resnet18", workers=16)) == ["12:10 GPU102"]


def test_workers_from_a_flag_keep_the_finding():
    source = PHOTOS.format(dataset="VOCDetection", network="resnet18", workers="args.workers")
    flag = "parser = argparse.ArgumentParser()\nparser.add_argument('--workers', type=int)\nargs = parser.parse_args()\n"
    source = "import argparse\n" + flag + source
    assert codes(source) == ["16:10 GPU102"]


def test_a_loader_gpu101_reports_is_one_finding_that_names_pinning():
    found = [d for d in diagnostics(IN_PROCESS.format(workers=""), select=("GPU101", "GPU102"))]
    assert [d.code for d in found] == ["GPU101"]
    assert found[0].help == (
        "The GPU waits while the training process loads each batch; with workers, also set `pin_memory=True` so that "
        "they pin the batches for the GPU copy"
    )


def test_with_workers_the_same_loader_is_reported_by_gpu102():
    assert codes(IN_PROCESS.format(workers=", num_workers=4")) == ["12:14 GPU102"]


def test_gpu101_does_not_name_pinning_for_batches_too_small_to_pin():
    # MNIST at 64: 200 KB a batch, nothing for pinning to save (batch_bytes.py), but loading in the process stays.
    source = IN_PROCESS.format(workers="").replace("CIFAR10", "MNIST").replace("batch_size=256", "batch_size=64")
    source = source.replace("transforms.RandomCrop(32, padding=4), ", "")
    found = diagnostics(source, select=("GPU101", "GPU102"))
    assert [d.code for d in found] == ["GPU101"]
    assert found[0].help == "The GPU waits while the training process loads each batch"


def test_gpu101_does_not_name_pinning_when_the_loader_pins():
    found = diagnostics(IN_PROCESS.format(workers=", pin_memory=True"), select=("GPU101", "GPU102"))
    assert [(d.code, d.help) for d in found] == [("GPU101", "The GPU waits while the training process loads each batch")]


def test_a_layer_of_the_module_that_works_per_pixel_keeps_the_finding():
    # A decoder of the module's own (`nn.Conv2d` at full resolution) adds GPU work per pixel that is not known.
    source = PHOTOS.format(dataset="Cityscapes", network="resnet18", workers=8).replace(
        "torch.nn.Flatten(), torch.nn.Linear(512, 128)", "torch.nn.Conv2d(512, 19, 1)"
    )
    assert codes(source) == ["12:10 GPU102"]


def test_functional_layers_that_work_per_pixel_keep_the_finding():
    source = PHOTOS.format(dataset="VOCDetection", network="resnet18", workers=8).replace(
        "loss = model(x).sum()", "loss = torch.nn.functional.conv2d(x, w).sum() + model(x).sum()"
    )
    assert codes(source) == ["12:10 GPU102"]


def test_a_dataset_whose_items_are_not_shown_keeps_both_findings():
    # GPU101 reports a dataset of unknown per-item work; nothing shows that loading dominates the copy.
    source = IN_PROCESS.format(workers="").replace(
        'torchvision.datasets.CIFAR10("data", train=True, download=True, transform=transform)', "make_dataset(transform)"
    ).replace("from torchvision import transforms\n", "from torchvision import transforms\nfrom data import make_dataset\n")
    assert codes(source) == ["13:14 GPU101", "13:14 GPU102"]


def preview_codes(source: str) -> list[str]:
    return findings(source, select=("GPU901", "GPU903"), preview=True)


def test_precision_rules_are_silent_where_workers_decoding_photographs_set_the_pace():
    # bf16 or a tuned convolution algorithm shortens a step that waits on the loader anyway
    assert preview_codes(PHOTOS.format(dataset="VOCDetection", network="resnet18", workers=8)) == []


def test_precision_rules_report_a_heavier_network_on_the_same_loader():
    assert preview_codes(PHOTOS.format(dataset="VOCDetection", network="resnet50", workers=8)) == ["8:9 GPU903", "17:9 GPU901"]
