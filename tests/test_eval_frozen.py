"""GPU405 on a frozen backbone (`analysis/evaluation.py`): when every parameter of the evaluated model was
frozen and only a new head trains, autograd records the head's few ops and nothing else, so an evaluation
loop without `no_grad()` costs next to nothing. The shapes come from transfer-learning notebooks (dataflowr
Module 1); partial freezing and PEFT models stay reported."""

from __future__ import annotations

from tests.conftest import diagnostics, findings

SETUP = """\
import torch
from torch import nn
from peft import get_peft_model
from torchvision import models

device = torch.device("cuda")
model_vgg = models.vgg16(weights="DEFAULT")
{freeze}
model_vgg.classifier._modules["6"] = nn.Linear(4096, 2)
model_vgg = model_vgg.to(device)
optimizer = torch.optim.SGD(model_vgg.classifier[6].parameters(), lr=0.001)


def test_model(model, dataloader):
    model.eval()
    correct = 0
    for inputs, classes in dataloader:
        outputs = model(inputs.to(device))
        correct += (outputs.argmax(1) == classes.to(device)).sum()
    return correct


{calls}
"""

WHOLE = "for param in model_vgg.parameters():\n    param.requires_grad = False"


def gpu405(freeze: str = WHOLE, calls: str = "test_model(model_vgg, loader)") -> list[str]:
    return findings(SETUP.format(freeze=freeze, calls=calls), select=("GPU405",))


def test_a_wholly_frozen_model_with_a_new_head_is_not_reported():
    assert gpu405() == []
    assert gpu405(freeze="model_vgg.requires_grad_(False)") == []


def test_a_submodule_of_a_frozen_model_is_not_reported():
    assert gpu405(calls="test_model(model_vgg, loader)\ntest_model(model_vgg.classifier, features_loader)") == []


def test_a_frozen_model_wrapped_with_parameter_free_layers_is_not_reported():
    calls = "model_lsm = nn.Sequential(model_vgg, nn.LogSoftmax(dim=1))\nmodel_lsm = model_lsm.to(device)\ntest_model(model_lsm, loader)"
    assert gpu405(calls=calls) == []


def test_a_partly_frozen_model_is_still_reported():
    # The classifier's three large layers still record their graph.
    [d] = diagnostics(SETUP.format(freeze="for param in model_vgg.features.parameters():\n    param.requires_grad = False",
                                   calls="test_model(model_vgg, loader)"), select=("GPU405",))
    assert (d.location.row, d.location.column) == (19, 19)
    assert d.message == "`model` runs in a loop after `model.eval()` with autograd on"


def test_a_caller_that_passes_a_trainable_model_keeps_the_finding():
    assert gpu405(calls="test_model(model_vgg, loader)\ntest_model(models.resnet18().to(device), loader)") == ["19:19 GPU405"]


def test_a_model_unfrozen_later_is_still_reported():
    calls = "for param in model_vgg.parameters():\n    param.requires_grad = True\ntest_model(model_vgg, loader)"
    assert gpu405(calls=calls) == ["19:19 GPU405"]


def test_a_peft_model_records_its_adapters_everywhere_and_is_still_reported():
    calls = "model_vgg = get_peft_model(model_vgg, config)\ntest_model(model_vgg, loader)"
    assert gpu405(freeze="", calls=calls) == ["18:19 GPU405"]


# A test script that freezes the whole model right after `eval()` (KAIR's `main_test_*`): nothing requires grad,
# so no graph is built and no activation kept; autograd is off in effect.
TEST_SCRIPT = """\
import torch
from nets import Net


def main(paths, args):
    device = torch.device("cuda")
    model = Net()
    model.eval()
    {freeze}
    model = model.to(device)
    for path in paths:
        out = model(torch.load(path).to(device))
        print(out.mean().item())
    {after}
"""


def gpu405_in_script(freeze: str, after: str = "") -> list[str]:
    return findings(TEST_SCRIPT.format(freeze=freeze, after=after), select=("GPU405",))


def test_a_model_frozen_through_named_parameters_before_the_loop_is_not_reported():
    assert gpu405_in_script("for k, v in model.named_parameters():\n        v.requires_grad = False") == []
    assert gpu405_in_script("for _, v in model.named_parameters():\n        v.requires_grad = False") == []
    assert gpu405_in_script("model.requires_grad_(False)") == []
    assert gpu405_in_script("for v in model.parameters(): v.requires_grad = False") == []


def test_a_model_frozen_only_in_part_or_only_on_one_path_is_still_reported():
    # Parameters named like the head keep requiring grad.
    assert gpu405_in_script('for n, v in model.named_parameters():\n        if "head" not in n:\n            v.requires_grad = False') == ["14:15 GPU405"]
    assert gpu405_in_script("for v in model.backbone.parameters():\n        v.requires_grad = False") == ["13:15 GPU405"]
    # `named_parameters(prefix=...)` / `parameters(recurse=False)`: not every parameter
    assert gpu405_in_script("for v in model.parameters(recurse=False):\n        v.requires_grad = False") == ["13:15 GPU405"]
    [d] = diagnostics(TEST_SCRIPT.format(freeze="if args.freeze:\n        model.requires_grad_(False)", after=""), select=("GPU405",))
    assert (d.location.row, d.location.column) == (13, 15)
    assert d.message == "`model` runs in a loop after `model.eval()` with autograd on"


def test_a_model_frozen_only_after_the_loop_is_still_reported():
    assert gpu405_in_script("pass", after="model.requires_grad_(False)") == ["12:15 GPU405"]
