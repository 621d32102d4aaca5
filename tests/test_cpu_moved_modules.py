"""A loop whose function first moves the module it runs to the CPU (`encoder = encoder.cpu()`) feeds no GPU
(`loader_flow.run_on_moved_cpu_modules`): GPU101 stays silent for its loader (seventeenth corpus, both judges:
noise, a notebook's `encode_batch` that projects a data set for a plot). Negatives: the module left where it was
(on the GPU), moved to a device the script sets to the CPU (a setting, changed at launch), and moved to CUDA.
"""

from __future__ import annotations

from tests.projects_helper import lint_written

DATA = """
import torchvision

def mnist(train):
    return torchvision.datasets.MNIST("./", train=train, transform=torchvision.transforms.ToTensor(), download=True)
"""

SCRIPT = """
import numpy as np
import torch
from torch.utils.data import DataLoader
from data import mnist


def encode_batch(encoder, dataset):
    projected = []
    encoder = encoder.eval()
    MOVE
    with torch.no_grad():
        for x, y in DataLoader(dataset, batch_size=128):
            projected.append(encoder(x.cpu()).numpy())
    return np.vstack(projected)


encoder = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 2)).cuda()
opt = torch.optim.Adam(encoder.parameters())
train = DataLoader(mnist(True), batch_size=128, shuffle=True, num_workers=4)
for epoch in range(10):
    for x, _ in train:
        loss = encoder(x.cuda()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
for step in range(3):
    projected = encode_batch(encoder, mnist(False))
"""


def _lint(tmp_path, monkeypatch, move: str) -> list[str]:
    files = {"data.py": DATA, "run.py": SCRIPT.replace("MOVE", move)}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] == "GPU101"]


def test_a_module_moved_to_the_cpu_feeds_no_gpu(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, "encoder = encoder.cpu()") == []
    assert _lint(tmp_path, monkeypatch, 'encoder = encoder.to("cpu")') == []


def test_a_module_left_in_place_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, "pass") == ["run.py:13 GPU101"]


def test_a_device_setting_of_cpu_keeps_the_finding(tmp_path, monkeypatch):
    # `device = "cpu"` is the script's setting, changed at launch (`cpu_as_shipped.py`), not a move for this loop
    assert _lint(tmp_path, monkeypatch, 'device = "cpu"\n    encoder = encoder.to(device)') == ["run.py:14 GPU101"]


def test_a_module_moved_to_cuda_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, 'encoder = encoder.to("cuda")') == ["run.py:13 GPU101"]
