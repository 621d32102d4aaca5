"""The bytes of a DataLoader batch (`analysis/batch_bytes.py`): GPU102 stays silent on batches of at most 512 KiB
(MNIST at 64-128 images, 64k-index batches over `range(n)`) and keeps batches that are larger or of unknown size.
Issue 13's ninth-corpus noise (N4)."""

from __future__ import annotations

import libcst as cst
import pytest

from gpulint.analysis import SemanticModel
from gpulint.analysis.batch_bytes import batch_bytes
from tests.conftest import findings

IMAGES = """\
import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import transforms

device = torch.device("cuda")
transform = {transform}
train_ds = torchvision.datasets.{dataset}(root="data", train=True, transform=transform, download=True)
batch_size = {batch}
loader = DataLoader(train_ds, batch_size, shuffle=True, num_workers=2)
for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        model(x, y).backward()
"""
TO_TENSOR = "transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])"

INDICES = """\
import argparse
import torch
from torch.utils.data import DataLoader


def train(model, optimizer, edges, x, batch_size):
    gpu_edges = edges.to(x.device)
    for perm in DataLoader({dataset}, batch_size, shuffle=True, num_workers=2):
        optimizer.zero_grad()
        edge = gpu_edges[perm].t()
        loss = model(x[edge[0]], x[edge[1]]).mean()
        loss.backward()
        optimizer.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default={batch})
    args = parser.parse_args()
    x = torch.randn(1000, 16, device="cuda")
    edges = torch.randint(0, 1000, (500000, 2))
    model = torch.nn.Bilinear(16, 16, 1).to("cuda")
    optimizer = torch.optim.Adam(model.parameters())
    train(model, optimizer, edges, x, args.batch_size)
"""


def gpu102(source: str) -> list[str]:
    return [f for f in findings(source, select=("GPU102",)) if "GPU102" in f]


def loader_bytes(source: str):
    model = SemanticModel(cst.parse_module(source), "m.py")
    return [batch_bytes(model, info.loader) for info in model.loader_flow.infos]


@pytest.mark.parametrize(
    ("dataset", "batch", "transform"),
    [
        ("MNIST", 64, TO_TENSOR),  # 200 KB
        ("FashionMNIST", 128, "transforms.ToTensor()"),  # 400 KB
        ("CIFAR10", 128, "transforms.PILToTensor()"),  # uint8: 384 KB
        ("CIFAR10", 32, "transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])"),  # 384 KB
    ],
)
def test_small_image_batches_are_silent(dataset, batch, transform):
    assert gpu102(IMAGES.format(dataset=dataset, batch=batch, transform=transform)) == []


@pytest.mark.parametrize(
    ("dataset", "batch", "transform"),
    [
        ("MNIST", 256, TO_TENSOR),  # 0.8 MB: the judges' "right"
        ("CIFAR10", 512, TO_TENSOR),  # 6 MB
        ("CIFAR10", 64, TO_TENSOR),  # 0.75 MB
        ("MNIST", 64, "transforms.Compose([transforms.Resize(224), transforms.ToTensor()])"),  # 12.8 MB
        ("MNIST", 64, "transforms.Compose([transforms.Lambda(lambda x: x.repeat(3, 1, 1)), transforms.ToTensor()])"),
        ("MNIST", 64, "make_transform()"),  # not in sight
        ("ImageFolder", 8, TO_TENSOR),  # shape unknown
    ],
)
def test_large_or_unknown_image_batches_are_still_found(dataset, batch, transform):
    source = IMAGES.format(dataset=dataset, batch=batch, transform=transform)
    assert gpu102(source) == ["10:10 GPU102"]


def test_image_batch_bytes():
    source = IMAGES.format(dataset="MNIST", batch=128, transform=TO_TENSOR)
    assert loader_bytes(source) == [128 * (28 * 28 * 4 + 8)]
    assert loader_bytes(IMAGES.format(dataset="MNIST", batch="args.batch_size", transform=TO_TENSOR)) == [None]


@pytest.mark.parametrize(
    ("dataset", "batch"),
    [("range(edges.size(0))", "64 * 1024"), ("torch.randperm(edges.size(0))", "4096"), ("list(range(edges.size(0)))", "65536")],
)
def test_index_batches_of_at_most_512_kib_are_silent(dataset, batch):
    assert gpu102(INDICES.format(dataset=dataset, batch=batch)) == []


@pytest.mark.parametrize(
    ("dataset", "batch"),
    [
        ("range(edges.size(0))", "380000"),  # 3 MB
        ("range(edges.size(0))", "None"),  # no default: chosen at run time
        ("torch.arange(edges.size(0), dtype=torch.float64)", "1024"),  # dtype given: not counted
        ("edge_ids", "1024"),  # not in sight
    ],
)
def test_large_or_unknown_index_batches_are_still_found(dataset, batch):
    assert gpu102(INDICES.format(dataset=dataset, batch=batch)) == ["8:17 GPU102"]


def test_index_batch_bytes_take_the_largest_size_callers_pass():
    call = "    train(model, optimizer, edges, x, args.batch_size)\n"
    source = INDICES.format(dataset="range(edges.size(0))", batch="64 * 1024")
    source = source.replace(call, call + call.replace("args.batch_size", "1 << 20"))
    assert loader_bytes(source) == [None]  # `1 << 20` is no int gpulint evaluates: unknown
    source = source.replace("1 << 20", "100000")
    assert loader_bytes(source) == [800000]
    assert gpu102(source) == ["8:17 GPU102"]


WRAPPED_TOKENS = """\
import torch
from datasets import load_dataset
from torch.utils.data import DataLoader, Dataset
from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained("distilbert-base-uncased")
raw = load_dataset("imdb")
tokenized = raw.map(lambda batch: tokenizer(batch["text"], truncation=True, padding=True), batched=True)
features = torch.load("features.pt")


class WrappedDataset(Dataset):
    def __init__(self, dataset_dict, partition_key="train", extra=None):
        self.partition = dataset_dict[partition_key]
        self.extra = extra

    def __getitem__(self, index):
        return self.partition[index]

    def __len__(self):
        return len(self.partition)


train_dataset = WrappedDataset({arguments})
loader = DataLoader(train_dataset, batch_size=12, shuffle=True, num_workers=4)
model = torch.nn.Linear(512, 2).cuda()
for batch in loader:
    model(batch["input_ids"].cuda().float()).sum().backward()
"""


def test_a_dataset_class_given_only_tokenizer_output_is_silent():
    assert gpu102(WRAPPED_TOKENS.format(arguments='tokenized, partition_key="train"')) == []


def test_a_dataset_class_given_tokens_and_other_data_is_still_found():
    assert gpu102(WRAPPED_TOKENS.format(arguments='tokenized, partition_key="train", extra=features')) == ["25:10 GPU102"]
