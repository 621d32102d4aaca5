"""Loaders built only to be counted (`analysis/loader_flow.py`, `never_used`): `iters = len(loader_for_count)`
(minimind's RL trainers) takes no batch, so GPU101/GPU102 have nothing to speed up; the loader the loop iterates
keeps its findings, and a counted loader that is iterated too stays reported."""

from __future__ import annotations

from tests.conftest import findings

SOURCE = """\
import torch
from torch.utils.data import DataLoader
from mydata import TextDataset

model = torch.nn.Linear(512, 512).cuda()
opt = torch.optim.AdamW(model.parameters())
train_ds = TextDataset("train.jsonl")
{count}
for epoch in range(3):
    loader = DataLoader(train_ds, batch_size=32, num_workers=8, pin_memory=True)
    for step, x in enumerate({iterated}):
        loss = model(x.cuda()).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(step / iters)
"""


def loader_findings(count: str, iterated: str = "loader") -> list[str]:
    return findings(SOURCE.format(count=count, iterated=iterated), select=("GPU101", "GPU102"))


def test_a_loader_only_counted_is_not_reported():
    assert loader_findings("loader_for_count = DataLoader(train_ds, batch_size=32)\niters = len(loader_for_count)") == []
    assert loader_findings("iters = len(DataLoader(train_ds, batch_size=32))") == []


def test_a_counted_loader_that_is_also_iterated_is_still_reported():
    count = "loader_for_count = DataLoader(train_ds, batch_size=32)\niters = len(loader_for_count)"
    assert loader_findings(count, iterated="loader_for_count") == ["8:20 GPU101", "8:20 GPU102"]
