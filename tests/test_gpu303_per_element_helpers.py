"""GPU303: a helper of another module that reads a GPU tensor once per element, run by a loop (round 21).

Two project facts (`analysis/forward_reach.py`, `analysis/batch_reach.py`), reported at the read in the helper with
the loop named, and not again at the call:

- a padding mask filled row by row with slice bounds read from the CUDA length tensor, in a function a per-step
  `forward` reaches through an encoder's `forward` (`mask[i, lengths[i]:] = 0`: one read per utterance, every step);
- a metric helper that walks a GPU tensor element by element (`[int(n) for n in counts]`), called once a batch by a
  validation loop through a helper of that loop's module, or through a trainer's override the base class's loop
  calls on `self`.

Negatives beside each: the lengths copied to the host once first, a loop over a few options, a call after
training, a loop that breaks after its first batch, CPU tensors.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

UTILS = """
import torch


def non_pad_mask(padded_input, input_lengths=None, pad_idx=None):
    if input_lengths is not None:
        n = padded_input.size(0)
        mask = padded_input.new_ones(padded_input.size()[:-1])
        for i in range(n):
            mask[i, input_lengths[i]:] = 0
    if pad_idx is not None:
        mask = padded_input.ne(pad_idx).float()
    return mask.unsqueeze(-1)
"""

ENCODER = """
import torch.nn as nn

from utils import non_pad_mask


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True) for _ in range(12))
        self.proj = nn.Linear(320, 512)

    def forward(self, padded_input, input_lengths):
        mask = non_pad_mask(padded_input, input_lengths=input_lengths)
        out = self.proj(padded_input) * mask
        for layer in self.layers:
            out = layer(out)
        return out
"""

TRAIN = """
import torch
from torch.utils.data import DataLoader, TensorDataset

from encoder import Encoder

model = Encoder().cuda()
optimizer = torch.optim.Adam(model.parameters())
data = TensorDataset(torch.randn(20000, 400, 320), torch.randint(100, 400, (20000,)))
loader = DataLoader(data, batch_size=32, num_workers=4, pin_memory=True)
for epoch in range(100):
    for x, lengths in loader:
        x, lengths = x.cuda(non_blocking=True), lengths.cuda(non_blocking=True)
        loss = model(x, lengths).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_mask_filled_row_by_row_with_gpu_bounds_in_a_helper_the_forward_reaches(tmp_path, monkeypatch):
    root = write(tmp_path, {"utils.py": UTILS, "encoder.py": ENCODER, "train.py": TRAIN})
    diagnostics = lint(root, monkeypatch, select=("GPU303",), rule_options=())
    assert found(diagnostics) == ["utils.py:10 GPU303"]  # at the read, not at the encoder's call nor the step's
    (finding,) = diagnostics
    assert finding.message == (
        "`mask[i, input_lengths[i]:]` (slicing with a GPU tensor as a bound) waits for the GPU once per iteration of "
        "`for i in range(n)` (line 9): as many reads a call as the loop has iterations, on every call of "
        "`non_pad_mask`, which a per-step `forward` runs (encoder.py:14; the step loop's call at train.py:14)"
    )
    assert finding.help.startswith("It waits once per iteration, every training step; copy the lengths to the host once")


def test_lengths_copied_to_the_host_once_are_read_once(tmp_path, monkeypatch):
    host = UTILS.replace("        for i in range(n):\n", "        lengths = input_lengths.tolist()\n        for i in range(n):\n")
    host = host.replace("mask[i, input_lengths[i]:] = 0", "mask[i, lengths[i]:] = 0")
    root = write(tmp_path, {"utils.py": host, "encoder.py": ENCODER, "train.py": TRAIN})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


def test_a_mask_helper_only_a_cpu_caller_gives_lengths_is_silent(tmp_path, monkeypatch):
    cpu = TRAIN.replace("x, lengths = x.cuda(non_blocking=True), lengths.cuda(non_blocking=True)", "x = x.cuda(non_blocking=True)")
    root = write(tmp_path, {"utils.py": UTILS, "encoder.py": ENCODER, "train.py": cpu})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


METRICS = """
import torch


def recalls_and_ndcgs(scores, labels, ks):
    metrics = {}
    answer_count = labels.sum(1)
    _, cut = torch.sort(-scores, dim=1)
    for k in sorted(ks, reverse=True):
        cut = cut[:, :k]
        hits = labels.float().gather(1, cut)
        weights = 1 / torch.log2(torch.arange(2, 2 + k).float())
        dcg = (hits * weights.to(hits.device)).sum(1)
        idcg = torch.Tensor([weights[: min(int(n), k)].sum() for n in answer_count]).to(dcg.device)
        metrics["NDCG@%d" % k] = (dcg / idcg).mean()
    return metrics
"""

MAIN = """
import torch
import torchvision
from torch.utils.data import DataLoader, TensorDataset

from metrics import recalls_and_ndcgs


def _calculate_metrics(model, batch, ks):
    images, labels = batch
    scores = model(images)[:, :100]
    return recalls_and_ndcgs(scores, labels, ks)


def _validate(model, loader, device, ks):
    model.eval()
    found = []
    with torch.no_grad():
        for batch in loader:
            batch = [x.to(device) for x in batch]
            found.append(_calculate_metrics(model, batch, ks))
    return found


device = torch.device("cuda")
model = torchvision.models.resnet50().to(device)
data = TensorDataset(torch.randn(5000, 3, 224, 224), torch.randint(0, 2, (5000, 100)))
loader = DataLoader(data, batch_size=128, num_workers=8)
for epoch in range(20):
    _validate(model, loader, device, [1, 5, 10, 20, 50, 100])
"""


