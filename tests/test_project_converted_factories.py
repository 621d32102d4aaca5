"""A tensor a factory fills on the CPU and converts before the copy (`torch.arange(n).long().to(device)`),
every step of a project's training code (issue 14; shaped like train-CLIP: a LightningModule in
models/wrapper.py, trained by train.py)."""

from __future__ import annotations

import pytest

from gpulint.fixer import apply_edits
from tests.projects_helper import found, lint, write

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

WRAPPER = """\
    import lightning.pytorch as pl
    import torch
    import torch.nn.functional as F


    class CLIPWrapper(pl.LightningModule):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def training_step(self, train_batch, idx):
            image, text = train_batch
            logits = self.model.encode_image(image) @ self.model.encode_text(text).t()
            ground_truth = {labels}
            loss = (F.cross_entropy(logits, ground_truth) + F.cross_entropy(logits.t(), ground_truth)) / 2
            return loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)
"""
TRAIN = """\
    import lightning.pytorch as pl

    from models.wrapper import CLIPWrapper


    def main(model, datamodule):
        trainer = pl.Trainer(accelerator="gpu", devices=1, max_epochs=32)
        trainer.fit(CLIPWrapper(model), datamodule)
"""


@pytest.mark.parametrize(
    ("labels", "expected", "fixed"),
    [
        (
            "torch.arange(len(logits)).long().to(logits.device)",
            ["models/wrapper.py:14 GPU201"],
            "torch.arange(len(logits), device=logits.device).long()",
        ),
        (
            "torch.randint(0, 10, (len(logits),)).long().to(logits.device)",  # unsafe: other random numbers
            ["models/wrapper.py:14 GPU201"],
            "torch.randint(0, 10, (len(logits),), device=logits.device).long()",
        ),
        ("torch.arange(len(logits), device=logits.device).long()", [], None),  # made on the GPU already
        ("torch.arange(len(logits)).long().to(logits.device, torch.int32)", ["models/wrapper.py:14 GPU201"], None),
        # a view: the same CPU data copied, reported without a fix (the copy is contiguous, a view on the device may not be)
        ("torch.arange(len(logits)).view(-1, 1).to(logits.device)", ["models/wrapper.py:14 GPU201"], None),
        ("torch.tensor(list(range(len(logits)))).view(-1, 1).to(logits.device)", [], None),  # data: GPU202's
    ],
)
def test_a_factory_converted_then_moved_every_lightning_step(tmp_path, monkeypatch, labels, expected, fixed):
    files = {"models/__init__.py": "", "models/wrapper.py": WRAPPER.format(labels=labels), "train.py": TRAIN}
    diagnostics = lint(write(tmp_path, files), monkeypatch, select=("GPU201",))
    assert found(diagnostics) == expected
    if expected:
        [d] = diagnostics
        assert d.message.startswith("`torch.")
        assert "fills on the CPU, then `.to()` copies it to the GPU every training step (`training_step` at line 11" in d.message
        source = (tmp_path / "models/wrapper.py").read_text()
        after = apply_edits(source, list(d.fix.edits)).splitlines()[13].strip() if d.fix else None
        assert after == (f"ground_truth = {fixed}" if fixed else None)
