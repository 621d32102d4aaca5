"""Every `torch.utils.data.DataLoader` construction, with its arguments found by keyword or position."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import ClassInfo, SemanticModel

DATALOADER = "torch.utils.data.DataLoader"
TENSOR_DATASET = "torch.utils.data.TensorDataset"
ITERABLE_DATASET = "torch.utils.data.IterableDataset"

# torch.utils.data.DataLoader.__init__, in order; the rest are keyword-only.
POSITIONAL_PARAMETERS = (
    "dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
    "pin_memory", "drop_last", "timeout", "worker_init_fn", "multiprocessing_context", "generator",
)  # fmt: skip


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
    # A subclass with its own __init__ may take other arguments: its calls are not DataLoader calls.
    return info is not None and model.is_subclass_of(info.node.name.value, DATALOADER) and "__init__" not in info.methods


def find_dataloaders(model: SemanticModel) -> list[DataLoaderCall]:
    found = []
    for call in model.calls:
        if not _is_dataloader_class(model, model.call_name(call)):
            continue
        arguments: dict[str, cst.Arg | PackedArgument] = {}
        opaque = False
        maybe: frozenset[str] = frozenset()
        position = 0
        for arg in call.args:
            if arg.star == "**":
                packed = model.values.keywords(arg.value)
                if packed is None:
                    opaque = True
                    continue
                arguments.update({name: PackedArgument(value) for name, value in packed.values.items()})
                maybe |= packed.maybe
            elif arg.star:
                opaque = True
            elif arg.keyword is not None:
                arguments[arg.keyword.value] = arg
            else:
                if position < len(POSITIONAL_PARAMETERS):
                    arguments[POSITIONAL_PARAMETERS[position]] = arg
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


def _tensor_dataset(model: SemanticModel, loader: DataLoaderCall) -> cst.Call | None:
    """The `TensorDataset(...)` call that is the loader's dataset (in the call, or bound to a name once)."""
    dataset = loader.value("dataset")
    value = _binding_value(model, dataset) if dataset is not None else None
    return value if isinstance(value, cst.Call) and model.call_name(value) == TENSOR_DATASET else None


def has_tensor_dataset(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """The dataset is a `TensorDataset`: in-memory tensors."""
    return _tensor_dataset(model, loader) is not None


def produces_cuda_batches(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """The dataset or collate_fn already yields CUDA tensors: workers and pinning cannot help."""
    residency = model.residency
    tensors = _tensor_dataset(model, loader)
    if tensors is not None and any(not arg.star and residency.is_gpu(arg.value, certain=True) for arg in tensors.args):
        return True
    if loader.value("dataset") is not None:
        info = dataset_class(model, loader)
        if info is not None and residency.contains_cuda_move(info.node):
            return True
    collate = loader.value("collate_fn")
    if collate is not None:
        if isinstance(collate, cst.Lambda):
            return residency.contains_cuda_move(collate)
        if isinstance(collate, cst.Name):
            for func in model.functions.get(collate.value, []):
                if residency.contains_cuda_move(func):
                    return True
    return False


def is_unsharded_iterable_dataset(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """An IterableDataset that never asks `get_worker_info()`: each worker would yield the same data."""
    info = dataset_class(model, loader)
    if info is None or not model.is_subclass_of(info.node.name.value, ITERABLE_DATASET):
        return False
    if loader.argument("worker_init_fn") is not None:
        return False
    return "get_worker_info" not in model.code(info.node)


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
