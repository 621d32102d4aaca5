"""Facts a method gets from its callers and its class (issue 14, sixth corpus): per-step code in methods of
project classes whose device comes from a caller in another module, and fill factories that reach the GPU
through `Variable(...)`, a later statement or a project helper that moves its argument.

Shapes after ikostrikov's pytorch-a2c-ppo-acktr-gail (`PPO.update`, `Discriminator.update` with
`self.device` from the constructor, `DiagGaussian.forward`) and Zeleni9's pytorch-wgan
(`Variable(torch.randn(...)).cuda()`, `z = torch.randn(...)` moved two lines later, `get_torch_variable`);
negatives beside each positive (a caller that gives a CPU module or device among GPU callers, a helper called
once at set-up, a tensor moved to the CPU, a name rebound before the move, a call in the epoch loop).
"""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, lint_written, write

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

PPO = """
import torch
import torch.optim as optim


class PPO:
    def __init__(self, actor_critic, lr):
        self.actor_critic = actor_critic
        self.optimizer = optim.Adam(actor_critic.parameters(), lr=lr)

    def update(self, rollouts):
        total = 0.0
        for obs, ret in rollouts:
            values = self.actor_critic.evaluate(obs)
            loss = (values - ret).pow(2).mean()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            total += loss.item()
        return total
"""

GAIL = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Discriminator(nn.Module):
    def __init__(self, dim, device):
        super().__init__()
        self.device = device
        self.trunk = nn.Linear(dim, 1)
        self.optimizer = torch.optim.Adam(self.trunk.parameters())

    def update(self, expert_loader):
        self.train()  # `self` is a module: its `.device` is no device by name alone
        for expert_state, policy_state in expert_loader:
            expert_d = self.trunk(expert_state)
            policy_d = self.trunk(policy_state)
            loss = F.binary_cross_entropy_with_logits(expert_d, torch.ones(expert_d.size()).to(self.device))
            loss = loss + F.binary_cross_entropy_with_logits(policy_d, torch.zeros(policy_d.size()).to(self.device))
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
"""

MODEL = """
import torch.nn as nn


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def evaluate(self, obs):
        return self.fc(obs)
"""

MAIN = """
import torch
from algo import PPO
from gail import Discriminator
from model import Policy


def main(rollouts, expert_loader, use_cuda):
    device = torch.device("cuda:0" if use_cuda else "cpu")
    actor_critic = Policy()
    actor_critic.to(device)
    agent = PPO(actor_critic, lr=1e-3)
    discr = Discriminator(4, device)
    for j in range(1000):
        discr.update(expert_loader)
        agent.update(rollouts)
"""

# The same library driven once more on the CPU: a module that was never moved, a CPU device.
CPU_CHECK = """
import torch
from algo import PPO
from gail import Discriminator
from model import Policy


def smoke(rollouts, expert_loader):
    PPO(Policy(), lr=1e-3).update(rollouts)
    Discriminator(4, torch.device("cpu")).update(expert_loader)
"""


def test_attributes_set_from_constructor_parameters_are_what_every_caller_gives(tmp_path, monkeypatch):
    files = {"algo.py": PPO, "gail.py": GAIL, "model.py": MODEL, "main.py": MAIN}
    diagnostics = lint(write(tmp_path, files), monkeypatch)
    assert sorted(found(diagnostics)) == [
        "algo.py:19 GPU303",  # loss of `self.actor_critic.evaluate(obs)`: the GPU module main.py gives
        "gail.py:19 GPU201",  # `.to(self.device)`: main.py gives a CUDA device
        "gail.py:20 GPU201",
    ]
    by_key = {(d.filename, d.location.row, d.code): d for d in diagnostics}
    assert by_key[("algo.py", 19, "GPU303")].message.startswith(
        "`loss.item()` waits for the GPU every training step (loop at line 13)"
    )
    assert by_key[("gail.py", 19, "GPU201")].message == (
        "`torch.ones(...)` fills on the CPU, then `.to()` copies it to the GPU every training step (loop at line 16)"
    )


def test_a_caller_that_gives_a_cpu_module_or_device_leaves_the_attribute_unknown(tmp_path, monkeypatch):
    files = {"algo.py": PPO, "gail.py": GAIL, "model.py": MODEL, "main.py": MAIN, "smoke.py": CPU_CHECK}
    assert lint_written(tmp_path, files, monkeypatch) == []


LATER = """
import torch
from torch.autograd import Variable
from utils import to_gpu


class GAN:
    def __init__(self, G, D, cuda):
        self.G, self.D, self.cuda = G, D, cuda
        self.opt = torch.optim.Adam(G.parameters())

    def train(self, loader):
        for epoch in range(10):
            for images in loader:
                z = torch.randn(n, 100)
                if self.cuda:
                    images, z = Variable(images).cuda(), Variable(z).cuda()
                noise = Variable(torch.randn(n, 100)).cuda()
                eps = to_gpu(torch.rand(n, 1))
                mask = torch.ones(n)
                mask = mask.cpu()
                loss = self.D(self.G(z) + noise).mean() + self.penalty(images, eps) + mask.sum()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            self.save(epoch)

    def penalty(self, images, eps):
        ones = torch.ones(n, 1).cuda()
        return (self.D(images * eps) - ones).pow(2).mean()

    def save(self, epoch):
        marker = torch.zeros(n).cuda()
        torch.save({"epoch": marker}, "ckpt.pt")
