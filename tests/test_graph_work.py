"""Full-graph steps of PyG's layers on graphs of documented size (`analysis/graph_work.py`, `model_size.step_work`):
a GCN of 16 hidden channels trained on Cora does ~0.4 GFLOP a step, launch-bound, so its per-step read (GPU303)
and mask indexing (GPU306) wait microseconds. Nearby shapes stay reported: wider layers or a larger graph (more
work), a graph the table does not document, a model fed a sampled batch (its nodes are unknown)."""

from __future__ import annotations

import libcst as cst

from gpulint.analysis import graph_work
from gpulint.analysis.model import SemanticModel
from tests.conftest import findings

SYNCS = {"select": ("GPU303", "GPU306")}


def _full_graph(
    dataset: str = "Planetoid(path, 'Cora')", hidden: int = 16, feed: str = "data.x, data.edge_index", read: str = "print(loss.item())"
) -> str:
    return f"""\
import torch
import torch.nn.functional as F
from torch_geometric.datasets import Amazon, KarateClub, Planetoid
from torch_geometric.nn import GCNConv

dataset = {dataset}
data = dataset[0]


class GCN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNConv(dataset.num_features, {hidden})
        self.conv2 = GCNConv({hidden}, dataset.num_classes)

    def forward(self, x, edge_index):
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, training=self.training)
        return self.conv2(x, edge_index)


device = torch.device('cuda')
model = GCN().to(device)
data = data.to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

for epoch in range(200):
    optimizer.zero_grad()
    out = model({feed})
    loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
    {read}
"""


def _model(source: str) -> SemanticModel:
    return SemanticModel(cst.parse_module(source), "train.py", source)


def test_documented_sizes_of_a_planetoid_graph():
    model = _model(_full_graph())
    step = model.loops[-1]
    assert model.model_size.step_work(step) == 3 * 2708 * (2 * 1433 * 16 + 8 * 2 * 16 + 2 * 16 * 7 + 8 * 2 * 7)
    sizes = [graph_work.dataset_field(model, n) for n in model.dataflow.order if isinstance(n, cst.Attribute) and n.attr.value.startswith("num_")]
    assert sizes == [1433, 7]


def test_small_gcn_on_cora_is_launch_bound():
    assert findings(_full_graph(), **SYNCS) == []
    assert findings(_full_graph("KarateClub()", hidden=64), **SYNCS) == []


def test_more_work_or_unknown_graphs_stay_reported():
    # the read of every step (GPU303); the mask's wait is silent beside it (full_batch.waits_every_full_batch_step)
    reported = ["33:11 GPU303"]
    assert findings(_full_graph(hidden=256), **SYNCS) == reported  # 4.5 GFLOP a step
    assert findings(_full_graph("Planetoid(path, 'PubMed')", hidden=64), **SYNCS) == reported  # 19,717 nodes
    assert findings(_full_graph("Amazon(path, 'Computers')"), **SYNCS) == reported  # a graph the table does not list
    assert findings(_full_graph(feed="batch.x, batch.edge_index"), **SYNCS) == reported  # not the whole graph
    # without a read of its own, the mask is the step's one wait: reported unless the step is launch-bound
    alone = {"read": "losses.append(loss)"}
    assert findings(_full_graph(hidden=256, **alone), **SYNCS) == ["30:28 GPU306"]
    assert findings(_full_graph("Planetoid(path, 'PubMed')", hidden=64, **alone), **SYNCS) == ["30:28 GPU306"]
    assert findings(_full_graph("Amazon(path, 'Computers')", **alone), **SYNCS) == ["30:28 GPU306"]
    assert findings(_full_graph(**alone), **SYNCS) == []
