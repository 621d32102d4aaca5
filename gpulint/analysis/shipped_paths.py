"""Code that never runs with the settings the project ships: `if ngpu > 1:` with `ngpu = 0` written in the
module, `if flag:` with `flag = 0`, `IS_PARALLEL = True if ngpu > 1 else False`.

Only tests whose every input is written in the code count (a literal, a module constant, a local set once):
a value chosen at run time (`torch.cuda.device_count()`) or meant to be changed at launch (a command-line
option, whatever its default; a YAML setting) leaves the branch possible, and the code is reported as usual.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.value_resolution import LITERAL, LOCAL_VARIABLE, MODULE_CONSTANT

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_MAX_DEPTH = 6
# Values only an edit of the code changes (a command-line default is changed at launch).
_WRITTEN_IN_CODE = frozenset({LITERAL, MODULE_CONSTANT, LOCAL_VARIABLE})
_UNKNOWN = object()
_COMPARE = {
    cst.GreaterThan: operator.gt, cst.GreaterThanEqual: operator.ge, cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le, cst.Equal: operator.eq, cst.NotEqual: operator.ne,
}  # fmt: skip


def never_runs(model: SemanticModel, node: cst.CSTNode) -> bool:
    """An enclosing `if` (or conditional expression) takes the other branch with the shipped settings."""
    child = node
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.If) and child is not ancestor.test:
            value = shipped_value(model, ancestor.test)
            if value is not _UNKNOWN and bool(value) != (child is ancestor.body):
                return True
        elif isinstance(ancestor, cst.IfExp) and child in (ancestor.body, ancestor.orelse):
            value = shipped_value(model, ancestor.test)
            if value is not _UNKNOWN and bool(value) != (child is ancestor.body):
                return True
        child = ancestor
    return False


def shipped_value(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> object:
    """The value `expr` has with the shipped settings, or `_UNKNOWN`."""
    if depth > _MAX_DEPTH:
        return _UNKNOWN
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.BaseNumber, cst.SimpleString)):
        resolved = model.values.resolve(expr)
        if resolved is not None and resolved.origin in _WRITTEN_IN_CODE:
            return resolved.value
        if isinstance(expr, cst.Name):  # `IS_PARALLEL = True if ngpu > 1 else False`, set once
            binders = model.bindings_of(expr.value, expr)
            if len(binders) == 1 and isinstance(binders[0], cst.Assign) and len(binders[0].targets) == 1:
                if isinstance(binders[0].targets[0].target, cst.Name):
                    return shipped_value(model, binders[0].value, depth + 1)
        return _UNKNOWN
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = shipped_value(model, expr.expression, depth + 1)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(expr, cst.BooleanOperation):
        left = shipped_value(model, expr.left, depth + 1)
        right = shipped_value(model, expr.right, depth + 1)
        if isinstance(expr.operator, cst.And):  # one false side decides, whatever the other is
            if (left is not _UNKNOWN and not left) or (right is not _UNKNOWN and not right):
                return False
            return _UNKNOWN if _UNKNOWN in (left, right) else True
        if (left is not _UNKNOWN and left) or (right is not _UNKNOWN and right):
            return True
        return _UNKNOWN if _UNKNOWN in (left, right) else False
    if isinstance(expr, cst.IfExp):
        test = shipped_value(model, expr.test, depth + 1)
        if test is _UNKNOWN:
            return _UNKNOWN
        return shipped_value(model, expr.body if test else expr.orelse, depth + 1)
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        compare = _COMPARE.get(type(expr.comparisons[0].operator))
        left = shipped_value(model, expr.left, depth + 1)
        right = shipped_value(model, expr.comparisons[0].comparator, depth + 1)
        if compare is None or _UNKNOWN in (left, right) or not (_number(left) and _number(right)):
            return _UNKNOWN
        return compare(left, right)
    return _UNKNOWN


def _number(value: object) -> bool:
    return isinstance(value, (int, float))

