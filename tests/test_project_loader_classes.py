"""Pinned loaders built in another module (GPU105): a `DataLoader` subclass that hands its arguments on
unchanged, a name bound to one of two loader classes, and a loop over a name bound to `enumerate(loader)`
(then maybe `tqdm(...)`) — yolov7's `create_dataloader` and its training loop."""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

DATASETS = """\
    import torch


    class InfiniteDataLoader(torch.utils.data.dataloader.DataLoader):
        def __init__({init_params}):
            super().__init__({super_args})
            self.iterator = super().__iter__()


    def create_dataloader(dataset, batch_size, workers=8, image_weights=False):
        loader = torch.utils.data.DataLoader if image_weights else InfiniteDataLoader
        dataloader = loader(dataset, batch_size=batch_size, num_workers=workers, pin_memory={pin})
        return dataloader, dataset
    """

TRAIN = """\
    import torch
    from tqdm import tqdm

    from utils.datasets import create_dataloader


    def train(model, optimizer, dataset, rank=-1):
        device = torch.device("cuda")
        dataloader, dataset = create_dataloader(dataset, 16)
        for epoch in range(3):
            pbar = enumerate(dataloader)
            if rank in [-1, 0]:
                pbar = tqdm(pbar, total=len(dataloader))
            for i, (imgs, targets) in pbar:
                imgs = imgs.to(device, non_blocking=True).float() / 255.0
                loss = model(imgs, targets.to(device))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """

FORWARDING = {"init_params": "self, *args, **kwargs", "super_args": "*args, **kwargs"}


def run(tmp_path, monkeypatch, pin="True", **init):
    datasets = DATASETS.format(pin=pin, **{**FORWARDING, **init})
    files = {"utils/__init__.py": "", "utils/datasets.py": datasets, "train.py": TRAIN}
    return lint(write(tmp_path, files), monkeypatch, select=("GPU105",))


def test_a_pinned_loader_of_a_forwarding_subclass_returned_from_another_module(tmp_path, monkeypatch):
    diagnostics = run(tmp_path, monkeypatch)
    assert found(diagnostics) == ["train.py:16 GPU105"]
    assert diagnostics[0].message == (
        "`targets.to(device)` copies a batch of a pinned `DataLoader` (utils/datasets.py:12) and blocks"
    )


def test_unpinned_loaders_and_subclasses_that_take_other_arguments_stay_silent(tmp_path, monkeypatch):
    assert found(run(tmp_path, monkeypatch, pin="False")) == []
    # an `__init__` of its own signature may take other arguments: its calls are not DataLoader calls
    changed = {"init_params": "self, dataset, batch_size, **kwargs", "super_args": "dataset, batch_size=batch_size * 2"}
    assert found(run(tmp_path, monkeypatch, **changed)) == []
