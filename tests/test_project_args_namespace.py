"""Research code that keeps its device on the argparse namespace (issue 14, shaped like ViT-pytorch):
`args.device = torch.device("cuda" ...)` set in `main()`, loaders built and pinned in a data module and
returned as a tuple, batches moved with `tuple(t.to(args.device) for t in batch)`, and the loss read under
`if (step + 1) % args.gradient_accumulation_steps == 0:` (every optimizer step: the default is 1)."""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

DATA = """\
    from torch.utils.data import DataLoader


    def get_loader(args, trainset, testset):
        train_loader = DataLoader(trainset, batch_size=args.train_batch_size, num_workers=4, pin_memory={pin})
        test_loader = DataLoader(testset, batch_size=64, num_workers=4, pin_memory={pin}) if testset is not None else None
        return train_loader, test_loader
"""
TRAIN = """\
    import argparse

    import numpy as np
    import torch

    from utils.data_utils import get_loader


    def valid(args, model, test_loader):
        model.eval()
        all_preds = []
        for step, batch in enumerate(test_loader):
            batch = tuple(t.to(args.device) for t in batch)
            x, y = batch
            with torch.no_grad():
                logits = model(x)
                eval_loss = torch.nn.functional.cross_entropy(logits, y)
                print(eval_loss.item())
                preds = torch.argmax(logits, dim=-1)
            if len(all_preds) == 0:
                all_preds.append(preds.detach().cpu().numpy())
            else:
                all_preds[0] = np.append(all_preds[0], preds.detach().cpu().numpy(), axis=0)
        return all_preds[0]


    def train(args, model, trainset, testset):
        train_loader, test_loader = get_loader(args, trainset, testset)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for step, batch in enumerate(train_loader):
            batch = tuple(t.to(args.device) for t in batch)
            x, y = batch
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            if (step + 1) % args.gradient_accumulation_steps == 0:
                print(loss.item())
                optimizer.step()
                optimizer.zero_grad()
                if step % 100 == 0:
                    valid(args, model, test_loader)


    def main(model, trainset, testset):
        parser = argparse.ArgumentParser()
        parser.add_argument("--train_batch_size", default=512, type=int)
        parser.add_argument("--gradient_accumulation_steps", type=int, default={accumulation})
        args = parser.parse_args()
        args.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model.to(args.device)
        train(args, model, trainset, testset)
"""


def project(tmp_path, pin="True", accumulation="1"):
    return write(tmp_path, {"utils/__init__.py": "", "utils/data_utils.py": DATA.format(pin=pin), "train.py": TRAIN.format(accumulation=accumulation)})


def test_the_device_on_the_argparse_namespace_reaches_the_callees(tmp_path, monkeypatch):
    # the train loader is iterated once (no epoch loop here): no GPU104 for it
    diagnostics = lint(project(tmp_path), monkeypatch)
    assert found(diagnostics) == [
        # (no GPU105 at line 13: the evaluation reads `eval_loss.item()` every batch, which GPU303 reports, so the
        # blocking copy of the next batch waits for an empty queue; see step_syncs)
        "train.py:18 GPU303",
        "train.py:23 GPU303",  # later steps append to the first copy; the first one (line 21) runs once
        "train.py:31 GPU105",
        "train.py:36 GPU303",  # every optimizer step: gradient_accumulation_steps is 1 by default
        "utils/data_utils.py:6 GPU104",  # the test loader's workers start again at every `valid(...)` in the loop
    ]
    by_line = {d.location.row: d for d in diagnostics}
    assert by_line[31].message == "`t.to(args.device)` copies a batch of a pinned `DataLoader` (utils/data_utils.py:5) and blocks"
    assert by_line[31].fix.edits[0].content == ", non_blocking=True"
    workers = diagnostics[-1]
    assert workers.message == (
        "`DataLoader` workers are shut down and started again for every pass of the loop at train.py:30 "
        "(its batches are taken at train.py:12)"
    )


def test_unpinned_loaders_and_a_real_accumulation_interval_are_silent(tmp_path, monkeypatch):
    # no pin_memory: no blocking copy to report (GPU102 says to pin the training loader); accumulation 4 by
    # default: the loss is read every fourth step
    assert found(lint(project(tmp_path, pin="False", accumulation="4"), monkeypatch)) == [
        "train.py:18 GPU303",
        "train.py:23 GPU303",
        "utils/data_utils.py:5 GPU102",
        "utils/data_utils.py:6 GPU102",
        "utils/data_utils.py:6 GPU104",
    ]


@pytest.mark.parametrize("pin", ["args.pin"])
def test_a_loader_pinned_on_some_runs_only_is_not_known_to_be_pinned(tmp_path, monkeypatch, pin):
    assert "train.py:31 GPU105" not in found(lint(project(tmp_path, pin=pin), monkeypatch))


def test_a_sequence_built_from_moved_elements_is_on_the_gpu_only_when_they_are(tmp_path, monkeypatch):
    train = TRAIN.format(accumulation="1").replace("tuple(t.to(args.device) for t in batch)", "[t.float() for t in batch]")
    files = {"utils/__init__.py": "", "utils/data_utils.py": DATA.format(pin="True"), "train.py": train}
    assert found(lint(write(tmp_path, files), monkeypatch)) == ["utils/data_utils.py:6 GPU104"]  # no GPU105, no GPU303


