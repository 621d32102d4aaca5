"""Hidden syncs in per-step loss and model helpers of another module (issue 14, eighth corpus): a loss module
whose `forward` a training loop calls every step with GPU tensors, and that selects with `masked_select` or a
boolean mask, or reads a value back with `.item()`.

Shapes after ming024's FastSpeech2 (`FastSpeech2Loss.forward` masks every prediction and target with
`masked_select`, called as `Loss(batch, output)` in train.py's step loop). The parameters take their residency
from the project's calls (`residency._received_tensor_level`): every call passing a GPU tensor makes it one for
sure, one GPU call and none passing a CPU value makes it likely. Negatives beside each: the loss called once at
set-up, on CPU tensors, by one call with a CPU tensor, or only in evaluation; a helper function of the same shape
is reported at its call (the helper-call path, unchanged).
"""

from __future__ import annotations

from tests.projects_helper import lint, write

LOSS = """
import torch
import torch.nn as nn


class MaskedLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.mae = nn.L1Loss()

    def forward(self, inputs, predictions):
        targets = inputs[1]
        preds, masks = predictions
        masks = ~masks
        preds = preds.masked_select(masks)
        targets = targets.masked_select(masks)
        return self.mae(preds, targets)


class PositiveLoss(nn.Module):
    def forward(self, pred, target):
        keep = target > 0
        count = keep.sum().item()
        return (pred[keep] - target[keep]).abs().sum() / max(count, 1)
"""

TRAIN = """
import torch
from torch.utils.data import DataLoader

from losses import MaskedLoss, PositiveLoss


def main(dataset, model):
    device = torch.device("cuda")
    model = model.to(device)
    crit = MaskedLoss()
    positive = PositiveLoss()
    opt = torch.optim.Adam(model.parameters(), fused=True)
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True, persistent_workers=True)
    for epoch in range(10):
        for x, y in loader:
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            output = model(x)
            loss = crit((x, y), output) + positive(output[0], y)
            loss.backward()
            opt.step()
            opt.zero_grad()
"""


def _found(tmp_path, monkeypatch, files):
    diagnostics = lint(write(tmp_path, files), monkeypatch, select=("GPU303", "GPU306"))
    return sorted((d.filename, d.location.row, d.code, d.message) for d in diagnostics)


def test_masks_and_reads_in_a_loss_module_called_every_step_are_reported_at_their_line(tmp_path, monkeypatch):
    found = _found(tmp_path, monkeypatch, {"losses.py": LOSS, "train.py": TRAIN})
    assert [(f, row, code) for f, row, code, _ in found] == [
        ("losses.py", 15, "GPU306"),  # preds.masked_select(masks)
        ("losses.py", 16, "GPU306"),  # targets.masked_select(masks)
        ("losses.py", 23, "GPU303"),  # keep.sum().item()
        ("losses.py", 24, "GPU306"),  # pred[keep]: once for the statement
    ]
    assert found[0][3] == (
        "`preds.masked_select(masks)` makes the host wait for the GPU every training step "
        "(`forward` at line 11, run by the call at train.py:20)"
    )


def test_a_loss_called_once_at_set_up_stays_silent(tmp_path, monkeypatch):
    once = TRAIN.replace("    for epoch in range(10):", "    probe = crit((x0, y0), model(x0)) + positive(model(x0)[0], y0)\n    for epoch in range(10):")
    once = once.replace("loss = crit((x, y), output) + positive(output[0], y)", "loss = output.sum()")
    once = once.replace("def main(dataset, model):", "def main(dataset, model, x0, y0):")
    once = once.replace("    crit = MaskedLoss()", "    x0, y0 = x0.to(device), y0.to(device)\n    crit = MaskedLoss()")
    assert _found(tmp_path, monkeypatch, {"losses.py": LOSS, "train.py": once}) == []


