"""Per-step code in called objects (issue 14, point 6): an instance of a project class called in the step loop
runs its `__call__` (an `nn.Module`'s `forward`) every step. The call resolves to that method, in this module and
across modules through the project index, so the per-step rules report in the method with the loop that runs it
named (syncs on what the loop hands it too: its parameters take the residency of the project's calls), or at the
call in the loop with the method's line where the method's module cannot see them. Shapes after yolov7's `ComputeLossOTA`, yolov4's
`YOLOLoss.forward` and d2l's `SSDLoss`; negatives beside each positive (a loss called only under a
`step % N` guard, once after the loop, in set-up; a library class; a method only `__init__` calls).
"""

from __future__ import annotations

import pytest

from tests.projects_helper import lint, lint_written, write

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

LOSSES = """
import torch


class MaskedLoss:
    def __init__(self, weight=1.0):
        self.weight = weight

    def __call__(self, pred, target):
        keep = target > 0
        k = int(keep.sum().item())
        return (pred[keep] - target[keep]).pow(2).mean() * self.weight


class AssignLoss:
    def __init__(self, device):
        self.device = device
        self.table = self.make_table()

    def make_table(self):
        return torch.zeros(n).cuda()

    def __call__(self, pred, target):
        offsets = self.offsets(target)
        return (pred - target).abs().mean() + offsets.sum()

    def offsets(self, target):
        grid = torch.arange(n).cuda()
        return grid.float() * target.mean()


class Smooth(torch.nn.Module):
    def forward(self, pred, target):
        return (pred - target).abs().mean()


class ModuleLoss(torch.nn.Module):
    def forward(self, pred, target):
        return pred[target > 0].sum()
"""

TRAIN = """
import torch
from torch.utils.data import DataLoader
from losses import MaskedLoss, AssignLoss, Smooth, ModuleLoss


def train(dataset):
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    model = torch.nn.Linear(8, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    crit = MaskedLoss()
    assign = AssignLoss("cuda")
    smooth = Smooth()
    masked = ModuleLoss()
    for x, y in loader:
        pred = model(x.cuda(non_blocking=True))
        target = y.cuda(non_blocking=True)
        loss = crit(pred, target)
        loss = loss + assign(pred, target) + smooth(pred, target) + masked(pred, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_instance_called_in_the_loop_reports_at_the_call_and_in_the_method(tmp_path, monkeypatch):
    root = write(tmp_path, {"losses.py": LOSSES, "train.py": TRAIN})
    diagnostics = lint(root, monkeypatch)
    # The syncs on the GPU tensors the loop hands the losses are reported once, at their line in the method
    # (its parameters take the residency of the project's calls), with the call that runs it named.
    assert sorted(f"{d.filename}:{d.location.row} {d.code}" for d in diagnostics) == [
        "losses.py:11 GPU303",  # `.item()` in MaskedLoss.__call__, run by crit(pred, target)
        "losses.py:12 GPU306",  # ... and boolean-mask indexing there
        "losses.py:28 GPU201",  # AssignLoss.offsets, called on `self` from `__call__`: torch.arange(n).cuda()
        "losses.py:39 GPU306",  # ModuleLoss.forward, run by masked(pred, target): boolean-mask indexing
    ]
    by_key = {(d.filename, d.location.row, d.code): d for d in diagnostics}
    assert by_key[("losses.py", 11, "GPU303")].message == (
        "`keep.sum().item()` waits for the GPU every training step (`__call__` at line 9, run by the call at train.py:18)"
    )
    assert by_key[("losses.py", 12, "GPU306")].message.startswith("`pred[keep]` makes the host wait for the GPU every training step")
    assert by_key[("losses.py", 39, "GPU306")].message.startswith(
        "`pred[target > 0]` makes the host wait for the GPU every training step (`forward` at line 38, run by the call at train.py:19)"
    )
    assert by_key[("losses.py", 28, "GPU201")].message == (
        "`torch.arange(...)` fills on the CPU, then `.cuda()` copies it to the GPU every training step "
        "(`offsets` at line 27, run by the call at train.py:19)"
    )
    # Silent: AssignLoss.make_table (only `__init__` runs it), Smooth.forward (nothing that waits).


SAME_MODULE = """
import torch
from torch.utils.data import DataLoader


class Criterion:
    def __call__(self, pred, target):
        keep = target != -100
        return torch.nn.functional.cross_entropy(pred[keep], target[keep])


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def init_hidden(self, n):
        return torch.zeros(n, 8).cuda()

    def forward(self, x):
        hidden = self.init_hidden(x.size(0))
        return self.fc(x + hidden)


