"""A data module named like a test (`dataset_test.py`) that the training script imports, whose loaders a wrapper
object builds and the script's trainer gets from `self.dataset.get_data_loaders()` (MolCLR's fine-tuning shape):
a library module every rule reads, and loaders whose batches the trainer's epoch loop takes."""

from __future__ import annotations

from tests.projects_helper import found, lint, write

ONLY = {"select": ("GPU104",)}

DATA = """\
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset


    class Photos(Dataset):
        def __init__(self, paths):
            self.paths = paths

        def __getitem__(self, i):
            return torch.tensor(list(Image.open(self.paths[i]).getdata()), dtype=torch.float32)

        def __len__(self):
            return len(self.paths)


    class Wrapper(object):
        def __init__(self, batch_size, paths):
            self.batch_size = batch_size
            self.paths = paths

        def get_data_loaders(self):
            dataset = Photos(self.paths)
            train_loader = DataLoader(dataset, batch_size=self.batch_size, shuffle=True, num_workers=4)
            valid_loader = DataLoader(dataset, batch_size=self.batch_size, num_workers=4)
            return train_loader, valid_loader
"""

TRAIN = """\
    import torch
    from data.MODULE import Wrapper


    class FineTune(object):
        def __init__(self, dataset, epochs):
            self.dataset = dataset
            self.epochs = epochs
            self.device = "cuda"

        def train(self, model, optimizer):
            train_loader, valid_loader = self.dataset.get_data_loaders()
            for epoch in range(self.epochs):
                for x in train_loader:
                    optimizer.zero_grad()
                    model(x.to(self.device)).sum().backward()
                    optimizer.step()
                with torch.no_grad():
                    for x in valid_loader:
                        model(x.to(self.device))


    def main():
        model = torch.nn.Linear(4, 1).cuda()
        FineTune(Wrapper(32, ["a.png", "b.png"]), 100).train(model, torch.optim.SGD(model.parameters(), lr=0.1))


    if __name__ == "__main__":
        main()
"""


def _lint(tmp_path, monkeypatch, module: str = "wrap", data: str = DATA, train: str = TRAIN, folder: str = "data"):
    files = {f"{folder}/{module}.py": data, "train.py": train.replace("data.MODULE", f"{folder.replace('/', '.')}.{module}")}
    return sorted(found(lint(write(tmp_path, files), monkeypatch, **ONLY)))


def test_loaders_a_handed_wrapper_returns_are_iterated_by_the_trainers_epoch_loop(tmp_path, monkeypatch):
    """`self.dataset.get_data_loaders()` on the object the trainer's constructor was handed: the method of the class
    every construction hands it, whose loaders the epoch loop then iterates (train and validation)."""
    assert _lint(tmp_path, monkeypatch) == ["data/wrap.py:24 GPU104", "data/wrap.py:25 GPU104"]


def test_loaders_built_anew_in_each_epoch_are_not_reported(tmp_path, monkeypatch):
    """The trainer asks the wrapper for new loaders in every epoch: nothing outlives a pass."""
    train = TRAIN.replace(
        "            train_loader, valid_loader = self.dataset.get_data_loaders()\n            for epoch in range(self.epochs):\n",
        "            for epoch in range(self.epochs):\n                train_loader, valid_loader = self.dataset.get_data_loaders()\n",
    )
    assert train != TRAIN
    assert _lint(tmp_path, monkeypatch, train=train) == []


def test_a_data_module_named_like_a_test_that_the_script_imports_is_read(tmp_path, monkeypatch):
    """`data/dataset_test.py` holds no test and train.py imports it: a library module, not a test file."""
    assert _lint(tmp_path, monkeypatch, module="dataset_test") == [
        "data/dataset_test.py:24 GPU104",
        "data/dataset_test.py:25 GPU104",
    ]


def test_a_real_test_module_or_one_in_a_tests_folder_stays_a_test(tmp_path, monkeypatch):
    """A module of that name that holds a test (a `test_` function, a pytest import) is a test file, and so is one
    in a `tests/` folder, whoever imports it: the rules that skip tests skip it."""
    with_test = DATA + "\n\ndef test_wrapper():\n    assert Wrapper(2, []).batch_size == 2\n"
    assert _lint(tmp_path / "a", monkeypatch, module="dataset_test", data=with_test) == []
    with_pytest = "import pytest\n" + DATA
    assert _lint(tmp_path / "b", monkeypatch, module="dataset_test", data=with_pytest) == []
    assert _lint(tmp_path / "c", monkeypatch, module="dataset_test", folder="tests") == []


def test_a_module_named_like_a_test_that_nothing_imports_stays_a_test(tmp_path, monkeypatch):
    files = {"data/dataset_test.py": DATA, "train.py": TRAIN.replace("from data.MODULE import Wrapper\n", "")}
    assert sorted(found(lint(write(tmp_path, files), monkeypatch, **ONLY))) == []
