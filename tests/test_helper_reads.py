"""Per-step code reached through calls (issue 14 point 6, seventh corpus): step functions kept in attributes,
a generator's update under `% n_critic`, one-hots filled on the CPU, `torch.Tensor(...)` moved per step, and
helpers of another module that a model's `forward` runs on every call.

Shapes after dvgodoy's PyTorchStepByStep (`self.train_step_fn = self._make_train_step_fn()` called per
mini-batch through a local alias), znxlwm's GAN collection (WGAN's `if ((iter + 1) % self.n_critic) == 0:`
generator step, ACGAN's `torch.zeros(...).scatter_(...)` one-hot moved under `if self.gpu_mode:`), yhenon's
retinanet (`torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda()` in the focal loss) and jaywalnut310's vits
(`commons.rand_slice_segments` called by `SynthesizerTrn.forward`). Negatives beside each: a log interval and
gradient accumulation under `%`, a closure called once, a name bound to something else as well, a one-hot
built once, a CPU `torch.Tensor(...)`, a helper called only at set-up.
"""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, lint_written, write

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

TRAINER = """
import numpy as np
import torch


class StepByStep(object):
    def __init__(self, model, loss_fn, optimizer):
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'
        self.model.to(self.device)
        self.train_loader = None
        self.val_loader = None
        self.train_step_fn = self._make_train_step_fn()
        self.val_step_fn = self._make_val_step_fn()

    def set_loaders(self, train_loader, val_loader=None):
        self.train_loader = train_loader
        self.val_loader = val_loader

    def _make_train_step_fn(self):
        def perform_train_step_fn(x, y):
            self.model.train()
            yhat = self.model(x)
            loss = self.loss_fn(yhat, y)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            return loss.item()

        return perform_train_step_fn

    def _make_val_step_fn(self):
        def perform_val_step_fn(x, y):
            self.model.eval()
            yhat = self.model(x)
            loss = self.loss_fn(yhat, y)
            return loss.item()

        return perform_val_step_fn

    def _mini_batch(self, validation=False):
        if validation:
            data_loader = self.val_loader
            step_fn = self.val_step_fn
        else:
            data_loader = self.train_loader
            step_fn = self.train_step_fn
        losses = []
        for x_batch, y_batch in data_loader:
            x_batch = x_batch.to(self.device)
            y_batch = y_batch.to(self.device)
            losses.append(step_fn(x_batch, y_batch))
        return np.mean(losses)

    def train(self, n_epochs):
        for epoch in range(n_epochs):
            loss = self._mini_batch(validation=False)
            with torch.no_grad():
                val_loss = self._mini_batch(validation=True)
"""


def test_step_closures_kept_in_attributes_are_reported_in_the_closure_with_the_loop_named(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"stepbystep.py": TRAINER}), monkeypatch)
    assert sorted(found(diagnostics)) == ["stepbystep.py:30 GPU303", "stepbystep.py:39 GPU303"]
    by_line = {d.location.row: d for d in diagnostics}
    assert by_line[30].message == (
        "`loss.item()` waits for the GPU every training step (`perform_train_step_fn` at line 23, run by the call at line 54)"
    )
    assert by_line[39].message == (
        "`loss.item()` waits for the GPU every evaluation step (`perform_val_step_fn` at line 35, run by the call at line 54)"
    )


def test_a_step_closure_called_once_or_through_a_name_bound_to_something_else_is_silent(tmp_path, monkeypatch):
    once = TRAINER.replace(
        "        for x_batch, y_batch in data_loader:\n"
        "            x_batch = x_batch.to(self.device)\n"
        "            y_batch = y_batch.to(self.device)\n"
        "            losses.append(step_fn(x_batch, y_batch))\n",
        "        x_batch, y_batch = next(iter(data_loader))\n"
        "        losses.append(step_fn(x_batch.to(self.device), y_batch.to(self.device)))\n",
    )
    assert lint_written(tmp_path / "once", {"stepbystep.py": once}, monkeypatch) == []
    # `step_fn` may also be a user's function: which body runs per batch is not known
    other = TRAINER.replace("            step_fn = self.train_step_fn\n", "            step_fn = self.user_step\n")
    other = other.replace("    def set_loaders(self", "    def user_step(self, x, y):\n        return 0.0\n\n    def set_loaders(self")
    assert lint_written(tmp_path / "other", {"stepbystep.py": other}, monkeypatch) == []
    # the attribute may be replaced by a user's step function: which body runs is not known either (and the loop
    # that calls `step_fn` is then no known training loop)
    replaced = TRAINER.replace(
        "    def set_loaders(self", "    def set_train_step(self, fn):\n        self.train_step_fn = fn\n\n    def set_loaders(self"
    )
    assert lint_written(tmp_path / "replaced", {"stepbystep.py": replaced}, monkeypatch) == []