class Trainer:
    def __init__(self, dataset):
        self.loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
        self.model = Decoder().cuda()
        self.criterion = Criterion()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def fit(self):
        for x, y in self.loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = self.criterion(self.model(x), y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
"""


def test_instance_held_in_self_and_a_module_of_the_same_file(tmp_path, monkeypatch):
    assert lint_written(tmp_path, {"train.py": SAME_MODULE}, monkeypatch) == [
        "train.py:18 GPU201",  # Decoder.init_hidden, called from forward: torch.zeros(...).cuda() every call
        "train.py:9 GPU306",  # Criterion.__call__, run by self.criterion(...) every step, indexes with a mask
    ]


GUARDED = """
import torch
from torch.utils.data import DataLoader
from losses import MaskedLoss, AssignLoss


def train(dataset):
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    model = torch.nn.Linear(8, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    crit = MaskedLoss()
    assign = AssignLoss("cuda")
    probe = MaskedLoss()
    probe(model(torch.ones(2, 8).cuda()), torch.ones(2, 1).cuda())  # a check before training: once
    for step, (x, y) in enumerate(loader):
        pred = model(x.cuda(non_blocking=True))
        target = y.cuda(non_blocking=True)
        loss = (pred - target).pow(2).mean()
        if step % 100 == 0:
            crit(pred, target)  # logged every 100 steps
            assign(pred, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
    crit(pred, target)  # once, after training
"""


def test_instance_called_under_an_interval_guard_once_or_before_training_is_silent(tmp_path, monkeypatch):
    assert lint_written(tmp_path, {"losses.py": LOSSES, "train.py": GUARDED}, monkeypatch) == []


LIBRARY = """
import torch
import torchmetrics
from torch.utils.data import DataLoader


class Unused:
    def __call__(self, pred, target):
        return pred[target > 0].sum().item()


def train(dataset):
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    model = torch.nn.Linear(8, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    metric = torchmetrics.MeanSquaredError().cuda()
    for x, y in loader:
        pred = model(x.cuda(non_blocking=True))
        target = y.cuda(non_blocking=True)
        metric(pred, target)  # a library class: what its __call__ does is unknown
        loss = (pred - target).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_library_instances_and_classes_never_called_stay_unknown(tmp_path, monkeypatch):
    assert lint_written(tmp_path, {"train.py": LIBRARY}, monkeypatch) == []


EVAL_ONLY = """
import torch
from losses import AssignLoss


def evaluate(model, batches):
    assign = AssignLoss("cuda")
    with torch.no_grad():
        for x, y in batches:
            assign(model(x), y)
"""


def test_a_method_no_training_loop_runs_is_not_per_step(tmp_path, monkeypatch):
    # AssignLoss.offsets builds on the CPU and copies, but only an evaluation helper over a list calls the
    # instance: nothing proves it runs on every training step.
    assert lint_written(tmp_path, {"losses.py": LOSSES, "evaluate.py": EVAL_ONLY}, monkeypatch) == []


ENGINE = """
import torch


def fit_one_epoch(model, criterion, optimizer, loader, probe):
    for step, (x, y) in enumerate(loader):
        pred = model(x.cuda(non_blocking=True))
        loss = criterion(pred, y.cuda(non_blocking=True))
        if step % 100 == 0:
            probe(pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

HANDED = """
import torch
from torch.utils.data import DataLoader
from engine import fit_one_epoch
from losses import AssignLoss


def main(dataset, other):
    loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
    model = torch.nn.Linear(8, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = AssignLoss("cuda")
    fit_one_epoch(model, criterion, opt, loader, other)
"""

HANDED_AS_PROBE = HANDED.replace("fit_one_epoch(model, criterion, opt, loader, other)", "fit_one_epoch(model, other, opt, loader, criterion)")


def test_instance_handed_to_the_function_whose_loop_calls_it(tmp_path, monkeypatch):
    # yolov4's shape: `yolo_loss = YOLOLoss(...)` in train.py, called as a parameter in utils_fit's step loop
    root = write(tmp_path, {"losses.py": LOSSES, "engine.py": ENGINE, "train.py": HANDED})
    diagnostics = [d for d in lint(root, monkeypatch) if d.filename == "losses.py"]
    assert [(d.location.row, d.code) for d in diagnostics] == [(28, "GPU201")]
    assert diagnostics[0].message.endswith("(`offsets` at line 27, run by the call at engine.py:8)")


def test_instance_handed_on_but_called_under_an_interval_guard_is_silent(tmp_path, monkeypatch):
    root = write(tmp_path, {"losses.py": LOSSES, "engine.py": ENGINE, "train.py": HANDED_AS_PROBE})
    assert [d for d in lint(root, monkeypatch) if d.filename == "losses.py"] == []
