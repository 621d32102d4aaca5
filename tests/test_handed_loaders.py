"""Per-step reads in a loop over a loader that the callers place with a framework (issue 14, eighth corpus, class
I): `fabric.setup_dataloaders(...)` / `accelerator.prepare_data_loader(...)` in `main`, the loader handed to
`train(...)` of the same or another module (`analysis/handed_loaders.py`, the summaries' `PLACED_LOADER`).

Shape after jzhang38/TinyLlama's pretraining script (the model and optimizer in a `state` dict, the loader a
parameter, `loss.item()` in `fabric.print` every micro-step). Negatives: one caller hands a loader Fabric does not
place (`move_to_device=False`) or a plain DataLoader, and a loop over a loader the function builds itself.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

TRAIN = """
import torch


def train(fabric, state, train_dataloader):
    model = state["model"]
    optimizer = state["optimizer"]
    for train_data in train_dataloader:
        input_ids = train_data[:, 0:10].contiguous()
        targets = train_data[:, 1:11].contiguous()
        logits = model(input_ids)
        loss = torch.nn.functional.cross_entropy(logits, targets)
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        fabric.print(f"loss {loss.item():.4f}")
"""

MAIN = """
import lightning as L
import torch
from torch.utils.data import DataLoader

from train import train


def main(fabric, train_set, val_set):
    model = fabric.setup(torch.nn.Linear(10, 10))
    optimizer = fabric.setup_optimizers(torch.optim.AdamW(model.parameters()))
    if val_set is None:
        train_dataloader = fabric.setup_dataloaders(DataLoader(train_set, batch_size=8))
    else:
        train_dataloader, val_dataloader = fabric.setup_dataloaders(DataLoader(train_set), DataLoader(val_set))
    state = {"model": model, "optimizer": optimizer}
    train(fabric, state, train_dataloader)


if __name__ == "__main__":
    main(L.Fabric(devices=1, precision="bf16-mixed"), None, None)
"""


def test_a_loader_fabric_places_in_the_caller_makes_the_loop_read_gpu_values(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"train.py": TRAIN, "main.py": MAIN}), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == ["train.py:16 GPU303"]
    assert diagnostics[0].message == "`loss.item()` waits for the GPU every training step (loop at line 8)"


def test_a_caller_that_hands_an_unplaced_loader_keeps_the_loop_unknown(tmp_path, monkeypatch):
    unplaced = MAIN.replace("DataLoader(train_set, batch_size=8))", "DataLoader(train_set, batch_size=8), move_to_device=False)")
    assert found(lint(write(tmp_path, {"train.py": TRAIN, "main.py": unplaced}), monkeypatch, select=("GPU303",))) == []


def test_a_second_caller_with_a_plain_loader_keeps_the_loop_unknown(tmp_path, monkeypatch):
    other = """
    from torch.utils.data import DataLoader

    from train import train


    def debug(fabric, state, data):
        train(fabric, state, DataLoader(data))
    """
    files = {"train.py": TRAIN, "main.py": MAIN, "debug.py": other}
    assert found(lint(write(tmp_path, files), monkeypatch, select=("GPU303",))) == []
