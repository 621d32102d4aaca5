"""A constructor that turns its keywords into attributes (`self.__dict__.update(kwargs)`), built from parsed options
(`Agent(**vars(opt))`): `self.dvc` is the `--dvc` option, a CUDA device when its default is "cuda", so the networks
moved `.to(self.dvc)` are on the GPU and the Adam over them is GPU904's (shaped like XinJingHao/DRL-Pytorch)."""

from __future__ import annotations

from tests.projects_helper import found, lint, write

AGENT = """\
    import torch
    from torch import nn


    class Agent:
        def __init__(self, **kwargs):
            {store}
            self.actor = nn.Sequential(nn.Linear(self.state_dim, 256), nn.ReLU(), nn.Linear(256, 2)).to(self.dvc)
            self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=self.lr)

        def train(self, s, a):
            loss = (self.actor(s) - a).square().mean()
            self.actor_optimizer.zero_grad()
            loss.backward()
            self.actor_optimizer.step()
"""
MAIN = """\
    import argparse

    import torch

    from agent import Agent

    parser = argparse.ArgumentParser()
    parser.add_argument("--dvc", type=str, default="{device}")
    parser.add_argument("--lr", type=float, default=1e-4)
    opt = parser.parse_args()
    opt.dvc = torch.device(opt.dvc)
    opt.state_dim = 8


    def main():
        agent = Agent({given})
        for step in range(1000):
            s = torch.randn(32, opt.state_dim, device=opt.dvc)
            agent.train(s, torch.zeros(32, 2, device=opt.dvc))


    if __name__ == "__main__":
        main()
"""
_UPDATE = "self.__dict__.update(kwargs)"


def _findings(tmp_path, monkeypatch, store=_UPDATE, device="cuda", given="**vars(opt)") -> list[str]:
    files = {"agent.py": AGENT.format(store=store), "main.py": MAIN.format(device=device, given=given)}
    return found(lint(write(tmp_path, files), monkeypatch, select=("GPU904",), preview=True))


def test_keywords_made_attributes_carry_the_parsed_cuda_device(tmp_path, monkeypatch):
    assert _findings(tmp_path, monkeypatch) == ["agent.py:9 GPU904"]


def test_the_options_dict_unpacked_the_other_way_is_the_same(tmp_path, monkeypatch):
    assert _findings(tmp_path, monkeypatch, given="**opt.__dict__") == ["agent.py:9 GPU904"]


def test_a_cpu_default_places_nothing_on_the_gpu(tmp_path, monkeypatch):
    assert _findings(tmp_path, monkeypatch, device="cpu") == []


def test_keywords_kept_in_a_dict_are_no_attributes(tmp_path, monkeypatch):
    # `self.kw = kwargs` sets no `self.dvc`: where the networks go is not known
    store = "self.kw = kwargs\n        self.dvc, self.state_dim, self.lr = kwargs['dvc'], 8, 1e-4"
    assert _findings(tmp_path, monkeypatch, store=store) == []


def test_callers_that_name_no_device_place_nothing(tmp_path, monkeypatch):
    assert _findings(tmp_path, monkeypatch, given="state_dim=8, lr=1e-4, dvc=opt.target") == []