def test_a_metric_helper_walking_a_gpu_tensor_per_validation_batch(tmp_path, monkeypatch):
    root = write(tmp_path, {"metrics.py": METRICS, "main.py": MAIN})
    diagnostics = lint(root, monkeypatch, select=("GPU303",), rule_options=())
    assert found(diagnostics) == ["metrics.py:14 GPU303"]  # not again at `recalls_and_ndcgs(...)` in main.py
    (finding,) = diagnostics
    assert finding.message.startswith("`int(n)` (`int()` of a tensor) waits for the GPU once per iteration of `for n in answer_count`")
    assert finding.message.endswith("which the loop at main.py:19 runs on every batch (the call at main.py:12)")
    assert finding.severity.value == "info"


def test_a_metric_helper_called_once_after_training_is_silent(tmp_path, monkeypatch):
    once = MAIN.replace("for epoch in range(20):\n    _validate(", "_validate(")
    once = once.replace("        for batch in loader:\n            batch = [x.to(device) for x in batch]\n            found.append(",
                        "        batch = [x.to(device) for x in next(iter(loader))]\n        if True:\n            found.append(")  # fmt: skip
    root = write(tmp_path, {"metrics.py": METRICS, "main.py": once})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


def test_a_validation_loop_that_breaks_after_one_batch_is_one_off(tmp_path, monkeypatch):
    # one batch shown once after training (a loop whose body ends in `break`, its function called once)
    demo = MAIN.replace("            found.append(_calculate_metrics(model, batch, ks))\n",
                        "            found.append(_calculate_metrics(model, batch, ks))\n            break\n")  # fmt: skip
    demo = demo.replace("for epoch in range(20):\n    _validate(", "_validate(")
    root = write(tmp_path, {"metrics.py": METRICS, "main.py": demo})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


def test_a_loop_over_a_few_cutoffs_is_not_a_walk(tmp_path, monkeypatch):
    # the only reads left are one `.cpu()` per cutoff: not per element, so not reported in the helper; the call
    # stays reported where it was (a read in a loop of the helper: `read_cost`'s repeated reads)
    options = METRICS.replace(
        "        idcg = torch.Tensor([weights[: min(int(n), k)].sum() for n in answer_count]).to(dcg.device)\n"
        '        metrics["NDCG@%d" % k] = (dcg / idcg).mean()\n',
        '        metrics["NDCG@%d" % k] = dcg.mean().cpu()\n',
    )
    assert "answer_count]" not in options
    root = write(tmp_path, {"metrics.py": options, "main.py": MAIN})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == ["main.py:12 GPU303"]


def test_a_metric_helper_on_cpu_tensors_is_silent(tmp_path, monkeypatch):
    cpu = MAIN.replace('device = torch.device("cuda")', 'device = torch.device("cpu")')
    root = write(tmp_path, {"metrics.py": METRICS, "main.py": cpu})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


BASE = """
import torch


class Trainer:
    def __init__(self, model, val_loader):
        self.device = torch.device("cuda")
        self.model = model.to(self.device)
        self.val_loader = val_loader

    def calculate_metrics(self, batch):
        raise NotImplementedError

    def validate(self):
        self.model.eval()
        with torch.no_grad():
            for batch in self.val_loader:
                batch = [x.to(self.device) for x in batch]
                metrics = self.calculate_metrics(batch)
"""

BERT = """
from base import Trainer
from metrics import recalls_and_ndcgs


class BertTrainer(Trainer):
    def calculate_metrics(self, batch):
        seqs, candidates, labels = batch
        scores = self.model(seqs)[:, -1, :].gather(1, candidates)
        return recalls_and_ndcgs(scores, labels, [1, 5, 10])
"""

RUN = """
import torch
from torch.utils.data import DataLoader, TensorDataset

from bert import BertTrainer

model = torch.nn.Sequential(torch.nn.Embedding(30000, 1024), torch.nn.Linear(1024, 30000))
data = TensorDataset(torch.randint(0, 30000, (10000, 200)), torch.randint(0, 30000, (10000, 100)), torch.randint(0, 2, (10000, 100)))
trainer = BertTrainer(model, DataLoader(data, batch_size=128, num_workers=4))
for epoch in range(100):
    trainer.validate()
"""


def test_an_override_the_base_trainers_loop_calls_runs_the_metric_every_batch(tmp_path, monkeypatch):
    root = write(tmp_path, {"metrics.py": METRICS, "base.py": BASE, "bert.py": BERT, "run.py": RUN})
    diagnostics = lint(root, monkeypatch, select=("GPU303",), rule_options=())
    assert found(diagnostics) == ["metrics.py:14 GPU303"]
    assert diagnostics[0].message.endswith("which the loop at base.py:17 runs on every batch (the call at bert.py:10)")


EVALUATE_BATCHES = """
import torch
import torch.nn.functional as F


def test(model, device, loader):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            total += F.nll_loss(output, target, reduction="sum").item()
    return total
"""

EPOCHS = """
import torch
import torchvision
from torch.utils.data import DataLoader, TensorDataset

from evaluate import test

device = torch.device("cuda")
model = torchvision.models.resnet50().to(device)
loader = DataLoader(TensorDataset(torch.randn(5000, 3, 224, 224), torch.randint(0, 1000, (5000,))), batch_size=128, num_workers=8)
for epoch in range(20):
    test(model, device, loader)
"""


def test_a_loss_read_once_per_batch_of_a_loader_is_no_walk(tmp_path, monkeypatch):
    # the loop walks a loader's batches, and the read is of a call's result (`F.nll_loss(...)`), not of the element
    root = write(tmp_path, {"evaluate.py": EVALUATE_BATCHES, "train.py": EPOCHS})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []
