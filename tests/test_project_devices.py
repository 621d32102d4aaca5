"""Devices and GPU modules across modules (issue 14): device parameters given by project helpers, argparse
defaults and factories that move the model they build; unit tests are not callers that decide the device."""

from __future__ import annotations

import textwrap

import pytest

from tests.projects_helper import lint_written

ENGINE = """\
    import torch


    def train_one_epoch(model, loader, optimizer, device):
        model.train()
        for images, labels in loader:
            images = images.to(device, non_blocking=True)  # no sync point before the read (step_syncs)
            labels = labels.to(device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(loss.item())
"""
DATA = """\
    from torch.utils.data import DataLoader


    def get_loader(ds):
        return DataLoader(ds, batch_size=64, shuffle=True, num_workers=4)
"""
GPU_FINDINGS = ["data.py:5 GPU102", "data.py:5 GPU104", "engine.py:13 GPU303"]  # GPU104: iterated every epoch in train.py


def train(device_expr: str, setup: str = "") -> str:
    return f"""\
    import argparse
    import torch
    from engine import train_one_epoch
    from data import get_loader
    {setup}

    def main(ds, model):
        parser = argparse.ArgumentParser()
        parser.add_argument("--device", default="cuda")
        parser.add_argument("--cpu-device", default="cpu")
        args = parser.parse_args()
        loader = get_loader(ds)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(10):
            train_one_epoch(model, loader, optimizer, {device_expr})
    """


DEV_HELPER = """\
    import os
    import torch


    def dev():
        if torch.cuda.is_available():
            return torch.device(f"cuda:{os.environ.get('LOCAL_RANK', 0)}")
        return torch.device("cpu")
"""


@pytest.mark.parametrize(
    ("device_expr", "expected"),
    [
        ("dist_util.dev()", GPU_FINDINGS),  # a project helper returning a CUDA device when there is one
        ("args.device", GPU_FINDINGS),  # an option whose default is "cuda"
        ("args.cpu_device", []),  # ... or "cpu"
        ('torch.device("cpu")', []),
    ],
)
def test_a_device_parameter_given_by_a_helper_or_an_option(tmp_path, monkeypatch, device_expr, expected):
    files = {"engine.py": ENGINE, "data.py": DATA, "utils/__init__.py": "", "utils/dist_util.py": DEV_HELPER}
    files["train.py"] = train(device_expr, "from utils import dist_util")
    assert lint_written(tmp_path, files, monkeypatch) == expected


def test_a_helper_that_only_ever_returns_the_cpu_is_not_a_gpu_device(tmp_path, monkeypatch):
    helper = "import torch\n\n\ndef dev():\n    return torch.device('cpu')\n"
    files = {"engine.py": ENGINE, "data.py": DATA, "utils/__init__.py": "", "utils/dist_util.py": helper}
    files["train.py"] = train("dist_util.dev()", "from utils import dist_util")
    assert lint_written(tmp_path, files, monkeypatch) == []


@pytest.mark.parametrize("test_file", ["tests/test_engine.py", "check_engine.py"])
def test_a_unit_test_that_runs_the_engine_on_cuda_is_not_a_caller_that_decides_the_device(tmp_path, monkeypatch, test_file):
    test = """\
        import pytest
        import torch
        from engine import train_one_epoch
        from data import get_loader


        def test_runs_on_gpu(ds, model):
            train_one_epoch(model, get_loader(ds), torch.optim.SGD(model.parameters(), lr=0.1), torch.device("cuda"))
    """
    files = {"engine.py": ENGINE, "data.py": DATA, test_file: test, "train.py": train('"cpu"')}
    assert lint_written(tmp_path, files, monkeypatch) == []
    # the same call from training code makes the engine GPU code
    files["train.py"] = train('torch.device("cuda")')
    assert lint_written(tmp_path, files, monkeypatch) == GPU_FINDINGS


MODELS = """\
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(10, 2)

        def forward(self, x):
            return self.fc(x)


    def build_model(device):
        model = Net()
        model.to(device)
        return model
"""
LOOP = """\
    def train(model, criterion, loader, optimizer):
        for x, y in loader:
            loss = criterion(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print("loss", loss.item())
"""


@pytest.mark.parametrize(
    ("move", "expected"),
    [("model.to(device)", ["engine.py:7 GPU303", "main.py:10 GPU102"]), ("model.train()", [])],
)
def test_a_factory_that_moves_the_model_it_builds_in_place(tmp_path, monkeypatch, move, expected):
    main = f"""\
        import torch
        from torch.utils.data import DataLoader
        from models import build_model
        from engine import train


        def main(ds):
            device = torch.device("cuda")
            model = build_model(device)
            loader = DataLoader(ds, batch_size=32, num_workers=4)
            criterion = torch.nn.CrossEntropyLoss()
            train(model, criterion, loader, torch.optim.SGD(model.parameters(), lr=0.1))
    """
    files = {"models.py": MODELS.replace("model.to(device)", move), "engine.py": LOOP, "main.py": main}
    assert lint_written(tmp_path, files, monkeypatch) == expected


