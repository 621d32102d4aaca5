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
    assert found(diagnostics) == ["evaluate.py:18 GPU303"]
    (finding,) = diagnostics
    assert finding.message.startswith("`recalls_and_ndcgs(scores, labels, [1, 5, 10])` (`int()` of a tensor at metrics.py:13")
    assert finding.help.startswith("It waits in a loop of the helper (at metrics.py:13), ")


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
