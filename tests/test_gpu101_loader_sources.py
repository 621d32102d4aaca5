"""GPU101 for loaders the code does not build with `DataLoader(...)` itself: a library dataset's own loader method
(pytorch-forecasting's `TimeSeriesDataSet.to_dataloader`), a graph library's loader over a dataset transformed per
item (PyG's `QM9(path, transform=...)`), and a factory of another module whose worker count is a method default an
estimator keeps (`fit(..., num_workers=0)` -> `self.num_workers` -> `create_dataloaders(..., self.num_workers)`)."""

from __future__ import annotations

import textwrap

from tests.conftest import diagnostics, findings, fixed
from tests.projects_helper import found, lint, write

FORECASTING = """\
    import pandas as pd
    import pytorch_lightning as pl
    from pytorch_forecasting import TimeSeriesDataSet
    from pytorch_forecasting.models import NHiTS

    df = pd.read_csv("data.csv")
    training = TimeSeriesDataSet(df, time_idx="t", target="y", group_ids=["g"], max_encoder_length=48)
    validation = TimeSeriesDataSet.from_dataset(training, df, stop_randomization=True)
    train_dataloader = training.to_dataloader(train=True, batch_size=256{workers})
    val_dataloader = validation.to_dataloader(train=False, batch_size=256{workers})
    model = NHiTS.from_dataset(training)
    trainer = pl.Trainer(accelerator="gpu", devices=1, max_epochs=20)
    trainer.fit(model, train_dataloaders=train_dataloader, val_dataloaders=val_dataloader)
    """


def test_time_series_loaders_without_workers_are_reported():
    source = FORECASTING.format(workers=", num_workers=0")
    assert findings(source, select=("GPU101",)) == ["9:20 GPU101", "10:18 GPU101"]
    (train, _) = [d for d in diagnostics(source) if d.code == "GPU101"]
    assert train.message.startswith("`DataLoader` uses `num_workers=0`")


def test_time_series_loader_left_without_a_count_is_fixed_in_the_method_call():
    source = """\
        from pytorch_forecasting import TimeSeriesDataSet
        import pytorch_lightning as pl


        def main(df, model):
            training = TimeSeriesDataSet(df, time_idx="t", target="y", group_ids=["g"])
            loader = training.to_dataloader(batch_size=256)
            pl.Trainer(accelerator="gpu").fit(model, train_dataloaders=loader)


        if __name__ == "__main__":
            main(load(), build())
        """
    assert findings(source, select=("GPU101",)) == ["7:14 GPU101"]
    assert "loader = training.to_dataloader(batch_size=256, num_workers=min(8, max(1," in fixed(source, select=("GPU101",))


def test_time_series_loaders_with_workers_and_other_to_dataloader_methods_stay_silent():
    assert [f for f in findings(FORECASTING.format(workers=", num_workers=4")) if f.endswith("GPU101")] == []
    other = """\
        import torch
        from mylib import Table

        device = torch.device("cuda")
        table = Table("data.csv")
        loader = table.to_dataloader(batch_size=64)
        for x in loader:
            x.to(device)
        """
    assert findings(other, select=("GPU101",)) == []


GRAPHS = """\
    import torch
    import torch_geometric.transforms as T
    from torch_geometric.datasets import QM9
    from torch_geometric.loader import DataLoader

    device = torch.device("cuda")
    dataset = QM9("data/QM9"{transform}).shuffle()
    val_loader = DataLoader(dataset[:10000], batch_size=128)
    train_loader = DataLoader(dataset[10000:], batch_size=128, shuffle=True)


    def train(model, optimizer):
        for data in train_loader:
            data = data.to(device)
            loss = model(data).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    def test(model, loader):
        for data in loader:
            model(data.to(device))


    for epoch in range(300):
        train(model, optimizer)
        test(model, val_loader)
    """


def test_graph_loader_over_a_dataset_transformed_per_item_is_reported():
    source = GRAPHS.format(transform=", transform=T.Compose([T.Complete(), T.Distance(norm=False)])")
    assert [f for f in findings(source) if f.endswith("GPU101")] == ["8:14 GPU101", "9:16 GPU101"]


def test_graph_loader_without_a_per_item_transform_stays_silent():
    for transform in ("", ", transform=None", ", pre_transform=T.Distance()"):
        assert [f for f in findings(GRAPHS.format(transform=transform)) if f.endswith("GPU101")] == []


UTILS = """\
    import numpy as np
    from torch.utils.data import DataLoader, Dataset


    class RowDataset(Dataset):
        def __init__(self, x, y):
            self.x = x
            self.y = y

        def __len__(self):
            return len(self.x)

        def __getitem__(self, index):
            return self.x[index], self.y[index]


    def create_dataloaders(X_train, y_train, batch_size, num_workers):
        return DataLoader(RowDataset(X_train.astype(np.float32), y_train), batch_size=batch_size, shuffle=True, num_workers=num_workers)
    """

