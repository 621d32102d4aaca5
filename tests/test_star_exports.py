"""`from torch.utils.data import *` binds torch.utils.data's public names (`imports.STAR_EXPORTS`): a lesson's
`TensorDataset(torch.tensor(X), torch.tensor(y))` over sklearn's `make_moons` points is in-memory data, and GPU101 /
GPU102 stay silent for its loaders (seventeenth corpus, both judges: noise, a chapter that also star-imports the
book's helper module, which re-exports `DataLoader`). Negatives: a data set of files through the same star import,
and a star import of another library, which binds nothing known (`TensorDataset` stays unresolved).
"""

from __future__ import annotations

from tests.projects_helper import lint_written

HELPERS = """
import torch
from torch.utils.data import Dataset, DataLoader


def train_simple_network(model, train_loader, epochs=5, device="cuda"):
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
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
STAR
from helpers import *
from sklearn.datasets import make_moons

X_train, y_train = make_moons(n_samples=8000, noise=0.4)
train_dataset = DATASET
training_loader = DataLoader(train_dataset, batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(2, 30), nn.Tanh(), nn.Linear(30, 2))
train_simple_network(model, training_loader, epochs=5, device="cuda")
"""
IN_MEMORY = "TensorDataset(torch.tensor(X_train, dtype=torch.float32), torch.tensor(y_train, dtype=torch.long))"


def _lint(tmp_path, monkeypatch, star="from torch.utils.data import *", dataset=IN_MEMORY) -> list[str]:
    lesson = LESSON.replace("STAR", star).replace("DATASET", dataset)
    files = {"helpers.py": HELPERS, "lesson.py": lesson}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] in ("GPU101", "GPU102")]


def test_tensor_dataset_through_a_star_import_is_in_memory(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch) == []


def test_files_through_the_star_import_keep_the_finding(tmp_path, monkeypatch):
    dataset = "ImageFolder('photos')"
    star = "from torch.utils.data import *\nfrom torchvision.datasets import ImageFolder"
    assert "lesson.py:11 GPU101" in _lint(tmp_path, monkeypatch, star=star, dataset=dataset)


def test_another_librarys_star_import_binds_nothing_known(tmp_path, monkeypatch):
    assert "lesson.py:10 GPU101" in _lint(tmp_path, monkeypatch, star="from tensorlib import *")