WGAN = """
import torch


class WGAN(object):
    def __init__(self, G, D, loader, gpu_mode=True):
        self.G, self.D, self.data_loader = G, D, loader
        self.n_critic = 5
        self.gpu_mode = gpu_mode
        self.G_optimizer = torch.optim.Adam(G.parameters())
        self.D_optimizer = torch.optim.Adam(D.parameters())
        if self.gpu_mode:
            self.G.cuda()
            self.D.cuda()
        self.hist = {'D_loss': [], 'G_loss': []}

    def train(self, epochs):
        for epoch in range(epochs):
            for iter, (x_, _) in enumerate(self.data_loader):
                z_ = torch.rand((64, 62), device='cuda')
                x_ = x_.cuda()
                self.D_optimizer.zero_grad()
                D_loss = -torch.mean(self.D(x_)) + torch.mean(self.D(self.G(z_)))
                D_loss.backward()
                self.D_optimizer.step()

                if ((iter + 1) % self.n_critic) == 0:
                    self.G_optimizer.zero_grad()
                    G_loss = -torch.mean(self.D(self.G(z_)))
                    self.hist['G_loss'].append(G_loss.item())
                    G_loss.backward()
                    self.G_optimizer.step()

                if ((iter + 1) % 100) == 0:
                    print("D_loss: %.8f" % D_loss.item())
"""

ACCUMULATE = """
import torch


def train(model, loader, optimizer, accum=4):
    model.cuda()
    losses = []
    for i, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x.cuda(non_blocking=True)), y.cuda(non_blocking=True))
        loss.backward()
        if (i + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.item())
"""


def test_a_read_in_the_generator_step_under_n_critic_is_per_step_not_a_log_interval(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"wgan.py": WGAN}), monkeypatch)
    assert found(diagnostics) == ["wgan.py:30 GPU303"]  # the `% 100` print stays a log interval
    assert diagnostics[0].message == "`G_loss.item()` waits for the GPU every training step (loop at line 19)"


def test_gradient_accumulation_under_a_modulo_stays_a_rate_limit(tmp_path, monkeypatch):
    assert lint_written(tmp_path, {"train.py": ACCUMULATE}, monkeypatch) == []


ONE_HOT = """
import torch


def train(G, D, loader, opt, gpu_mode=True, classes=10):
    G.cuda()
    D.cuda()
    fixed = torch.zeros((100, classes)).scatter_(1, torch.arange(100).remainder(classes).unsqueeze(1), 1)
    if gpu_mode:
        fixed = fixed.cuda()
    for x_, y_ in loader:
        y_vec_ = torch.zeros((x_.size(0), classes)).scatter_(1, y_.type(torch.LongTensor).unsqueeze(1), 1)
        if gpu_mode:
            x_, y_vec_ = x_.cuda(), y_vec_.cuda()
        loss = D(x_, y_vec_).mean() + G(fixed).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_one_hot_filled_on_the_cpu_and_moved_every_step_is_reported_at_its_factory(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"cgan.py": ONE_HOT}), monkeypatch)
    assert found(diagnostics) == ["cgan.py:12 GPU201"]  # not the one-hot built once before the loop
    assert diagnostics[0].message == (
        "`torch.zeros(...)` fills on the CPU, then `.cuda()` at line 14 copies it to the GPU every training step (loop at line 11)"
    )
    assert diagnostics[0].fix is None


LOSSES = """
import torch
import torch.nn as nn


class FocalLoss(nn.Module):
    def forward(self, regressions, targets):
        losses = []
        for j in range(regressions.shape[0]):
            scale = torch.Tensor([[0.1, 0.1, 0.2, 0.2]])
            if torch.cuda.is_available():
                t = targets[j] / torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda()
                empty = torch.Tensor([]).long()
                empty = empty.cuda()
            else:
                t = targets[j] / scale
            losses.append((regressions[j] - t).abs().mean())
        return torch.stack(losses).mean()
