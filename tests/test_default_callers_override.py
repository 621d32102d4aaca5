"""A helper's parameter default that every call in the project overrides is not what ships (issue 13, eighth
corpus W1: lecture helpers `get_loaders(batch_size, num_workers=0)` whose every caller passes `num_workers=2`).
The loader facts read the callers: all in sight and all passing another value -> the default is not reported;
a caller that leaves the default, or passes the default's value, keeps the finding. Minimal projects of our own."""

from __future__ import annotations

from tests.projects_helper import lint_written

HELPER = """\
    from torch.utils.data import DataLoader
    from torchvision import datasets
    from torchvision.transforms import ToTensor


    def get_loaders(batch_size, num_workers=0):
        train = DataLoader(datasets.CIFAR10("data", transform=ToTensor()), batch_size=batch_size, num_workers=num_workers)
        return train
"""
TRAIN = """\
    import torch
    from helper_data import get_loaders

    model = torch.nn.Linear(10, 2).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in get_loaders({args}):
        loss = model(x.cuda()).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
FINDING = "helper_data.py:7 GPU101"


def _project(tmp_path, monkeypatch, *calls: str) -> list[str]:
    files = {"helper_data.py": HELPER, **{f"train{i}.py": TRAIN.format(args=args) for i, args in enumerate(calls)}}
    return lint_written(tmp_path, files, monkeypatch)


def test_every_caller_passing_workers_silences_the_default(tmp_path, monkeypatch):
    assert FINDING not in _project(tmp_path, monkeypatch, "256, num_workers=2", "128, 4")


def test_a_caller_that_leaves_the_default_keeps_the_finding(tmp_path, monkeypatch):
    assert FINDING in _project(tmp_path, monkeypatch, "256, num_workers=2", "128")


def test_a_caller_that_passes_zero_keeps_the_finding(tmp_path, monkeypatch):
    assert FINDING in _project(tmp_path, monkeypatch, "256, num_workers=2", "128, num_workers=0")


def test_a_caller_passing_a_run_time_value_keeps_the_finding(tmp_path, monkeypatch):
    assert FINDING in _project(tmp_path, monkeypatch, "256, num_workers=len([1, 2])")



def _notebook(source: str) -> str:
    import json

    return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})  # fmt: skip


def test_notebook_callers_are_read_too(tmp_path, monkeypatch):
    from tests.projects_helper import found, lint, write

    lesson = "from helper_data import get_loaders\ntrain_loader = get_loaders(256, num_workers={workers})\n"
    for workers, expected in (("2", False), ("0", True)):
        root = tmp_path / workers
        write(root, {"helper_data.py": HELPER, "train0.py": TRAIN.format(args="64, 4")})
        (root / "lesson.ipynb").write_text(_notebook(lesson.format(workers=workers)), encoding="utf-8")
        assert (FINDING in found(lint(root, monkeypatch, ["helper_data.py", "train0.py", "lesson.ipynb"]))) is expected
