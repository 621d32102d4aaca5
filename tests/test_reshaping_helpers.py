"""Per-step reads behind a helper that reshapes its arguments first (issue 14, eighth corpus class K): the NLP
book's `compute_accuracy(y_pred, y_true, mask_index)` starts with `y_pred, y_true = normalize_sizes(y_pred, y_true)`
and reads `.item()` of what it computes from them, called every training and validation step. Negatives: a helper
whose result is not made from the argument (a CPU tensor of its own), and a helper called once after training."""

from __future__ import annotations

from tests.projects_helper import found, lint, write

TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def normalize_sizes(y_pred, y_true):
    if len(y_pred.size()) == 3:
        y_pred = y_pred.contiguous().view(-1, y_pred.size(2))
    if len(y_true.size()) == 2:
        y_true = y_true.contiguous().view(-1)
    return y_pred, y_true


def compute_accuracy(y_pred, y_true, mask_index):
    y_pred, y_true = normalize_sizes(y_pred, y_true)
    _, y_pred_indices = y_pred.max(dim=1)
    correct_indices = torch.eq(y_pred_indices, y_true).float()
    valid_indices = torch.ne(y_true, mask_index).float()
    n_correct = (correct_indices * valid_indices).sum().item()
    n_valid = valid_indices.sum().item()
    return n_correct / n_valid * 100


def main():
    device = torch.device("cuda")
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 40)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.randn(10000, 1024), torch.randint(0, 40, (10000,)))
    loader = DataLoader(data, batch_size=256, shuffle=True, pin_memory=True)
    running_acc = 0.0
    for epoch in range(10):
        for x, y in loader:
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            y_pred = model(x)
            loss = nn.functional.cross_entropy(y_pred, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            acc_t = compute_accuracy(y_pred, y, 0)
            running_acc += (acc_t - running_acc) / 2
    return running_acc


if __name__ == "__main__":
    main()
"""


def _gpu303(tmp_path, monkeypatch, text):
    diagnostics = lint(write(tmp_path, {"train.py": text}), monkeypatch, select=("GPU303",))
    return [d for d in diagnostics if d.code == "GPU303"]


def test_a_read_behind_a_helper_that_reshapes_the_arguments_first_is_reported_at_the_call(tmp_path, monkeypatch):
    (finding,) = _gpu303(tmp_path, monkeypatch, TRAIN)
    assert found([finding]) == ["train.py:41 GPU303"]
    assert finding.message == (
        "`compute_accuracy(y_pred, y, 0)` (`.item()` at train.py:20, 2 reads a call) waits for the GPU every training step (loop at line 33)"
    )


def test_a_helper_whose_result_is_its_own_cpu_tensor_is_silent(tmp_path, monkeypatch):
    own = TRAIN.replace("    return y_pred, y_true\n", "    return torch.zeros(4), torch.ones(4)\n")
    assert _gpu303(tmp_path, monkeypatch, own) == []


def test_the_reshaping_helper_called_once_after_training_is_silent(tmp_path, monkeypatch):
    once = TRAIN.replace("            acc_t = compute_accuracy(y_pred, y, 0)\n", "            acc_t = 0.0\n").replace(
        "    return running_acc\n", "    return compute_accuracy(y_pred, y, 0)\n"
    )
    assert _gpu303(tmp_path, monkeypatch, once) == []
