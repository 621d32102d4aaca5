"""A Lightning 1.x Trainer told `gpus=0` (or `gpus=None`) with no `accelerator` trains on the CPU
(`analysis/frameworks.py`, `_no_gpus_written` / `_asks_no_gpus`): 1.x selects no GPU for 0 and None and its
`accelerator` default is the CPU. Its loaders, its module and its optimizer get no GPU advice. Only a literal
written in the call counts: `gpus=1`, `gpus=args.gpus` (chosen at launch) and unpacked settings keep the findings.

The repro is a minimal shape of our own (issue 13, eleventh corpus class N1: a W&B Lightning MNIST example).
"""

from __future__ import annotations

import pytest

from tests.conftest import findings

LESSON = """\
import argparse

import pytorch_lightning as pl
import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader
from torchvision import transforms
from torchvision.datasets import MNIST


class Model(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(28 * 28, 10)

    def forward(self, x):
        return self.layer(x.view(x.size(0), -1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.02)

    def train_dataloader(self):
        return DataLoader(MNIST(".", train=True, download=True, transform=transforms.ToTensor()), batch_size=32)


parser = argparse.ArgumentParser()
parser.add_argument("--gpus", type=int, default=0)
args = parser.parse_args()
trainer_kwargs = {{"max_epochs": 2}}
trainer = pl.Trainer({arguments})
trainer.fit(Model())
"""


def found(arguments: str) -> list[str]:
    return findings(LESSON.format(arguments=arguments), "mnist.py", preview=True)


@pytest.mark.parametrize("arguments", ["gpus=0, max_epochs=2", "gpus=None, max_epochs=2", "accelerator='cpu', max_epochs=2"])
def test_trainer_on_the_cpu_gets_no_gpu_advice(arguments: str) -> None:
    assert found(arguments) == []


@pytest.mark.parametrize(
    "arguments",
    [
        "gpus=1, max_epochs=2",  # asked for a GPU
        "gpus=args.gpus, max_epochs=2",  # chosen at launch, whatever the default
        "gpus=0, accelerator='gpu', max_epochs=2",  # an accelerator that may be a GPU
        "gpus=0, **trainer_kwargs",  # the unpacked settings may name a device
        "max_epochs=2",  # 2.x's "auto" accelerator picks the GPU
    ],
)
def test_trainer_that_may_use_a_gpu_keeps_the_findings(arguments: str) -> None:
    assert "27:16 GPU101" in found(arguments)
