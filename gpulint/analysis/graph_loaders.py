"""PyG's cluster loader over a graph of known size: what one batch holds, and that it is built on the host.

torch_geometric/loader/cluster.py (1.x-2.x): `ClusterData(data, num_parts, ...)` splits the graph into `num_parts`
METIS partitions of about equal node counts, and `ClusterLoader(cluster_data, batch_size, **kwargs)` is a
`DataLoader` over the partition ids whose own `collate_fn` (`_collate`) joins `batch_size` of them into one `Data`:
the node features, labels and masks of about `num_nodes * batch_size / num_parts` nodes and the edges among them,
sliced from the CPU graph in the loader's workers (or the training process without them). `Data` has
`pin_memory()`, so `pin_memory=True` pins that whole batch in the loader's pinning thread.

The graph's size is a fact of the library data set it is read from (PyG's documented statistics of the full
graph: nodes, float32 node features, the label's bytes per node), for a graph taken as `dataset[0]` of a data set
built by the library's class (`Reddit(root)`, `Planetoid(root, name="Cora")`) with no per-item `transform` (which
may move it, `T.ToDevice`) and bound once (a graph moved to the GPU, `data = data.to(device)`, is rebound). A
batch's bytes are then `batch_size / num_parts` of the graph's node bytes (its edges come on top): Reddit in
1500 parts taken 20 at a time is ~3.1k nodes of 602 float32 features, ~7.5 MB a batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.value_resolution import as_int

if TYPE_CHECKING:
    from gpulint.analysis.dataloaders import DataLoaderCall
    from gpulint.analysis.model import SemanticModel

_DATASETS = "torch_geometric.datasets."
_CLUSTER_LOADERS = frozenset({"torch_geometric.loader.ClusterLoader", "torch_geometric.data.ClusterLoader"})
_CLUSTER_DATA = frozenset({"torch_geometric.loader.ClusterData", "torch_geometric.data.ClusterData"})
_INT64, _FLOAT32 = 8, 4
# PyG's single-graph data sets: (nodes, node features, label bytes per node), from the data sets' documented
# statistics (torch_geometric.datasets: Reddit, Reddit2, Flickr, Yelp, AmazonProducts; Planetoid by `name`).
# Features are float32; a class label is one int64, a multi-label target one float32 per class.
GRAPH_SIZES: dict[str, tuple[int, int, int]] = {
    "Reddit": (232_965, 602, _INT64),
    "Reddit2": (232_965, 602, _INT64),
    "Flickr": (89_250, 500, _INT64),
    "Yelp": (716_847, 300, 100 * _FLOAT32),
    "AmazonProducts": (1_569_960, 200, 107 * _FLOAT32),
}
PLANETOID_SIZES: dict[str, tuple[int, int, int]] = {
    "cora": (2_708, 1_433, _INT64),
    "citeseer": (3_327, 3_703, _INT64),
    "pubmed": (19_717, 500, _INT64),
}


def cluster_batch_bytes(model: SemanticModel, loader: DataLoaderCall) -> Optional[int]:
    """The node bytes of one batch of a PyG `ClusterLoader` over `ClusterData(graph, num_parts=P)` of a library
    graph of known size (module docstring), or None when the code does not show them."""
    if model.call_name(loader.call) not in _CLUSTER_LOADERS or loader.opaque or not loader.known("batch_size"):
        return None
    from gpulint.analysis.batch_bytes import loader_batch_size

    first = loader.call.args[0] if loader.call.args and loader.call.args[0].keyword is None and not loader.call.args[0].star else None
    if first is None:
        first = next((a for a in loader.call.args if a.keyword is not None and a.keyword.value == "cluster_data"), None)
    size = loader_batch_size(model, loader)
    if first is None or size is None:
        return None
    clusters = _single_source(model, first.value)
    if not isinstance(clusters, cst.Call) or model.call_name(clusters) not in _CLUSTER_DATA:
        return None
    graph = _argument(clusters, 0, "data")
    parts = _argument(clusters, 1, "num_parts")
    if graph is None or parts is None:
        return None
    resolved = model.values.resolve(parts)
    count = as_int(resolved.value) if resolved is not None else None
    stats = host_graph_size(model, graph)
    if count is None or count < 1 or stats is None:
        return None
    nodes, features, label = stats
    return -(-nodes * min(size, count) // count) * (features * _FLOAT32 + label)


def host_graph_batches(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """`loader` is a PyG cluster loader whose batches are subgraphs of a host graph of known size: its own
    dataset (the partition ids) and collate (`_collate`, which slices the CPU graph) make CPU `Data` batches."""
    return cluster_batch_bytes(model, loader) is not None


def host_graph_size(model: SemanticModel, graph: cst.BaseExpression) -> Optional[tuple[int, int, int]]:
    """(nodes, features, label bytes) of `graph` where it is `dataset[0]` of a PyG library data set of known size,
    built with no per-item transform and never rebound (so still on the host); None otherwise."""
    value = _single_source(model, graph)
    if not (isinstance(value, cst.Subscript) and len(value.slice) == 1):
        return None
    index = value.slice[0].slice
    if not (isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0"):
        return None
    built = _single_source(model, value.value)
    if not isinstance(built, cst.Call):
        return None
    name = model.call_name(built) or ""
    if not name.startswith(_DATASETS):
        return None
    if any(a.star or (a.keyword is not None and a.keyword.value == "transform") for a in built.args):
        return None  # a transform runs on every access and may move the graph (`T.ToDevice`)
    short = name.rsplit(".", 1)[-1]
    if short == "Planetoid":
        which = _argument(built, 1, "name")
        text = which.evaluated_value if isinstance(which, cst.SimpleString) else None
        return PLANETOID_SIZES.get(text.lower()) if isinstance(text, str) else None
    return GRAPH_SIZES.get(short)


def _single_source(model: SemanticModel, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The one expression that builds `expr` (through names bound once), or None."""
    if not isinstance(expr, cst.Name):
        return expr
    sources = model.batch_cost.expression_sources(expr)
    return sources[0] if sources is not None and len(sources) == 1 and sources[0] is not expr else None


def _argument(call: cst.Call, position: int, keyword: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position].value if position < len(positional) else None
