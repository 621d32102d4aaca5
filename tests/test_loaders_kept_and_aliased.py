"""Loaders whose batches are taken out of sight of the loop that builds them (issue 14, fourteenth corpus): kept by an
object another module builds (`Solver(config, train_loader)`, then `for x, y in self.train_loader` in its methods),
iterated by a method another method calls in its loop (`self.validation()` every few hundred iterations), or handed to
a framework under a name bound to the loader, or to a list holding it, in one branch of several."""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, lint_written, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

_FACTORY = """
    from torch.utils.data import DataLoader


    def get_loader(dataset, batch_size, num_workers=4):
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
        return loader
"""

_SOLVER = """
    import torch


    class Solver:
        def __init__(self, model, train_loader, epochs):
            self.model = model.cuda()
            self.train_loader = train_loader
            self.epochs = epochs
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        def train(self):
            for epoch in range(self.epochs):
                for images, labels in self.train_loader:
                    images, labels = images.cuda(), labels.cuda()
                    loss = torch.nn.functional.cross_entropy(self.model(images), labels)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
"""

_MAIN = """
    import torchvision
    from data import get_loader
    from solver import Solver


    def main():
        dataset = torchvision.datasets.ImageFolder("data/train", transform=torchvision.transforms.ToTensor())
        loader = get_loader(dataset, batch_size=64)
        solver = Solver(torchvision.models.resnet50(), loader, 100)
        solver.train()


    if __name__ == "__main__":
        main()
"""


def test_a_loader_kept_by_an_object_of_another_module_is_consumed_by_its_methods(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"data.py": _FACTORY, "solver.py": _SOLVER, "main.py": _MAIN}), monkeypatch)
    assert found(diagnostics) == ["data.py:6 GPU102", "data.py:6 GPU104"]
    pinned, workers = diagnostics
    assert pinned.message == "`DataLoader` has no `pin_memory` but its batches reach the GPU"
    assert "they are copied to the GPU at solver.py:15, in the loop at solver.py:14" in pinned.help
    assert workers.message == (
        "`DataLoader` workers are shut down and started again for every pass of the loop at solver.py:13 "
        "(its batches are taken at solver.py:14)"
    )


def test_an_object_that_keeps_the_loader_but_iterates_another_attribute_consumes_nothing(tmp_path, monkeypatch):
    # the constructor keeps the loader, but the method's loop is over a loader the object builds itself
    solver = _SOLVER.replace("for images, labels in self.train_loader:", "for images, labels in self.own_loader:").replace(
        "self.epochs = epochs", "self.epochs = epochs\n            self.own_loader = [(torch.zeros(8, 3), torch.zeros(8))]"
    )
    assert lint_written(tmp_path, {"data.py": _FACTORY, "solver.py": solver, "main.py": _MAIN}, monkeypatch) == []


def test_a_pinned_persistent_loader_kept_by_an_object_stays_silent(tmp_path, monkeypatch):
    factory = _FACTORY.replace("num_workers=num_workers)", "num_workers=num_workers, pin_memory=True, persistent_workers=True)")
    assert lint_written(tmp_path, {"data.py": factory, "solver.py": _SOLVER, "main.py": _MAIN}, monkeypatch) == ["solver.py:15 GPU105", "solver.py:15 GPU105"]


_TRAINER = """
    import torch
    from torch.utils.data import DataLoader


    class Trainer:
        def __init__(self, model, train_set, val_set):
            self.model = model.cuda()
            self.train_loader = DataLoader(train_set, batch_size=16, shuffle=True, num_workers=4, pin_memory=True)
            self.val_loader = DataLoader(val_set, batch_size=16, num_workers=4, pin_memory=True)
            self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

        def train(self, val_every):
            for iteration, (images, targets) in enumerate(self.train_loader):
                images, targets = images.cuda(non_blocking=True), targets.cuda(non_blocking=True)
                loss = torch.nn.functional.cross_entropy(self.model(images), targets)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                if iteration % val_every == 0:
                    self.validation()

        def validation(self):
            self.model.eval()
            with torch.no_grad():
                for images, targets in self.val_loader:
                    output = self.model(images.cuda(non_blocking=True))
            self.model.train()


    if __name__ == "__main__":
        Trainer(torch.nn.Conv2d(3, 21, 3), None, None).train(1000)
"""


def test_a_method_iterating_a_loader_attribute_runs_again_in_the_loop_that_calls_it(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"train.py": _TRAINER}), monkeypatch)
    assert found(diagnostics) == ["train.py:10 GPU104"]
    assert diagnostics[0].message == "`DataLoader` workers are shut down and started again for every pass of the loop at line 14"


def test_a_method_called_once_after_the_loop_starts_its_workers_once(tmp_path, monkeypatch):
    trainer = _TRAINER.replace("                if iteration % val_every == 0:\n                    self.validation()\n", "").replace(
        "        def validation(self):", "            self.validation()\n\n        def validation(self):"
    )
    assert lint_written(tmp_path, {"train.py": trainer}, monkeypatch) == []


