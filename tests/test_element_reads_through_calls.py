"""Helpers and objects of another module that read a GPU tensor element by element on the host, called every
step (issue 14 points 5-6, per-step code reached through calls; round 19 on the fourteenth to eighteenth corpora).

Three facts of the project summaries (`analysis/summary.py`), each composed across modules by the index:

- a read in a comprehension repeats once per element, as in a loop: `[int(n) for n in counts]` over a GPU
  tensor (an NDCG's ideal gain, a vocabulary's `DecodeIds([int(l) for l in labels])`) is the per-element read
  `read_cost` takes as cost evidence; `[c for c in t.tolist()]` reads once (the first iterable is evaluated once);
- `if t[i] != 0 and not (i > 0 and t[i - 1] == t[i]):` takes the truth of each operand, each a read when it is a
  tensor (a CTC label converter walking the arg-max predictions);
- `converter = utils.LabelConverter(alphabet)` at module level, `converter.decode(preds)` in a function of that
  module: a method of the project class that call built (as for an instance built in the function itself).

Shapes after torchrec's bert4rec metrics and crnn.pytorch's `strLabelConverter`; negatives beside each: the
tensor copied to the host once before the comprehension, a converter handed CPU predictions, a read under a log
interval.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

METRICS = """
import torch


def recalls_and_ndcgs(scores, labels, ks):
    metrics = {}
    answer_count = labels.sum(1)
    rank = (-scores).argsort(dim=1)
    for k in ks:
        hits = labels.gather(1, rank[:, :k])
        weights = 1 / torch.log2(torch.arange(2, 2 + k).float())
        dcg = (hits * weights.to(hits.device)).sum(1)
        idcg = torch.Tensor([weights[: min(int(n), k)].sum() for n in answer_count]).to(dcg.device)
        metrics[k] = dcg / idcg
    return metrics
"""

EVALUATE = """
import torch
import torchvision
from torch.utils.data import DataLoader, TensorDataset

from metrics import recalls_and_ndcgs

model = torchvision.models.resnet50().cuda()
data = TensorDataset(torch.randn(5000, 3, 224, 224), torch.randint(0, 2, (5000, 100)).float())
loader = DataLoader(data, batch_size=128, num_workers=8)
model.eval()
results = []
with torch.no_grad():
    for epoch in range(20):
        for x, labels in loader:
            x, labels = x.cuda(non_blocking=True), labels.cuda(non_blocking=True)
            scores = model(x)[:, :100]
            results.append(recalls_and_ndcgs(scores, labels, [1, 5, 10]))
"""


def test_a_read_per_element_in_a_comprehension_of_a_helper_is_cost_evidence(tmp_path, monkeypatch):
    root = write(tmp_path, {"metrics.py": METRICS, "evaluate.py": EVALUATE})
    diagnostics = lint(root, monkeypatch, select=("GPU303",), rule_options=())
    # the call, and the walk itself at its read in the helper (`walked_params`: the loop hands a moved batch)
    assert found(diagnostics) == ["evaluate.py:18 GPU303", "metrics.py:13 GPU303"]
    call, walk = diagnostics
    assert call.message.startswith("`recalls_and_ndcgs(scores, labels, [1, 5, 10])` (`int()` of a tensor at metrics.py:13")
    assert call.help.startswith("It waits in a loop of the helper (at metrics.py:13), ")
    assert walk.message == (
        "`int(n)` waits for the GPU once per element of `answer_count` (loop at line 13), on every call from the batch "
        "loop at evaluate.py:18"
    )
    assert walk.help.startswith("It waits once per element of `answer_count`, made from the GPU tensor `labels` that the loop at evaluate.py:18 ")


def test_a_comprehension_over_the_tensor_copied_once_is_one_read(tmp_path, monkeypatch):
    # `answer_count.tolist()`: the comprehension's iterable is evaluated once, its elements are Python ints
    once = METRICS.replace("for n in answer_count]", "for n in answer_count.tolist()]")
    root = write(tmp_path, {"metrics.py": once, "evaluate.py": EVALUATE})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []
    assert found(lint(root, monkeypatch, select=("GPU303",))) == ["evaluate.py:18 GPU303"]  # with `unproven-cost`


def test_a_helper_called_under_a_log_interval_is_silent(tmp_path, monkeypatch):
    step = EVALUATE.replace("        for x, labels in loader:\n", "        for i, (x, labels) in enumerate(loader):\n").replace(
        "            results.append(recalls_and_ndcgs(", "            if i % 100 == 0:\n                results.append(recalls_and_ndcgs("
    )
    root = write(tmp_path, {"metrics.py": METRICS, "evaluate.py": step})
    assert found(lint(root, monkeypatch, select=("GPU303",))) == []


CONVERTER = """
class LabelConverter:
    def __init__(self, alphabet):
        self.alphabet = alphabet + "-"

    def decode(self, t, length):
        chars = []
        for i in range(length):
            if t[i] != 0 and not (i > 0 and t[i - 1] == t[i]):
                chars.append(self.alphabet[i])
        return "".join(chars)