"""

UTILS = """
def to_gpu(t):
    return t.cuda()
"""

SETUP = """
import torch
from utils import to_gpu

table = to_gpu(torch.arange(10))


def build():
    z = torch.zeros(8)
    z = torch.ones(8)
    return z.cuda()
"""


def test_factories_moved_later_or_by_a_helper_are_reported_at_the_factory(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"gan.py": LATER, "utils.py": UTILS, "setup.py": SETUP}), monkeypatch)
    assert sorted(found(diagnostics)) == [
        "gan.py:15 GPU201",  # z = torch.randn(...), moved by `Variable(z).cuda()` two lines later
        "gan.py:18 GPU201",  # Variable(torch.randn(...)).cuda(): Variable(t) is t
        "gan.py:19 GPU201",  # to_gpu(torch.rand(...)): a project helper that moves its argument
        "gan.py:29 GPU201",  # penalty(), called on self in the step loop
    ]  # silent: mask moved to the CPU, save() in the epoch loop, setup.py's one-time code
    by_key = {(d.filename, d.location.row): d for d in diagnostics}
    assert by_key[("gan.py", 15)].message == (
        "`torch.randn(...)` fills on the CPU, then `.cuda()` at line 17 copies it to the GPU every training step (loop at line 14)"
    )
    assert by_key[("gan.py", 15)].fix is None  # the move sits under `if self.cuda:`: nothing to rewrite in place
    assert by_key[("gan.py", 19)].message == (
        "`torch.rand(...)` fills on the CPU, then `to_gpu()` copies it to the GPU every training step (loop at line 14)"
        " (the move at utils.py:3)"
    )
    assert by_key[("gan.py", 29)].message.startswith(
        "`torch.ones(...)` fills on the CPU, then `.cuda()` copies it to the GPU every training step "
        "(`penalty` at line 28, run by the call at gan.py:22)"
    )


def test_variable_wrapped_factory_is_fixed_inside_the_wrapper(tmp_path, monkeypatch):
    from gpulint import api
    from gpulint.config import Settings

    root = write(tmp_path, {"gan.py": LATER, "utils.py": UTILS})
    monkeypatch.chdir(root)
    report = api.fix([root / "gan.py"], Settings(root=root), unsafe=True, jobs=1, cache=False)
    fixed = report.files[0].fixed.splitlines()
    # unsafe (the CUDA generator draws different numbers); `Variable(...)` stays, the tensor is made on the GPU
    assert fixed[17] == '                noise = Variable(torch.randn(n, 100, device="cuda"))'
    assert fixed[14] == "                z = torch.randn(n, 100)"  # moved later, under `if self.cuda:`: no fix


A2C = """
import torch.optim as optim


class A2C:
    def __init__(self, actor_critic, lr):
        self.actor_critic = actor_critic
        self.optimizer = optim.RMSprop(actor_critic.parameters(), lr=lr)

    def update(self, rollouts):
        obs, ret = rollouts
        loss = (self.actor_critic.evaluate(obs) - ret).pow(2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()
"""

CHOSEN = """
import torch
from algo import PPO
from a2c import A2C
from model import Policy


def main(rollouts, algo, use_cuda):
    device = torch.device("cuda:0" if use_cuda else "cpu")
    actor_critic = Policy()
    actor_critic.to(device)
    if algo == "ppo":
        agent = PPO(actor_critic, lr=1e-3)
    else:
        agent = A2C(actor_critic, lr=1e-3)
    for j in range(1000):
        agent.update(rollouts)
"""

LOGGED = CHOSEN.replace("        agent.update(rollouts)", "        if j % 100 == 0:\n            agent.update(rollouts)")


def test_a_method_of_an_instance_called_in_the_step_loop_of_another_module_is_per_step_code(tmp_path, monkeypatch):
    # `agent` is bound in two branches: the call does not resolve where it is (nothing reported there); the
    # project's summary follows the instance bound last, so `A2C.update` reports its own `.item()`
    files = {"algo.py": PPO, "a2c.py": A2C, "model.py": MODEL, "main.py": CHOSEN}
    diagnostics = lint(write(tmp_path, files), monkeypatch)
    assert sorted(found(diagnostics)) == ["a2c.py:16 GPU303", "algo.py:19 GPU303"]
    by_key = {(d.filename, d.location.row): d for d in diagnostics}
    assert by_key[("a2c.py", 16)].message.startswith(
        "`loss.item()` waits for the GPU every training step (`update` at line 10, run by the call at main.py:17)"
    )


def test_a_method_called_every_hundred_steps_is_not_per_step_code(tmp_path, monkeypatch):
    files = {"algo.py": PPO, "a2c.py": A2C, "model.py": MODEL, "main.py": LOGGED}
    assert lint_written(tmp_path, files, monkeypatch) == ["algo.py:19 GPU303"]  # PPO's own minibatch loop


METER = """
import torch


class Meter:
    def __init__(self, device):
        self.total = torch.zeros((), device=device)

    def log(self, loss):
        self.total += loss
        print(f"loss {self.total}")
"""

ONE_METER = """
import torch
from meter import Meter


def train(model, loader, opt):
    meter = Meter("cuda")
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        meter.log(loss)
"""


def test_a_method_whose_syncs_are_reported_at_the_call_is_not_reported_again_in_place(tmp_path, monkeypatch):
    assert lint_written(tmp_path, {"meter.py": METER, "train.py": ONE_METER}, monkeypatch) == ["train.py:13 GPU303"]
