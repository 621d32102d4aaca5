"""Array annotations: what a type annotation says is NumPy data on the host.

`def select_action(self, state: np.ndarray)` says `state` is a host array (a gym observation); `def sample_batch(self)
-> Dict[str, np.ndarray]` says each string-keyed item of what it returns is one (a replay buffer's minibatch). A
tensor made from such a value must be copied to the GPU whichever constructor builds it (`analysis/host_arrays.py`).
Only NumPy's own array classes count; `Any`, `Tensor`, containers of anything else and unannotated code prove nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_ARRAY_CLASSES = frozenset({"numpy.ndarray", "numpy.typing.NDArray"})
_MAPPINGS = frozenset({"typing.Dict", "typing.Mapping", "collections.abc.Mapping", "dict", "builtins.dict"})
_UNIONS = frozenset({"typing.Optional"})


def is_array_annotation(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`np.ndarray`, `NDArray[np.float32]`, `Optional[np.ndarray]`, `np.ndarray | None`."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
        sides = [s for s in (expr.left, expr.right) if not (isinstance(s, cst.Name) and s.value == "None")]
        return len(sides) == 1 and is_array_annotation(model, sides[0])
    if isinstance(expr, cst.Subscript):
        only = expr.slice[0].slice if len(expr.slice) == 1 else None
        if model.qualified_name(expr.value) in _UNIONS and isinstance(only, cst.Index):
            return is_array_annotation(model, only.value)
        return model.qualified_name(expr.value) in _ARRAY_CLASSES
    return isinstance(expr, (cst.Name, cst.Attribute)) and model.qualified_name(expr) in _ARRAY_CLASSES


def is_array_mapping_annotation(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`Dict[str, np.ndarray]` / `dict[str, np.ndarray]`: every item is a host array."""
    if not isinstance(expr, cst.Subscript) or len(expr.slice) != 2:
        return False
    container = model.qualified_name(expr.value) or (expr.value.value if isinstance(expr.value, cst.Name) else None)
    item = expr.slice[1].slice
    return container in _MAPPINGS and isinstance(item, cst.Index) and is_array_annotation(model, item.value)


def param_annotated(model: SemanticModel, param: cst.Param, mapping: bool = False) -> bool:
    """`param` is annotated as a host array (or, with `mapping`, as a dict of them)."""
    if param.annotation is None:
        return False
    check = is_array_mapping_annotation if mapping else is_array_annotation
    return check(model, param.annotation.annotation)


def returns_array_mapping(model: SemanticModel, call: cst.Call) -> bool:
    """`call` runs a function of this module whose every definition of that name returns a dict of host arrays
    (`self.memory.sample_batch()` with `def sample_batch(self) -> Dict[str, np.ndarray]`)."""
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    defs = model.functions.get(name, ()) if name else ()
    return bool(defs) and all(d.returns and is_array_mapping_annotation(model, d.returns.annotation) for d in defs)
