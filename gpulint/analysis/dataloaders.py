"""Every `torch.utils.data.DataLoader` construction, with its arguments found by keyword or position."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.default_device import data_made_on_default_cuda
from gpulint.analysis.loader_classes import DATALOADER, DATALOADER_SIGNATURE, library_signature
from gpulint.analysis.residency import CUDA
from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import ClassInfo, SemanticModel

# ignite/distributed/auto.py (0.4-0.5): `auto_dataloader(dataset, **kwargs)` returns `DataLoader(dataset, **kwargs)`,
# after dividing `batch_size` (and `num_workers`) among the processes of a distributed run and, when `pin_memory`
# is not given, setting it to whether the device is CUDA: those two values depend on the run.
LOADER_FACTORIES = {
    "ignite.distributed.auto_dataloader": frozenset({"batch_size", "pin_memory"}),
    "ignite.distributed.auto.auto_dataloader": frozenset({"batch_size", "pin_memory"}),
}
TENSOR_DATASET = "torch.utils.data.TensorDataset"
ITERABLE_DATASET = "torch.utils.data.IterableDataset"
LOADER_FACTORY_SIGNATURE = DATALOADER_SIGNATURE  # `auto_dataloader(dataset, **kwargs)`
# Library datasets whose method builds a DataLoader over the dataset itself, read in their source:
# pytorch_forecasting/data/timeseries.py (0.9-1.x): `TimeSeriesDataSet.to_dataloader(self, train=True, batch_size=64,
# batch_sampler=None, **kwargs)` returns `DataLoader(self, **kwargs)` with `shuffle=train`, `drop_last=train and ...`,
# `collate_fn=self._collate_fn`, `batch_size`, `batch_sampler` set first and `kwargs` (every DataLoader keyword,
# `num_workers` too, 0 when left out) updating them. Each `__getitem__` builds its sample in Python: a pandas
# `self.index.iloc[idx]` row lookup, a slice and `.clone()` of every feature tensor, the target normalizer's
# parameters for the series, length randomization (a Beta draw) and per-sample encoders; `_collate_fn` pads every
# field with `pad_sequence`. Datasets built by the class, `TimeSeriesDataSet(df, ...)`, or by its class methods
# `from_dataset(...)` / `from_parameters(...)`, are the instances. Values: (the method, its signature).
_TIME_SERIES = {"positional": ["train", "batch_size", "batch_sampler"], "maps": {"train": "shuffle", "batch_size": "batch_size", "batch_sampler": "batch_sampler"}, "fixed": ["drop_last"]}  # `collate_fn` is the class's own: it pads, and takes no CUDA device
DATASET_LOADER_METHODS = {
    f"{home}.TimeSeriesDataSet": ("to_dataloader", _TIME_SERIES)
    for home in ("pytorch_forecasting", "pytorch_forecasting.data", "pytorch_forecasting.data.timeseries")
}
_DATASET_BUILDERS = ("from_dataset", "from_parameters")
# Text every module that builds a loader contains (the rules' prefilter): `DataLoader`, PyG's `ClusterLoader`,
# the project subclasses named like them (`InfiniteDataLoader`, `GraphLoader`), and the library dataset methods.
LOADER_TEXT = "Loader|auto_dataloader|to_dataloader"


@dataclass(frozen=True)
class PackedArgument:
    """An argument passed through `**mapping`: its value is written where the mapping is built."""

    value: cst.BaseExpression


@dataclass
class DataLoaderCall:
    call: cst.Call
    arguments: dict[str, cst.Arg | PackedArgument]  # written in the call, or in a `**kwargs` dict built nearby
    opaque: bool  # `*args`, or a `**mapping` gpulint cannot follow: any argument may be passed
    maybe: frozenset[str] = frozenset()  # passed through `**mapping` on some runs only (or with several values)

    def known(self, *names: str) -> bool:
        """Each of `names` is either surely not passed or passed with one known value (on GPU runs)."""
        return not self.opaque and not any(name in self.maybe for name in names)

    def argument(self, name: str) -> cst.Arg | PackedArgument | None:
        return self.arguments.get(name)

    def value(self, name: str) -> cst.BaseExpression | None:
        arg = self.arguments.get(name)
        return arg.value if arg is not None else None


def _is_dataloader_class(model: SemanticModel, qualified: str | None) -> bool:
    if qualified == DATALOADER:
        return True
    info = model.local_class_of(qualified)
    # A subclass with its own __init__ may take other arguments (`loader_classes` reads those that hand them on);
    # one with its own __iter__ is iterated its own way: neither is read as DataLoader here.
    if info is None or "__init__" in info.methods or "__iter__" in info.methods:
        return False
    return model.is_subclass_of(info.node.name.value, DATALOADER)


def loader_signature(model: SemanticModel, call: cst.Call) -> dict | None:
    """How `call` builds a DataLoader from its arguments (`analysis/loader_classes.py`): DataLoader itself, a
    known library loader (PyG's), or a project class deriving from one that hands its `**kwargs` on; None when
    it builds none."""
    name = model.call_name(call)
    signature = library_signature(name)
    if signature is not None:
        return signature
    if _is_dataloader_class(model, name):
        return DATALOADER_SIGNATURE
    called = call.func.attr.value if isinstance(call.func, cst.Attribute) else getattr(call.func, "value", None)
    if called not in _project_loader_names(model):
        return None  # the common case: no lookup of the project's facts
    callee = model.callee(call)
    return callee.loader if callee is not None and callee.kind == "class" else None


def _project_loader_names(model: SemanticModel) -> frozenset[str]:
    """The last part of every reference this module makes to a project class that builds a DataLoader."""
    cached = model.memo("project loader classes")  # one entry per module: the names, not an answer per node
    if "names" not in cached:
        callees = getattr(model.project, "callees", {})
        cached["names"] = frozenset(ref.rpartition(".")[2] for ref, c in callees.items() if c.kind == "class" and c.loader)
    return cached["names"]


def is_loader_call(model: SemanticModel, call: cst.Call) -> bool:
    """`call` builds a DataLoader (itself, a library's or a project subclass taking its arguments)."""
    return loader_signature(model, call) is not None


def dataset_loader_method(model: SemanticModel, call: cst.Call) -> tuple[cst.BaseExpression, dict] | None:
    """(the dataset, the method's signature) for `training.to_dataloader(...)` where `training` is bound once to a
    library dataset whose method builds a DataLoader over itself (`DATASET_LOADER_METHODS`): `training =
    TimeSeriesDataSet(df, ...)`, or `TimeSeriesDataSet.from_dataset(training, df)`; None otherwise."""
    func = call.func
    if not isinstance(func, cst.Attribute) or not isinstance(func.value, cst.Name):
        return None
    if func.attr.value not in {method for method, _ in DATASET_LOADER_METHODS.values()}:
        return None
    built = _binding_value(model, func.value)
    if not isinstance(built, cst.Call):
        return None
    name = model.call_name(built) or ""
    owner, _, last = name.rpartition(".")
    known = DATASET_LOADER_METHODS.get(name) or (DATASET_LOADER_METHODS.get(owner) if last in _DATASET_BUILDERS else None)
    if known is None or known[0] != func.attr.value:
        return None
    return func.value, known[1]


def find_dataloaders(model: SemanticModel) -> list[DataLoaderCall]:
    found = []
    for call in model.calls:
        name = model.call_name(call)
        signature = LOADER_FACTORY_SIGNATURE if name in LOADER_FACTORIES else loader_signature(model, call)
        receiver = None
        if signature is None:
            method = dataset_loader_method(model, call)
            if method is None:
                continue
            receiver, signature = method
        positional, maps = signature["positional"], signature["maps"]
        arguments: dict[str, cst.Arg | PackedArgument] = {}
        if receiver is not None:
            arguments["dataset"] = PackedArgument(receiver)  # the method builds its loader over the dataset itself
        opaque = False
        # passed through `**mapping` on some runs only, or set by the class itself (PyG's `collate_fn`)
        maybe: frozenset[str] = LOADER_FACTORIES.get(name, frozenset()) | frozenset(signature["fixed"])
        position = 0
        for arg in call.args:
            if arg.star == "**":
                packed = model.values.keywords(arg.value)
                if packed is None:
                    opaque = True
                    continue
                for keyword, value in packed.values.items():
                    meaning = maps.get(keyword, keyword)
                    if meaning is not None:
                        arguments[meaning] = PackedArgument(value)
                maybe |= frozenset(maps.get(k, k) for k in packed.maybe) - {None}
            elif arg.star:
                opaque = True
            elif arg.keyword is not None:
                meaning = maps.get(arg.keyword.value, arg.keyword.value)
                if meaning is not None:
                    arguments[meaning] = arg
            else:
                if position < len(positional) and maps.get(positional[position]) is not None:
                    arguments[maps[positional[position]]] = arg
                position += 1
        found.append(DataLoaderCall(call, arguments, opaque, maybe))
    return found


def _binding_value(model: SemanticModel, expr: cst.BaseExpression) -> cst.BaseExpression:
    """The expression a name was bound to (once), or the expression itself."""
    if isinstance(expr, cst.Name):
        binders = model.bindings_of(expr.value, expr)
        if len(binders) == 1 and isinstance(binders[0], cst.Assign):
            return binders[0].value
    return expr


def dataset_class(model: SemanticModel, loader: DataLoaderCall) -> ClassInfo | None:
    """The module's own Dataset class that the loader's dataset is constructed from."""
    dataset = loader.value("dataset")
    if dataset is None:
        return None
    dataset = _binding_value(model, dataset)
    if isinstance(dataset, cst.Call):
        return model.local_class_of(model.call_name(dataset))
    return None


def produces_cuda_batches(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """The dataset or collate_fn already yields CUDA tensors (or may: a data set built where the default device may
    be CUDA): workers and pinning cannot help."""
    residency = model.residency
    if loader.value("dataset") is not None:
        info = dataset_class(model, loader)
        if info is not None and residency.contains_cuda_move(info.node):
            return True
    if model.batch_cost.holds_cuda_tensors(loader):
        return True
    if _made_on_given_device(model, loader):
        return True
    if _transforms_move_to_cuda(model, loader):
        return True
    collate = loader.value("collate_fn")
    if collate is not None and _collate_moves_to_cuda(model, collate):
        return True
    dataset = loader.value("dataset")
    # built where the default device may be CUDA (`torch.set_default_device("cuda")` here, in a caller, or on import
    # of a config module): its tensors are made on the GPU (`analysis/default_device.py`)
    return dataset is not None and data_made_on_default_cuda(model, dataset) is not None


def _made_on_given_device(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """Every source of the dataset is built by a library call given a device that may be CUDA
    (`OnDeviceDataset(data, device=device)`, `get_tasksets(..., device=device).train.dataset`): it holds CUDA
    tensors (`analysis/device_datasets.py`)."""
    from gpulint.analysis.device_datasets import made_on_given_device

    sources = model.batch_cost.dataset_sources(loader)
    return bool(sources) and all(made_on_given_device(model, source) is not None for source in sources)


# Dataset arguments applied to every item the dataset returns (torchvision's convention, kept by most datasets).
_ITEM_TRANSFORMS = frozenset({"transform", "target_transform", "transforms"})


def _transforms_move_to_cuda(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """Every construction of the dataset hands it a per-item transform that moves to CUDA
    (`BaseDataset(x, y, transform=push_to_device)`, `def push_to_device(t): return t.to(device)`): its items are
    CUDA tensors, which workers forked from the training process cannot make and `pin_memory` cannot pin."""
    sources = model.batch_cost.dataset_sources(loader)
    return bool(sources) and all(
        isinstance(source, cst.Call)
        and any(a.keyword is not None and a.keyword.value in _ITEM_TRANSFORMS and _collate_moves_to_cuda(model, a.value) for a in source.args)
        for source in sources  # type: ignore[union-attr]
    )


# Transform wrappers that apply the callables they are given to each item (torchvision's `Compose` and `Lambda`).
_COMPOSED_TRANSFORMS = frozenset({"Compose", "Lambda"})


def collate_moves_to_cuda(model: SemanticModel, collate: cst.BaseExpression) -> bool:
    """The collate function (or per-item transform) `collate` moves what it returns to CUDA: worker processes forked
    from the training process cannot run it, and `pin_memory` cannot pin what it returns."""
    return _collate_moves_to_cuda(model, collate)


def _collate_moves_to_cuda(model: SemanticModel, collate: cst.BaseExpression, depth: int = 0) -> bool:
    """The collate function moves batches to CUDA: a function or lambda of this module that does, or any
    callable handed a CUDA device (`functools.partial(collate, device=device)`, `lambda b: collate(b, device)`,
    a closure built by `make_collate(device)`)."""
    residency = model.residency
    if depth > 4:
        return False
    if isinstance(collate, cst.Name):
        functions = model.functions.get(collate.value, [])
        if functions:
            return any(residency.contains_cuda_move(func) for func in functions)
        # Any definition that may reach the loader counts (`if ...: collate = partial(f, device=d) else: ...`).
        binders = model.bindings_of(collate.value, collate)
        return any(isinstance(b, cst.Assign) and _collate_moves_to_cuda(model, b.value, depth + 1) for b in binders)
    if isinstance(collate, cst.IfExp):
        return any(_collate_moves_to_cuda(model, branch, depth + 1) for branch in (collate.body, collate.orelse))
    if isinstance(collate, cst.Attribute) and isinstance(collate.value, cst.Name):
        # `collate_fn=dataset.collate_fn`: the method of the module's class the object is built from
        writes = model.dataflow.reaching_writes(collate.value.value, collate)
        built = writes[0].value if len(writes) == 1 else None  # the object the loader is built with (`a = Data(...)`)
        info = model.local_class_of(model.call_name(built)) if isinstance(built, cst.Call) else None
        method = info.methods.get(collate.attr.value) if info is not None else None
        return method is not None and (residency.contains_cuda_move(method) or _moves_to_star_device(model, method))
    if isinstance(collate, cst.Lambda):
        # `lambda b: collate(b, vocab)`: also what a function of this module that it calls does
        return residency.contains_cuda_move(collate) or any(
            _given_cuda_device(model, c) or (isinstance(c.func, cst.Name) and any(residency.contains_cuda_move(f) for f in model.functions.get(c.func.value, [])))
            for c in model.calls_inside(collate)
        )
    if isinstance(collate, cst.Call):
        if _given_cuda_device(model, collate):
            return True
        if model.call_name(collate) == "functools.partial" and collate.args:
            return _collate_moves_to_cuda(model, collate.args[0].value, depth + 1)
        if (model.call_name(collate) or "").rsplit(".", 1)[-1] in _COMPOSED_TRANSFORMS:
            # `Compose([ToTensor(), Lambda(lambda x: x.to(device))])`: each part runs on every item in turn
            parts = [e.value for a in collate.args for e in (a.value.elements if isinstance(a.value, (cst.List, cst.Tuple)) else ())]
            parts += [a.value for a in collate.args if not isinstance(a.value, (cst.List, cst.Tuple))]
            return any(_transform_part_moves_to_cuda(model, part, depth + 1) for part in parts)
        if isinstance(collate.func, cst.Name):  # a factory of this module that returns a collate closure
            return any(residency.contains_cuda_move(func) for func in model.functions.get(collate.func.value, []))
    return False


def _transform_part_moves_to_cuda(model: SemanticModel, part: cst.BaseExpression, depth: int) -> bool:
    """A part of a composed transform that is code of this module (a lambda, a function, a nested `Compose` or
    `Lambda`) and moves to CUDA. A library transform's arguments are sizes and options (`RandomCrop(32,
    padding=4)`), not devices."""
    if isinstance(part, cst.Name):
        binders = model.bindings_of(part.value, part)
        if not model.functions.get(part.value) and not any(
            isinstance(b, cst.Assign) and isinstance(b.value, (cst.Lambda, cst.Call)) and _composed(model, b.value) for b in binders
        ):
            return False
    elif not _composed(model, part):
        return False
    return _collate_moves_to_cuda(model, part, depth)


def _composed(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """A lambda, or a `Compose(...)` / `Lambda(...)` call."""
    return isinstance(expr, cst.Lambda) or (
        isinstance(expr, cst.Call) and (model.call_name(expr) or "").rsplit(".", 1)[-1] in _COMPOSED_TRANSFORMS
    )


def _moves_to_star_device(model: SemanticModel, func: cst.FunctionDef) -> bool:
    """`.to(device)` with `device` bound nowhere in the module, after a star import of a library
    (`from torch_snippets import *` binds its `device = "cuda" if torch.cuda.is_available() else "cpu"`): a device
    chosen at run time, CUDA on a GPU host."""
    if any(isinstance(c.func, cst.Attribute) and c.func.attr.value in ("to", "cuda") and _given_cuda_device(model, c) for c in model.calls_inside(func)):
        return True
    cached = model.memo("star imports")
    if "any" not in cached:
        cached["any"] = any(
            isinstance(item, cst.ImportFrom) and isinstance(item.names, cst.ImportStar)
            for line in model.module.body if isinstance(line, cst.SimpleStatementLine) for item in line.body
        )  # fmt: skip
    if not cached["any"]:
        return False
    for call in model.calls_inside(func):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "to" and call.args:
            target = call.args[0].value
            if isinstance(target, cst.Name) and not model.bindings_of(target.value, target):
                return True
            if model.residency.device_kind(target) == CUDA:
                return True  # `device = "cuda" if torch.cuda.is_available() else "cpu"` (with `torch` unknown)
    return False


def _given_cuda_device(model: SemanticModel, call: cst.Call) -> bool:
    return any(not arg.star and model.residency.device_kind(arg.value) == CUDA and not _positional_size(model, arg) for arg in call.args)


def _positional_size(model: SemanticModel, arg: cst.Arg) -> bool:
    """A positional argument that is a whole number (`Resize(h, w)` with `h, w = 128, 192`): a size, not a GPU
    index (an index counts given by keyword: `partial(collate, device=0)`)."""
    if arg.keyword is not None:
        return False
    value = arg.value
    if isinstance(value, cst.Name):
        writes = model.dataflow.reaching_writes(value.value, value)
        if len(writes) == 1 and writes[0].value is not None and not writes[0].is_augmented:
            value = writes[0].value  # `h, w = 128, 192`: the element written
    ok, number = literal_value(value)
    return ok and isinstance(number, int) and not isinstance(number, bool)


# torch_geometric/data/dataset.py (1.x-2.x): `Dataset.__getitem__(idx)` returns `self.get(...)` passed through
# `self.transform` when one was given, on every access; a slice, `index_select` or `shuffle()` is a copy of the
# dataset that keeps its transform. The library's loaders batch the graphs with their own `Collater`, on the CPU.
_GRAPH_DATASETS = "torch_geometric.datasets."
_GRAPH_VIEWS = frozenset({"shuffle", "index_select", "copy"})


def transformed_graph_items(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """A graph library's loader (PyG's, `collate_fn` its own `Collater`, no CUDA) over a library graph dataset
    built with a per-item transform (`QM9(path, transform=T.Compose([...]))`, or a slice or shuffle of one): each
    item runs the transform in `__getitem__`, in the training process without workers."""
    name = model.call_name(loader.call) or ""
    if library_signature(name) is None or not name.startswith("torch_geometric."):
        return False
    dataset = loader.value("dataset")
    return dataset is not None and _built_with_transform(model, dataset, 0)


def _built_with_transform(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> bool:
    if depth > 6:
        return False
    if isinstance(expr, cst.Subscript):
        return _built_with_transform(model, expr.value, depth + 1)
    if isinstance(expr, cst.Name):
        value = _binding_value(model, expr)
        return value is not expr and _built_with_transform(model, value, depth + 1)
    if not isinstance(expr, cst.Call):
        return False
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _GRAPH_VIEWS:
        return _built_with_transform(model, expr.func.value, depth + 1)
    if not (model.call_name(expr) or "").startswith(_GRAPH_DATASETS):
        return False
    transform = next((a.value for a in expr.args if a.keyword is not None and a.keyword.value == "transform"), None)
    return transform is not None and not (isinstance(transform, cst.Name) and transform.value == "None")


def is_unsharded_iterable_dataset(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """An IterableDataset that never asks `get_worker_info()` (see `BatchCost.streams_unsharded`): with workers
    each would yield the same data, or act on a stale copy of the state it reads. A `worker_init_fn` may shard it."""
    if loader.argument("worker_init_fn") is not None:
        return False
    return model.batch_cost.streams_unsharded(loader.value("dataset"))


def defined_for_workers(model: SemanticModel, loader: DataLoaderCall) -> list[str]:
    """What the loader's workers must unpickle that this module defines: its dataset class and its own
    `collate_fn` / `worker_init_fn` functions (`lambda` for a lambda). A worker started by `spawn` or
    `forkserver` finds them only by importing the module that defines them."""
    found = []
    info = dataset_class(model, loader)
    if info is not None:
        found.append(info.node.name.value)
    for argument in ("collate_fn", "worker_init_fn"):
        value = loader.value(argument)
        if isinstance(value, cst.Lambda):
            found.append("lambda")
        elif isinstance(value, cst.Name) and (value.value in model.functions or value.value in model.classes):
            found.append(value.value)
    return found
