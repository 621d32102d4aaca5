"""GPU101 in a recipe notebook (the twentieth corpus): loaders handed to a training function inside a dict of
settings (`train_val(model, {"train_dl": train_dl, ...})`, read back as `params["train_dl"]`), a dataset class
written as stubs whose methods later cells assign (`Data.__getitem__ = __getitem__`), and a per-item transform
given a size (`Resize(h, w)`) that is no CUDA device."""

from __future__ import annotations

from tests.test_notebooks import check, notebook

DATASET = """\
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

class Photos(Dataset):
    def __init__(self, paths, labels):
        self.paths, self.labels = paths, labels

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, idx):
        return torch.as_tensor(list(Image.open(self.paths[idx]).getdata())), self.labels[idx]
"""
STUB = """\
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

class Photos(Dataset):
    def __init__(self, paths, labels):
        pass

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, idx):
        pass
"""
METHODS = """\
def __init__(self, paths, labels):
    self.paths, self.labels = paths, labels

def __getitem__(self, idx):
    return torch.as_tensor(list(Image.open(self.paths[idx]).getdata())), self.labels[idx]
"""
ASSIGNED = "Photos.__init__ = __init__\nPhotos.__getitem__ = __getitem__\n"
CHEAP_METHODS = """\
def __getitem__(self, idx):
    return self.paths[idx], self.labels[idx]
"""
LOADERS = """\
train_ds = Photos(paths, labels)
train_dl = DataLoader(train_ds, batch_size=8, shuffle=True)
"""
TRAIN = """\
device = torch.device("cuda")
model = torch.nn.Linear(10, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def loss_epoch(model, dataset_dl, opt=None):
    for xb, yb in dataset_dl:
        loss = model(xb.to(device)).sum()
        if opt is not None:
            opt.zero_grad()
            loss.backward()
            opt.step()

def train_val(model, params):
    train_dl = params["train_dl"]
    for epoch in range(params["num_epochs"]):
        loss_epoch(model, train_dl, params["optimizer"])
"""
PEEK = """\
for xb, yb in train_dl:
    print(xb.shape)
    break
"""


def _codes(*cells: str) -> list[str]:
    report = check(notebook(*cells), select=("GPU101",))
    return [f"{d.location.row}:{d.location.column} {d.code}" for d in report.diagnostics]


def test_a_loader_handed_in_a_dict_of_settings_to_the_training_function_is_reported():
    run = 'params_train = {"num_epochs": 10, "optimizer": opt, "train_dl": train_dl}\ntrain_val(model, params_train)\n'
    assert _codes(DATASET, LOADERS, PEEK, TRAIN, run) == ["16:12 GPU101"]


def test_the_dict_rebuilt_cell_after_cell_with_the_same_loader_is_still_followed():
    first = 'params_train = {"num_epochs": 1, "optimizer": opt, "train_dl": train_dl}\ntrain_val(model, params_train)\n'
    second = 'params_train = {"num_epochs": 10, "optimizer": opt, "train_dl": train_dl}\ntrain_val(model, params_train)\n'
    assert _codes(DATASET, LOADERS, PEEK, TRAIN, first, second) == ["16:12 GPU101"]


def test_a_loader_only_peeked_at_and_a_dict_that_holds_another_entry_stay_silent():
    # the dict hands the training function another loader under the key it reads: this one is only peeked at
    other = 'other_dl = DataLoader(Photos(paths, labels), batch_size=8, num_workers=4)\n'
    run = 'params_train = {"num_epochs": 10, "optimizer": opt, "train_dl": other_dl, "spare": train_dl}\ntrain_val(model, params_train)\n'
    assert _codes(DATASET, LOADERS, PEEK, TRAIN, other, run) == []


def test_methods_assigned_to_a_stub_class_in_later_cells_are_what_each_item_runs():
    run = 'train_val(model, {"num_epochs": 10, "optimizer": opt, "train_dl": train_dl})\n'
    assert _codes(STUB, METHODS, ASSIGNED, LOADERS, TRAIN, run) == ["25:12 GPU101"]


def test_an_assigned_method_replaces_what_the_class_body_says():
    # the class body decodes a file per item, but the notebook puts a method in its place that makes none
    run = 'train_val(model, {"num_epochs": 10, "optimizer": opt, "train_dl": train_dl})\n'
    cheap = "def __getitem__(self, idx):\n    return torch.zeros(10), 0\n\nPhotos.__getitem__ = __getitem__\n"
    assert _codes(DATASET, cheap, LOADERS, TRAIN, run) == []
    # and without the assignment the class's own method decides
    assert _codes(DATASET, cheap.replace("Photos.__getitem__ = __getitem__", "pass"), LOADERS, TRAIN, run) == ["21:12 GPU101"]


def test_a_class_with_methods_assigned_elsewhere_keeps_its_own_cheap_getitem():
    held = """\
import torch
from torch.utils.data import DataLoader, Dataset

class Rows(Dataset):
    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return self.x[idx], 0
"""
    length = "def __len__(self):\n    return len(self.x)\n\nRows.__len__ = __len__\n"
    loaders = "train_dl = DataLoader(Rows(torch.randn(640, 10)), batch_size=8, shuffle=True)\n"
    run = 'train_val(model, {"num_epochs": 10, "optimizer": opt, "train_dl": train_dl})\n'
    assert _codes(held, length, loaders, TRAIN, run) == []


RESIZED = """\
import torch
from PIL import Image
from albumentations import Resize
from torch.utils.data import DataLoader, Dataset

h, w = 128, 192

class Scans(Dataset):
    def __init__(self, paths, transform=None):
        self.paths, self.transform = paths, transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, idx):
        image = Image.open(self.paths[idx])
        if self.transform:
            image = self.transform(image=image)["image"]
        return torch.as_tensor(image)

val_dl = DataLoader(Scans(paths, transform={transform}), batch_size=16)
device = torch.device("cuda")
model = torch.nn.Linear(10, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for xb in val_dl:
        loss = model(xb.to(device)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_transform_given_a_size_is_no_cuda_device():
    assert _codes(RESIZED.format(transform="Resize(h, w)")) == ["21:10 GPU101"]


def test_a_transform_given_a_cuda_device_still_makes_cuda_items():
    source = RESIZED.format(transform="to_cuda").replace("h, w = 128, 192", "h, w = 128, 192\nto_cuda = lambda image: image.to(device)")
    source = source.replace('device = torch.device("cuda")\nmodel', "model").replace("class Scans", 'device = torch.device("cuda")\n\nclass Scans')
    assert _codes(source) == []
