"""A Lightning 1.x Trainer asked for no device runs on the CPU (`analysis/frameworks.py`,
`_cpu_by_default_lightning_1`): 1.x's `accelerator` default is None (the CPU) where 2.x's is "auto". A Trainer
built with an argument 2.0 removed (`progress_bar_refresh_rate=20`) and no `gpus=` / `devices=` /
`accelerator=` is a 1.x one, so no finding says the Trainer copies batches to the GPU or trains on CUDA.

The repro is a minimal shape of our own (issue 13, eighth corpus class W2: Mastering-PyTorch's Lightning lesson).
"""

from __future__ import annotations

import pytest

from tests.conftest import findings

LESSON = """\
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
        return DataLoader(MNIST(".", train=True, download=True, transform=transforms.ToTensor()), batch_size=256, num_workers=4)


model = Model()
trainer_kwargs = {{"gpus": 1}}
trainer = pl.Trainer({arguments})
trainer.fit(model)
"""


def codes(arguments: str) -> list[str]:
    return [f.split(" ")[1] for f in findings(LESSON.format(arguments=arguments), "lesson.py", preview=True)]


def test_lightning_1_trainer_without_a_device_makes_no_gpu_claims() -> None:
    found = codes("progress_bar_refresh_rate=20, max_epochs=10")
    assert not {"GPU102", "GPU901", "GPU902"} & set(found)


@pytest.mark.parametrize(
    "arguments",
    [
        "max_epochs=10",  # no 1.x-only argument: 2.x's "auto" accelerator picks the GPU
        "progress_bar_refresh_rate=20, max_epochs=10, gpus=1",  # 1.x asked for a GPU
        "progress_bar_refresh_rate=20, max_epochs=10, accelerator='gpu', devices=1",
        "progress_bar_refresh_rate=20, **trainer_kwargs",  # the device may be unpacked
    ],
)
def test_trainer_that_may_use_a_gpu_keeps_the_claims(arguments: str) -> None:
    assert "GPU102" in codes(arguments)


def test_lightning_2_trainer_keeps_the_precision_advice() -> None:
    assert "GPU901" in codes("max_epochs=10") and "GPU901" in codes("progress_bar_refresh_rate=20, gpus=1")