"""

VALIDATE = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

import utils

converter = utils.LabelConverter("0123456789abcdefghijklmnopqrstuvwxyz")
net = nn.Sequential(nn.Conv2d(1, 512, 3, padding=1), nn.Conv2d(512, 512, 3, padding=1), nn.Conv2d(512, 37, 3, padding=1)).cuda()


def validate(loader):
    correct = 0
    with torch.no_grad():
        for images, texts in loader:
            preds = net(images.cuda()).mean(2).argmax(1).flatten()
            text = converter.decode(preds, preds.numel())
            correct += text == texts[0]
    return correct


loader = DataLoader(TensorDataset(torch.randn(2000, 1, 32, 100), torch.zeros(2000)), batch_size=64, num_workers=4)
for epoch in range(50):
    validate(loader)
"""


def test_a_method_of_a_module_level_instance_reads_each_element_of_the_predictions(tmp_path, monkeypatch):
    root = write(tmp_path, {"utils.py": CONVERTER, "train.py": VALIDATE})
    diagnostics = lint(root, monkeypatch, select=("GPU303",), rule_options=())
    assert found(diagnostics) == ["train.py:17 GPU303"]
    (finding,) = diagnostics
    assert finding.message.startswith("`converter.decode(preds, preds.numel())` (a Python condition on a tensor at utils.py:9")
    assert finding.help.startswith("It waits in a loop of the helper (at utils.py:9), once per element of the GPU tensor")


def test_a_module_level_instance_handed_host_predictions_reads_nothing(tmp_path, monkeypatch):
    host = VALIDATE.replace("converter.decode(preds, preds.numel())", "converter.decode(preds.tolist(), preds.numel())")
    root = write(tmp_path, {"utils.py": CONVERTER, "train.py": host})
    # the one `.tolist()` a batch stays, with no cost evidence: silent by default
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


def test_a_module_level_name_bound_to_a_library_object_is_not_a_project_method(tmp_path, monkeypatch):
    library = VALIDATE.replace('converter = utils.LabelConverter("0123456789abcdefghijklmnopqrstuvwxyz")', "import collections\nconverter = collections.Counter()")
    library = library.replace("text = converter.decode(preds, preds.numel())", "text = converter.get(0)")
    root = write(tmp_path, {"utils.py": CONVERTER, "train.py": library})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


