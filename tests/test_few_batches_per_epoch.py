"""GPU101/GPU102 on a loader read for a few batches once per epoch (`batch_cost.reads_a_few_batches`): a
validation pass that shows two examples each epoch (hkproj/pytorch-transformer's `run_validation`, which breaks
on a counter at `num_examples=2`) loads two batches beside a training epoch of thousands; workers would start
each epoch for them. A loader read a few batches per training step, or read in full each epoch, stays reported."""

from __future__ import annotations

import pytest

from tests.conftest import findings

SCRIPT = """\
import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

device = torch.device("cuda")
model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 224 * 224, 10)).to(device)
optimizer = torch.optim.AdamW(model.parameters())
criterion = nn.CrossEntropyLoss()


def get_ds():
    train_ds = datasets.ImageFolder("train", transforms.ToTensor())
    val_ds = datasets.ImageFolder("val", transforms.ToTensor())
    train_dataloader = DataLoader(train_ds, batch_size=64, shuffle=True)
    val_dataloader = DataLoader(val_ds, batch_size=2, shuffle=True)  # (at batch_size=1 GPU102 is silent: one sample a batch)
    return train_dataloader, val_dataloader


def run_validation(model, validation_ds, num_examples=NUM):
    count = 0
    with torch.no_grad():
        for x, y in validation_ds:
            count += 1
            print(model(x.to(device)).argmax(1), y)
            if count == num_examples:
                break


def main(epochs=20):
    train_dataloader, val_dataloader = get_ds()
    for epoch in range(epochs):
        for x, y in train_dataloader:
            loss = criterion(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        run_validation(model, val_dataloader)
"""


def gpu10x(source: str) -> list[str]:
    return findings(source, select=("GPU101", "GPU102"))


def test_a_loader_read_for_two_examples_once_per_epoch_gets_no_worker_or_pinning_advice():
    assert gpu10x(SCRIPT.replace("NUM", "2")) == ["15:24 GPU101"]  # (pinning named in its help: loader_bound.py)


def test_a_loader_read_for_many_batches_per_epoch_is_still_reported():
    assert gpu10x(SCRIPT.replace("NUM", "5000")) == ["15:24 GPU101", "16:22 GPU101"]


def test_a_loader_read_in_full_each_epoch_is_still_reported():
    source = SCRIPT.replace("NUM", "2").replace("            if count == num_examples:\n                break\n", "")
    assert gpu10x(source) == ["15:24 GPU101", "16:22 GPU101"]


@pytest.mark.parametrize("read", ["next(iter(val_dataloader))", "next(batches)"])
def test_a_few_batches_per_training_step_are_still_reported(read):
    # One batch per step is the whole training's data: each step waits for it (iterfresh's vq-vae shape).
    source = SCRIPT.replace("NUM", "2").replace(
        "        for x, y in train_dataloader:\n",
        f"        batches = iter(val_dataloader)\n        for step in range(10000):\n            x, y = {read}\n",
    )
    assert "16:22 GPU101" in gpu10x(source)
