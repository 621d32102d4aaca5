"""Loader settings from YAML files of the repository (issue 14, the "config" misses): Hydra's
`config_path` / `config_name` with its defaults list, `yaml.safe_load(open(<literal>))`, `OmegaConf.load`.
A value resolves only when the file is identifiable statically; interpolations, paths built at run time
and missing files stay unknown. Findings name the YAML file and line and never edit code for them."""

from __future__ import annotations

import os

from gpulint.analysis import settings_files
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

HYDRA = """
import hydra
import torch
from torch.utils.data import DataLoader

from data import Folder

device = torch.device("cuda")


@hydra.main(config_path="configs", config_name="train", version_base=None)
def main(cfg):
    loader = DataLoader(
        Folder(cfg.data.root),
        batch_size=cfg.data.batch_size,
        num_workers=cfg.data.num_workers,
        pin_memory=cfg.loader.pin_memory,
        shuffle=True,
    )
    model = torch.nn.Linear(3, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in loader:
        loss = model(x.to(device)).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""

PRIMARY = """\
defaults:
  - data: imagenet
  - _self_

loader:
  pin_memory: false
"""

GROUP = """\
root: /data/imagenet
num_workers: 0
batch_size: 8
"""


def hydra_project(tmp_path):
    return write(
        tmp_path / "p",
        {"data.py": DATASET, "train.py": HYDRA, "configs/train.yaml": PRIMARY, "configs/data/imagenet.yaml": GROUP},
    )


def test_hydra_defaults_resolve_loader_settings(tmp_path, monkeypatch):
    root = hydra_project(tmp_path)
    diagnostics = lint(root, monkeypatch)
    assert found(diagnostics) == ["train.py:13 GPU101", "train.py:13 GPU102", "train.py:13 GPU103"]
    workers, pin, batch = diagnostics
    assert workers.message.startswith("`DataLoader` uses `num_workers=0` (YAML setting at configs/data/imagenet.yaml:2):")
    assert pin.message.startswith("`DataLoader` uses `pin_memory=False` (YAML setting at configs/train.yaml:6) but")
    assert batch.message.startswith("`DataLoader` uses `batch_size=8` (YAML setting at configs/data/imagenet.yaml:3), below 16")
    # the value is the YAML file's: no edit of the code that reads it
    assert [d.fix for d in diagnostics] == [None, None, None]
    assert [r[0] for r in workers.related] == ["the YAML setting"]


def test_the_primary_config_wins_over_its_group_and_good_values_are_silent(tmp_path, monkeypatch):
    root = hydra_project(tmp_path)
    (root / "configs/train.yaml").write_text(
        PRIMARY.replace("pin_memory: false", "pin_memory: true") + "data:\n  num_workers: 8\n  batch_size: 64\n", encoding="utf-8"
    )
    assert found(lint(root, monkeypatch)) == []


def test_unknown_settings_are_never_guessed(tmp_path, monkeypatch):
    root = hydra_project(tmp_path)
    # an interpolation, a group option without a file, a key that is not there: all unknown
    (root / "configs/train.yaml").write_text(
        "defaults:\n  - data: missing\n\nloader:\n  pin_memory: ${oc.env:PIN_MEMORY}\n", encoding="utf-8"
    )
    assert found(lint(root, monkeypatch)) == []


PLAIN = """
import torch
import yaml
from omegaconf import OmegaConf
from torch.utils.data import DataLoader

from data import Folder

device = torch.device("cuda")


