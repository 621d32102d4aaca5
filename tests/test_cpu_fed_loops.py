"""Loops that feed the loader's CPU batches to a model moved to the run's device: only a CPU run works, so the
GPU-underuse findings in them and on the loaders only they read are dropped (`analysis/cpu_fed_loops.py`)."""

from __future__ import annotations

import pytest

from tests.conftest import diagnostics
from tests.test_notebooks import check, notebook

SETUP = """\
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torch.utils.data import DataLoader

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
trainset = torchvision.datasets.FashionMNIST("./data", train=True, transform=torchvision.transforms.ToTensor())
trainloader = DataLoader(trainset, batch_size=4, shuffle=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(784, 4096), nn.ReLU(), nn.Linear(4096, 10))  # 3.3M parameters: not a toy

    def forward(self, x):
        return self.fc(x.view(-1, 784))


def plot_preds(net, images, labels):
    return net(images).argmax(1) == labels
"""

MODEL = """\
net = Net().to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
"""

LOOP = """\
for epoch in range(10):
    running_loss = 0.0
    for i, data in enumerate(trainloader, 0):
        inputs, labels = data{move}
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        running_loss += loss.item()
        if i % 1000 == 999:
            print(running_loss / 1000, plot_preds(net, inputs, labels), len(trainloader))
"""


def rows(source: str, path: str = "train.py") -> list[tuple[str, int]]:
    return [(d.code, d.location.row) for d in diagnostics(source, path)]


def test_a_gpu_model_fed_cpu_batches_gets_no_findings_in_its_loop_or_on_its_loader() -> None:
    # On a GPU the first forward raises: only a CPU run works, so no finding is about GPU use.
    source = SETUP + MODEL + LOOP.format(move="")
    assert [code for code, _ in rows(source)] == []


def test_the_same_notebook_gets_no_findings() -> None:
    report = check(notebook(SETUP, MODEL, LOOP.format(move="")), "demo.ipynb")
    assert [d.code for d in report.diagnostics] == []


@pytest.mark.parametrize(
    "move",
    [
        "\n        inputs, labels = inputs.to(device), labels.to(device)",  # moved in the loop
        "\n        inputs = inputs.cuda()",
        "\n        inputs, labels = to_device((inputs, labels))",  # a helper that may move them
    ],
)
def test_batches_moved_to_the_device_keep_the_findings(move: str) -> None:
    source = "from helpers import to_device\n" + SETUP + MODEL + LOOP.format(move=move)
    found = rows(source)
    assert ("GPU303", source.splitlines().index("        running_loss += loss.item()") + 1) in found
    assert "GPU103" in [code for code, _ in found]


def test_a_model_whose_forward_moves_its_input_keeps_the_findings() -> None:
    source = (SETUP + MODEL + LOOP.format(move="")).replace("return self.fc(x.view(-1, 784))", "return self.fc(x.to(self.fc.weight.device))")
    assert "GPU303" in [code for code, _ in rows(source)]


def test_a_loader_with_a_collate_fn_keeps_the_findings() -> None:
    source = (SETUP + MODEL + LOOP.format(move="")).replace("shuffle=True)", "shuffle=True, collate_fn=collate)")
    assert "GPU303" in [code for code, _ in rows("from helpers import collate\n" + source)]


def test_a_loader_also_read_by_a_loop_that_moves_its_batches_keeps_its_finding() -> None:
    other = "for x, y in trainloader:\n    print(net(x.to(device)).sum().item())\n"
    found = [code for code, _ in rows(SETUP + MODEL + LOOP.format(move="") + other)]
    assert "GPU103" in found


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # a dataset of CUDA tensors: its batches are on the GPU already
        (
            'trainset = torchvision.datasets.FashionMNIST("./data", train=True, transform=torchvision.transforms.ToTensor())',
            "trainset = torch.utils.data.TensorDataset(torch.load(\"x.pt\").cuda(), torch.load(\"y.pt\").cuda())",
        ),
        # a transform that moves each sample
        (
            "transform=torchvision.transforms.ToTensor())",
            "transform=push_to_device)\ndef push_to_device(x):\n    return x.to(device)\n",
        ),
    ],
)
def test_a_dataset_that_may_hold_gpu_tensors_keeps_the_findings(old: str, new: str) -> None:
    source = (SETUP + MODEL + LOOP.format(move="")).replace(old, new)
    assert "GPU103" in [code for code, _ in rows(source)]  # the loader's batch size of 4, as before


def test_a_data_parallel_model_scatters_cpu_batches_and_keeps_the_findings() -> None:
    source = (SETUP + MODEL + LOOP.format(move="")).replace("net = Net().to(device)", "net = nn.DataParallel(Net()).to(device)")
    assert "GPU303" in [code for code, _ in rows(source)]
