"""Host arrays: values that are data already on the host (NumPy arrays, rows unpacked from a sampled batch), as
opposed to sizes or constants. A tensor made from such a value must be copied to the GPU whichever constructor
builds it: `torch.tensor(arr, device=...)` copies the same bytes as `torch.FloatTensor(arr).to(device)`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.array_annotations import param_annotated, returns_array_mapping
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
    (`state, action, reward = memory.sample(n)`, `obs, _ = batch`) or a parameter annotated as a NumPy array
    (`state: np.ndarray`), or a string-keyed item of a dict annotated as NumPy arrays (`samples["obs"]` after
    `samples = self.memory.sample_batch()`, `def sample_batch(self) -> Dict[str, np.ndarray]`)."""
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
        if not writes and isinstance(expr, cst.Name):  # only the parameter's value reaches here
            param = _parameter(model, expr)
            return param is not None and param_annotated(model, param)
        return bool(writes) and all(_writes_host_array(model, w, depth) for w in writes)
    if isinstance(expr, cst.Subscript):
        return _item_of_array_mapping(model, expr)
    return False


def _item_of_array_mapping(model: SemanticModel, expr: cst.Subscript) -> bool:
    """`samples["obs"]` where every reaching write of `samples` is a call returning, or a parameter annotated as,
    `Dict[str, np.ndarray]`."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return False
    if not isinstance(expr.slice[0].slice.value, cst.SimpleString) or not isinstance(expr.value, cst.Name):
        return False
    writes = model.dataflow.reaching_writes(expr.value.value, expr)
    if not writes:  # only the parameter's value reaches here
        param = _parameter(model, expr.value)
        return param is not None and param_annotated(model, param, mapping=True)
    return all(_writes_array_mapping(model, w) for w in writes)


def _parameter(model: SemanticModel, name: cst.Name) -> cst.Param | None:
    """The parameter of the function around `name` that it names, if any."""
    scope = model.scope_of(name)
    binders = model.bindings.get((id(scope), name.value), ())
    return next((b for b in binders if isinstance(b, cst.Param)), None)


def _writes_array_mapping(model: SemanticModel, write) -> bool:
    if isinstance(write.statement, cst.Param):
        return param_annotated(model, write.statement, mapping=True)
    return write.source is None and isinstance(write.value, cst.Call) and returns_array_mapping(model, write.value)


def _writes_host_array(model: SemanticModel, write, depth: int) -> bool:
    if write.is_augmented:
        return False
    if isinstance(write.statement, cst.Param):  # what its annotation says (`state: np.ndarray`)
        return param_annotated(model, write.statement)
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