"""


def test_torch_tensor_moved_to_the_gpu_per_forward_is_a_legacy_constructor_without_a_fix(tmp_path, monkeypatch):
    # Constant data (`torch.Tensor([[0.1, ...]])`, `torch.Tensor([])`) crosses as `torch.tensor(...)` would: silent
    # (analysis/legacy_constructors.py). A size form builds on the CPU what could be built on the GPU.
    assert found(lint(write(tmp_path, {"losses.py": LOSSES}), monkeypatch)) == []
    sized = LOSSES.replace("torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda()", "torch.Tensor(regressions.shape[1], 4).fill_(0.1).cuda()")
    diagnostics = lint(write(tmp_path, {"losses.py": sized}), monkeypatch)
    assert found(diagnostics) == ["losses.py:12 GPU202"]  # not the CPU `scale` (line 10)
    assert diagnostics[0].message == "`torch.Tensor(...)` is a legacy constructor, built on the CPU, then copied to the GPU"
    assert all(d.fix is None for d in diagnostics)  # its dtype is the program's default: no rewrite is sure


COMMONS = """
import torch


def rand_slice_segments(x, segment_size=4):
    b, d, t = x.size()
    ids_str = (torch.rand([b]).to(device=x.device) * (t - segment_size + 1)).to(dtype=torch.long)
    return x[:, :, :segment_size], ids_str


def init_mask(n):
    return torch.zeros(n).to(device="cuda")
"""

MODELS = """
import torch.nn as nn
import commons


class Synthesizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv1d(8, 8, 1)
        self.mask = commons.init_mask(8)

    def forward(self, x):
        z, ids = commons.rand_slice_segments(self.proj(x))
        return z, ids
"""


def test_a_helper_of_another_module_that_forward_calls_is_per_step_code(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"commons.py": COMMONS, "models.py": MODELS}), monkeypatch)
    assert found(diagnostics) == ["commons.py:7 GPU201"]  # `init_mask`, reached from `__init__` only, is set-up
    assert diagnostics[0].message == (
        "`torch.rand(...)` fills on the CPU, then `.to()` copies it to the GPU on every call of the model "
        "(`rand_slice_segments` at line 5, called by the `forward` at models.py:13)"
    )


OBSERVATIONS = """
import torch


def run(envs, q_network, optimizer, device, steps):
    q_network.to(device)
    obs = envs.reset()
    for step in range(steps):
        q_values = q_network(torch.Tensor(obs).to(device))
        obs, reward, done, info = envs.step(q_values.argmax(1).cpu().numpy())
        loss = q_values.mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_host_data_through_torch_tensor_is_the_copy_torch_tensor_would_make(tmp_path, monkeypatch):
    assert "GPU202" not in " ".join(lint_written(tmp_path, {"dqn.py": OBSERVATIONS}, monkeypatch))


LOCAL_STEP = """
import torch
from torch import nn


def main():
    device = torch.device("cuda")
    model = nn.Linear(10, 10).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [torch.randn(64, 10) for _ in range(8)]

    def step(i):
        x = batches[i % 8].to(device)
        loss = model(x).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    for i in range(1000):
        step(i)
"""


def test_a_step_function_defined_in_main_and_called_by_its_loop_is_per_step_code(tmp_path, monkeypatch):
    """Seen writing the GPU ground-truth script (bench/gpu_verify/gt_loop.py): `def step(i)` inside `main`, called
    by main's loop, reads `loss.item()` every step; the closure has no loop of its own around the read."""
    diagnostics = lint(write(tmp_path, {"train.py": LOCAL_STEP}), monkeypatch)
    assert found(diagnostics) == ["train.py:18 GPU303"]
    assert diagnostics[0].message == (
        "`loss.item()` waits for the GPU every training step (`step` at line 12, run by the call at line 21)"
    )


def test_a_local_step_called_once_or_rebound_is_silent(tmp_path, monkeypatch):
    once = LOCAL_STEP.replace("    for i in range(1000):\n        step(i)\n", "    step(0)\n")
    assert lint_written(tmp_path / "once", {"train.py": once}, monkeypatch) == []
    rebound = LOCAL_STEP.replace("    for i in range(1000):\n", "    step = print\n    for i in range(1000):\n")
    assert lint_written(tmp_path / "rebound", {"train.py": rebound}, monkeypatch) == []
