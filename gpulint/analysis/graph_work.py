"""Graphs of documented size, for the work of a full-graph step of PyG's message-passing layers.

A node-classification example trains on one graph that a data set of `torch_geometric.datasets` holds whole
(`data = dataset[0].to(device)`, `model(data.x, data.edge_index)`): every step feeds the model all its nodes, so
the step's work is known once the graph's size is. PyG documents its data sets' sizes; `GRAPH_DATASETS` holds those
of the single-graph ones (nodes, edges, node features, classes). `dataset_size(model, expr)`: the size of the data
set `expr` builds or names (the name as shipped: a literal or an argparse default; a name not known, the largest
of the class's graphs, field by field: Planetoid builds only those). `graph_of(model, expr)`: `expr` is that data
set's graph (`dataset[0]`, moved or not). `node_rows(model, expr)`: `expr` is the node features of such a graph
(`data.x`), the rows of a full-graph step. `ModelSize` reads `dataset.num_features` / `num_classes` from here, and
the work of PyG's layers per node (`model_size._graph_layer`: `GCNConv`, `GATConv`, `SAGEConv`, `GraphConv`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel


@dataclass(frozen=True)
class GraphSize:
    nodes: int
    edges: int  # directed edges, as `edge_index` holds them
    features: int
    classes: int


# PyG's documented statistics of its single-graph data sets, by class and (lower-case) name ("" when the class has one).
GRAPH_DATASETS: dict[str, dict[str, GraphSize]] = {
    "Planetoid": {
        "cora": GraphSize(2708, 10556, 1433, 7),
        "citeseer": GraphSize(3327, 9104, 3703, 6),
        "pubmed": GraphSize(19717, 88648, 500, 3),
    },
    "KarateClub": {"": GraphSize(34, 156, 34, 4)},
}
# At least the average degree (edges / nodes) of every graph in the table (Cora 3.9, CiteSeer 2.7, PubMed 4.5,
# KarateClub 4.6): a layer's per-edge work is counted per node at this many edges.
MAX_DEGREE = 8
_FEATURES = {"num_features": "features", "num_node_features": "features", "num_classes": "classes"}
_MAX_DEPTH = 6


def dataset_size(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> Optional[GraphSize]:
    """The documented size of the single-graph data set `expr` builds or names; None for any other value."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("shuffle", "to", "copy") and not model.call_name(expr):
            return dataset_size(model, func.value, depth + 1)
        name = model.call_name(expr) or ""
        if not name.startswith("torch_geometric.datasets."):
            return None
        graphs = GRAPH_DATASETS.get(name.rsplit(".", 1)[1])
        if graphs is None or any(a.star for a in expr.args):
            return None
        if "" in graphs:
            return graphs[""]
        given = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value == "name"), None)
        plain = [a.value for a in expr.args if a.keyword is None]
        given = given if given is not None else plain[1] if len(plain) > 1 else None
        resolved = _name(model, given) if given is not None else None
        if resolved is not None and resolved.lower() in graphs:
            return graphs[resolved.lower()]
        sizes = list(graphs.values())  # any name the class accepts: the largest of its graphs, field by field
        return GraphSize(*(max(getattr(s, f) for s in sizes) for f in ("nodes", "edges", "features", "classes")))
    if isinstance(expr, cst.Name):
        return _same_at_every_write(model, expr, lambda value: dataset_size(model, value, depth + 1))
    return None


def _same_at_every_write(model: SemanticModel, name: cst.Name, size_of) -> Optional[GraphSize]:
    """The size every plain write of `name` gives (`size_of` of its value); None when one is unknown or they differ."""
    found = [size_of(w.value) if w.value is not None and not w.is_augmented else None for w in _writes(model, name)]
    if not found or None in found or len(set(found)) != 1:
        return None
    return found[0]


def _name(model: SemanticModel, expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value if isinstance(expr.evaluated_value, str) else None
    if isinstance(expr, cst.Name):
        writes = _writes(model, expr)
        if len(writes) == 1 and isinstance(writes[0].value, cst.SimpleString):
            return _name(model, writes[0].value)
    resolved = model.values.resolve(expr)  # a constant, an argparse default: the data set as shipped
    return resolved.value if resolved is not None and isinstance(resolved.value, str) else None


def _writes(model: SemanticModel, name: cst.Name) -> list:
    """The writes of `name` a read may see; in a function reading a module's name, the module's last one (the
    function runs once the module has set it up: `dataset = "Cora"` then `dataset = Planetoid(path, dataset)`)."""
    flow = model.dataflow
    writes = flow.reaching_writes(name.value, name)
    if len(writes) > 1 and model.scope_of(name) is not model.module and all(model.scope_of(w.statement) is model.module for w in writes):
        return [max(writes, key=lambda w: flow.order[w.statement])]
    return writes


def dataset_field(model: SemanticModel, expr: cst.Attribute) -> Optional[int]:
    """`dataset.num_features` / `num_node_features` / `num_classes` of a data set of the table."""
    field = _FEATURES.get(expr.attr.value)
    if field is None:
        return None
    size = dataset_size(model, expr.value)
    return None if size is None else getattr(size, field)


def graph_of(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> Optional[GraphSize]:
    """`expr` is the graph of a single-graph data set of the table: `dataset[0]`, moved (`.to(device)`) or not."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda") and not model.call_name(expr):
            return graph_of(model, func.value, depth + 1)
        return None
    if isinstance(expr, cst.Subscript):
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            return None
        index = expr.slice[0].slice.value
        if not (isinstance(index, cst.Integer) and index.evaluated_value == 0):
            return None
        return dataset_size(model, expr.value)
    if isinstance(expr, cst.Name):
        return _same_at_every_write(model, expr, lambda value: graph_of(model, value, depth + 1))
    return None


def node_rows(model: SemanticModel, expr: cst.BaseExpression) -> Optional[GraphSize]:
    """`expr` is the node features of a whole graph of the table (`data.x`): a step that feeds them runs on every
    node."""
    if not isinstance(expr, cst.Attribute) or expr.attr.value != "x" or dotted_name(expr.value) is None:
        return None
    return graph_of(model, expr.value)
