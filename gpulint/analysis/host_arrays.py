"""Host arrays: values that are data already on the host (NumPy arrays, rows unpacked from a sampled batch), as
opposed to sizes or constants. A tensor made from such a value must be copied to the GPU whichever constructor
builds it: `torch.tensor(arr, device=...)` copies the same bytes as `torch.FloatTensor(arr).to(device)`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Array methods that return an array of the same data: a size is never reshaped or cast.
_ARRAY_METHODS = frozenset({"reshape", "astype", "numpy", "squeeze", "flatten", "ravel", "transpose", "copy"})
# Sizes a tuple may be unpacked from (`h, w = img.shape`): numbers, not data.
_SIZE_ATTRIBUTES = frozenset({"shape", "size", "ndim"})


def is_host_array(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """`expr` is host data shown by how it was made: a NumPy call, an array method (`state.reshape(1, -1)`), or a
    name whose every reaching write is one of these or one element of an unpacked batch
    (`state, action, reward = memory.sample(n)`, `obs, _ = batch`)."""
    if depth > 4:
        return False
    if isinstance(expr, cst.Call):
        name = model.call_name(expr) or ""
        if name.startswith("numpy."):
            return True
        func = expr.func
        return isinstance(func, cst.Attribute) and func.attr.value in _ARRAY_METHODS and not _is_tensor_method(model, expr)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        key = dotted_name(expr)
        writes = model.dataflow.reaching_writes(key, expr) if key else []
        return bool(writes) and all(_writes_host_array(model, w, depth) for w in writes)
    return False


def _writes_host_array(model: SemanticModel, write, depth: int) -> bool:
    if write.is_augmented:
        return False
    if write.source is not None:  # one element of an unpacked value
        source = write.source
        if isinstance(source, cst.Attribute) and source.attr.value in _SIZE_ATTRIBUTES:
            return False
        if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) and source.func.attr.value in _SIZE_ATTRIBUTES:
            return False
        return isinstance(source, (cst.Call, cst.Name, cst.Attribute, cst.Subscript)) and not model.residency.level(source)
    return write.value is not None and is_host_array(model, write.value, depth + 1)


def _is_tensor_method(model: SemanticModel, call: cst.Call) -> bool:
    """`x.reshape(...)` of a value known to be a tensor (on any device): not NumPy's."""
    func = call.func
    return isinstance(func, cst.Attribute) and (bool(model.residency.level(func.value)) or model.residency.is_module(func.value))
