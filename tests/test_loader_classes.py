"""Loaders built by a class deriving from DataLoader (issue 14, tenth corpus class D): PyG's loaders and project
subclasses that hand their `**kwargs` on to `DataLoader.__init__` take its keyword arguments, so their workers are
re-spawned every epoch like DataLoader's own (`analysis/loader_classes.py`)."""

from __future__ import annotations

import ast
import textwrap

from gpulint.analysis.loader_classes import loader_classes
from tests.conftest import diagnostics, findings, fixed
from tests.projects_helper import found, lint, write

ONLY = {"select": ("GPU104",)}
LOADER_RULES = {"select": ("GPU101", "GPU102", "GPU103", "GPU104", "GPU105")}

# pretrain-gnns' shape: a collate function of its own, the other arguments handed on
_MASKING_LOADER = """\
    import torch.utils.data


    class DataLoaderMasking(torch.utils.data.DataLoader):
        def __init__(self, dataset, batch_size=1, shuffle=True, **kwargs):
            super(DataLoaderMasking, self).__init__(
                dataset, batch_size, shuffle, collate_fn=lambda data_list: collate(data_list), **kwargs
            )
"""

_EPOCHS = """\
    for epoch in range(1, 101):
        for step, batch in enumerate(loader):
            batch = batch.to("cuda")
            loss = model(batch).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def _script(loader: str, imports: str = "") -> str:
    return textwrap.dedent(imports) + f"\nloader = {loader}\n" + textwrap.dedent(_EPOCHS)


def test_pyg_loader_with_workers_is_re_spawned_every_epoch():
    source = _script("DataLoader(train_dataset, batch_size=32, shuffle=True, num_workers=4)", "from torch_geometric.data import DataLoader\n")
    assert findings(source, **ONLY) == ["3:10 GPU104"]
    [d] = diagnostics(source, **ONLY)
    assert d.message == "`DataLoader` workers are shut down and started again for every pass of the loop at line 4"
    assert fixed(source, **ONLY) == source.replace("num_workers=4)", "num_workers=4, persistent_workers=True)")


def test_pyg_loader_arguments_by_position_follow_its_own_signature():
    # PyG's fourth positional parameter is `follow_batch`, not DataLoader's `sampler`
    source = _script("DataLoader(ds, 32, True, ['x'], num_workers=4)", "from torch_geometric.loader import DataLoader\n")
    assert findings(source, **ONLY) == ["3:10 GPU104"]
    # without workers there is nothing to keep; PyG sets `collate_fn` itself, so the rules that judge the batches
    # (workers, pinning, batch size) do not guess about them
    plain = _script("DataLoader(ds, 32, True)", "from torch_geometric.loader import DataLoader\n")
    assert findings(plain, **LOADER_RULES) == []


def test_pyg_cluster_loader_is_re_spawned_every_epoch():
    # ogb's Cluster-GCN example (ninth corpus): 12 workers extract the subgraph of each batch of clusters
    source = _script(
        "ClusterLoader(cluster_data, batch_size=32, shuffle=True, num_workers=12)",
        "from torch_geometric.data import ClusterData, ClusterLoader\n",
    )
    assert findings(source, **LOADER_RULES) == ["3:10 GPU104"]


def test_project_subclass_handing_kwargs_on_takes_dataloader_arguments():
    source = textwrap.dedent(_MASKING_LOADER) + _script("DataLoaderMasking(dataset, batch_size=256, shuffle=True, num_workers=8)")
    assert findings(source, **ONLY) == ["10:10 GPU104"]
    assert fixed(source, **ONLY) == source.replace("num_workers=8)", "num_workers=8, persistent_workers=True)")
    # its own `collate_fn`: the rules about the batches stay silent rather than guess
    assert findings(source, **LOADER_RULES) == ["10:10 GPU104"]


def test_subclass_of_another_module_is_a_dataloader_through_the_project(tmp_path, monkeypatch):
    train = textwrap.dedent(
        """\
        import argparse

        from dataloader import DataLoaderMasking

        parser = argparse.ArgumentParser()
        parser.add_argument("--num_workers", type=int, default=8)
        args = parser.parse_args()
        loader = DataLoaderMasking(dataset, batch_size=256, shuffle=True, num_workers=args.num_workers)
        """
    ) + textwrap.dedent(_EPOCHS)
    diagnostics = lint(write(tmp_path, {"dataloader.py": _MASKING_LOADER, "train.py": train}), monkeypatch, **ONLY)
    assert found(diagnostics) == ["train.py:8 GPU104"]
    # `--num_workers 0` must still work: the fix keeps the workers only when there are some
    assert [e.content for e in diagnostics[0].fix.edits] == [", persistent_workers=args.num_workers > 0"]
    # pretrain-gnns as shipped pins torch 1.0.1, which has no `persistent_workers`: the advice cannot be followed
    (tmp_path / "requirements.txt").write_text("torch==1.0.1\ntorch-geometric==1.0.3\n", encoding="utf-8")
    assert found(lint(tmp_path, monkeypatch, **ONLY)) == []


def test_subclasses_that_do_not_hand_the_arguments_on_are_not_loader_calls():
    no_kwargs = """\
        import torch


        class FixedLoader(torch.utils.data.DataLoader):
            def __init__(self, dataset, workers):
                super().__init__(dataset, batch_size=64, num_workers=workers)
    """
    source = textwrap.dedent(no_kwargs) + _script("FixedLoader(dataset, 4)")
    assert findings(source, **LOADER_RULES) == []  # a keyword a fix adds would not be accepted


def test_subclass_iterated_its_own_way_is_not_read_as_dataloader():
    # yolov7's InfiniteDataLoader: one iterator over a repeating sampler, made once; its workers never stop
    infinite = """\
        import torch


        class InfiniteDataLoader(torch.utils.data.dataloader.DataLoader):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                object.__setattr__(self, "batch_sampler", _RepeatSampler(self.batch_sampler))
                self.iterator = super().__iter__()

            def __len__(self):
                return len(self.batch_sampler.sampler)

            def __iter__(self):
                for i in range(len(self)):
                    yield next(self.iterator)
    """
    source = textwrap.dedent(infinite) + _script("InfiniteDataLoader(dataset, batch_size=64, num_workers=8)")
    assert findings(source, **ONLY) == []


def test_workers_the_subclass_sets_or_swallows_itself_are_unknown():
    sets_workers = """\
        import torch


        class WorkerLoader(torch.utils.data.DataLoader):
            def __init__(self, dataset, **kwargs):
                super().__init__(dataset, num_workers=4, **kwargs)
    """
    source = textwrap.dedent(sets_workers) + _script("WorkerLoader(dataset, batch_size=64)")
    # no `num_workers` in the call, yet the loader has workers; `pin_memory` it leaves to the call
    assert findings(source, **LOADER_RULES) == ["8:10 GPU102"]
    assert fixed(source, select=("GPU102",)) == source.replace("batch_size=64)", "batch_size=64, pin_memory=True)")
    swallows = """\
        import torch


        class QuietLoader(torch.utils.data.DataLoader):
            def __init__(self, dataset, num_workers=0, **kwargs):
                self.requested = num_workers
                super().__init__(dataset, **kwargs)
    """
    source = textwrap.dedent(swallows) + _script("QuietLoader(dataset, batch_size=64, num_workers=4)")
    # its `num_workers` never reaches DataLoader: neither "no workers" nor "workers re-spawned"
    assert findings(source, select=("GPU101", "GPU104")) == []


def test_pyg_loaders_iterated_once_or_for_few_epochs_stay_silent():
    once = """\
        from torch_geometric.loader import DataLoader

        test_loader = DataLoader(test_dataset, batch_size=32, num_workers=4)
        for batch in test_loader:
            preds.append(model(batch.to("cuda")).argmax(-1).cpu())
    """
    assert findings(once, **ONLY) == []
    two_epochs = _script("DataLoader(ds, batch_size=32, num_workers=4)", "from torch_geometric.loader import DataLoader\n")
    assert findings(two_epochs.replace("range(1, 101)", "range(2)"), **ONLY) == []


def test_signatures_of_subclasses():
    source = textwrap.dedent(
        """\
        import torch.utils.data
        from torch_geometric.loader import DataLoader as GraphLoader


        class Plain(torch.utils.data.DataLoader):
            pass


        class Renamed(torch.utils.data.DataLoader):
            def __init__(self, data, bs=1, *, seed=0, **kwargs):
                super().__init__(data, bs, **kwargs)


        class Graphs(GraphLoader):
            def __init__(self, dataset, batch_size=1, **kwargs):
                super().__init__(dataset, batch_size, **kwargs)


        class Forwarding(Plain):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)


        class Other(torch.nn.Module):
            pass
        """
    )
    tree = ast.parse(source)
    imports = {"torch": "torch", "GraphLoader": "torch_geometric.loader.DataLoader"}

    def qualify(node):
        if isinstance(node, ast.Name):
            return imports.get(node.id)
        if isinstance(node, ast.Attribute):
            inner = qualify(node.value)
            return f"{inner}.{node.attr}" if inner else None
        return None

    found = loader_classes(tree.body, qualify)
    assert sorted(found) == ["Forwarding", "Graphs", "Plain", "Renamed"]
    assert found["Renamed"]["positional"] == ["data", "bs"]
    assert found["Renamed"]["maps"]["data"] == "dataset" and found["Renamed"]["maps"]["bs"] == "batch_size"
    assert found["Renamed"]["maps"]["seed"] is None and found["Renamed"]["maps"]["num_workers"] == "num_workers"
    assert found["Graphs"]["fixed"] == ["collate_fn"] and found["Graphs"]["maps"]["follow_batch"] is None
    assert found["Forwarding"]["positional"][:3] == ["dataset", "batch_size", "shuffle"]
