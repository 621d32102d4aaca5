"""GPU407 in a module that trains part of a submodule (`analysis/partial_submodules.py`): lightly's masked-ViT
examples run `self.backbone.encode(...)` of a timm ViT whose classifier head then gets no gradient, so DDP needs
`find_unused_parameters=True`. The nearby shapes (the submodule called whole, a helper object's method) stay."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import findings

# the models here are out of sight (a trainer's, or modules handed in): GPU407 reports them only with this option
UNPROVEN_MODELS = (("GPU407", (("unproven-models", True),)),)

MAE = textwrap.dedent("""\
    import copy

    import pytorch_lightning as pl
    import torch
    from lightly.models.modules import MaskedVisionTransformerTIMM
    from timm.models.vision_transformer import vit_base_patch32_224


    class MAE(pl.LightningModule):
        def __init__(self):
            super().__init__()
            vit = vit_base_patch32_224()
            self.backbone = MaskedVisionTransformerTIMM(vit=vit)
            self.teacher = copy.deepcopy(self.backbone)
            self.scaler = torch.cuda.amp.GradScaler()
            self.head = torch.nn.Linear(768, 768)

        def training_step(self, batch, batch_idx):
            images = batch[0]
            features = {call}
            return self.head(features).pow(2).mean()

        def configure_optimizers(self):
            self.backbone.train()
            return torch.optim.AdamW(self.parameters(), lr=1.5e-4)


    trainer = pl.Trainer(max_epochs=10, devices="auto", accelerator="gpu", strategy="ddp_find_unused_parameters_true")
    trainer.fit(model=MAE(), train_dataloaders=dataloader)
""")


@pytest.mark.parametrize(
    "call",
    [
        "self.backbone.encode(images=images, idx_keep=None)",
        "self.teacher.encode(images)",  # a deep copy of the module built in `__init__`
        "self.backbone.forward_features(images)",
    ],
)
def test_a_submodule_run_through_part_of_it_needs_the_search(call):
    assert findings(MAE.format(call=call), select=("GPU407",), rule_options=UNPROVEN_MODELS) == []


@pytest.mark.parametrize(
    "call",
    [
        "self.backbone(images)",  # the whole submodule
        "self.backbone.forward(images)",
        "self.backbone.encode(images) + self.backbone(images)",  # run whole as well: every part is used
        "self.scaler.scale(images)",  # a helper object's method, not a module's
        "self.head.weight.sum() * images",
    ],
)
def test_a_submodule_run_whole_keeps_the_finding(call):
    assert findings(MAE.format(call=call), select=("GPU407",), rule_options=UNPROVEN_MODELS) == ["28:81 GPU407"]
