"""GPU102's default findings need evidence of their cost (`analysis/copy_cost.py`, `analysis/batch_bytes.py`): a batch
the code shows above 512 KiB copied pageable is reported with its bytes in the help; a batch of unknown bytes (a
dataset class, a `TensorDataset` of arrays, a folder of images) is silent unless `unproven-cost = true` (four corpora's
judges: 1 such finding right for both against 67 noise for both). lightly's two-view transforms show their bytes:
each view a float32 3 x input_size x input_size tensor (lightly's BYOL examples on CIFAR-10, right for both judges of
the fourteenth corpus)."""

from __future__ import annotations

import libcst as cst
import pytest

from gpulint.analysis import SemanticModel
from gpulint.analysis.batch_bytes import batch_bytes
from tests.conftest import diagnostics

UNPROVEN_PINNING = (("GPU102", (("unproven-cost", True),)),)

LIGHTLY = """\
import torch
import torchvision
from lightly.transforms import {imports}

device = "cuda" if torch.cuda.is_available() else "cpu"
transform = {transform}
dataset = torchvision.datasets.CIFAR10("datasets/cifar10", download=True, transform=transform)
dataloader = torch.utils.data.DataLoader(dataset, batch_size={batch}, shuffle=True, drop_last=True, num_workers=8)
for epoch in range(10):
    for batch in dataloader:
        x0, x1 = batch[0]
        x0 = x0.to(device)
        x1 = x1.to(device)
        loss = model(x0, x1)
        loss.backward()
"""
BYOL = "BYOLTransform, BYOLView1Transform, BYOLView2Transform"
BYOL_32 = (
    "BYOLTransform(view_1_transform=BYOLView1Transform(input_size=32, gaussian_blur=0.0), "
    "view_2_transform=BYOLView2Transform(input_size=32, gaussian_blur=0.0))"
)


def gpu102(text: str, rule_options=()) -> list:
    return [d for d in diagnostics(text, rule_options=rule_options) if d.code == "GPU102"]


def loader_bytes(text: str):
    model = SemanticModel(cst.parse_module(text), "m.py")
    return [batch_bytes(model, info.loader) for info in model.loader_flow.infos]


def test_two_cifar_views_of_256_images_are_reported_with_their_bytes():
    text = LIGHTLY.format(imports=BYOL, transform=BYOL_32, batch=256)
    assert loader_bytes(text) == [256 * (2 * 3 * 32 * 32 * 4 + 8)]  # ~6.3 MB: two views and the label
    (finding,) = gpu102(text)
    assert finding.message == "`DataLoader` has no `pin_memory` but its batches are copied to the GPU (`x0.to(device)` at line 12)"
    assert finding.help.startswith("~6.3 MB a batch: ~0.45-0.79 ms a step pageable (8-14 GB/s, after a wait for the queue)")


@pytest.mark.parametrize(
    ("imports", "transform", "view"),
    [
        ("FDATransform, FDAView1Transform, FDAView2Transform",
         "FDATransform(view_1_transform=FDAView1Transform(input_size=32), view_2_transform=FDAView2Transform(input_size=32))", 32),
        ("TiCoTransform, TiCoView1Transform, TiCoView2Transform",
         "TiCoTransform(view_1_transform=TiCoView1Transform(input_size=32), view_2_transform=TiCoView2Transform(input_size=32))", 32),
        ("SimCLRTransform", "SimCLRTransform(input_size=32, cj_prob=0.5)", 32),
        ("SimCLRTransform", "SimCLRTransform()", 224),  # lightly's default input_size
        ("BYOLTransform", "BYOLTransform()", 224),  # both default views
    ],
)
def test_lightly_two_view_transforms_make_two_float32_views(imports, transform, view):
    text = LIGHTLY.format(imports=imports, transform=transform, batch=256)
    assert loader_bytes(text) == [256 * (2 * 3 * view * view * 4 + 8)]


@pytest.mark.parametrize(
    ("imports", "transform"),
    [
        ("SwaVTransform", "SwaVTransform(crop_sizes=(32, 16))"),  # multi-crop: views of several sizes
        (BYOL, "BYOLTransform(view_1_transform=BYOLView1Transform(input_size=size), view_2_transform=BYOLView2Transform(input_size=32))"),
        (BYOL, "BYOLTransform(BYOLView1Transform(input_size=32), BYOLView2Transform(input_size=32))"),  # positional
        (BYOL, "BYOLTransform(view_1_transform=make_view(), view_2_transform=BYOLView2Transform(input_size=32))"),
    ],
)
def test_other_lightly_transforms_leave_the_bytes_unknown_and_the_loader_silent(imports, transform):
    text = LIGHTLY.format(imports=imports, transform=transform, batch=256)
    assert loader_bytes(text) == [None]
    assert gpu102(text) == []  # no evidence of a cost
    assert len(gpu102(text, UNPROVEN_PINNING)) == 1


def test_small_views_are_silent_even_with_the_option():
    # 32 x two 3x32x32 views: ~0.8 MB at batch 32 would be reported; 16 images, ~0.39 MB, are known cheap
    text = LIGHTLY.format(imports=BYOL, transform=BYOL_32, batch=16)
    assert loader_bytes(text) == [16 * (2 * 3 * 32 * 32 * 4 + 8)]
    assert gpu102(text) == gpu102(text, UNPROVEN_PINNING) == []


ROWS = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda")
features = torch.load("features.pt")
labels = torch.load("labels.pt")
loader = DataLoader(TensorDataset(features, labels), batch_size=256, shuffle=True, num_workers=4)
for epoch in range(100):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        model(x, y).backward()
"""


def test_a_batch_of_unknown_bytes_is_silent_by_default_and_reported_with_the_option():
    assert gpu102(ROWS) == []
    (finding,) = gpu102(ROWS, UNPROVEN_PINNING)
    assert "its cost is unproven (the code does not show a batch's bytes;" in finding.help


BRANCHES = """\
import torch
import torchvision
from torchvision import transforms

device = torch.device("cuda")
normalize = transforms.Normalize((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010))
if args.augment:
    transform_train = transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor(), normalize])
else:
    transform_train = {other}
trainset = torchvision.datasets.CIFAR10(root="data", train=True, transform=transform_train)
loader = torch.utils.data.DataLoader(trainset, batch_size=128, shuffle=True, num_workers=8)
for epoch in range(200):
    for inputs, targets in loader:
        inputs, targets = inputs.cuda(), targets.cuda()
        model(inputs, targets).backward()
"""


def test_a_transform_bound_in_two_branches_gives_the_larger_image_and_a_named_step_counts():
    # mixup-cifar10's shape: CIFAR at 128, ~1.6 MB a batch whichever branch runs (a judge called it right)
    text = BRANCHES.format(other="transforms.Compose([transforms.ToTensor(), normalize])")
    assert loader_bytes(text) == [128 * (3 * 32 * 32 * 4 + 8)]
    (finding,) = gpu102(text)
    assert finding.help.startswith("~1.6 MB a batch: ")


def test_a_branch_whose_transform_is_not_known_leaves_the_bytes_unknown():
    text = BRANCHES.format(other="make_transform(args)")
    assert loader_bytes(text) == [None]
    assert gpu102(text) == []
    assert len(gpu102(text, UNPROVEN_PINNING)) == 1


def test_a_named_step_bound_to_an_unknown_transform_leaves_the_bytes_unknown():
    text = BRANCHES.replace("normalize = transforms.Normalize(", "normalize = MyNormalize(").format(other="transforms.ToTensor()")
    assert loader_bytes(text) == [None]