LOADERS = """\
    from torch.utils.data import DataLoader


    def get_dataloaders(cfg, train_ds, val_ds):
        train = DataLoader(train_ds, batch_size=cfg.batch_size, shuffle=True{options})
        val = DataLoader(val_ds, batch_size=cfg.batch_size{options})
        return train, val
"""
ACCELERATE = """\
    from accelerate import Accelerator
    from data import get_dataloaders


    def main(cfg, model, optimizer, train_ds, val_ds):
        accelerator = Accelerator()
        train_loader, val_loader = get_dataloaders(cfg, train_ds, val_ds)
        model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)
        for batch in train_loader:
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
"""
LIGHTNING = """\
    import lightning as L
    from data import get_dataloaders


    def main(cfg, model, train_ds, val_ds):
        train_loader, val_loader = get_dataloaders(cfg, train_ds, val_ds)
        trainer = L.Trainer(accelerator="{accelerator}", max_epochs=3, precision="bf16-mixed")
        trainer.fit(model, train_loader, val_loader)
"""
IGNITE = """\
    import torch
    from ignite.engine import create_supervised_trainer
    from data import get_dataloaders


    def main(cfg, model, optimizer, train_ds, val_ds):
        train_loader, _ = get_dataloaders(cfg, train_ds, val_ds)
        trainer = create_supervised_trainer(model, optimizer, torch.nn.functional.cross_entropy, device="cuda")
        trainer.run(train_loader, max_epochs=10)
"""


@pytest.mark.parametrize(
    ("train", "expected"),
    [
        # accelerate copies the batches of the loader it prepares: the loader in data.py feeds GPU training
        (ACCELERATE, ["data.py:5 GPU101", "data.py:5 GPU102", "data.py:6 GPU101"]),
        (LIGHTNING.format(accelerator="gpu"), ["data.py:5 GPU101", "data.py:5 GPU102", "data.py:6 GPU101", "data.py:6 GPU102"]),
        (IGNITE, ["data.py:5 GPU101", "data.py:5 GPU102", "data.py:6 GPU101"]),
        (LIGHTNING.format(accelerator="cpu"), []),  # a Trainer on the CPU copies nothing
    ],
)
def test_a_loader_built_in_one_module_and_handed_to_a_framework_in_another(tmp_path, monkeypatch, train, expected):
    files = {"data.py": LOADERS.format(options=""), "train.py": train}
    assert lint_written(tmp_path, files, monkeypatch) == expected


@pytest.mark.parametrize("train", [ACCELERATE, LIGHTNING.format(accelerator="gpu"), IGNITE])
def test_pinned_loaders_with_workers_handed_to_a_framework_are_fine(tmp_path, monkeypatch, train):
    options = ", num_workers=8, pin_memory=True, persistent_workers=True"
    files = {"data.py": LOADERS.format(options=options), "train.py": train}
    assert lint_written(tmp_path, files, monkeypatch) == []


def test_a_fit_method_of_a_library_that_is_no_training_framework_hands_over_nothing(tmp_path, monkeypatch):
    train = """\
        from sklearn.linear_model import LogisticRegression
        from data import get_dataloaders


        def main(cfg, train_ds, val_ds):
            train_loader, _ = get_dataloaders(cfg, train_ds, val_ds)
            LogisticRegression().fit(train_loader, None)
    """
    files = {"data.py": LOADERS.format(options=""), "train.py": train}
    assert lint_written(tmp_path, files, monkeypatch) == []


TRAINER = """\
    import torch


    class Trainer:
        def __init__(self, model, optimizer, args, device=None):
            self.model = model
            self.optimizer = optimizer
            self.args = args
            self.device = device

        def train(self, loader):
            for images, labels in loader:
                images = images.to({device})
                loss = torch.nn.functional.cross_entropy(self.model(images), labels.to({device}))
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                print(loss.item())
"""
RUN = """\
    import argparse
    import torch
    from torch.utils.data import DataLoader
    from trainer import Trainer


    def main(dataset, model):
        parser = argparse.ArgumentParser()
        parser.add_argument("--epochs", default=10, type=int)
        args = parser.parse_args()
        loader = DataLoader(dataset, batch_size=256, shuffle=True, num_workers=4)
        {choice}
        optimizer = torch.optim.Adam(model.parameters(), 3e-4)
        trainer = Trainer(model, optimizer, args=args, device={device})
        trainer.train(loader)
"""
CHOSEN = """if torch.cuda.is_available():
            args.device = torch.device("cuda")
        else:
            args.device = torch.device("cpu")"""