MODEL = """\
    import torch

    from tab.utils import create_dataloaders


    class TabModel:
        def fit(self, X_train, y_train, max_epochs=100, batch_size=1024, num_workers={default}):
            self.batch_size = batch_size
            self.num_workers = num_workers
            self.device = torch.device("cuda")
            self.network = torch.nn.Linear(X_train.shape[1], 1).to(self.device)
            self.optimizer = torch.optim.Adam(self.network.parameters())
            train_dataloader = self._construct_loaders(X_train, y_train)
            for epoch in range(max_epochs):
                for X, y in train_dataloader:
                    X, y = X.to(self.device).float(), y.to(self.device).float()
                    loss = (self.network(X).squeeze(-1) - y).pow(2).mean()
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

        def _construct_loaders(self, X_train, y_train):
            return create_dataloaders(X_train, y_train, self.batch_size, {handed})
    """


def run(tmp_path, monkeypatch, default="0", handed="self.num_workers", extra=None):
    files = {"tab/__init__.py": "", "tab/utils.py": UTILS, "tab/model.py": MODEL.format(default=default, handed=handed)}
    files.update(extra or {})
    return lint(write(tmp_path, files), monkeypatch, select=("GPU101",))


def test_a_method_default_an_estimator_keeps_reaches_the_factory_of_another_module(tmp_path, monkeypatch):
    reported = run(tmp_path, monkeypatch)
    assert found(reported) == ["tab/utils.py:18 GPU101"]
    message = reported[0].message
    assert "`num_workers=0` (method default every call hands in at tab/model.py:7)" in message
    assert reported[0].fix is None  # the value is written in another module


def test_a_method_default_above_zero_or_a_count_the_class_passes_stays_silent(tmp_path, monkeypatch):
    assert found(run(tmp_path, monkeypatch, default="4")) == []
    assert found(run(tmp_path / "b", monkeypatch, handed="self.workers")) == []  # no such default: unknown


def test_a_method_the_class_calls_with_a_count_or_an_attribute_stored_twice_stays_silent(tmp_path, monkeypatch):
    # `self.fit(..., num_workers=2)` in the class: the default does not always apply
    refit = MODEL + "\n        def refit(self, X, y):\n            self.fit(X, y, num_workers=2)\n"
    files = {"tab/__init__.py": "", "tab/utils.py": UTILS, "tab/model.py": refit.format(default="0", handed="self.num_workers")}
    assert found(lint(write(tmp_path, files), monkeypatch, select=("GPU101",))) == []
    # a second store of the attribute (`self.num_workers = 8` elsewhere in the class)
    stored = MODEL + "\n        def set_workers(self):\n            self.num_workers = 8\n"
    files["tab/model.py"] = stored.format(default="0", handed="self.num_workers")
    assert found(lint(write(tmp_path / "b", files), monkeypatch, select=("GPU101",))) == []


def test_a_count_changed_from_outside_the_class_stays_silent(tmp_path, monkeypatch):
    outside = """\
        from tab.model import TabModel

        clf = TabModel()
        clf.num_workers = 4
        """
    assert found(run(tmp_path, monkeypatch, extra={"run.py": textwrap.dedent(outside)})) == []


SNIPPETS = """\
    from torch_snippets import *

    device = "cuda" if torch.cuda.is_available() else "cpu"


    class PairDataset(Dataset):
        def __init__(self, folder, transform=None):
            self.items = Glob(folder + "/*/*")
            self.transform = transform

        def __getitem__(self, ix):
            img = read(self.items[ix])
            return self.transform(img)

        def __len__(self):
            return len(self.items)
    {collate}

    trn_ds = PairDataset("./data/faces/training/", transform=trn_tfms)
    trn_dl = DataLoader(trn_ds, shuffle=True, batch_size=64{collate_arg})
    for epoch in range(200):
        for data in trn_dl:
            loss = model(data.to(device)).sum()
            loss.backward()
    """


def test_dataloader_of_a_star_import_that_re_exports_torchs_is_reported():
    source = SNIPPETS.format(collate="", collate_arg="")
    assert findings(source, select=("GPU101",)) == ["20:10 GPU101"]


def test_a_collate_method_that_moves_to_the_star_imported_device_stays_silent():
    collate = "\n        def collate_fn(self, batch):\n            return torch.stack(batch).to(device)\n"
    # `device` bound in the module: its CUDA move is seen as before; bound by the star import only: may be CUDA
    source = SNIPPETS.format(collate=collate, collate_arg=", collate_fn=trn_ds.collate_fn")
    assert findings(source, select=("GPU101",)) == []
    unbound = source.replace('device = "cuda" if torch.cuda.is_available() else "cpu"\n', "")
    assert findings(unbound, select=("GPU101",)) == []


def test_other_libraries_star_imports_bind_no_dataloader():
    source = SNIPPETS.format(collate="", collate_arg="").replace("from torch_snippets import *", "from mylib import *")
    assert findings(source, select=("GPU101",)) == []


def test_the_summary_keeps_the_held_defaults_through_json():
    import json

    from gpulint.analysis.summary import ModuleSummary, summarize

    summary = summarize(textwrap.dedent(MODEL.format(default="0", handed="self.num_workers")))
    construct = summary.functions["TabModel._construct_loaders"]
    assert construct.held == {0: {2: [1024, 7, "batch_size"], 3: [0, 7, "num_workers"]}}
    again = ModuleSummary.from_json(json.loads(json.dumps(summary.to_json())))
    assert again.functions["TabModel._construct_loaders"].held == construct.held
