"""GPU101 and a loader over a `random_split` part of a handful of batches (`analysis/small_splits.py`): a lesson's
256-text training split at `batch_size=32` is 8 batches a pass, and restarting the fix's workers every pass costs
about what they would save (seventeenth corpus, both judges: noise). Negatives: the large part of the same split
(its length is computed), a split of many batches, and a split of a torchvision data set (images decoded per
sample: ten batches of them are seconds).
"""

from __future__ import annotations

from tests.projects_helper import lint_written

HELPERS = """
import torch


def train_network(model, train_loader, epochs=10, device="cuda"):
    model.to(device)
    opt = torch.optim.Adam(model.parameters())
    for epoch in range(epochs):
        for x, y in train_loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
"""

LESSON = """
import torch
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader
from helpers import train_network
from texts import TextDataset, pad_batch

full = DATA
small, rest = torch.utils.data.random_split(full, LENGTHS)
loader = DataLoader(PART, batch_size=32, shuffle=True, collate_fn=pad_batch)
model = nn.Sequential(nn.EmbeddingBag(20000, 64), nn.Linear(64, 4))
train_network(model, loader, epochs=10, device="cuda")
"""
TEXTS = 'TextDataset("ag_news_train.csv")'
TEXT_MODULE = """
import csv
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset


class TextDataset(Dataset):
    def __init__(self, path):
        with open(path) as f:
            self.rows = list(csv.reader(f))

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        label, text = self.rows[i]
        return int(label), text


def tokenize(text):
    return [hash(word) % 20000 for word in text.lower().split()]


def pad_batch(batch):
    labels = [label for label, _ in batch]
    texts = [torch.tensor(tokenize(text), dtype=torch.int64) for _, text in batch]
    longest = max(t.size(0) for t in texts)
    texts = [F.pad(t, (0, longest - t.size(0))) for t in texts]
    return torch.stack(texts), torch.tensor(labels)
"""


def _lint(tmp_path, monkeypatch, data=TEXTS, lengths="(256, len(full) - 256)", part="small") -> list[str]:
    lesson = LESSON.replace("DATA", data).replace("LENGTHS", lengths).replace("PART", part)
    files = {"helpers.py": HELPERS, "texts.py": TEXT_MODULE, "lesson.py": lesson}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] == "GPU101"]


REPORTED = ["lesson.py:11 GPU101"]


def test_a_split_of_eight_batches_is_silent(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch) == []


def test_a_split_written_from_the_batch_size_is_silent(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, lengths="[32 * 2, len(full) - 32 * 2]") == []


def test_the_large_part_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, part="rest") == REPORTED


def test_a_split_of_many_batches_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, lengths="(2000, len(full) - 2000)") == REPORTED


def test_a_split_of_images_keeps_the_finding(tmp_path, monkeypatch):
    data = 'torchvision.datasets.ImageFolder("photos", transform=torchvision.transforms.ToTensor())'
    assert _lint(tmp_path, monkeypatch, data=data) == REPORTED


# One evaluation pass beside training that a project helper runs for several epochs (`one_off_passes._trains_for_epochs`):
# a notebook cell builds a loader and the next cell reads it once under `no_grad` (seventeenth corpus, both judges:
# noise). Negatives: a helper given one epoch (one pass of training beside one of evaluation), and the same loader
# handed to the helper (read every epoch).
EVALUATION = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from helpers import train_network
from texts import TextDataset, pad_batch

train_loader = DataLoader(TextDataset("train.csv"), batch_size=32, shuffle=True, collate_fn=pad_batch)
model = nn.Sequential(nn.EmbeddingBag(20000, 64), nn.Linear(64, 4))
train_network(model, TRAINED, epochs=EPOCHS, device="cuda")
test_loader = DataLoader(TextDataset("test.csv"), batch_size=32, collate_fn=pad_batch)
preds = []
with torch.no_grad():
    for x, y in test_loader:
        preds.append(model(x.to("cuda")).argmax(1).cpu())
"""


def _lint_evaluation(tmp_path, monkeypatch, epochs="10", trained="train_loader") -> list[str]:
    lesson = EVALUATION.replace("EPOCHS", epochs).replace("TRAINED", trained)
    files = {"helpers.py": HELPERS, "texts.py": TEXT_MODULE, "lesson.py": lesson}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] == "GPU101"]


def test_one_evaluation_pass_beside_a_helper_that_trains_for_epochs_is_silent(tmp_path, monkeypatch):
    assert _lint_evaluation(tmp_path, monkeypatch) == ["lesson.py:8 GPU101"]


def test_a_helper_given_one_epoch_keeps_the_evaluation_finding(tmp_path, monkeypatch):
    assert _lint_evaluation(tmp_path, monkeypatch, epochs="1") == ["lesson.py:11 GPU101", "lesson.py:8 GPU101"]