# A walk through a chain of calls (round 23, after torchrec's bert4rec example): the batch loop hands each moved batch
# to a module-level function that unpacks it and calls the metrics helper of another module, which reads one number
# per sample of a GPU tensor it was handed. The read is reported where it is, in the helper.
CHAIN = """
import torch
import torchvision
from torch.utils.data import DataLoader, TensorDataset

from metrics import recalls_and_ndcgs


def batch_metrics(model, batch, ks):
    images, labels = batch
    scores = model(images)[:, :100]
    return recalls_and_ndcgs(scores, labels, ks)


def validate(model, loader, device):
    results = []
    with torch.no_grad():
        for batch in loader:
            batch = [x.to(device) for x in batch]
            results.append(batch_metrics(model, batch, [1, 5, 10]))
    return results


model = torchvision.models.resnet50().cuda()
data = TensorDataset(torch.randn(5000, 3, 224, 224), torch.randint(0, 2, (5000, 100)).float())
val_loader = DataLoader(data, batch_size=128, num_workers=8)
for epoch in range(20):
    validate(model, val_loader, torch.device("cuda"))
"""


def _metrics_findings(diagnostics) -> list[str]:
    return [f for f in found(diagnostics) if f.startswith("metrics.py")]


def test_a_walk_in_a_helper_of_another_module_reached_through_a_chain_of_calls_is_reported_at_the_read(tmp_path, monkeypatch):
    root = write(tmp_path, {"metrics.py": METRICS, "main.py": CHAIN})
    diagnostics = [d for d in lint(root, monkeypatch, select=("GPU303",), rule_options=()) if d.filename.endswith("metrics.py")]
    assert found(diagnostics) == ["metrics.py:13 GPU303"]
    (walk,) = diagnostics
    assert walk.message == (
        "`int(n)` waits for the GPU once per element of `answer_count` (loop at line 13), on every call from the batch "
        "loop at main.py:20"
    )
    assert walk.fix is None  # advice only: where to copy depends on what the helper does with the numbers


def test_a_helper_run_once_after_the_loop_on_collected_outputs_is_silent(tmp_path, monkeypatch):
    once = CHAIN.replace(
        "            results.append(batch_metrics(model, batch, [1, 5, 10]))\n    return results\n",
        "            results.append(batch)\n"
        "    images = torch.cat([b[0] for b in results])\n"
        "    labels = torch.cat([b[1] for b in results])\n"
        "    return recalls_and_ndcgs(model(images), labels, [1, 5, 10])\n",
    )
    assert once != CHAIN
    root = write(tmp_path, {"metrics.py": METRICS, "main.py": once})
    assert _metrics_findings(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


def test_a_helper_called_under_a_log_interval_through_a_chain_is_silent(tmp_path, monkeypatch):
    logged = CHAIN.replace("        for batch in loader:\n", "        for i, batch in enumerate(loader):\n").replace(
        "            results.append(batch_metrics(", "            if i % 100 == 0:\n                results.append(batch_metrics("
    )
    root = write(tmp_path, {"metrics.py": METRICS, "main.py": logged})
    assert _metrics_findings(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


def test_rows_of_an_evaluation_output_copied_out_one_by_one_are_no_walk(tmp_path, monkeypatch):
    # a greedy decoder's hypotheses, a batch's outputs copied row by row: the loop's output, not host computation
    rows = METRICS.replace(
        "        idcg = torch.Tensor([weights[: min(int(n), k)].sum() for n in answer_count]).to(dcg.device)\n",
        "        idcg = [row.tolist() for row in labels]\n",
    )
    root = write(tmp_path, {"metrics.py": rows, "main.py": CHAIN})
    assert _metrics_findings(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


def test_per_element_reads_of_a_small_cpu_tensor_are_silent(tmp_path, monkeypatch):
    # every caller hands CPU labels (only the images go to the GPU): `int(n)` reads host memory
    host = CHAIN.replace(
        "            batch = [x.to(device) for x in batch]\n            results.append(batch_metrics(model, batch, [1, 5, 10]))",
        "            images, labels = batch\n            results.append(recalls_and_ndcgs(model(images.to(device)).cpu(), labels, [1, 5, 10]))",
    )
    assert host != CHAIN
    root = write(tmp_path, {"metrics.py": METRICS, "main.py": host})
    assert _metrics_findings(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []
