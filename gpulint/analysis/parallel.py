"""Data parallelism: `nn.DataParallel` wrappers and whether they can spread over several GPUs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

DATA_PARALLEL = "torch.nn.DataParallel"
DATA_PARALLEL_FUNCTION = "torch.nn.parallel.data_parallel"
DEVICE_COUNT = "torch.cuda.device_count"
_CANONICAL = {"torch.nn.parallel.data_parallel.data_parallel": DATA_PARALLEL_FUNCTION}


@dataclass
class DataParallelCall:
    call: cst.Call
    device_ids: cst.Arg | None
    several_gpus: bool  # device_ids absent or naming several devices, or under a `device_count() > 1` guard
    why: str  # what makes it multi-GPU, for the message


def _device_ids(call: cst.Call, position: int) -> cst.Arg | None:
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "device_ids":
            return arg
    return positional[position] if len(positional) > position else None


def _counts_devices(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`node` calls `torch.cuda.device_count()`, or names a variable assigned from it (`n_gpu`)."""
    for call in model.calls:
        if model.call_name(call) == DEVICE_COUNT and model.is_inside(call, node):
            return True
    names = [node] if isinstance(node, (cst.Name, cst.Attribute)) else []
    for child in _sub_expressions(node):
        if isinstance(child, (cst.Name, cst.Attribute)):
            names.append(child)
    for name in names:
        leaf = name.attr.value if isinstance(name, cst.Attribute) else name.value
        for binder in model.bindings_of(leaf, name) if isinstance(name, cst.Name) else _attribute_binders(model, leaf):
            if isinstance(binder, cst.Assign) and any(
                model.call_name(c) == DEVICE_COUNT and model.is_inside(c, binder.value) for c in model.calls
            ):
                return True
    return False


def _attribute_binders(model: SemanticModel, attr: str) -> list[cst.CSTNode]:
    """Assignments to `<anything>.attr` (`args.n_gpu = torch.cuda.device_count()`)."""
    found = []
    for node in model.attributes:
        if node.attr.value == attr:
            parent = model.parent.get(model.parent.get(node))
            if isinstance(parent, cst.Assign):
                found.append(parent)
    return found


def _sub_expressions(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class _Walk(cst.CSTVisitor):
        def on_visit(self, child: cst.CSTNode) -> bool:
            found.append(child)
            return True

    node.visit(_Walk())
    return found


def _guarded_by_device_count(model: SemanticModel, call: cst.Call) -> bool:
    for ancestor in model.ancestors(call):
        if isinstance(ancestor, (cst.If, cst.IfExp)) and _counts_devices(model, ancestor.test):
            return True
    return False


def find_data_parallel(model: SemanticModel) -> list[DataParallelCall]:
    found = []
    for call in model.calls:
        qualified = model.call_name(call)
        qualified = _CANONICAL.get(qualified or "", qualified)
        info = model.local_class_of(qualified)
        if info is not None and model.is_subclass_of(info.node.name.value, DATA_PARALLEL):
            qualified = DATA_PARALLEL
        if qualified == DATA_PARALLEL:
            device_ids = _device_ids(call, 1)
        elif qualified == DATA_PARALLEL_FUNCTION:
            device_ids = _device_ids(call, 2)
        else:
            continue
        several, why = _several_gpus(model, call, device_ids)
        found.append(DataParallelCall(call, device_ids, several, why))
    return found


def _several_gpus(model: SemanticModel, call: cst.Call, device_ids: cst.Arg | None) -> tuple[bool, str]:
    value = device_ids.value if device_ids is not None else None
    if isinstance(value, (cst.List, cst.Tuple)) and not any(isinstance(e, cst.StarredElement) for e in value.elements):
        return len(value.elements) >= 2, f"`device_ids` names {len(value.elements)} GPUs"
    if _guarded_by_device_count(model, call):
        return True, "under a `torch.cuda.device_count()` check"
    if value is None or (isinstance(value, cst.Name) and value.value == "None"):
        return True, "it spreads over every visible GPU"
    if _counts_devices(model, value):
        return True, "`device_ids` spans `torch.cuda.device_count()` GPUs"
    return False, ""  # device ids from elsewhere: may well be one GPU
