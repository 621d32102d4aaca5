"""Instances built by project factories (issue 14, point 6, class A of the thirteenth corpus): a call on what a
factory of the project returns (`crit = build_loss()`, `net, crit, aux = set_model()`) runs the method of the class
every `return` of the factory instantiates, so a loss module the step loop calls through a factory's result reports
its waits in its `forward` with the call that runs it named, as one built in place does. Shapes after BiSeNet's
`set_model()` returning `OhemCELoss` instances (lib/ohem_ce_loss.py, tools/train_amp.py) and GraphMAE's
`build_model(args)`; negatives: a factory that returns a library object or None on some path, the instance called
only under a `step % N` guard, once after the loop, or in set-up.
"""

from __future__ import annotations

import pytest

from tests.projects_helper import lint, write

LOSS = """
import torch
import torch.nn as nn


class OhemCELoss(nn.Module):
    def __init__(self, thresh, lb_ignore=255):
        super().__init__()
        self.thresh = -torch.log(torch.tensor(thresh, dtype=torch.float)).cuda()
        self.lb_ignore = lb_ignore
        self.criteria = nn.CrossEntropyLoss(ignore_index=lb_ignore, reduction="none")

    def forward(self, logits, labels):
        n_min = labels[labels != self.lb_ignore].numel() // 16
        loss = self.criteria(logits, labels).view(-1)
        loss_hard = loss[loss > self.thresh]
        if loss_hard.numel() < n_min:
            loss_hard, _ = loss.topk(n_min)
        return torch.mean(loss_hard)
"""

TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from ohem import OhemCELoss


def set_model(lb_ignore=255):
    net = nn.Conv2d(3, 19, 1)
    net.cuda()
    criteria_pre = OhemCELoss(0.7, lb_ignore)
    return net, criteria_pre


def build_loss():
    loss = OhemCELoss(0.7)
    return loss


def train(dataset):
    loader = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True)
    net, criteria_pre = set_model()
    crit = build_loss()
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for im, lb in loader:
        im, lb = im.cuda(non_blocking=True), lb.cuda(non_blocking=True)
        logits = net(im)
        loss = criteria_pre(logits, lb) + crit(logits, lb)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_loss_module_from_a_factory_reports_its_masks_in_forward(tmp_path, monkeypatch):
    root = write(tmp_path, {"ohem.py": LOSS, "train.py": TRAIN})
    diagnostics = lint(root, monkeypatch)
    found = sorted(f"{d.filename}:{d.location.row} {d.code}" for d in diagnostics if d.filename == "ohem.py")
    assert found == ["ohem.py:14 GPU306", "ohem.py:16 GPU306"]
    by_key = {(d.filename, d.location.row, d.code): d for d in diagnostics}
    # element 1 of `set_model()`'s tuple and `build_loss()`'s result both run OhemCELoss.forward: the first call names it
    assert by_key[("ohem.py", 14, "GPU306")].message.startswith(
        "`labels[labels != self.lb_ignore]` makes the host wait for the GPU every training step "
        "(`forward` at line 13, run by the call at train.py:"
    )
    assert by_key[("ohem.py", 16, "GPU306")].message.startswith("`loss[loss > self.thresh]` makes the host wait")


def test_each_factory_shape_alone_is_enough(tmp_path, monkeypatch):
    tuple_only = TRAIN.replace("loss = criteria_pre(logits, lb) + crit(logits, lb)", "loss = criteria_pre(logits, lb)")
    root = write(tmp_path / "tuple", {"ohem.py": LOSS, "train.py": tuple_only})
    assert sorted(f"{d.filename}:{d.location.row} {d.code}" for d in lint(root, monkeypatch) if d.filename == "ohem.py") == [
        "ohem.py:14 GPU306", "ohem.py:16 GPU306",
    ]  # fmt: skip
    single_only = TRAIN.replace("loss = criteria_pre(logits, lb) + crit(logits, lb)", "loss = crit(logits, lb)")
    root = write(tmp_path / "single", {"ohem.py": LOSS, "train.py": single_only})
    assert sorted(f"{d.filename}:{d.location.row} {d.code}" for d in lint(root, monkeypatch) if d.filename == "ohem.py") == [
        "ohem.py:14 GPU306", "ohem.py:16 GPU306",
    ]  # fmt: skip


