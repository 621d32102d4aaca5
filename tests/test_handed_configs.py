"""Configs handed down a script (issue 14, "values through calls and configs"; the tenth corpus's DrQ-v2 shape):
the Hydra config a `@hydra.main` function receives, or a YAML file loaded from a known path, passed on to a class
(`Workspace(cfg)`, stored as `self.cfg`) or a function (`make_loader(cfg.data)`) keeps its YAML defaults there.
A Hydra setting is known only when no file of the config folder writes another value at that place. A parameter
some call fills otherwise, or a script another module imports, stays unknown."""

from __future__ import annotations

from tests.projects_helper import found, lint, write

DATASET = """
import torch


class Folder(torch.utils.data.Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return torch.load(self.files[i])
"""

TRAIN = """
import hydra
import torch
from torch.utils.data import DataLoader

from data import Folder


def make_loader(data_cfg, files):
    return DataLoader(Folder(files), batch_size=256, num_workers=data_cfg.num_workers, pin_memory=True, shuffle=True)


class Workspace:
    def __init__(self, cfg):
        self.cfg = cfg
        self.device = torch.device(cfg.device)
        self.model = torch.nn.Linear(3, 3).to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    def train(self, files):
        loader = DataLoader(Folder(files), batch_size=self.cfg.batch_size, num_workers=self.cfg.workers, pin_memory=True)
        other = make_loader(self.cfg.data, files)
        for x in loader:
            loss = self.model(x.to(self.device, non_blocking=True)).sum()
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            print(loss.item())
        for x in other:
            loss = self.model(x.to(self.device, non_blocking=True)).sum()
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()


@hydra.main(config_path="cfgs", config_name="config")
def main(cfg):
    from train import Workspace as W

    workspace = W(cfg)
    workspace.train(cfg.files)


if __name__ == "__main__":
    main()
"""

CONFIG = """\
defaults:
  - _self_
  - task@_global_: walk

device: cuda
batch_size: 8
workers: 0
data:
  num_workers: 0
"""


def project(tmp_path, config=CONFIG, task="num_frames: 1000\\n", train=TRAIN, extra=None):
    files = {"data.py": DATASET, "train.py": train, "cfgs/config.yaml": config, "cfgs/task/walk.yaml": task}
    return write(tmp_path / "p", {**files, **(extra or {})})


def test_a_hydra_config_handed_to_a_class_and_a_function_keeps_its_yaml_defaults(tmp_path, monkeypatch):
    diagnostics = lint(project(tmp_path), monkeypatch)
    assert found(diagnostics) == ["train.py:10 GPU101", "train.py:21 GPU101", "train.py:21 GPU103", "train.py:28 GPU303"]
    handed, workers, batch, read = diagnostics
    assert handed.message.startswith("`DataLoader` uses `num_workers=0` (YAML setting at cfgs/config.yaml:9):")
    assert workers.message.startswith("`DataLoader` uses `num_workers=0` (YAML setting at cfgs/config.yaml:7):")
    assert batch.message.startswith("`DataLoader` uses `batch_size=8` (YAML setting at cfgs/config.yaml:6), below 16")
    assert read.message.startswith("`loss.item()` waits for the GPU every training step")
    assert [d.fix for d in (handed, workers, batch)] == [None, None, None]  # the YAML decides: no code edit


def test_good_settings_are_silent(tmp_path, monkeypatch):
    config = CONFIG.replace("batch_size: 8", "batch_size: 64").replace("workers: 0", "workers: 4")
    root = project(tmp_path, config=config.replace("  num_workers: 0", "  num_workers: 8"))
    assert found(lint(root, monkeypatch)) == ["train.py:28 GPU303"]


def test_a_cpu_device_in_every_config_file_is_no_gpu(tmp_path, monkeypatch):
    root = project(tmp_path, config=CONFIG.replace("device: cuda", "device: cpu"))
    assert "train.py:28 GPU303" not in found(lint(root, monkeypatch))


def test_a_hydra_device_another_config_file_may_replace_stays_unknown(tmp_path, monkeypatch):
    # the task option is mounted at the top (`task@_global_`): its `device: cuda` may replace the primary's `cpu`,
    # so the device is not known to be the CPU: chosen at run time, a GPU read as before
    root = project(tmp_path, config=CONFIG.replace("device: cuda", "device: cpu"), task="device: cuda\n")
    assert "train.py:28 GPU303" in found(lint(root, monkeypatch))


def test_a_parameter_some_call_fills_otherwise_stays_unknown(tmp_path, monkeypatch):
    train = TRAIN.replace("    workspace.train(cfg.files)", "    workspace.train(cfg.files)\n    W({'device': 'cuda'}).train([])")
    train = train.replace("    return DataLoader(", "    return DataLoader(").replace(
        "other = make_loader(self.cfg.data, files)", "other = make_loader(self.cfg.data, files)\n        make_loader(dict(num_workers=2), files)"
    )
    root = project(tmp_path, train=train)
    assert [f for f in found(lint(root, monkeypatch)) if "GPU10" in f] == []


def test_a_script_another_module_imports_stays_unknown(tmp_path, monkeypatch):
    root = project(tmp_path, extra={"eval.py": "from train import Workspace\n\nws = Workspace(None)\n"})
    assert [f for f in found(lint(root, monkeypatch)) if "GPU10" in f] == []


OMEGA = """
import torch
from omegaconf import OmegaConf
from torch.utils.data import DataLoader

from data import Folder

device = torch.device("cuda")


def build(loader_cfg, files):
    return DataLoader(Folder(files), batch_size=64, num_workers=loader_cfg["num_workers"], pin_memory=loader_cfg.pin)


def main(files):
    conf = OmegaConf.load("configs/base.yaml")
    model = torch.nn.Linear(3, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in build(conf.loader, files):
        loss = model(x.to(device)).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


if __name__ == "__main__":
    main([])
"""


def test_a_config_loaded_from_a_literal_path_and_handed_to_a_function(tmp_path, monkeypatch):
    files = {"data.py": DATASET, "train.py": OMEGA, "configs/base.yaml": "loader:\n  num_workers: 0\n  pin: false\n"}
    diagnostics = lint(write(tmp_path / "p", files), monkeypatch)
    assert found(diagnostics) == ["train.py:12 GPU101", "train.py:12 GPU102"]
    assert all("(YAML setting at configs/base.yaml:" in d.message for d in diagnostics)
