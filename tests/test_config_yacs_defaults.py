"""Settings whose defaults a yacs module of the project writes (`_C = CN()`, `_C.DATA.NUM_WORKERS = 4` in
config/defaults.py) and that other modules read on the config object (`config.DATA.NUM_WORKERS`): a read has
the default's value when every value the project may give that setting agrees (its code's writes, and every
YAML file of the project, any of which `merge_from_file` may load); a count is above 0 when every one of them
is. A value written that is not a literal, or settings that disagree, stay unknown (issue 14, the sixth
corpus's hysts/pytorch_image_classification; Swin-Transformer's `config.py`)."""

from __future__ import annotations

import os

import pytest

from tests.projects_helper import found, lint, write

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

DEFAULTS = """
from yacs.config import CfgNode as CN

_C = CN()
_C.DEVICE = "cuda"
_C.DATA = CN()
_C.DATA.NUM_WORKERS = 4
_C.DATA.PIN_MEMORY = False
_C.TRAIN = CN()
_C.TRAIN.EPOCHS = 90


def get_cfg_defaults():
    return _C.clone()
"""

DATA = """
import torch
from torch.utils.data import DataLoader


class Folder(torch.utils.data.Dataset):
    def __init__(self, files):
        self.files = files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        return torch.load(self.files[i])


def build_loader(config, files):
    return DataLoader(
        Folder(files),
        batch_size=64,
        shuffle=True,
        num_workers=config.DATA.NUM_WORKERS,
        pin_memory=config.DATA.PIN_MEMORY,
    )
"""