ON_GPU = ["run.py:11 GPU102", "trainer.py:18 GPU303"]


@pytest.mark.parametrize(
    ("used", "choice", "given", "expected"),
    [
        # `self.device = device` in the constructor, the device given by the caller in another module
        ("self.device", "", 'torch.device("cuda")', ON_GPU),
        ("self.device", "", '"cpu"', []),
        # `args.device` set in main.py, read as `self.args.device` in the trainer's module
        ("self.args.device", CHOSEN, "None", ON_GPU),
        ("self.args.device", 'args.device = "cpu"', "None", []),
    ],
)
def test_a_device_the_constructor_keeps_from_a_caller_in_another_module(tmp_path, monkeypatch, used, choice, given, expected):
    files = {"trainer.py": TRAINER.format(device=used), "run.py": RUN.format(choice=choice, device=given)}
    assert lint_written(tmp_path, files, monkeypatch) == expected


def test_a_model_handed_to_a_framework_is_no_loader(tmp_path, monkeypatch):
    models = """\
        import torch.nn as nn


        def build_model(cfg):
            return nn.Sequential(nn.Linear(cfg.width, 10))
    """
    train = """\
        from accelerate import Accelerator
        from models import build_model


        def main(cfg, optimizer, train_loader):
            accelerator = Accelerator()
            model = build_model(cfg)
            model, optimizer, train_loader = accelerator.prepare(model, optimizer, train_loader)
    """
    root = tmp_path
    for name, text in {"models.py": models, "train.py": train}.items():
        (root / name).write_text(textwrap.dedent(text), encoding="utf-8")
    from gpulint.analysis.project import ProjectIndex
    from gpulint.analysis.summary import summarize

    index = ProjectIndex(root, {p: summarize(p.read_text()) for p in sorted(root.glob("*.py"))})
    assert index.context(root / "models.py").gpu_reason is None  # not "the loader `build_model` builds feeds GPU code"


def test_a_device_helper_and_a_trainer_re_exported_by_star_imports(tmp_path, monkeypatch):
    util = """\
        import torch


        def prepare_device(n_gpu_use):
            n_gpu = torch.cuda.device_count()
            device = torch.device("cuda:0" if n_gpu_use > 0 and n_gpu > 0 else "cpu")
            return device, list(range(n_gpu_use))
    """
    train = """\
        import torch
        from torch.utils.data import DataLoader
        from trainer import Trainer
        from utils import prepare_device


        def main(config, model, dataset):
            device, device_ids = prepare_device(config["n_gpu"])
            model = model.to(device)
            loader = DataLoader(dataset, batch_size=128, num_workers=2)
            trainer = Trainer(model, torch.optim.Adam(model.parameters()), config, device=device)
            trainer.train(loader)
    """
    files = {
        "utils/__init__.py": "from .util import *\n",
        "utils/util.py": util,
        "trainer/__init__.py": "from .trainer import *\n",
        "trainer/trainer.py": TRAINER.format(device="self.device"),
        "train.py": train,
    }
    assert lint_written(tmp_path, files, monkeypatch) == ["train.py:10 GPU102", "trainer/trainer.py:18 GPU303"]


@pytest.mark.parametrize(("reduction", "expected"), [('"none"', []), ('"mean"', [])])
def test_a_helper_that_syncs_only_for_one_value_of_an_option_is_not_a_per_step_sync(tmp_path, monkeypatch, reduction, expected):
    # `.item()` only under `if reduction == "mean":`: whether a call syncs depends on what it passes, which the
    # summary does not follow (precision first: neither call is reported)
    metrics = """\
        import torch


        def compute_top_k(logits, labels, k, reduction="mean"):
            _, top_ks = torch.topk(logits, k, dim=-1)
            if reduction == "mean":
                return (top_ks == labels[:, None]).float().sum(dim=-1).mean().item()
            return (top_ks == labels[:, None]).float().sum(dim=-1)
    """
    files = {"metrics.py": metrics, "engine.py": ENGINE.replace("print(loss.item())", f"acc = compute_top_k(model(images), labels, 1, reduction={reduction})"), "data.py": DATA}
    files["engine.py"] = "from metrics import compute_top_k\n" + textwrap.dedent(files["engine.py"])
    files["train.py"] = train('torch.device("cuda")')
    assert lint_written(tmp_path, files, monkeypatch) == ["data.py:5 GPU102", "data.py:5 GPU104", *expected]
