"""A data set a library builds on the device it is given holds GPU tensors (`analysis/device_datasets.py`):
workers cannot fork them, GPU101 stays silent for a loader over it.

Shape after learn2learn's supervised pre-training example (seventeenth corpus, both judges: wrong): the script
asks a library for its task sets with `device=data_device` (the CUDA device when `--cuda` is given), takes
`tasks.dataset` and wraps it in a `DataLoader` that a training loop of another module reads. Negatives beside it:
the host device, no device, `device=None`, a function of this project given the device (its code decides), and a
value the library call returned that is not its data (`len(tasks)`).
"""

from __future__ import annotations

from tests.projects_helper import lint_written

TRAIN = """
import torch


def train(model, loader, device, epochs):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
"""


def script(build: str, dataset: str = "tasks.dataset", helper: str = "") -> str:
    return f"""
import argparse
import torch
import fewshot
from torch.utils.data import DataLoader
from lib.loop import train
{helper}

def main(args):
    device = torch.device("cpu")
    if args.cuda and torch.cuda.device_count():
        device = torch.device("cuda")
    data_device = device
{build}    loader = DataLoader({dataset}, batch_size=64, shuffle=True)
    model = torch.nn.Linear(84, 5).to(device)
    train(model, loader, device, 100)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    main(parser.parse_args())
"""


TASKSETS = '    tasks, valid, test = fewshot.get_tasksets("mini-imagenet", device={device})\n'


def _lint(tmp_path, monkeypatch, text: str) -> list[str]:
    files = {"lib/__init__.py": "", "lib/loop.py": TRAIN, "run.py": text}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] == "GPU101"]


REPORTED = ["run.py:15 GPU101"]


def test_task_sets_built_on_a_device_chosen_at_run_time(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, script(TASKSETS.format(device="data_device"))) == []


def test_data_set_class_given_a_cuda_device(tmp_path, monkeypatch):
    build = '    base = fewshot.MiniImagenet("~/data")\n    dataset = fewshot.OnDeviceDataset(base, device="cuda")\n'
    assert _lint(tmp_path, monkeypatch, script(build, dataset="dataset")) == []


def test_a_split_of_what_the_library_built_on_the_device(tmp_path, monkeypatch):
    build = '    splits = fewshot.load_splits("mini-imagenet", device=torch.device("cuda"))\n'
    assert _lint(tmp_path, monkeypatch, script(build, dataset='splits["train"]')) == []


def test_task_sets_on_the_host_keep_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, script(TASKSETS.format(device='"cpu"'))) == REPORTED
    assert _lint(tmp_path, monkeypatch, script(TASKSETS.format(device='torch.device("cpu")'))) == REPORTED


def test_no_device_or_none_keeps_the_finding(tmp_path, monkeypatch):
    build = '    tasks, valid, test = fewshot.get_tasksets("mini-imagenet")\n'
    assert _lint(tmp_path, monkeypatch, script(build)) == REPORTED
    assert _lint(tmp_path, monkeypatch, script(TASKSETS.format(device="None"))) == REPORTED


def test_a_project_function_given_the_device_keeps_the_finding(tmp_path, monkeypatch):
    helper = (
        "\n\ndef make_dataset(name, device):\n    data = fewshot.MiniImagenet(name)\n    data.device = device\n"
        "    return data\n"
    )
    build = '    dataset = make_dataset("mini-imagenet", device=data_device)\n'
    text = script(build, dataset="dataset", helper=helper)
    found = _lint(tmp_path, monkeypatch, text)
    assert [f.split()[-1] for f in found] == ["GPU101"]


def test_a_count_of_what_the_library_built_is_not_its_data(tmp_path, monkeypatch):
    build = TASKSETS.format(device="data_device") + "    dataset = fewshot.Indices(len(tasks))\n"
    assert _lint(tmp_path, monkeypatch, script(build, dataset="dataset")) == ["run.py:16 GPU101"]
