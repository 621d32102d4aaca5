"""Loaders whose batches are a graph library's objects, which `pin_memory=True` cannot pin.

DataLoader's pinning (torch/utils/data/_utils/pin_memory.py, `pin_memory(data)`) pins tensors, walks mappings,
tuples and sequences, and calls `.pin_memory()` on any other object that has one; anything else is handed on as
it is. A DGL graph (`dgl.batch(graphs)`, `dgl.graph(...)`) has only the in-place `pin_memory_()`, so a loader
whose collate returns one pins the few label tensors beside it and leaves the graph's node and edge data in
pageable memory: `pin_memory=True` (GPU102) and `non_blocking=True` (GPU105) change nothing for the graph.
PyG's `Batch` does have `pin_memory()`: its loaders are not such loaders.

The project side (`graph_collates`) names the functions and methods whose every definition in the project
returns such a graph, alone or as the first element of a tuple (`return dgl.batch(graphs), labels`); the module
side (`graph_batches`) matches a loader's `collate_fn` against them: `collate`, `dataset.collate` (a method of
a dataset class another module builds: every `collate` the project defines returns a graph), or
`functools.partial(collate, ...)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import libcst as cst

from gpulint.analysis.summary import MODULE_BODY, FunctionSummary

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel
    from gpulint.analysis.project import ProjectIndex

# Library calls that build a graph object with no `pin_memory()` method (DGL 0.4 to 2.x).
GRAPH_BUILDERS = frozenset({"dgl.batch", "dgl.batch_hetero", "dgl.graph", "dgl.heterograph", "dgl.DGLGraph"})


def graph_collates(index: ProjectIndex) -> dict[str, str]:
    """Function or method name -> the graph builder every definition of that name in the project returns."""
    return index.computed("graph collates", lambda: _find_graph_collates(index))


def _find_graph_collates(index: ProjectIndex) -> dict[str, str]:
    found: dict[str, Optional[str]] = {}
    for record in index.records.values():
        for key, f in record.summary.functions.items():
            if key == MODULE_BODY:
                continue
            name = key.rsplit(".", 1)[-1]
            builder = _returned_graph(f)
            if name in found and found[name] != builder:
                builder = None  # two definitions that disagree: which one the loader gets is not known
            found[name] = builder
    return {name: builder for name, builder in found.items() if builder is not None}


def _returned_graph(f: FunctionSummary) -> Optional[str]:
    """The graph builder whose result each `return` of `f` gives (first element of a returned tuple)."""
    builders = set()
    for value in f.returns:
        main: Any = value
        if isinstance(main, tuple) and main and main[0] == "tuple":
            main = main[1][0] if main[1] else None
        if not (isinstance(main, tuple) and len(main) == 2 and main[0] == "src"):
            return None
        for source in main[1].split("|"):
            if not source.startswith("c:") or not source[2:].isdigit() or int(source[2:]) >= len(f.calls):
                return None
            ref = f.calls[int(source[2:])][0]
            if ref not in GRAPH_BUILDERS:
                return None
            builders.add(ref)
    return min(builders) if builders else None


def graph_batches(model: SemanticModel, loader: Any) -> Optional[str]:
    """The graph builder (`dgl.batch`) whose object is the main part of every batch of `loader`; None when the
    batches may be tensors (the default collate, a collate that is not known to build a graph)."""
    collate = loader.value("collate_fn")
    for _ in range(3):
        if isinstance(collate, cst.Name) and not model.functions.get(collate.value):
            writes = model.dataflow.reaching_writes(collate.value, collate)
            if len(writes) == 1 and isinstance(writes[0].value, (cst.Name, cst.Attribute, cst.Call)) and not writes[0].is_augmented:
                collate = writes[0].value  # `collate_fn = dataset.collate`, then `DataLoader(..., collate_fn=collate_fn)`
                continue
        if isinstance(collate, cst.Call) and model.call_name(collate) == "functools.partial" and collate.args:
            collate = collate.args[0].value  # `partial(dataset.collate, pos_enc=True)`
            continue
        break
    if isinstance(collate, (cst.Name, cst.Attribute)):
        qualified = model.qualified_name(collate)
        if qualified in GRAPH_BUILDERS:
            return qualified  # `collate_fn=dgl.batch`
        name = collate.value if isinstance(collate, cst.Name) else collate.attr.value
        return model.project.graph_collates.get(name)
    return None
