"""GPU102 on PyG's `ClusterLoader` (`analysis/graph_loaders.py`): the loader sets its own dataset (the partition ids)
and collate (which slices the CPU graph into one `Data` a batch, pinnable), so its batches are known to be made on
the host when the code shows the graph: `dataset[0]` of a PyG library data set of known size, with no per-item
transform, bound once. Its batch's bytes are then the evidence of a cost: `batch_size / num_parts` of the graph's
node bytes (pyg-team's cluster_gcn_reddit example: Reddit in 1500 parts taken 20 at a time, ~7.5 MB a batch, a
cost-aware label of the fifteenth corpus). Silent where the graph's size or residence is unknown (a graph of
another data set, a `T.ToDevice` transform, a graph moved to the GPU before it is partitioned) and where the
batches are small (Cora in 1500 parts: a few kilobytes)."""

from __future__ import annotations

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.copy_cost import copy_bytes
from tests.conftest import diagnostics
from tests.projects_helper import found, lint, write

CLUSTER = """\
import torch
import torch.nn.functional as F
from torch_geometric.datasets import {dataset}
from torch_geometric.loader import ClusterData, ClusterLoader

dataset = {dataset}('../data/graph'{extra})
data = dataset[0]{moved}
cluster_data = ClusterData(data, num_parts={parts}, recursive=False)
train_loader = ClusterLoader(cluster_data, batch_size=20, shuffle=True, num_workers=12)
device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
model = Net().to(device)


def train():
    model.train()
    for batch in train_loader:
        batch = batch.to(device)
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)
        loss = F.nll_loss(out[batch.train_mask], batch.y[batch.train_mask])
        loss.backward()
        optimizer.step()


for epoch in range(1, 31):
    train()
"""


def cluster(dataset="Reddit", parts=1500, extra="", moved="") -> str:
    return CLUSTER.format(dataset=dataset, parts=parts, extra=extra, moved=moved)


def gpu102(text: str) -> list:
    return [d for d in diagnostics(text, rule_options=()) if d.code == "GPU102"]


def loader_bytes(text: str) -> list:
    model = SemanticModel(cst.parse_module(text), "m.py")
    return [copy_bytes(model, info.loader) for info in model.loader_flow.infos]


def test_reddit_clusters_twenty_at_a_time_are_reported_with_their_bytes():
    text = cluster()
    # 232,965 nodes * 20 / 1500 -> 3,107 nodes of 602 float32 features and an int64 label
    assert loader_bytes(text) == [3107 * (602 * 4 + 8)]
    (finding,) = gpu102(text)
    assert finding.location.row == 9
    assert finding.message == "`DataLoader` has no `pin_memory` but its batches are copied to the GPU (`batch.to(device)` at line 17)"
    assert finding.help.startswith("~7.5 MB a batch: ~0.54-0.94 ms a step pageable (8-14 GB/s, after a wait for the queue)")


def test_a_planetoid_graph_is_sized_by_its_name():
    text = cluster(dataset="Planetoid", parts=2, extra=", name='PubMed'")
    assert loader_bytes(text) == [19717 * (500 * 4 + 8)]  # both parts: the whole graph, ~40 MB
    assert len(gpu102(text)) == 1


def test_small_clusters_are_silent():
    text = cluster(dataset="Planetoid", extra=", name='Cora'")
    assert loader_bytes(text) == [-(-2708 * 20 // 1500) * (1433 * 4 + 8)]  # 37 nodes, ~0.2 MB
    assert gpu102(text) == []


def test_a_graph_of_unknown_size_or_residence_is_silent():
    assert loader_bytes(cluster(dataset="KarateClub")) == [None]  # no known size
    assert gpu102(cluster(dataset="KarateClub")) == []
    on_gpu = cluster(extra=", transform=T.ToDevice('cuda')")  # every access moves the graph
    assert loader_bytes(on_gpu) == [None] and gpu102(on_gpu) == []
    moved = cluster(moved="\ndata = data.to('cuda')")  # partitioned on the GPU: its batches are CUDA tensors
    assert loader_bytes(moved) == [None] and gpu102(moved) == []


def test_a_pinned_cluster_loader_is_silent():
    text = cluster().replace("num_workers=12)", "num_workers=12, pin_memory=True)")
    assert gpu102(text) == []


DATA = """\
from torch_geometric.datasets import {dataset}
from torch_geometric.loader import ClusterData, ClusterLoader


def make_loader(root):
    dataset = {dataset}(root)
    data = dataset[0]
    cluster_data = ClusterData(data, num_parts=1500)
    return ClusterLoader(cluster_data, batch_size=20, shuffle=True, num_workers=4)
"""
TRAIN = """\
import torch
import torch.nn.functional as F

from data import make_loader

device = torch.device('cuda')


def main(model, optimizer):
    model.to(device)
    loader = make_loader('../data')
    for epoch in range(30):
        for batch in loader:
            batch = batch.to(device)
            optimizer.zero_grad()
            F.nll_loss(model(batch.x, batch.edge_index), batch.y).backward()
            optimizer.step()
"""


def test_a_cluster_loader_built_in_another_module_is_reported_where_its_graph_is_known(tmp_path, monkeypatch):
    root = write(tmp_path / "reddit", {"data.py": DATA.format(dataset="Reddit"), "train.py": TRAIN})
    assert [f for f in found(lint(root, monkeypatch, rule_options=())) if f.endswith("GPU102")] == ["data.py:9 GPU102"]
    other = write(tmp_path / "karate", {"data.py": DATA.format(dataset="KarateClub"), "train.py": TRAIN})
    assert [f for f in found(lint(other, monkeypatch, rule_options=())) if f.endswith("GPU102")] == []
