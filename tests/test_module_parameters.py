"""A parameter a function puts in eval mode (`model.eval()`, also `.parameters()`, `.named_modules()`) is a module,
and so is what it hands that parameter to (issue 14, the project model; torchrec's bert4rec example in the
seventeenth corpus): `_validate(model, ...)` calls `model.eval()` and hands `model` to `_calculate_metrics`, whose
`model(kjt)` is then a forward, so `_validate`'s loop is an evaluation loop and the metric helper of another module
that reads the scores per `k` (and each element's count with `int()` in a comprehension) waits many times a batch.
The model itself is a library wrapper the project cannot see (`DistributedModelParallel`).

Negatives: the same loop without `model.eval()` (nothing says the parameter is a module: the loop's role stays
unknown), and a parameter only trained (`agent.train()`: an agent or a trainer may have a `train` method too).
"""

from __future__ import annotations

from tests.projects_helper import lint_written

METRICS = """
import torch


def recalls_and_ndcgs(scores, labels, ks):
    metrics = {}
    answer_count = labels.sum(1)
    for k in sorted(ks, reverse=True):
        hits = scores[:, :k]
        idcg = torch.tensor([min(int(n), k) for n in answer_count], dtype=torch.float).to(scores.device)
        metrics[k] = (hits.sum(1) / idcg).mean().cpu().item()
    return metrics
"""

MAIN = """
import torch
from somelib import ModelParallel

from metrics import recalls_and_ndcgs


def _calculate_metrics(model, batch, ks):
    seqs, labels = batch
    scores = model(seqs)
    return recalls_and_ndcgs(scores, labels, ks)


def _validate(model, loader, device, ks):
    {switch}
    with torch.no_grad():
        for batch in loader:
            batch = [x.to(device) for x in batch]
            metrics = _calculate_metrics(model, batch, ks)
            print(metrics)


def main(train_loader, val_loader):
    device = torch.device("cuda")
    model = ModelParallel(torch.nn.Linear(8, 100), device=device)
    for epoch in range(10):
        _validate(model, val_loader, device, [1, 5, 10, 20])
"""


def _lint(tmp_path, monkeypatch, switch: str) -> list[str]:
    return lint_written(tmp_path, {"metrics.py": METRICS, "main.py": MAIN.replace("{switch}", switch)}, monkeypatch)


# Whatever the model's mode, `int(n)` walks the elements of `labels.sum(1)`, made from the batch the loop moves to the
# GPU: one wait per row of every batch, reported at the walk (`analysis/walked_params.py`).
WALK = "metrics.py:10 GPU303"


def test_helper_reads_per_k_in_an_evaluation_loop_of_a_parameter_put_in_eval_mode(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, "model.eval()") == ["main.py:11 GPU303", WALK]


def test_loop_without_eval_mode_stays_unknown(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, "pass") == [WALK]


def test_train_mode_alone_says_nothing(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, "model.train()") == [WALK]
