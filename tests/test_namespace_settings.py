"""Settings written as a namespace in a notebook (`analysis/namespace_settings.py`): `args = Namespace(cuda=False)`
and `args.device = torch.device("cuda" if args.cuda else "cpu")` put the lesson on the CPU as shipped, so no
finding says its batches are copied to the GPU or that a read waits for the GPU. `cuda=True`, or a flag set from
`torch.cuda.is_available()`, keeps the GPU claims.

The repros are minimal shapes of our own (issue 13, eighth corpus class W2: the NLP book's notebooks).
"""

from __future__ import annotations

import pytest

from tests.conftest import diagnostics

LESSON = """\
from argparse import Namespace

import torch
from torch.utils.data import DataLoader

args = Namespace(
    batch_size=64,
    cuda={cuda},
    num_epochs=100,
)
if not torch.cuda.is_available():
    args.cuda = False
{extra}
args.device = torch.device("cuda" if args.cuda else "cpu")


def train(model, dataset, optimizer):
    for epoch in range(args.num_epochs):
        loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
        for x, y in loader:
            x = x.to(args.device)
            y = y.to(args.device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(loss.item())


model = torch.nn.Linear(10, 2).to(args.device)
"""


def codes(cuda: str, extra: str = "") -> list[str]:
    return [f"{d.location.row} {d.code}" for d in diagnostics(LESSON.format(cuda=cuda, extra=extra), "lesson.py")]


def test_cuda_false_as_shipped_makes_no_gpu_claims() -> None:
    # The loader still has no workers (GPU101, not a GPU claim); nothing is copied to or waits for a GPU.
    assert codes("False") == ["19 GPU101"]


@pytest.mark.parametrize(
    ("cuda", "extra"),
    [
        ("True", ""),  # the lesson asks for CUDA: on a GPU machine the flag stays True
        ("False", "args.cuda = torch.cuda.is_available()"),  # decided at run time
        ("False", "setattr(args, 'cuda', True)"),  # set another way
        ("False", "args = Namespace(cuda=True, batch_size=64, num_epochs=10)"),  # bound twice
    ],
)
def test_cuda_on_or_unknown_keeps_gpu_claims(cuda: str, extra: str) -> None:
    found = codes(cuda, extra)
    assert any(c.endswith("GPU102") for c in found) and any(c.endswith("GPU303") for c in found)


def test_message_of_kept_claim() -> None:
    messages = [d.message for d in diagnostics(LESSON.format(cuda="True", extra=""), "lesson.py") if d.code == "GPU102"]
    assert messages == ["`DataLoader` has no `pin_memory` but its batches are copied to the GPU (`x.to(args.device)` at line 21)"]


HELPER = """\
from argparse import Namespace

import torch
from torch.utils.data import DataLoader

args = Namespace(batch_size=64, cuda={cuda})
if not torch.cuda.is_available():
    args.cuda = False
args.device = torch.device("cuda" if args.cuda else "cpu")


def generate_batches(dataset, batch_size, shuffle=True, drop_last=True, device="cpu"):
    dataloader = DataLoader(dataset=dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last)
    for data_dict in dataloader:
        out_data_dict = {{}}
        for name, tensor in data_dict.items():
            out_data_dict[name] = data_dict[name].to(device)
        yield out_data_dict


def train(model, dataset, optimizer):
    for epoch in range(100):
        for batch in generate_batches(dataset, batch_size=args.batch_size, device=args.device):
            loss = model(batch["x"]).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


for batch in generate_batches(None, batch_size=args.batch_size, device=args.device):
    pass
"""


def test_helper_given_the_cpu_device_copies_nothing_to_a_gpu() -> None:
    # The NLP book's `generate_batches(..., device=args.device)`: every caller gives the CPU device as shipped.
    found = [f"{d.location.row} {d.code}" for d in diagnostics(HELPER.format(cuda="False"), "lesson.py")]
    assert not any(c.endswith("GPU102") for c in found)


def test_helper_given_a_cuda_device_keeps_gpu102() -> None:
    found = [f"{d.location.row} {d.code}" for d in diagnostics(HELPER.format(cuda="True"), "lesson.py")]
    assert "13 GPU102" in found
