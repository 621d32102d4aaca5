"""GPU104 where a framework iterates the loader every epoch (issue 14, the ninth corpus's class D).

Minimal shapes of our own after the ninth corpus's lessons: a Lightning `trainer.fit(model, train_loader,
val_loader)` (also behind a "checkpoint exists" test, also with `os.cpu_count()` workers), ignite
`idist.auto_dataloader` loaders built from a settings dict that `idist.Parallel(...).run(training, config)` hands
down, run by engines that a module factory builds (the evaluator from an epoch handler). Negative shapes: workers
kept, no workers, a one-epoch fit, a loader only tested once, a launcher-less function handed on as a value.
"""

from __future__ import annotations

import textwrap

from gpulint.diagnostics import Applicability
from tests.conftest import gpu104_text, diagnostics, findings, fixed

ONLY = {"select": ("GPU104",)}

LIGHTNING = """\
import os

import lightning as L
import torch
from torch.utils import data
from torchvision import datasets, transforms

NUM_WORKERS = {workers}
train_set = datasets.CIFAR10("data", train=True, transform=transforms.ToTensor(), download=True)
train_loader = data.DataLoader(train_set, batch_size=128, shuffle=True, num_workers=NUM_WORKERS{extra})
val_loader = data.DataLoader(train_set, batch_size=128, num_workers=NUM_WORKERS{extra})


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(3072, 10)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x.flatten(1)), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def train_model(max_epochs=180):
    trainer = L.Trainer(accelerator="gpu", devices=1, max_epochs=max_epochs)
    ckpt = os.path.join("saved_models", "net.ckpt")
    if os.path.isfile(ckpt):
        return Net.load_from_checkpoint(ckpt)
    model = Net()
    trainer.fit(model, train_loader, val_loader)
    return model


model = train_model({epochs})
"""


def lightning(workers: str = "4", extra: str = "", epochs: str = "") -> str:
    return LIGHTNING.format(workers=workers, extra=extra, epochs=epochs)


def test_lightning_fit_re_spawns_the_training_and_validation_workers_every_epoch():
    source = lightning()
    assert findings(source, **ONLY) == ["10:16 GPU104", "11:14 GPU104"]
    train, _ = diagnostics(source, **ONLY)
    assert gpu104_text(train) == (
        "`DataLoader` workers are shut down and started again for every epoch (`trainer.fit(...)` at line 33"
        " iterates it once per epoch): a pass is 391 steps of 128 over CIFAR10's train split (50,000 samples), at"
        " least ~0.4 s; restarting 4 workers costs ~125 ms a pass, ~20-32 % of it"
    )
    assert train.fix.applicability == Applicability.UNSAFE
    assert fixed(source, **ONLY) == source.replace("num_workers=NUM_WORKERS)", "num_workers=NUM_WORKERS, persistent_workers=True)")


def test_a_cpu_count_of_workers_is_at_least_one():
    source = lightning(workers="os.cpu_count()")
    assert findings(source, **ONLY) == ["10:16 GPU104", "11:14 GPU104"]
    assert "persistent_workers=True)" in fixed(source, **ONLY)


def test_kept_workers_no_workers_and_a_one_epoch_fit_are_silent():
    assert findings(lightning(extra=", persistent_workers=True"), **ONLY) == []
    assert findings(lightning(workers="0"), **ONLY) == []
    assert findings(lightning(epochs="max_epochs=1"), **ONLY) == []  # one start either way
    assert findings(lightning(epochs="max_epochs=5"), **ONLY) == ["10:16 GPU104", "11:14 GPU104"]


def test_a_loader_only_tested_once_is_silent():
    source = lightning().replace("trainer.fit(model, train_loader, val_loader)", "trainer.fit(model, train_loader)\n    trainer.test(model, val_loader)")
    assert findings(source, **ONLY) == ["10:16 GPU104"]


