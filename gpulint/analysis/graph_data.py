"""PyG's data objects carry sizes as Python numbers, not tensors.

torch_geometric's `Data`/`HeteroData`/`Batch` (torch_geometric/data/data.py, batch.py) answer `num_nodes`,
`num_edges`, `num_node_features`, `num_edge_features`, `num_features` and a batch's `num_graphs` with Python ints
(from stored sizes or a tensor's `.size()`), and its samplers' loaders (torch_geometric/loader/node_loader.py,
`filter_fn`: `data.batch_size = input_id.numel()`; `data.num_sampled_nodes = ...` lists of ints from the sampler's
output) set `batch_size`, `num_sampled_nodes` and `num_sampled_edges` as Python ints and lists of ints, on the CPU
batch and unchanged by `batch.to(device)` (which moves only tensor attributes). Reading one waits for nothing:
`out[:batch.batch_size]` or `batch.y[:batch.num_sampled_nodes[0]]` slices with a host number.

The fact holds for a module that uses PyG (imports from `torch_geometric`): elsewhere an object's `batch_size`
may be anything."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Attributes of PyG's data objects that are Python ints (or lists of them) on any device.
PYG_HOST_ATTRIBUTES = frozenset({
    "batch_size", "num_graphs", "num_nodes", "num_edges", "num_node_features", "num_edge_features", "num_features",
    "num_sampled_nodes", "num_sampled_edges",
})  # fmt: skip


def pyg_host_attribute(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`batch.batch_size`, `data.num_nodes`, `batch.num_sampled_nodes` in a module that imports from PyG."""
    return isinstance(expr, cst.Attribute) and expr.attr.value in PYG_HOST_ATTRIBUTES and _uses_pyg(model)


def _uses_pyg(model: SemanticModel) -> bool:
    return any(q == "torch_geometric" or q.startswith("torch_geometric.") for q in model.imports.bindings.values())
