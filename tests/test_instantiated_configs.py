"""Objects a Hydra config builds (issue 14; the tenth corpus's DrQ-v2 shape): `hydra.utils.instantiate(cfg.agent)`
whose `_target_` names a project class is an instance of that class, followed back through the calls that hand
the config down from `@hydra.main`; its methods called every step are per-step code, and a `device` the config
gives its `__init__` (`${device}` with `device: cuda`) puts it on the GPU. A `_target_` outside the project, one
another config file may replace, a config some call fills otherwise, or a CPU device: nothing new."""

from __future__ import annotations

from tests.projects_helper import found, lint, write

AGENT = """
import torch
import torch.nn.functional as F


class Agent:
    def __init__(self, device, lr, use_tb):
        self.device = device
        self.use_tb = use_tb
        self.critic = torch.nn.Linear(8, 1).to(device)
        self.opt = torch.optim.SGD(self.critic.parameters(), lr=lr)

    def update_critic(self, obs, target):
        metrics = dict()
        loss = F.mse_loss(self.critic(obs), target)
        if self.use_tb:
            metrics["critic_loss"] = loss.item()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        return metrics

    def update(self, batch, step):
        obs, target = (torch.as_tensor(x, device=self.device) for x in batch)
        return self.update_critic(obs, target)
"""

TRAIN = """
import hydra


def make_agent(cfg):
    return hydra.utils.instantiate(cfg)


class Workspace:
    def __init__(self, cfg):
        self.cfg = cfg
        self.agent = make_agent(self.cfg.agent)

    def train(self, batches):
        for step, batch in enumerate(batches):
            metrics = self.agent.update(batch, step)


@hydra.main(config_path="cfgs", config_name="config")
def main(cfg):
    workspace = Workspace(cfg)
    workspace.train([])


if __name__ == "__main__":
    main()
"""

CONFIG = """\
device: cuda
lr: 1e-4
use_tb: true
agent:
  _target_: agent.Agent
  device: ${device}
  lr: ${lr}
  use_tb: ${use_tb}
"""


def project(tmp_path, config=CONFIG, train=TRAIN, extra=None):
    return write(tmp_path / "p", {"agent.py": AGENT, "train.py": train, "cfgs/config.yaml": config, **(extra or {})})


def test_a_method_of_the_class_a_hydra_config_builds_runs_every_step(tmp_path, monkeypatch):
    diagnostics = lint(project(tmp_path), monkeypatch)
    assert found(diagnostics) == ["agent.py:17 GPU303"]
    assert diagnostics[0].message == (
        "`loss.item()` waits for the GPU every training step (`update_critic` at line 13, run by the call at train.py:16)"
    )


def test_the_instance_built_in_the_hydra_main_itself(tmp_path, monkeypatch):
    train = """
import hydra
from hydra.utils import instantiate


@hydra.main(config_path="cfgs", config_name="config")
def main(cfg):
    agent = instantiate(cfg.agent)
    for step in range(1000):
        agent.update(([0.0] * 8, [0.0]), step)


if __name__ == "__main__":
    main()
"""
    assert found(lint(project(tmp_path, train=train), monkeypatch)) == ["agent.py:17 GPU303"]


def test_a_cpu_device_in_the_config_is_no_gpu(tmp_path, monkeypatch):
    root = project(tmp_path, config=CONFIG.replace("device: cuda", "device: cpu"))
    assert found(lint(root, monkeypatch)) == []


def test_a_target_another_config_file_may_replace_names_no_class(tmp_path, monkeypatch):
    # an `agent` group option may choose another class: which one runs is not known
    root = project(tmp_path, extra={"cfgs/agent/other.yaml": "_target_: other.Other\ndevice: cuda\n"})
    assert found(lint(root, monkeypatch)) == []


def test_a_target_outside_the_project_names_no_class(tmp_path, monkeypatch):
    root = project(tmp_path, config=CONFIG.replace("_target_: agent.Agent", "_target_: rl_library.Agent"))
    assert found(lint(root, monkeypatch)) == []


def test_a_config_some_call_fills_otherwise_names_no_class(tmp_path, monkeypatch):
    train = TRAIN.replace("    workspace.train([])", "    workspace.train([])\n    Workspace(load_other()).train([])")
    assert found(lint(project(tmp_path, train=train), monkeypatch)) == []
