"""Classes whose call builds a `torch.utils.data.DataLoader` from the arguments it is given.

A project class deriving from `DataLoader` (pretrain-gnns' `DataLoaderMasking`, yolov7's `InfiniteDataLoader`), and
the graph libraries' loaders that do the same (PyG's `DataLoader`), take DataLoader's keyword arguments: what they
do not name themselves they hand on to `DataLoader.__init__` in `**kwargs`, unchanged. Their call is a DataLoader
construction whose arguments mean what they mean there, except those the class sets itself (PyG's `collate_fn`):
those are unknown from the call. A class is one only when `**kwargs` reaches `DataLoader.__init__`, so a keyword a
fix adds (`persistent_workers=True`) reaches it too.

A signature is a JSON-able dict (kept in the module summary, so other modules' calls see it):
`{"positional": [own positional parameters, in order], "maps": {own parameter: DataLoader's parameter, or None
when it is not one of DataLoader's}, "fixed": [DataLoader parameters the class sets itself]}`.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional

DATALOADER = "torch.utils.data.DataLoader"

# torch.utils.data.DataLoader.__init__, in order; the rest are keyword-only.
POSITIONAL_PARAMETERS = (
    "dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
    "pin_memory", "drop_last", "timeout", "worker_init_fn", "multiprocessing_context", "generator",
)  # fmt: skip
KEYWORD_PARAMETERS = ("prefetch_factor", "persistent_workers", "pin_memory_device", "in_order")
DATALOADER_PARAMETERS = frozenset(POSITIONAL_PARAMETERS + KEYWORD_PARAMETERS)

DATALOADER_SIGNATURE = {"positional": list(POSITIONAL_PARAMETERS), "maps": {p: p for p in DATALOADER_PARAMETERS}, "fixed": []}


def _library(positional: tuple[str, ...], fixed: tuple[str, ...]) -> dict:
    return {"positional": list(positional), "maps": {p: p if p in DATALOADER_PARAMETERS else None for p in positional}, "fixed": list(fixed)}


_PYG_GRAPHS = _library(("dataset", "batch_size", "shuffle", "follow_batch", "exclude_keys"), ("collate_fn",))
_PYG_LISTS = _library(("dataset", "batch_size", "shuffle"), ("collate_fn",))
_PYG_CLUSTERS = _library(("cluster_data", "batch_size", "shuffle"), ("dataset", "collate_fn"))
# Library loaders that subclass DataLoader and hand `**kwargs` on to it (read in their source):
# torch_geometric/loader/dataloader.py (2.x: `DataLoader(dataset, batch_size=1, shuffle=False, follow_batch=None,
# exclude_keys=None, **kwargs)`, `collate_fn=Collater(...)` set itself; `torch_geometric.data.DataLoader` is its
# 1.x home, `(dataset, batch_size=1, shuffle=True, follow_batch=[], **kwargs)`, and a deprecated alias in 2.x),
# data_list_loader.py and dense_data_loader.py (`(dataset, batch_size=1, shuffle=False, **kwargs)`),
# cluster.py (`ClusterLoader(cluster_data, **kwargs)`, 1.x `(cluster_data, batch_size=1, shuffle=False, **kwargs)`:
# the dataset is the range of cluster ids, and the collate function extracts each batch's subgraph).
LIBRARY_LOADERS = {
    "torch_geometric.loader.DataLoader": _PYG_GRAPHS,
    "torch_geometric.data.DataLoader": _PYG_GRAPHS,
    "torch_geometric.loader.DataListLoader": _PYG_LISTS,
    "torch_geometric.data.DataListLoader": _PYG_LISTS,
    "torch_geometric.loader.DenseDataLoader": _PYG_LISTS,
    "torch_geometric.data.DenseDataLoader": _PYG_LISTS,
    "torch_geometric.loader.ClusterLoader": _PYG_CLUSTERS,
    "torch_geometric.data.ClusterLoader": _PYG_CLUSTERS,
}
# determined/pytorch/_data.py (0.2x-0.3x): `determined.pytorch.DataLoader(dataset, batch_size=1, shuffle=False,
# sampler=None, batch_sampler=None, num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
# worker_init_fn=None, multiprocessing_context=None, generator=None, *, prefetch_factor=None,
# persistent_workers=False)`: torch's parameters in torch's order with torch's defaults; `get_data_loader()` hands
# them all to the `torch.utils.data.DataLoader` it builds (its batch sampler wrapped to repeat, shard and skip).
_DETERMINED = {
    "positional": list(POSITIONAL_PARAMETERS),
    "maps": {p: p for p in (*POSITIONAL_PARAMETERS, "prefetch_factor", "persistent_workers")},
    "fixed": [],
}
LIBRARY_LOADERS.update({"determined.pytorch.DataLoader": _DETERMINED, "determined.pytorch._data.DataLoader": _DETERMINED})


def library_signature(qualified: Optional[str]) -> Optional[dict]:
    """The signature of `DataLoader` itself or of a known library loader named `qualified`."""
    if qualified == DATALOADER:
        return DATALOADER_SIGNATURE
    return LIBRARY_LOADERS.get(qualified) if qualified else None


def loader_classes(body: list, qualify: Callable[[ast.AST], Optional[str]]) -> dict[str, dict]:
    """The module-level classes of `body` deriving from DataLoader (or a known library loader, or another such
    class of the module) whose call builds it from its arguments -> their signature."""
    found: dict[str, dict] = {}
    for stmt in body:
        if not isinstance(stmt, ast.ClassDef):
            continue
        bases = [library_signature(qualify(base)) or (found.get(base.id) if isinstance(base, ast.Name) else None) for base in stmt.bases]
        base = next((b for b in bases if b is not None), None)
        if base is None:
            continue
        methods = {m.name: m for m in stmt.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if "__iter__" in methods:
            continue  # iterated its own way: yolov7's `InfiniteDataLoader` keeps one iterator, and its workers, for good
        init = methods.get("__init__")
        signature = base if init is None else _forwarding_init(init, base)
        if signature is not None:
            found[stmt.name] = signature
    return found


def _forwarding_init(init: ast.FunctionDef, base: dict) -> Optional[dict]:
    """The signature of a class whose `__init__(self, ..., **kwargs)` calls `super().__init__(..., **kwargs)`
    (or `super(Cls, self).__init__`) once; None for any other shape (its arguments may mean anything)."""
    a = init.args
    if a.kwarg is None or not a.args or a.posonlyargs:
        return None
    calls = [c for c in ast.walk(init) if isinstance(c, ast.Call) and _is_super_init(c)]
    if len(calls) != 1:
        return None
    call = calls[0]
    own = [p.arg for p in a.args[1:]]
    if a.vararg is not None:
        # `(self, *args, **kwargs)` handing both on unchanged: the base's own signature
        passes_on = (
            not own and not a.kwonlyargs and [type(x) for x in call.args] == [ast.Starred]
            and getattr(call.args[0].value, "id", None) == a.vararg.arg
        )  # fmt: skip
        if not passes_on:
            return None
    maps: dict[str, Optional[str]] = {}
    set_here: set[str] = set()  # DataLoader parameters the class gives a value of its own
    for position, arg in enumerate(call.args):
        if isinstance(arg, ast.Starred):
            if a.vararg is not None and getattr(arg.value, "id", None) == a.vararg.arg:
                continue
            return None  # positions unknown from here
        if position >= len(base["positional"]):
            return None
        target = base["maps"].get(base["positional"][position])
        if isinstance(arg, ast.Name) and arg.id in own + [k.arg for k in a.kwonlyargs]:
            maps[arg.id] = target
        elif target is not None:
            set_here.add(target)
    fixed = set(base["fixed"])
    kwargs_handed = False
    for keyword in call.keywords:
        if keyword.arg is None:
            if getattr(keyword.value, "id", None) != a.kwarg.arg:
                return None  # another mapping: any argument may be set
            kwargs_handed = True
            continue
        target = base["maps"].get(keyword.arg, keyword.arg if keyword.arg in DATALOADER_PARAMETERS else None)
        if isinstance(keyword.value, ast.Name) and keyword.value.id in own + [k.arg for k in a.kwonlyargs]:
            maps[keyword.value.id] = target
        elif target is not None:
            set_here.add(target)
    if not kwargs_handed:
        return None
    fixed |= set_here
    # an own parameter named like one of DataLoader's that it does not hand on: that argument never reaches it
    for name in own + [k.arg for k in a.kwonlyargs]:
        maps.setdefault(name, None)
        if maps[name] is None and name in DATALOADER_PARAMETERS:
            fixed.add(name)
    if a.vararg is not None:
        return {**base, "fixed": sorted(fixed)}
    # a keyword it does not name reaches the base through `**kwargs`, and means there what it means to the base
    return {"positional": own, "maps": {**base["maps"], **maps}, "fixed": sorted(fixed)}


def _is_super_init(call: ast.Call) -> bool:
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call)):
        return False
    return isinstance(func.value.func, ast.Name) and func.value.func.id == "super"