def train(files, name):
    with open("configs/plain.yaml") as f:
        cfg = yaml.safe_load(f)
    conf = OmegaConf.load("configs/plain.yaml")
    other = yaml.safe_load(open(name))
    loaders = [
        DataLoader(Folder(files), batch_size=64, num_workers=cfg["data"]["num_workers"], pin_memory=True),
        DataLoader(Folder(files), batch_size=64, num_workers=conf.data.num_workers, pin_memory=True),
        DataLoader(Folder(files), batch_size=64, num_workers=other["data"]["num_workers"], pin_memory=True),
    ]
    model = torch.nn.Linear(3, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for loader in loaders:
        for x in loader:
            loss = model(x.to(device, non_blocking=True)).sum()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
"""


def test_yaml_and_omegaconf_loaded_from_a_literal_path(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {"data.py": DATASET, "train.py": PLAIN, "configs/plain.yaml": "data:\n  num_workers: 0\n"})
    diagnostics = lint(root, monkeypatch)
    # `other` comes from a path chosen at run time: unknown
    assert found(diagnostics) == ["train.py:18 GPU101", "train.py:19 GPU101"]
    assert all("(YAML setting at configs/plain.yaml:2)" in d.message for d in diagnostics)


def test_editing_the_yaml_file_rechecks_the_script_that_reads_it(tmp_path, monkeypatch):
    root = hydra_project(tmp_path)
    assert "train.py:13 GPU101" in found(lint(root, monkeypatch, use_cache=True))
    assert "train.py:13 GPU101" in found(lint(root, monkeypatch, use_cache=True))  # warm
    group = root / "configs/data/imagenet.yaml"
    group.write_text(GROUP.replace("num_workers: 0", "num_workers: 8"), encoding="utf-8")
    os.utime(group, ns=(group.stat().st_atime_ns, group.stat().st_mtime_ns + 10**9))
    assert "train.py:13 GPU101" not in found(lint(root, monkeypatch, use_cache=True))


def test_setting_files_are_read_safely_and_bounded(tmp_path):
    unsafe = tmp_path / "unsafe.yaml"
    unsafe.write_text("data: !!python/object/apply:os.system ['echo owned']\nnum_workers: 0\n", encoding="utf-8")
    assert settings_files.lookup(str(unsafe), ["num_workers"]) == (0, 2)
    assert settings_files.lookup(str(unsafe), ["data"]) is None  # a tag other than a plain value: not constructed
    tagged = tmp_path / "tagged.yaml"
    tagged.write_text("num_workers: !!python/name:os.system\n", encoding="utf-8")
    assert settings_files.lookup(str(tagged), ["num_workers"]) is None
    broken = tmp_path / "broken.yaml"
    broken.write_text("data: [1, 2\n", encoding="utf-8")
    assert settings_files.lookup(str(broken), ["data"]) is None
    large = tmp_path / "large.yaml"
    large.write_text("num_workers: 0\n" + "# padding\n" * 40000, encoding="utf-8")
    assert settings_files.lookup(str(large), ["num_workers"]) is None


def test_a_yaml_path_from_an_argparse_default(tmp_path, monkeypatch):
    script = """
        import argparse

        import torch
        import yaml
        from torch.utils.data import DataLoader

        from data import Folder

        parser = argparse.ArgumentParser()
        parser.add_argument("--config", default="configs/caption.yaml")
        args = parser.parse_args()
        config = yaml.load(open(args.config, "r"), Loader=yaml.Loader)
        device = torch.device("cuda")
        model = torch.nn.Linear(3, 3).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        loader = DataLoader(Folder([]), batch_size=config["batch_size"], num_workers=4, pin_memory=True)
        if __name__ == "__main__":
            for x in loader:
                model(x.to(device, non_blocking=True)).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
    """
    root = write(tmp_path / "p", {"data.py": DATASET, "train.py": script, "configs/caption.yaml": "batch_size: 4\n"})
    diagnostics = lint(root, monkeypatch)
    assert found(diagnostics) == ["train.py:17 GPU103"]
    assert "`batch_size=4` (YAML setting at configs/caption.yaml:1)" in diagnostics[0].message


# ---- job files that launch a script with flags (Azure ML jobs and pipeline steps) -------------------

LAUNCHED = """
import argparse

import torch
from torch.utils.data import DataLoader

from data import Folder


def main(args):
    device = torch.device("cuda")
    model = torch.nn.Linear(3, 3).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Folder([]), batch_size=64, num_workers=4, pin_memory=True)
    for epoch in range(args.epochs):
        for x in loader:
            model(x.to(device, non_blocking=True)).sum().backward()
            optimizer.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    main(parser.parse_args())
"""

JOB = """
code: src
command: >-
  python train.py
  --epochs ${{inputs.epochs}}
  --data-dir ${{inputs.cifar}}
inputs:
  epochs: 1
  cifar:
    type: uri_folder
"""


def test_a_job_file_that_runs_one_epoch(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {"src/data.py": DATASET, "src/train.py": LAUNCHED, "job.yml": JOB})
    assert found(lint(root, monkeypatch)) == []
    assert settings_files.launch_values(str(root / "src/train.py"), ["--epochs"], [str(root / "job.yml")]) == [(1, 8, str(root / "job.yml"))]


def test_a_job_that_starts_the_script_with_torchrun(tmp_path, monkeypatch):
    job = JOB.replace("python train.py", "torchrun --nproc_per_node 2 train.py")
    root = write(tmp_path / "p", {"src/data.py": DATASET, "src/train.py": LAUNCHED, "job.yml": job})
    assert found(lint(root, monkeypatch)) == []


def test_a_pipeline_step_with_a_literal_flag_and_many_epochs(tmp_path, monkeypatch):
    pipeline = "jobs:\n  train:\n    code: src/train-model\n    command: python train.py --epochs=90\n"
    files = {"src/train-model/data.py": DATASET, "src/train-model/train.py": LAUNCHED, "pipeline.yml": pipeline}
    root = write(tmp_path / "p", files)
    diagnostics = lint(root, monkeypatch)
    assert found(diagnostics) == ["src/train-model/train.py:14 GPU104"]


def test_without_a_value_written_in_the_job_file_the_count_is_unknown(tmp_path, monkeypatch):
    # A component whose input has no default (the pipeline that uses it sets it): the argparse default (here 1)
    # is not what runs, and nothing is guessed.
    component = JOB.replace("  epochs: 1\n", "  epochs:\n    type: integer\n")
    script = LAUNCHED.replace("default=10", "default=1")
    root = write(tmp_path / "p", {"src/data.py": DATASET, "src/train.py": script, "job.yml": component})
    assert found(lint(root, monkeypatch)) == ["src/train.py:14 GPU104"]


def test_a_job_file_for_another_script_says_nothing_about_this_one(tmp_path, monkeypatch):
    other = JOB.replace("python train.py", "python evaluate.py")
    root = write(tmp_path / "p", {"src/data.py": DATASET, "src/train.py": LAUNCHED, "job.yml": other})
    assert found(lint(root, monkeypatch)) == ["src/train.py:14 GPU104"]  # the argparse default: 10 epochs


def test_editing_the_job_file_rechecks_the_script(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {"src/data.py": DATASET, "src/train.py": LAUNCHED, "job.yml": JOB})
    assert found(lint(root, monkeypatch, use_cache=True)) == []
    job = root / "job.yml"
    job.write_text(JOB.replace("epochs: 1", "epochs: 30"), encoding="utf-8")
    os.utime(job, ns=(job.stat().st_atime_ns, job.stat().st_mtime_ns + 10**9))
    assert found(lint(root, monkeypatch, use_cache=True)) == ["src/train.py:14 GPU104"]