_LIGHTNING = """
    import lightning as L
    from torch.utils.data import DataLoader


    def pretrain(model, train_set, val_set, knn_set, knn: bool):
        train_loader = DataLoader(train_set, batch_size=128, num_workers=8, persistent_workers=True, pin_memory=True)
        val_loader = DataLoader(val_set, batch_size=128, num_workers=8, persistent_workers=True)
        knn_loader = DataLoader(knn_set, batch_size=128, num_workers=8, persistent_workers=True)
        if knn:
            val_loaders = [knn_loader, val_loader]
        else:
            val_loaders = val_loader
        trainer = L.Trainer(max_epochs=100, accelerator="gpu")
        trainer.fit(model, train_dataloaders=train_loader, val_dataloaders=val_loaders)
"""


def test_loaders_handed_to_the_trainer_under_a_name_bound_in_branches_feed_it(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"main.py": _LIGHTNING}), monkeypatch)
    assert found(diagnostics) == ["main.py:8 GPU102", "main.py:9 GPU102"]
    assert diagnostics[0].message == "`DataLoader` has no `pin_memory` but its batches are copied to the GPU by `trainer.fit(...)` at line 15"


def test_a_name_bound_again_before_the_hand_over_no_longer_holds_the_loader(tmp_path, monkeypatch):
    # `val_loaders` is bound to the two loaders, then to something else before the trainer gets it
    lightning = _LIGHTNING.replace("        trainer = L.Trainer(", "        val_loaders = None\n        trainer = L.Trainer(")
    assert lint_written(tmp_path, {"main.py": lightning}, monkeypatch) == []


# A batch size the factory takes from its caller: `main(config)` with `config = parser.parse_args()`, then
# `get_loader(..., batch_size=config.batch_size)`; the training loop is the Solver's, in a third module.
_ARGPARSE_MAIN = """
    import argparse

    import torchvision
    from data import get_loader
    from solver import Solver


    def main(config):
        dataset = torchvision.datasets.ImageFolder(config.path, transform=torchvision.transforms.ToTensor())
        loader = get_loader(dataset, batch_size=config.batch_size)
        solver = Solver(torchvision.models.resnet50(), loader, config.epochs)
        solver.train()


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--path", type=str, default="data/train")
        parser.add_argument("--batch_size", type=int, default=1)
        parser.add_argument("--epochs", type=int, default=100)
        config = parser.parse_args()
        main(config)
"""


def test_a_small_argparse_default_handed_to_the_factory_is_the_training_batch_size(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"data.py": _FACTORY, "solver.py": _SOLVER, "main.py": _ARGPARSE_MAIN}), monkeypatch)
    # GPU104: one sample a training step over a folder of unknown size is read as a long pass (`epoch_length.
    # one_sample_training_pass`, the batch size the call of main.py gives); at 128 (below) it is reported
    assert found(diagnostics) == ["data.py:6 GPU102", "data.py:6 GPU103"]
    assert diagnostics[1].message == (
        "`DataLoader` uses `batch_size=1` (argparse default at main.py:19, given by the call at main.py:11), below 16"
    )
    assert diagnostics[1].fix is None  # set in another module, which may size other things with it


def test_a_small_literal_handed_to_the_factory_is_reported_and_a_large_default_is_not(tmp_path, monkeypatch):
    small = _MAIN.replace("batch_size=64", "batch_size=4")
    diagnostics = lint(write(tmp_path / "small", {"data.py": _FACTORY, "solver.py": _SOLVER, "main.py": small}), monkeypatch)
    assert [d.message for d in diagnostics if d.code == "GPU103"] == [
        "`DataLoader` uses `batch_size=4` (the call at main.py:9), below 16"
    ]
    large = _ARGPARSE_MAIN.replace("default=1)", "default=128)")
    assert lint_written(tmp_path / "large", {"data.py": _FACTORY, "solver.py": _SOLVER, "main.py": large}, monkeypatch) == [
        "data.py:6 GPU102", "data.py:6 GPU104",
    ]  # fmt: skip


def test_a_small_batch_size_given_to_a_loader_that_only_feeds_evaluation_is_not_reported(tmp_path, monkeypatch):
    # the Solver's loop runs under no_grad and steps no optimizer: an evaluation batch size is not a training one
    solver = """
        import torch


        class Solver:
            def __init__(self, model, train_loader, epochs):
                self.model = model.cuda().eval()
                self.train_loader = train_loader
                self.epochs = epochs

            def train(self):
                with torch.no_grad():
                    for epoch in range(self.epochs):
                        for images, labels in self.train_loader:
                            print(self.model(images.cuda()).argmax(1).eq(labels.cuda()).sum())
    """
    assert "data.py:6 GPU103" not in lint_written(tmp_path, {"data.py": _FACTORY, "solver.py": solver, "main.py": _ARGPARSE_MAIN}, monkeypatch)


def test_a_module_level_call_reading_its_own_parsed_command_line_gives_the_default(tmp_path, monkeypatch):
    main = """
        import argparse

        import torchvision
        from data import get_loader
        from solver import Solver

        parser = argparse.ArgumentParser()
        parser.add_argument("--batch_size", type=int, default=8)
        args = parser.parse_args()
        dataset = torchvision.datasets.ImageFolder("data/train", transform=torchvision.transforms.ToTensor())
        Solver(torchvision.models.resnet50(), get_loader(dataset, args.batch_size), 100).train()
    """
    diagnostics = lint(write(tmp_path, {"data.py": _FACTORY, "solver.py": _SOLVER, "main.py": main}), monkeypatch)
    assert [d.message for d in diagnostics if d.code == "GPU103"] == [
        "`DataLoader` uses `batch_size=8` (argparse default at main.py:9, given by the call at main.py:12), below 16"
    ]
