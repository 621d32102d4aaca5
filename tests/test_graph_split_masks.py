"""GPU306 on the node splits of a PyTorch Geometric data set (`residency._is_mask`): `data.train_mask` of
`data = dataset[0].to(device)` with `dataset = Planetoid(...)` is a boolean mask, so `out[data.train_mask]`
in a full-graph training loop makes the host wait for the mask's count every epoch. A `train_mask` of an object
that is not a PyG data set's graph (a project's own batch, whatever its dtype) is not known to be boolean."""

from __future__ import annotations

from tests.conftest import findings

GPU306 = {"select": ("GPU306",)}

SOURCE = """\
import torch
import torch.nn.functional as F
from torch_geometric.datasets import Planetoid

device = torch.device("cuda")
dataset = Planetoid(root="tmp/Cora", name="Cora")
data = {graph}
model = GCN().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for epoch in range(200):
    optimizer.zero_grad()
    out = model(data)
    loss = F.nll_loss(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
"""


def test_boolean_split_masks_of_a_pyg_dataset_graph():
    assert findings(SOURCE.format(graph="dataset[0].to(device)"), **GPU306) == ["13:23 GPU306"]
    assert findings(SOURCE.format(graph="dataset.data.cuda()"), **GPU306) == ["13:23 GPU306"]


def test_masks_of_graphs_from_elsewhere_are_not_known_to_be_boolean():
    assert findings(SOURCE.format(graph="load_graph(device)"), **GPU306) == []
    own = SOURCE.format(graph="dataset[0].to(device)").replace("dataset = Planetoid(", "dataset = MyGraphs(")
    assert findings(own, **GPU306) == []
    # another attribute of the graph: an index tensor, not a mask
    index = SOURCE.format(graph="dataset[0].to(device)").replace("data.train_mask", "data.train_idx")
    assert findings(index, **GPU306) == []