def test_a_factory_returning_something_else_on_a_path_names_no_method(tmp_path, monkeypatch):
    mixed = TRAIN.replace(
        "def build_loss():\n    loss = OhemCELoss(0.7)\n    return loss",
        "def build_loss(kind='ohem'):\n    if kind == 'ohem':\n        return OhemCELoss(0.7)\n    return nn.CrossEntropyLoss()",
    ).replace("loss = criteria_pre(logits, lb) + crit(logits, lb)", "loss = crit(logits, lb)")
    root = write(tmp_path, {"ohem.py": LOSS, "train.py": mixed})
    assert [d for d in lint(root, monkeypatch) if d.filename == "ohem.py"] == []  # the loss may be the library's: nothing known runs


def test_a_factory_instance_called_under_a_guard_after_the_loop_or_in_set_up_stays_silent(tmp_path, monkeypatch):
    guarded = TRAIN.replace(
        "loss = criteria_pre(logits, lb) + crit(logits, lb)",
        "loss = logits.mean()\n        if opt.state and len(opt.state) % 100 == 0:\n            print(crit(logits, lb))",
    ).replace("for im, lb in loader:", "for step, (im, lb) in enumerate(loader):").replace(
        "len(opt.state) % 100 == 0", "step % 100 == 0"
    )
    root = write(tmp_path / "guarded", {"ohem.py": LOSS, "train.py": guarded})
    assert [d for d in lint(root, monkeypatch) if d.filename == "ohem.py"] == []
    after = TRAIN.replace("loss = criteria_pre(logits, lb) + crit(logits, lb)", "loss = logits.mean()") + (
        "    print(crit(logits, lb))\n"
    )
    root = write(tmp_path / "after", {"ohem.py": LOSS, "train.py": after})
    assert [d for d in lint(root, monkeypatch) if d.filename == "ohem.py"] == []


NET = """
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        grid = torch.arange(x.size(1)).cuda()
        return self.fc(x) + grid
"""

BUILD = """
from net import Net


def build_model(cfg):
    model = Net()
    return model
"""

PRETRAIN = """
import torch
from build import build_model


def pretrain(model, feats, optimizer, epochs):
    x = feats.cuda()
    for epoch in range(epochs):
        loss = model(x).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def main(cfg):
    model = build_model(cfg)
    model.cuda()
    optimizer = torch.optim.Adam(model.parameters())
    pretrain(model, torch.randn(64, 8), optimizer, 100)
"""


@pytest.mark.usefixtures("unproven_cost")  # (the factory's size is out of sight)
def test_a_model_from_a_factory_handed_to_the_training_function_runs_forward_every_step(tmp_path, monkeypatch):
    root = write(tmp_path, {"net.py": NET, "build.py": BUILD, "pretrain.py": PRETRAIN})
    by_key = {(d.filename, d.location.row, d.code): d for d in lint(root, monkeypatch)}
    assert by_key[("net.py", 12, "GPU201")].message == (
        "`torch.arange(...)` fills on the CPU, then `.cuda()` copies it to the GPU every training step "
        "(`forward` at line 11, run by the call at pretrain.py:9)"
    )


def test_a_class_chosen_by_settings_through_rebound_imports_names_no_method(tmp_path, monkeypatch):
    chosen = BUILD.replace(
        "from net import Net\n\n\ndef build_model(cfg):\n    model = Net()\n    return model",
        "def build_model(cfg):\n    if cfg == 'b':\n        from other import Other as M\n    else:\n        from net import Net as M\n"
        "    model = M()\n    return model",
    )
    other = "import torch.nn as nn\n\n\nclass Other(nn.Module):\n    def forward(self, x):\n        return x\n"
    root = write(tmp_path, {"net.py": NET, "other.py": other, "build.py": chosen, "pretrain.py": PRETRAIN})
    found = [d.message for d in lint(root, monkeypatch) if d.filename == "net.py"]
    assert not any("run by the call at" in m for m in found), found  # which class runs is the settings' choice
