"""A dataset class of another module whose rows are a tensor it builds in one of its own methods
(`self.data = self.batchify(...)`, returning `data.view(b, -1).t().contiguous()`), and whose `__getitem__` only
indexes it, hands out rows held in memory: GPU101 (no loader workers) is silent for it, in the class's module
or another. A class whose `__getitem__` opens a file, or whose method hands back what it was given unchanged
(here a memory-mapped array), stays reported."""

from __future__ import annotations

import ast

from gpulint.analysis.held_data import held_data
from tests.projects_helper import lint_written

DATA = """\
import torch
from torch.utils.data import Dataset


class Batched(Dataset):
    def __init__(self, corpus, batch_size=20, valid=False):
        self.batch_size = batch_size
        self.valid = valid
        self.corpus = corpus
        self.data = self.batchify()

    def batchify(self):
        data = self.corpus.val if self.valid else self.corpus.train
        nbatch = data.size(0) // self.batch_size
        data = data.narrow(0, 0, nbatch * self.batch_size)
        data = data.view(self.batch_size, -1).t().contiguous()
        return data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


class Rows(Dataset):
    def __init__(self, data, batch_size):
        self.batch_size = batch_size
        self.data = self.batchify(data)

    def batchify(self, data):
        nbatch = data.size(0) // self.batch_size
        data = data.narrow(0, 0, nbatch * self.batch_size)
        data = data.contiguous().view(self.batch_size, -1).t().contiguous()
        return data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


class Files(Dataset):
    def __init__(self, root):
        self.files = self.listing(root)

    def listing(self, root):
        files = sorted(root.glob("*.pt"))
        return files

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with open(self.files[i], "rb") as f:
            return torch.load(f)


class Unchanged(Dataset):
    def __init__(self, data):
        self.data = self.prepare(data)

    def prepare(self, data):
        if data is None:
            data = []
        return data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]
"""

TRAIN = """\
import sys
import numpy
import torch
from torch.utils.data import DataLoader
from data import DATASET

model = torch.nn.Linear(20, 2).cuda()
dataset = DATASET(numpy.load(sys.argv[1], mmap_mode="r"), 20)
loader = DataLoader(dataset, batch_size=32, shuffle=True)
for epoch in range(10):
    for x in loader:
        x = x.cuda()
        model(x.float()).sum().backward()
"""


def _qualify(node: ast.AST):
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
        return "torch." + node.attr
    return None


def test_the_summary_follows_a_method_of_the_class_that_returns_a_tensor():
    facts = held_data(ast.parse(DATA), _qualify)
    assert facts == {"Batched": {"items": []}, "Rows": {"items": []}}


def _gpu101(tmp_path, monkeypatch, dataset: str) -> list[str]:
    files = {"data.py": DATA, "train.py": TRAIN.replace("DATASET", dataset)}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU101")]


def test_a_dataset_of_rows_its_own_method_batchifies_is_silent(tmp_path, monkeypatch):
    assert _gpu101(tmp_path / "a", monkeypatch, "Batched") == []
    assert _gpu101(tmp_path / "b", monkeypatch, "Rows") == []


def test_a_dataset_that_opens_a_file_per_item_is_reported(tmp_path, monkeypatch):
    assert _gpu101(tmp_path, monkeypatch, "Files") == ["train.py:9 GPU101"]


def test_a_dataset_whose_method_hands_back_what_it_was_given_is_reported(tmp_path, monkeypatch):
    assert _gpu101(tmp_path, monkeypatch, "Unchanged") == ["train.py:9 GPU101"]


def _one_module(tmp_path, monkeypatch, dataset: str) -> list[str]:
    source = DATA + TRAIN.replace("from data import DATASET\n", "").replace("DATASET", dataset).replace("import sys\n", "import sys\n\n")
    return [f for f in lint_written(tmp_path, {"train.py": source}, monkeypatch) if f.endswith("GPU101")]


def test_in_one_module_a_dataset_of_rows_its_own_method_batchifies_is_silent(tmp_path, monkeypatch):
    assert _one_module(tmp_path / "a", monkeypatch, "Batched") == []
    assert _one_module(tmp_path / "b", monkeypatch, "Rows") == []


def test_in_one_module_datasets_that_open_files_or_hold_what_they_were_given_are_reported(tmp_path, monkeypatch):
    line = DATA.count("\n") + 9
    assert _one_module(tmp_path / "a", monkeypatch, "Files") == [f"train.py:{line} GPU101"]
    assert _one_module(tmp_path / "b", monkeypatch, "Unchanged") == [f"train.py:{line} GPU101"]


SQUAD = """\
import os
import torch
from transformers import squad_convert_examples_to_features


def load_examples(path, processor, tokenizer, evaluate=False):
    cached = path + ".cache"
    if os.path.exists(cached):
        saved = torch.load(cached)
        features, dataset, examples = saved["features"], saved["dataset"], saved["examples"]
    else:
        examples = processor.get_train_examples(path)
        features, dataset = squad_convert_examples_to_features(
            examples=examples, tokenizer=tokenizer, max_seq_length=384, is_training=not evaluate, RETURN
        )
        torch.save({"features": features, "dataset": dataset, "examples": examples}, cached)
    return dataset, examples, features
"""

SQUAD_TRAIN = """\
import sys
import torch
from torch.utils.data import DataLoader
from data import load_examples

model = torch.nn.Linear(384, 2).cuda()
dataset, _, _ = load_examples(sys.argv[1], None, None)
loader = DataLoader(dataset, batch_size=32, shuffle=True)
for epoch in range(2):
    for ids, mask in loader:
        model(ids.cuda().float()).sum().backward()
"""


def test_a_helper_returning_squad_features_converted_to_a_tensor_dataset_is_silent(tmp_path, monkeypatch):
    files = {"data.py": SQUAD.replace("RETURN", 'return_dataset="pt"'), "train.py": SQUAD_TRAIN}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU101")] == []


def test_squad_features_not_converted_to_tensors_are_reported(tmp_path, monkeypatch):
    files = {"data.py": SQUAD.replace("RETURN", 'return_dataset="tf"'), "train.py": SQUAD_TRAIN}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU101")] == ["train.py:8 GPU101"]
