"""Datasets whose per-item transform moves every item to the GPU (`analysis/dataloaders.py`,
`produces_cuda_batches`): the loader yields CUDA tensors, so workers forked from the training process would have to
initialise CUDA and `pin_memory` cannot pin them. GPU101/GPU102 stay silent and the fix adds neither; a transform
that stays on the host, or one construction of the dataset without the moving transform, keeps both findings."""

from __future__ import annotations

from tests.conftest import fixed, findings

SOURCE = """\
import torch
from torch.utils.data import DataLoader
from mydata import PairDataset

device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def push_to_device(tensor):
    return tensor.to(device)


def as_float(tensor):
    return tensor.float()


x_train, y_train = torch.load("train.pt")
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
{dataset}
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
for epoch in range(10):
    for xb, yb in loader:
        loss = torch.nn.functional.cross_entropy(model(xb.to(device)), yb.to(device))
        loss.backward()
        opt.step()
        opt.zero_grad()
"""

MOVING = "train_ds = PairDataset(x_train, y_train, transform=push_to_device, target_transform=push_to_device)"


def loader_findings(dataset: str) -> list[str]:
    return findings(SOURCE.format(dataset=dataset), select=("GPU101", "GPU102"))


def test_a_dataset_whose_transform_moves_items_to_the_gpu_is_not_reported_nor_fixed():
    assert loader_findings(MOVING) == []
    assert loader_findings('train_ds = PairDataset(x_train, y_train, transform=lambda t: t.to("cuda"))') == []
    source = SOURCE.format(dataset=MOVING)
    assert fixed(source, select=("GPU101", "GPU102")) == source


def test_a_transform_that_stays_on_the_host_keeps_both_findings():
    assert loader_findings("train_ds = PairDataset(x_train, y_train, transform=as_float)") == ["20:10 GPU101", "20:10 GPU102"]


def test_one_construction_without_the_moving_transform_keeps_both_findings():
    dataset = f"if torch.cuda.is_available():\n    {MOVING}\nelse:\n    train_ds = PairDataset(x_train, y_train)"
    assert loader_findings(dataset) == ["23:10 GPU101", "23:10 GPU102"]
