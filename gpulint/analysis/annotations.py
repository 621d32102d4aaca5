"""What a parameter's type annotation says it holds: an object of a class, not a tensor.

`def train(..., aggregator: MetricAggregator | None)` says the parameter is a metrics object or None, even where
the project's callers build it with `.to(device)` (a `torchmetrics` collection moves to the GPU the way a tensor
does). Its truth value (`if aggregator and not aggregator.disabled:`) is a Python test of an object: nothing waits
for the GPU. Only a class imported by name from a library that is not a tensor library, or one of this module's
classes that does not derive from `torch.Tensor`, counts; containers (`Dict[str, Tensor]`), type variables,
`Any`, builtins (`float`, which a caller may still fill with a 0-d tensor) and aliases prove nothing, nor does a
class named like data (`batch: Batch`, `out: ModelOutput`, `state: TrainState`): its attributes are the tensors
the step reads (`batch.labels.sum().item()`), and the attributes of an annotated parameter are where it is.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Libraries whose classes may be (or hold) tensors, and `typing`'s wrappers of other types.
_TENSOR_LIBRARIES = ("torch", "numpy", "jax", "tensordict", "tensorflow", "cupy", "typing", "typing_extensions",
                     "collections", "builtins", "jaxtyping", "torchtyping")  # fmt: skip
_UNIONS = frozenset({"typing.Optional", "typing.Union"})
# Class names that say tensor data whatever library they come from (`TensorDict`, `NDArray`, `BatchedTensor`), or a
# container of it whose attributes are tensors (`Batch`, `ModelOutput`, `TrainState`, `Rollout`): not proved objects.
_TENSOR_NAME = re.compile(
    r"tensor|array|parameter|buffer|batch|sample|input|output|data|state|result|example|feature|obs|observation|transition|"
    r"trajector|rollout|episode|step",
    re.IGNORECASE,
)


def annotated_as_object(model: SemanticModel, param: cst.Param) -> bool:
    """`param`'s annotation names only classes that are not tensors (and None): `MetricAggregator | None`,
    `Optional[Logger]`."""
    if param.annotation is None:
        return False
    classes = _alternatives(model, param.annotation.annotation)
    return bool(classes) and all(_object_class(model, c) for c in classes)


def _alternatives(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> Optional[list[cst.BaseExpression]]:
    """The classes a union names, None left out: `A | None` and `Optional[A]` -> [A]; [] when it names none."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Name) and expr.value == "None":
        return []
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
        left, right = _alternatives(model, expr.left, depth + 1), _alternatives(model, expr.right, depth + 1)
        return None if left is None or right is None else [*left, *right]
    if isinstance(expr, cst.Subscript) and model.qualified_name(expr.value) in _UNIONS:
        found: list[cst.BaseExpression] = []
        for element in expr.slice:
            if not isinstance(element.slice, cst.Index):
                return None
            inner = _alternatives(model, element.slice.value, depth + 1)
            if inner is None:
                return None
            found.extend(inner)
        return found
    if isinstance(expr, (cst.Name, cst.Attribute)):
        return [expr]
    return None  # a string annotation, a container (`list[Tensor]`), anything else: not followed


def _object_class(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    name = dotted_name(expr)
    if name is None or _TENSOR_NAME.search(name.rsplit(".", 1)[-1]) or not name.rsplit(".", 1)[-1][:1].isupper():
        return False  # (a lower-case name is a builtin, a module or an alias: not a class for sure)
    if "." not in name and name in model.classes:  # this module's class: a tensor only if it derives from one
        return not model.derives_from(name, "a tensor subclass", lambda bases: any(_TENSOR_NAME.search(b) for b in bases))
    qualified = model.imports.resolve(name)
    if qualified is None or "." not in qualified:
        return False  # not imported by name here (an alias, a type variable, a name from a star import)
    return not qualified.startswith(tuple(f"{library}." for library in _TENSOR_LIBRARIES))