def test_a_loss_every_step_on_cpu_tensors_stays_silent(tmp_path, monkeypatch):
    cpu = TRAIN.replace('device = torch.device("cuda")', 'device = torch.device("cpu")')
    cpu = cpu.replace("x = x.to(device, non_blocking=True)", "x = x.float()").replace("y = y.to(device, non_blocking=True)", "y = y.float()")
    cpu = cpu.replace("model = model.to(device)", "model = model.float()")
    assert _found(tmp_path, monkeypatch, {"losses.py": LOSS, "train.py": cpu}) == []


def test_a_cpu_self_check_elsewhere_does_not_hide_the_training_calls_gpu_tensors(tmp_path, monkeypatch):
    """A sanity check that runs the loss on small CPU tensors once: the training loop's call still passes GPU
    tensors every step (the check's tensors are not known to be anywhere: likely, not certain)."""
    check = """
import torch

from losses import MaskedLoss


def check_loss():
    target = torch.ones(8)
    return MaskedLoss()((target, target), (target, target > 0))
"""
    found = _found(tmp_path, monkeypatch, {"losses.py": LOSS, "train.py": TRAIN, "check.py": check})
    assert [(f, row, code) for f, row, code, _ in found][:2] == [("losses.py", 15, "GPU306"), ("losses.py", 16, "GPU306")]


def test_a_loss_called_only_in_evaluation_is_not_reported_in_the_loss(tmp_path, monkeypatch):
    """Evaluation metrics select with masks by design (`data-dependent shapes that are the point of the code`)."""
    evaluate = TRAIN.replace("            loss.backward()\n            opt.step()\n            opt.zero_grad()\n", "            scores.append(loss)\n")
    evaluate = evaluate.replace("    for epoch in range(10):", "    scores = []\n    model.eval()\n    with torch.no_grad():")
    evaluate = evaluate.replace("    opt = torch.optim.Adam(model.parameters(), fused=True)\n", "")
    found = _found(tmp_path, monkeypatch, {"losses.py": LOSS, "train.py": evaluate})
    assert [(f, code) for f, _, code, _ in found if f == "losses.py"] == []  # no training step runs the loss
    assert all("every evaluation step" in message for *_, message in found)  # the helper call, as before


def test_a_tensor_parameter_some_call_fills_with_a_model_output_is_no_module(tmp_path, monkeypatch):
    """`crit(batch, model(x))` in an evaluation helper whose `model` is a parameter: the index says the value
    derives from a module; another call passing a GPU tensor says it is a tensor (the loss masks it)."""
    evaluate = """
import torch

from losses import MaskedLoss


def evaluate(model, loader, device):
    crit = MaskedLoss()
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            total += crit((x, y), model(x))
    return total
"""
    found = _found(tmp_path, monkeypatch, {"losses.py": LOSS, "train.py": TRAIN, "evaluate.py": evaluate})
    assert [(f, row, code) for f, row, code, _ in found][:2] == [("losses.py", 15, "GPU306"), ("losses.py", 16, "GPU306")]


def test_helpers_with_effects_that_are_no_syncs_are_followed_as_before(tmp_path, monkeypatch):
    """A helper handed a loader to iterate and a device to build on, called in the loop: its effects on those
    parameters are no syncs (a regression: they were read as syncs and the analysis failed)."""
    helpers = """
import torch


def first_batch(loader, device):
    for x, y in loader:
        return x.to(device), torch.ones(1, device=device)
"""
    train = TRAIN.replace("from losses import MaskedLoss, PositiveLoss", "from losses import MaskedLoss, PositiveLoss\nfrom helpers import first_batch")
    train = train.replace("            output = model(x)\n", "            output = model(x)\n            probe, scale = first_batch(loader, device)\n")
    diagnostics = lint(write(tmp_path, {"losses.py": LOSS, "train.py": train, "helpers.py": helpers}), monkeypatch)
    assert [d.name for d in diagnostics if d.code is None] == []
    assert sorted((d.filename, d.location.row, d.code) for d in diagnostics if d.code in ("GPU303", "GPU306")) == [
        ("losses.py", 15, "GPU306"), ("losses.py", 16, "GPU306"), ("losses.py", 23, "GPU303"), ("losses.py", 24, "GPU306"),
    ]