IGNITE = """\
import ignite.distributed as idist
import torch
from ignite.engine import Events, create_supervised_evaluator, create_supervised_trainer

config = {{"batch_size": 512, "num_workers": {workers}, "num_epochs": {epochs}}}


def get_dataflow(config):
    train_loader = idist.auto_dataloader(train_set, batch_size=config["batch_size"], num_workers=config["num_workers"], shuffle=True)
    test_loader = idist.auto_dataloader(test_set, batch_size=config["batch_size"], num_workers=config["num_workers"])
    return train_loader, test_loader


def create_trainer(model, optimizer, criterion):
    trainer = create_supervised_trainer(model, optimizer, criterion, device=idist.device())
    return trainer


def training(local_rank, config):
    train_loader, val_loader = get_dataflow(config)
    model = idist.auto_model(torch.nn.Linear(10, 2))
    optimizer = idist.auto_optim(torch.optim.SGD(model.parameters(), lr=0.1))
    trainer = create_trainer(model, optimizer, torch.nn.CrossEntropyLoss())
    evaluator = create_supervised_evaluator(model, device=idist.device())

    def run_validation(engine):
        evaluator.run(val_loader)

    trainer.add_event_handler(Events.EPOCH_COMPLETED, run_validation)
    trainer.run(train_loader, max_epochs=config["num_epochs"])


{launch}
"""
PARALLEL = """\
with idist.Parallel(backend=None) as parallel:
    parallel.run(training, config)
"""


def ignite(workers: str = "2", epochs: str = "5", launch: str = PARALLEL) -> str:
    return IGNITE.format(workers=workers, epochs=epochs, launch=launch)


def test_ignite_loaders_from_a_settings_dict_the_launcher_hands_down():
    source = ignite()
    assert findings(source, **ONLY) == ["9:20 GPU104", "10:19 GPU104"]
    train, val = diagnostics(source, **ONLY)
    assert "(`trainer.run(...)` at line 30 iterates it once per epoch)" in gpu104_text(train)
    assert "(`evaluator.run(...)` at line 27 iterates it once per epoch)" in gpu104_text(val)
    assert fixed(source, **ONLY).count("shuffle=True, persistent_workers=True)") == 1


def test_torch_multiprocessing_spawn_hands_its_args_down_too():
    source = ignite(launch="torch.multiprocessing.spawn(training, args=(config,), nprocs=2)\n")
    assert findings(source, **ONLY) == ["9:20 GPU104", "10:19 GPU104"]


def test_ignite_negative_shapes():
    assert findings(ignite(workers="0"), **ONLY) == []
    assert "9:20 GPU104" not in findings(ignite(epochs="2"), **ONLY)  # two starts of the training workers either way
    # a function handed on as a value (a registry) may be called with any settings: the workers are not known
    assert findings(ignite(launch="RUNNERS = {'train': training}\n"), **ONLY) == []


EPOCHS_FROM_STEPS = """\
import argparse
import math

import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--num_train_epochs", type=int, default=1)
parser.add_argument("--max_train_steps", type=int, default=None)
args = parser.parse_args()
loader = DataLoader(dataset, batch_size=4, shuffle=True, num_workers=1)
{recompute}for epoch in range(args.num_train_epochs):
    for batch in loader:
        model(batch.cuda()).sum().backward()
"""


def test_an_epoch_count_the_script_recomputes_is_not_its_option_default():
    # the DreamBooth shape: `--max_train_steps` decides the epochs, `--num_train_epochs` defaults to 1
    recompute = "if args.max_train_steps is not None:\n    args.num_train_epochs = math.ceil(args.max_train_steps / len(loader))\n"
    assert findings(EPOCHS_FROM_STEPS.format(recompute=recompute), **ONLY) == ["11:10 GPU104"]
    assert findings(EPOCHS_FROM_STEPS.format(recompute=""), **ONLY) == []  # one epoch, as the option says
