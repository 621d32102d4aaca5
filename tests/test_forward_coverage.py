"""GPU407 reports `find_unused_parameters=True` by default only when the model handed to DDP is resolved through the
project (classes and factories in other modules) and its forward is shown to run every submodule it owns on every
call (`analysis/forward_coverage.py`). Silent when the forward skips modules at random or by a training-time test,
runs different parts by an argument, leaves a submodule out or runs it only through another method, when the
wrapped module is run past its forward (`model.module.generator(...)`), and when the model is out of sight (unless
`unproven-models = true`)."""

from __future__ import annotations

import pytest

from gpulint.config import Settings, with_overrides
from gpulint.linter import lint_files
from tests.projects_helper import found, write

TRAIN = """\
import torch
from torch.nn.parallel import DistributedDataParallel as DDP

from models import get_model


def main(rank, loader):
    model = get_model(16)
    model = model.to(rank)
    model = DDP(model, device_ids=[rank], find_unused_parameters=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = model(x.cuda()).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""

MODELS = """\
import random

import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ff = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)
        self.dropout = nn.Dropout(0.1)
        self.layerdrop = 0.1

    def forward(self, x):
        return self.norm(x + self.dropout(self.ff(x)))


class Net(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.layers = nn.ModuleList([Block(d) for _ in range(4)])
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def get_model(d):
    model = Net(d)
    return model
"""


def lint_project(root, files, monkeypatch, unproven=False):
    monkeypatch.chdir(root)
    options = (("GPU407", (("unproven-models", True),)),) if unproven else ()
    settings = with_overrides(Settings(root=root, rule_options=options), select=("GPU407",))
    paths = sorted(write(root, files).rglob("*.py"))
    return sorted(found(d for r in lint_files(paths, settings, jobs=1, use_cache=False) for d in r.diagnostics))


def test_a_model_that_runs_every_submodule_every_step_is_reported(tmp_path, monkeypatch):
    # `get_model` -> `Net` in another module -> `Block` in a ModuleList: every layer runs whole on every call
    assert lint_project(tmp_path, {"train.py": TRAIN, "models.py": MODELS}, monkeypatch) == ["train.py:10 GPU407"]


def test_a_model_wrapped_through_the_qualified_name_is_reported(tmp_path, monkeypatch):
    train = TRAIN.replace("from torch.nn.parallel import DistributedDataParallel as DDP\n", "").replace(
        "model = DDP(model,", "model = torch.nn.parallel.DistributedDataParallel(model,"
    )
    assert lint_project(tmp_path, {"train.py": train, "models.py": MODELS}, monkeypatch) == ["train.py:9 GPU407"]


def test_a_model_class_of_the_script_itself_is_reported(tmp_path, monkeypatch):
    script = MODELS + TRAIN.replace("from models import get_model\n", "")
    assert lint_project(tmp_path, {"train.py": script}, monkeypatch) == ["train.py:41 GPU407"]


@pytest.mark.parametrize(
    "old, new",
    [
        # zipformer's layer drop: a layer skipped at random while training
        ("            x = layer(x)", "            if self.training and random.random() < 0.1:\n                continue\n            x = layer(x)"),
        # Zipformer2's skip rates: a module run only while a test of the training state passes
        ("        return self.norm(x + self.dropout(self.ff(x)))", "        if not self.training or random.random() >= self.layerdrop:\n            x = x + self.ff(x)\n        return self.norm(x)"),
        ("        return self.norm(x + self.dropout(self.ff(x)))", "        if self.training:\n            x = x + self.ff(x)\n        return self.norm(x)"),
        # VITS: the one DDP model runs its generator or its discriminator, by a keyword
        ("    def forward(self, x):\n        for", "    def forward(self, x, forward_generator=True):\n        if not forward_generator:\n            return self.head(x)\n        for"),
        # HuBERT fine-tuning: the pretraining head is built but never run
        ("        self.head = nn.Linear(d, 2)\n", "        self.head = nn.Linear(d, 2)\n        self.final_proj = nn.Linear(d, 8)\n"),
        # a project submodule run only through another method than its forward
        ("            x = layer(x)", "            x = layer.extract_features(x)"),
    ],
)
def test_a_model_that_leaves_parameters_out_of_some_steps_needs_the_search(tmp_path, monkeypatch, old, new):
    assert old in MODELS
    models = MODELS.replace(old, new)
    assert lint_project(tmp_path, {"train.py": TRAIN, "models.py": models}, monkeypatch) == []
    assert lint_project(tmp_path, {"train.py": TRAIN, "models.py": models}, monkeypatch, unproven=True) == []


def test_a_wrapped_model_run_past_its_forward_needs_the_search(tmp_path, monkeypatch):
    # the generator step and the discriminator step call parts of the inner module directly
    train = TRAIN.replace("loss = model(x.cuda()).sum()", "loss = model.module.head(model(x.cuda())).sum()")
    assert lint_project(tmp_path, {"train.py": train, "models.py": MODELS}, monkeypatch) == []


HANDED = """\
class Wrapper(nn.Module):
    def __init__(self, encoder, dim):
        super().__init__()
        self.encoder = encoder
        self.dim = dim
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        return self.out(self.encoder(x))


def get_encoder(d):
    encoder = Net(d)
    return encoder


def get_model(d):
    encoder = get_encoder(d)
    model = Wrapper(encoder=encoder, dim=d)
    return model
"""


def test_a_submodule_the_factory_hands_to_the_constructor_is_followed(tmp_path, monkeypatch):
    # icefall's `get_model` -> `AsrModel(encoder=get_encoder_model(params))`: the encoder the factory builds
    models = MODELS.replace("def get_model(d):\n    model = Net(d)\n    return model\n", HANDED)
    assert lint_project(tmp_path, {"train.py": TRAIN, "models.py": models}, monkeypatch) == ["train.py:10 GPU407"]
    # ... and when the encoder skips layers at random (zipformer's layer drop), the model needs the search
    dropping = models.replace("            x = layer(x)", "            if self.training and random.random() < 0.1:\n                continue\n            x = layer(x)")
    assert lint_project(tmp_path, {"train.py": TRAIN, "models.py": dropping}, monkeypatch, unproven=True) == []


UNKNOWN = [
    # a submodule the caller hands to the constructor, itself handed in: its class is not known here
    (
        "def get_model(d):\n    model = Net(d)\n",
        "class Wrapper(nn.Module):\n    def __init__(self, encoder):\n        super().__init__()\n        self.encoder = encoder\n\n"
        "    def forward(self, x):\n        return self.encoder(x)\n\n\ndef get_model(d, encoder=None):\n    model = Wrapper(encoder)\n",
    ),
    # a library model
    ("def get_model(d):\n    model = Net(d)\n", "def get_model(d):\n    import torchvision\n    model = torchvision.models.resnet18()\n"),
    # a project base class between the model and nn.Module
    ("class Net(nn.Module):", "class Base(nn.Module):\n    pass\n\n\nclass Net(Base):"),
]


@pytest.mark.parametrize("old, new", UNKNOWN)
def test_a_model_out_of_sight_is_reported_only_with_unproven_models(tmp_path, monkeypatch, old, new):
    assert old in MODELS
    models = MODELS.replace(old, new)
    assert lint_project(tmp_path, {"train.py": TRAIN, "models.py": models}, monkeypatch) == []
    assert lint_project(tmp_path, {"train.py": TRAIN, "models.py": models}, monkeypatch, unproven=True) == ["train.py:10 GPU407"]


def test_a_model_handed_in_as_a_parameter_is_out_of_sight(tmp_path, monkeypatch):
    train = TRAIN.replace("def main(rank, loader):\n    model = get_model(16)\n", "def main(rank, loader, model):\n")
    assert lint_project(tmp_path, {"train.py": train, "models.py": MODELS}, monkeypatch) == []
    assert lint_project(tmp_path, {"train.py": train, "models.py": MODELS}, monkeypatch, unproven=True) == ["train.py:9 GPU407"]
