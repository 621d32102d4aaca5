"""Per-step work reached through objects the code keeps (round 21): a logging object held in an attribute that
aliases another (`self.integrator = self.train_integrator`, set in `train()`, read in `do_pass` written above it),
the loss values handed on in a dict display (`{**data, **out}`), and a model wrapped inline
(`DistributedDataParallel(Net().cuda(), ...)`).

Shapes after the per-step integrators and loss dicts of the fourteenth to twentieth corpora: the integrator's
`add_dict(losses)` reads each loss with `.mean().item()` in a loop of its own, many waits a step, reported at the
call by default. Negatives beside each: an alias whose writes name objects of two classes (not resolved), a host
value of a dict display read by its key (not a GPU tensor), a wrapper handed a tensor's move (no module).
"""

from __future__ import annotations

from gpulint.config import Settings
from gpulint.linter import lint_files
from tests.projects_helper import found, lint_written, write

INTEGRATOR = """
class Integrator:
    def __init__(self, logger):
        self.values = {}
        self.logger = logger

    def add_tensor(self, key, tensor):
        if key not in self.values:
            self.values[key] = tensor.mean().item()
        else:
            self.values[key] += tensor.mean().item()

    def add_dict(self, tensor_dict):
        for k, v in tensor_dict.items():
            self.add_tensor(k, v)


class Printer:
    def __init__(self, logger):
        self.logger = logger

    def add_dict(self, tensor_dict):
        pass
"""

LOSSES = """
import torch.nn.functional as F


class LossComputer:
    def __init__(self, para):
        self.para = para

    def compute(self, data, it):
        losses = {}
        losses["total_loss"] = F.cross_entropy(data["logits"], data["gt"])
        return losses
"""

MODEL = """
import torch
from torch import nn, optim
from util.integ import Integrator, Printer
from model.losses import LossComputer


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x)


class TrainModel:
    def __init__(self, para, logger=None, local_rank=0):
        self.net = nn.parallel.DistributedDataParallel(Net().cuda(), device_ids=[local_rank])
        self.train_integrator = Integrator(logger)
        self.val_integrator = {val_class}(logger)
        self.loss_computer = LossComputer(para)
        self.optimizer = optim.Adam(self.net.parameters(), lr=1e-3)

    def do_pass(self, data, it=0):
        for k, v in data.items():
            data[k] = v.cuda(non_blocking=True)
        out = {{}}
        out["logits"] = self.net(data["rgb"])
        losses = self.loss_computer.compute({{**data, **out}}, it)
        self.integrator.add_dict(losses)
        self.optimizer.zero_grad()
        losses["total_loss"].backward()
        self.optimizer.step()

    def train(self):
        self.integrator = self.train_integrator
        return self

    def val(self):
        self.integrator = self.val_integrator
        return self
"""

TRAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset
from model.model import TrainModel

ds = TensorDataset(torch.randn(1000, 8), torch.randint(0, 4, (1000,)))
loader = DataLoader(ds, batch_size=64, num_workers=4, pin_memory=True, persistent_workers=True)
trainer = TrainModel({})
trainer.train()
for epoch in range(100):
    for it, (x, y) in enumerate(loader):
        trainer.do_pass({"rgb": x, "gt": y}, it)
"""


def _files(val_class: str) -> dict[str, str]:
    return {
        "util/__init__.py": "",
        "util/integ.py": INTEGRATOR,
        "model/__init__.py": "",
        "model/losses.py": LOSSES,
        "model/model.py": MODEL.format(val_class=val_class),
        "train.py": TRAIN,
    }


def _default_findings(root, monkeypatch, code: str) -> list:
    """The findings of `code` as `gpulint check` reports them by default (no `unproven-cost`)."""
    monkeypatch.chdir(root)
    settings = Settings(root=root)
    paths = sorted(root.rglob("*.py"))
    return [d for result in lint_files(paths, settings, jobs=1, use_cache=False) for d in result.diagnostics if d.code == code]


def test_integrator_held_in_an_aliasing_attribute_reads_each_loss_of_the_dict(tmp_path, monkeypatch):
    root = write(tmp_path, _files("Integrator"))
    diagnostics = _default_findings(root, monkeypatch, "GPU303")
    assert found(diagnostics) == ["model/model.py:31 GPU303"]
    (only,) = diagnostics
    assert only.message == (
        "`self.integrator.add_dict(losses)` (`.item()` at util/integ.py:9, 2 reads a call) waits for the GPU every "
        "training step (`do_pass` at line 25, run by the call at train.py:12)"
    )


def test_alias_of_objects_of_two_classes_is_not_resolved(tmp_path, monkeypatch):
    # `self.integrator` is the train integrator after `train()` and a `Printer` after `val()`: which class runs is the
    # run's choice, so the call stays unresolved (as before), even with `unproven-cost`.
    assert "model/model.py:31 GPU303" not in lint_written(tmp_path, _files("Printer"), monkeypatch)


DICT_DISPLAY = """
import torch
from torch import nn

net = nn.Linear(8, 4).cuda()
opt = torch.optim.SGD(net.parameters(), lr=0.1)


def report(values):
    for k, v in values.items():
        print(k, float(v))


def run(loader):
    for x, y in loader:
        x = x.cuda()
        out = {"logits": net(x), "count": 4}
        loss = nn.functional.cross_entropy(out["logits"], y.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if out["count"] > 3:
            pass
        report({**out, "loss": loss})
"""


def test_dict_display_holds_gpu_values_but_not_its_host_entries(tmp_path, monkeypatch):
    # `report({**out, "loss": loss})` hands a dict of GPU tensors to a helper that reads each value: reported at the
    # call; `out["count"]` is the literal 4 of the display, no GPU tensor: its comparison reads nothing.
    assert lint_written(tmp_path, {"train.py": DICT_DISPLAY}, monkeypatch) == ["train.py:24 GPU303"]


WRAPPED = """
import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x)


def run(loader, rank):
    model = DDP(Net().to(rank), device_ids=[rank])
    for batch in loader:
        for k, v in batch.items():
            batch[k] = v.to(rank)
        out = model(batch["x"])
        if out.sum() > 0:
            print("positive")
"""

WRAPPED_TENSOR = """
import torch
from torch import nn


class Scale(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight

    def forward(self, x):
        return x * self.weight


def run(loader):
    scale = Scale(torch.ones(4).cuda())
    for batch in loader:
        for k, v in batch.items():
            batch[k] = v.cuda()
        out = scale(batch["x"])
        if out.sum() > 0:
            print("positive")
"""


def test_wrapper_of_a_module_moved_inline_runs_on_the_gpu(tmp_path, monkeypatch):
    # `DDP(Net().to(rank), ...)`: `Module.to` moves the module in place and returns it: the wrapper holds a GPU module,
    # so what it computes is on the GPU whatever gpulint knows of its input (the batch is moved item by item in place)
    assert lint_written(tmp_path, {"train.py": WRAPPED}, monkeypatch) == ["train.py:22 GPU303"]


def test_wrapper_handed_a_moved_tensor_is_no_gpu_module(tmp_path, monkeypatch):
    # `Scale(torch.ones(4).cuda())`: a tensor's move is a new tensor, no module: the wrapper's output on CPU batches
    # is not known to be on the GPU (as before)
    assert lint_written(tmp_path, {"train.py": WRAPPED_TENSOR}, monkeypatch) == []