def test_a_first_pass_test_on_a_list_the_loop_empties_again_is_no_first_pass(tmp_path, monkeypatch):
    train = TRAIN.format(accumulation="1").replace(
        "            if len(all_preds) == 0:", "            if step % 10 == 0:\n                all_preds = []\n            if len(all_preds) == 0:"
    )
    files = {"utils/__init__.py": "", "utils/data_utils.py": DATA.format(pin="False"), "train.py": train}
    diagnostics = lint(write(tmp_path, files), monkeypatch)
    # `all_preds.append(preds...cpu())` is reported: in the finding of `print(eval_loss.item())` above it (one wait)
    assert "train.py:18 GPU303" in found(diagnostics)
    assert any("the read after it at line 23 " in d.message for d in diagnostics)


@pytest.mark.parametrize(("persistent", "expected"), [("", ["utils/data_utils.py:5 GPU104"]), (", persistent_workers=True", [])])
def test_a_loader_of_a_data_module_iterated_every_epoch_in_the_training_module(tmp_path, monkeypatch, persistent, expected):
    train = """\
        import torch

        from utils.data_utils import get_loader


        def train(args, model, trainset):
            train_loader, _ = get_loader(args, trainset, None)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            while True:
                for batch in train_loader:
                    loss = model(batch[0].cuda(non_blocking=True)).sum()
                    loss.backward()
                    optimizer.step()
    """
    data = DATA.format(pin="True").replace("pin_memory=True)\n", f"pin_memory=True{persistent})\n", 1)
    files = {"utils/__init__.py": "", "utils/data_utils.py": data, "train.py": train}
    diagnostics = lint(write(tmp_path, files), monkeypatch)
    assert [f for f in found(diagnostics) if "GPU104" in f] == expected
    if expected:
        assert diagnostics[-1].message.endswith("for every pass of the loop at train.py:9 (its batches are taken at train.py:10)")


MODELING = """\
    import torch.nn as nn


    class VisionTransformer(nn.Module):
        def __init__(self, dim=768):
            super().__init__()
            self.blocks = nn.Sequential(*[nn.Linear(dim, dim) for _ in range(12)])

        def forward(self, x):
            return self.blocks(x)


    class Config:
        def __init__(self):
            self.hidden = 768

        def to(self, device):
            return self
"""
SETUP = """\
    import torch

    from models.modeling import {cls}


    def setup(args):
        model = {cls}()
        model.to(args.device)
        return model


    def main(args, loader):
        args.device = torch.device("cuda")
        model = setup(args)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for x in loader:
            model(x.to(args.device)).sum().backward()
            optimizer.step()


    if __name__ == "__main__":
        main(None, [])
"""


@pytest.mark.parametrize(("cls", "expected"), [("VisionTransformer", ["train.py:8 GPU902"]), ("Config", [])])
def test_a_model_class_of_another_module_moved_to_cuda_is_a_model(tmp_path, monkeypatch, cls, expected):
    # an nn.Module of models/modeling.py moved to CUDA in float32: GPU902; a project class that is no module is not
    files = {"models/__init__.py": "", "models/modeling.py": MODELING, "train.py": SETUP.format(cls=cls)}
    assert found(lint(write(tmp_path, files), monkeypatch, select=("GPU902",), preview=True)) == expected


ENGINE = """\
    def train_one_epoch(model, criterion, data_loader, optimizer, device):
        model.train()
        for samples, targets in data_loader:
            samples = samples.to(device, non_blocking=True)
            loss = criterion(model(samples), targets.to(device, non_blocking=True))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""
MAIN = """\
    import torch

    from engine import train_one_epoch


    def main(args, dataset_train, model, criterion, optimizer):
        device = torch.device("cuda")
        data_loader_train = torch.utils.data.DataLoader(dataset_train, batch_size=64, num_workers=10, pin_memory=True)
        for epoch in range(300):
            {epoch_start}
            train_one_epoch(model, criterion, data_loader_train, optimizer, device)
"""


@pytest.mark.parametrize(
    ("epoch_start", "expected"),
    [
        ("data_loader_train.sampler.set_epoch(epoch)", ["main.py:8 GPU104"]),  # the sampler lives in the main process
        ("data_loader_train.dataset.set_epoch(epoch)", []),  # persistent workers would keep a stale dataset
    ],
)
def test_a_loader_handed_every_epoch_to_an_engine_in_another_module(tmp_path, monkeypatch, epoch_start, expected):
    # shaped like deit: main.py builds the loader and runs the epochs, engine.py iterates it
    files = {"engine.py": ENGINE, "main.py": MAIN.format(epoch_start=epoch_start)}
    diagnostics = lint(write(tmp_path, files), monkeypatch, select=("GPU104",))
    assert found(diagnostics) == expected
    if expected:
        assert diagnostics[0].message.endswith("for every pass of the loop at main.py:9 (its batches are taken at engine.py:3)")