TRAIN = """
import argparse

import torch

from config.defaults import get_cfg_defaults
from data import build_loader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cfg", type=str)
    args = parser.parse_args()
    cfg = get_cfg_defaults()
    if args.cfg:
        cfg.merge_from_file(args.cfg)
    device = torch.device(cfg.DEVICE)
    loader = build_loader(cfg, ["a.pt", "b.pt"])
    model = torch.nn.Linear(8, 8).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(cfg.TRAIN.EPOCHS):
        for x in loader:
            loss = model(x.to(device)).sum()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""

LOADER = ["data.py:18 GPU102", "data.py:18 GPU104"]


def project(tmp_path, **extra: str):
    files = {"config/__init__.py": "", "config/defaults.py": DEFAULTS, "data.py": DATA, "train.py": TRAIN, **extra}
    return write(tmp_path / f"p{len(list(tmp_path.iterdir()))}", files)


def check(root, monkeypatch, **kw):
    return lint(root, monkeypatch, select=("GPU101", "GPU102", "GPU104"), **kw)


def test_yacs_defaults_are_the_settings_a_loader_reads(tmp_path, monkeypatch):
    diagnostics = check(project(tmp_path), monkeypatch)
    assert found(diagnostics) == LOADER
    pinned, workers = diagnostics
    assert pinned.message.startswith(
        "`DataLoader` uses `pin_memory=False` (settings default at config/defaults.py:8) but its batches reach the GPU"
    )
    assert pinned.fix is None  # the value is the defaults module's, not an edit of the read
    assert workers.message.startswith(
        "`DataLoader` workers are shut down and started again for every pass of the loop at train.py:21 "
        "(its batches are taken at train.py:22)"
    )


def test_yaml_files_that_agree_keep_the_value_and_counts_above_zero_stay_above_zero(tmp_path, monkeypatch):
    same = "DATA:\n  PIN_MEMORY: false\n  NUM_WORKERS: 8\n"
    assert found(check(project(tmp_path, **{"configs/imagenet.yaml": same}), monkeypatch)) == LOADER


def test_settings_that_disagree_or_are_not_literals_stay_unknown(tmp_path, monkeypatch):
    # a YAML file pins memory: pin_memory is unknown; 8 and 4 workers are both above 0
    pinned = project(tmp_path, **{"configs/imagenet.yaml": "DATA:\n  PIN_MEMORY: true\n  NUM_WORKERS: 8\n"})
    assert found(check(pinned, monkeypatch)) == ["data.py:18 GPU104"]
    # a YAML file without workers: neither GPU104 (not above 0 everywhere) nor GPU101 (not 0 everywhere)
    zero = project(tmp_path, **{"configs/debug.yaml": "DATA:\n  NUM_WORKERS: 0\n  PIN_MEMORY: false\n"})
    assert found(check(zero, monkeypatch)) == ["data.py:18 GPU102"]
    # the code sets them from the command line: unknown
    written = "    cfg.DATA.NUM_WORKERS = args.workers\n    cfg.DATA.PIN_MEMORY = args.pin\n"
    source = TRAIN.replace("    device = torch", written + "    device = torch")
    assert found(check(project(tmp_path, **{"train.py": source}), monkeypatch)) == []


def test_without_a_yacs_defaults_module_nothing_is_read(tmp_path, monkeypatch):
    plain = DEFAULTS.replace("CN()", "Namespace()")
    plain = plain.replace("from yacs.config import CfgNode as CN", "from argparse import Namespace")
    assert found(check(project(tmp_path, **{"config/defaults.py": plain}), monkeypatch)) == []


def test_a_device_setting_every_file_agrees_on(tmp_path, monkeypatch):
    select = {"select": ("GPU201",)}
    noisy = "noise = torch.randn(x.size(1)).to(device)\n            loss = model(x.to(device) + noise).sum()"
    step = TRAIN.replace("loss = model(x.to(device)).sum()", noisy)
    assert found(lint(project(tmp_path, **{"train.py": step}), monkeypatch, **select)) == ["train.py:23 GPU201"]
    # every settings file keeps the CPU: no GPU advice
    cpu = project(tmp_path, **{"train.py": step, "config/defaults.py": DEFAULTS.replace('"cuda"', '"cpu"')})
    assert found(lint(cpu, monkeypatch, **select)) == []
    # the defaults say CUDA, a YAML file says CPU: unknown, so the run-time choice (`torch.device(...)`) decides
    mixed = project(tmp_path, **{"train.py": step, "configs/cpu.yaml": "DEVICE: cpu\n"})
    assert found(lint(mixed, monkeypatch, **select)) == ["train.py:23 GPU201"]


def test_editing_a_yaml_file_rechecks_the_module_that_reads_the_setting(tmp_path, monkeypatch):
    root = project(tmp_path, **{"configs/imagenet.yaml": "DATA:\n  NUM_WORKERS: 8\n"})
    assert found(check(root, monkeypatch, use_cache=True)) == LOADER
    assert found(check(root, monkeypatch, use_cache=True)) == LOADER  # warm
    yaml = root / "configs/imagenet.yaml"
    yaml.write_text("DATA:\n  NUM_WORKERS: 8\n  PIN_MEMORY: true\n", encoding="utf-8")
    os.utime(yaml, ns=(yaml.stat().st_atime_ns, yaml.stat().st_mtime_ns + 10**9))
    assert found(check(root, monkeypatch, use_cache=True)) == ["data.py:18 GPU104"]


YAML_SCRIPT = """
import torch
import yaml

with open("configs/train.yaml") as f:
    cfg = yaml.safe_load(f)
device = torch.device(cfg["device"])
model = torch.nn.Linear(8, 8).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    x = torch.randn(batch, 8).to(device)
    model(x).sum().backward()
    optimizer.step()
"""


def test_a_device_in_the_yaml_file_a_script_loads(tmp_path, monkeypatch):
    def run(**configs):
        root = write(tmp_path / f"y{len(list(tmp_path.iterdir()))}", {"train.py": YAML_SCRIPT, **configs})
        return found(lint(root, monkeypatch, select=("GPU201",)))

    assert run(**{"configs/train.yaml": "device: cuda\n"}) == ["train.py:11 GPU201"]
    assert run(**{"configs/train.yaml": "device: cpu\n", "configs/small.yaml": "device: cpu\n"}) == []
    # the files shipped beside it disagree: unknown, so `torch.device(...)` is a device chosen at run time
    assert run(**{"configs/train.yaml": "device: cpu\n", "configs/gpu.yaml": "device: cuda\n"}) == ["train.py:11 GPU201"]
    # the key is absent: the same
    assert run(**{"configs/train.yaml": "lr: 0.1\n"}) == ["train.py:11 GPU201"]
