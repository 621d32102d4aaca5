"""Determined trials as framework facts (frameworks.DETERMINED_TRIAL, loader_classes' `determined.pytorch.DataLoader`).

A class deriving from `determined.pytorch.PyTorchTrial` hands its loaders to the Determined harness from
`build_training_data_loader` / `build_validation_data_loader`; the harness copies each batch to the trial's device
(a GPU slot by default) and iterates the training loader for the configured length, the validation loader at every
validation. `determined.pytorch.DataLoader` takes torch's arguments with torch's defaults (`num_workers=0`).

Positives: loaders of such a trial over per-sample decoding (PIL images through transforms, image files read per
item), with no workers, also with the trial in one module and the data set in another. Negatives: the same trial
with workers, a trial over in-memory tensors, a class that is no Determined trial with the same method names, and a
trial that turns the harness's copies off and never moves its batches.
"""

from __future__ import annotations

import textwrap

import libcst as cst

from gpulint.analysis import SemanticModel
from tests.conftest import diagnostics, findings
from tests.projects_helper import lint_written

ONLY = {"select": ("GPU101",)}


def model_of(source: str) -> SemanticModel:
    return SemanticModel(cst.parse_module(textwrap.dedent(source)))

TRIAL = """\
    import torch
    import torchvision
    from torchvision import transforms
    from determined.pytorch import DataLoader, PyTorchTrial, PyTorchTrialContext


    def images(train):
        transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
        return torchvision.datasets.CIFAR10(root="data", train=train, download=True, transform=transform)


    class Trial(BASE):
        def __init__(self, context: PyTorchTrialContext) -> None:
            self.context = context
            self.model = self.context.wrap_model(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3072, 10)))
            self.optimizer = self.context.wrap_optimizer(torch.optim.SGD(self.model.parameters(), lr=0.1))

        def train_batch(self, batch, epoch_idx, batch_idx):
            data, labels = batch
            loss = torch.nn.functional.cross_entropy(self.model(data), labels)
            self.context.backward(loss)
            self.context.step_optimizer(self.optimizer)
            return {"loss": loss}

        def evaluate_batch(self, batch):
            data, labels = batch
            return {"error": (self.model(data).argmax(1) != labels).float().mean()}

        def build_training_data_loader(self):
            return DataLoader(images(True), batch_size=self.context.get_per_slot_batch_size()WORKERS)

        def build_validation_data_loader(self):
            return DataLoader(images(False), batch_size=self.context.get_per_slot_batch_size()WORKERS)
    """


def trial(base="PyTorchTrial", workers=""):
    return TRIAL.replace("BASE", base).replace("WORKERS", workers)


def test_loaders_a_determined_trial_builds_without_workers_are_reported():
    assert findings(trial(), **ONLY) == ["30:16 GPU101", "33:16 GPU101"]
    train, valid = [d for d in diagnostics(trial()) if d.code == "GPU101"]
    assert train.message.startswith("`DataLoader` has no `num_workers`: batches load in the training process")
    assert train.severity.name == "WARNING" and valid.severity.name == "INFO"


def test_the_hooks_hand_the_loaders_to_the_harness_which_places_the_batches():
    model = model_of(trial())
    (train, valid) = model.dataloaders
    feeds = [model.loader_flow.info(loader).feeds for loader in (train, valid)]
    assert [(f.framework, f.role, f.places_on_device, f.per_epoch) for (f,) in feeds] == [
        ("the Determined harness", "train", True, False),
        ("the Determined harness", "eval", True, True),
    ]


def test_the_fix_adds_workers_to_the_determined_loader():
    from tests.conftest import fixed

    assert "batch_size=self.context.get_per_slot_batch_size(), num_workers=min(8, max(1," in fixed(trial(), **ONLY)


def test_a_trial_with_workers_is_silent():
    assert findings(trial(workers=", num_workers=4"), **ONLY) == []


def test_a_trial_over_tensors_in_memory_is_silent():
    source = trial().replace(
        'return torchvision.datasets.CIFAR10(root="data", train=train, download=True, transform=transform)',
        "return torch.utils.data.TensorDataset(torch.randn(50000, 3, 32, 32), torch.randint(0, 10, (50000,)))",
    )
    assert findings(source, **ONLY) == []


def test_a_class_that_is_no_determined_trial_is_silent():
    source = trial(base="object").replace("from determined.pytorch import DataLoader, PyTorchTrial, PyTorchTrialContext", "from torch.utils.data import DataLoader\n    PyTorchTrialContext = object")
    assert findings(source, **ONLY) == []


def test_a_trial_that_turns_the_copies_off_is_not_fed_to_the_gpu_by_the_harness():
    source = trial().replace(
        "self.context = context\n",
        "self.context = context\n            self.context.experimental.disable_auto_to_device()\n",
    )
    model = model_of(source)
    assert all(not f.places_on_device for loader in model.dataloaders for f in model.loader_flow.info(loader).feeds)


DATA = """\
import os
import numpy as np
import torch
from PIL import Image


class Pedestrians(torch.utils.data.Dataset):
    def __init__(self, root):
        self.root = root
        self.names = sorted(os.listdir(os.path.join(root, "images")))

    def __getitem__(self, i):
        image = Image.open(os.path.join(self.root, "images", self.names[i])).convert("RGB")
        mask = np.array(Image.open(os.path.join(self.root, "masks", self.names[i])))
        return torch.from_numpy(np.array(image)).permute(2, 0, 1).float() / 255, torch.from_numpy(mask)

    def __len__(self):
        return len(self.names)
"""
MODEL_DEF = """\
import torch
from data import Pedestrians
from determined.pytorch import DataLoader, PyTorchTrial


class Detection(PyTorchTrial):
    def __init__(self, context):
        self.context = context
        self.dataset = Pedestrians("/tmp/data")
        self.model = self.context.wrap_model(torch.nn.Conv2d(3, 2, 3))

    def build_training_data_loader(self):
        return DataLoader(self.dataset, batch_size=2WORKERS)

    def train_batch(self, batch, epoch_idx, batch_idx):
        images, masks = batch
        loss = self.model(images).mean()
        self.context.backward(loss)
        return {"loss": loss}
"""


def test_a_trial_over_a_data_set_of_another_module_that_decodes_images_per_item(tmp_path, monkeypatch):
    files = {"data.py": DATA, "model_def.py": MODEL_DEF.replace("WORKERS", "")}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU101")] == ["model_def.py:13 GPU101"]
    files["model_def.py"] = MODEL_DEF.replace("WORKERS", ", num_workers=2")
    assert [f for f in lint_written(tmp_path / "w", files, monkeypatch) if f.endswith("GPU101")] == []


def test_a_validation_loader_with_workers_is_restarted_at_every_validation():
    """The harness iterates the validation loader anew at each validation (GPU104 words it so); the training loader
    is one iterator over a repeating sampler, never restarted."""
    source = trial(workers=", num_workers=4")
    model = model_of(source)
    (train, valid) = model.dataloaders
    assert [f.per_epoch for f in model.loader_flow.info(train).feeds] == [False]
    assert [(f.per_epoch, f.every) for f in model.loader_flow.info(valid).feeds] == [(True, "validation")]
    reported = [d for d in diagnostics(source, select=("GPU104",))]
    assert [(d.location.row, d.message) for d in reported] == [
        (33, "`DataLoader` workers are shut down and started again for every validation (the Determined harness "
         "(`build_validation_data_loader` at line 32) iterates it once per validation)")
    ]
