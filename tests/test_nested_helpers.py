"""A function nested in a method and called there with its arguments (`analysis/summary.py`, `inline`): a
segmentation metric's `update` hands each prediction to `def evaluate_worker(self, pred, label)`, which calls
`pixel_accuracy(pred, label)` (two `.item()`) and a histogram helper (`.cpu()`). Fourteenth corpus: the metric's
reads ran every validation batch out of sight, the nested function's body being skipped. Its body now counts as
the method's own where it is called, so the call in the evaluation loop is reported with the read named; the
same update under `if i % 50 == 0:` is not every step, a worker without reads is silent, and what the nested
function writes on `self` (moved to the prediction's device, as it reads) does not make `get()`'s read of a CPU
total a GPU read."""

from __future__ import annotations

from tests.projects_helper import lint_written

METRICS = """\
import torch


def pixel_accuracy(output, target):
    predict = torch.argmax(output, 1)
    labeled = torch.sum(target > 0).item()
    correct = torch.sum((predict == target) * (target > 0)).item()
    return correct, labeled


def histograms(output, target, nclass):
    predict = torch.argmax(output, 1).float()
    inter = torch.histc(predict.cpu(), bins=nclass, min=0, max=nclass)
    return inter


class SegmentationMetric:
    def __init__(self, nclass):
        self.nclass = nclass
        self.reset()

    def update(self, preds, labels):
        def evaluate_worker(self, pred, label):
            correct, labeled = pixel_accuracy(pred, label)
            inter = histograms(pred, label, self.nclass)
            self.total_correct += correct
            self.total_label += labeled
            if self.total_inter.device != inter.device:
                self.total_inter = self.total_inter.to(inter.device)
            self.total_inter += inter

        if isinstance(preds, torch.Tensor):
            evaluate_worker(self, preds, labels)
        else:
            for pred, label in zip(preds, labels):
                evaluate_worker(self, pred, label)

    def get(self):
        return self.total_correct / max(self.total_label, 1), self.total_inter.mean().item()

    def reset(self):
        self.total_inter = torch.zeros(self.nclass)
        self.total_correct = 0
        self.total_label = 0
"""

TRAIN = """\
import torch
import torchvision
from torch.utils.data import DataLoader

from metrics import SegmentationMetric


def validate(dataset):
    model = torchvision.models.segmentation.deeplabv3_resnet50(num_classes=21).cuda().eval()
    loader = DataLoader(dataset, batch_size=8, num_workers=4, pin_memory=True)
    metric = SegmentationMetric(21)
    with torch.no_grad():
        for i, (image, target) in enumerate(loader):
            image, target = image.cuda(non_blocking=True), target.cuda(non_blocking=True)
            output = model(image)["out"]
            metric.update(output, target)
            pix_acc, miou = metric.get()
    return metric.get()
"""

QUIET_METRICS = """\
import torch


def pixel_accuracy(output, target):
    predict = torch.argmax(output, 1)
    labeled = torch.sum(target > 0)
    correct = torch.sum((predict == target) * (target > 0))
    return correct, labeled


def histograms(output, target, nclass):
    predict = torch.argmax(output, 1).float()
    inter = torch.histc(predict, bins=nclass, min=0, max=nclass)
    return inter


class SegmentationMetric:
    def __init__(self, nclass):
        self.nclass = nclass
        self.reset()

    def update(self, preds, labels):
        def evaluate_worker(self, pred, label):
            correct, labeled = pixel_accuracy(pred, label)
            inter = histograms(pred, label, self.nclass)
            self.total_correct += correct
            self.total_label += labeled
            if self.total_inter.device != inter.device:
                self.total_inter = self.total_inter.to(inter.device)
            self.total_inter += inter

        if isinstance(preds, torch.Tensor):
            evaluate_worker(self, preds, labels)
        else:
            for pred, label in zip(preds, labels):
                evaluate_worker(self, pred, label)

    def get(self):
        return self.total_correct / max(self.total_label, 1), self.total_inter.mean().item()

    def reset(self):
        self.total_inter = torch.zeros(self.nclass)
        self.total_correct = 0
        self.total_label = 0
"""


def test_a_nested_worker_reads_every_validation_batch_reported_at_the_call(tmp_path, monkeypatch):
    assert lint_written(tmp_path, {"metrics.py": METRICS, "train.py": TRAIN}, monkeypatch) == ["train.py:16 GPU303"]


def test_the_update_every_fifty_batches_is_silent(tmp_path, monkeypatch):
    guarded = TRAIN.replace("            metric.update(output, target)", "            if i % 50 == 0:\n                metric.update(output, target)")
    assert guarded != TRAIN
    assert lint_written(tmp_path, {"metrics.py": METRICS, "train.py": guarded}, monkeypatch) == []


def test_a_nested_worker_without_reads_is_silent(tmp_path, monkeypatch):
    assert lint_written(tmp_path, {"metrics.py": QUIET_METRICS, "train.py": TRAIN}, monkeypatch) == []


def test_the_finding_counts_the_reads_each_call_makes(tmp_path, monkeypatch):
    from tests.projects_helper import lint, write

    diagnostics = lint(write(tmp_path, {"metrics.py": METRICS, "train.py": TRAIN}), monkeypatch)
    assert [d.message for d in diagnostics] == [
        "`metric.update(output, target)` (`.item()` at metrics.py:7, 3 reads a call) waits for the GPU every evaluation "
        "step (loop at line 13)"
    ]


def test_a_helper_with_one_read_names_no_count(tmp_path, monkeypatch):
    from tests.projects_helper import lint, write

    one = METRICS.replace("    labeled = torch.sum(target > 0).item()\n", "    labeled = torch.sum(target > 0)\n").replace(
        "torch.histc(predict.cpu(), bins", "torch.histc(predict, bins"
    )
    diagnostics = lint(write(tmp_path, {"metrics.py": one, "train.py": TRAIN}), monkeypatch)
    assert [d.message for d in diagnostics] == [
        "`metric.update(output, target)` (`.item()` at metrics.py:7) waits for the GPU every evaluation step (loop at line 13)"
    ]
