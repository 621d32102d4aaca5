"""Branches a call cannot take: a method's wait that sits behind a setting the call's own path has ruled out.

A class that picks its code by a setting fixed at construction (`self.parameterization = config.parameterization`,
assigned in `__init__` only) branches on it in several methods: `_sample` returns `self._ar_sampler(...)` under
`if self.parameterization == 'ar':`, and `forward` runs `self._subs_parameterization(...)` (a boolean-mask read)
only under `if self.parameterization == 'subs':`. A call of `self.forward(...)` in `_ar_sampler` then never reaches
the read: on that path the setting is `'ar'`, so the `'subs'` branch is false.

`unreached_wait(model, call, via)`: True when the wait a project summary reports for `call` at `via` ("path:line")
lies in a method of this module's class that `call`'s callee reaches only through calls under `self.A == c2` (or
in the `else` of `self.A != c2`), while the call itself runs where `self.A == c1` holds, `c1 != c2` (inside such a
branch, or in a method whose every call in the module is). Only string, number and boolean literals compare; an
attribute assigned outside `__init__`, a method called from anywhere but `self.<method>(...)` in its own class
(handed on, or called from another module: not known), or a chain longer than a few methods is never excluded.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_MAX_CHAIN = 4  # methods followed from the callee to the wait


def unreached_wait(model: SemanticModel, call: cst.Call, via: Optional[str]) -> bool:
    if not via or ":" not in via or not _calls_own_method(call):
        return False
    shown, _, line = via.rpartition(":")
    if not line.isdigit() or not PurePosixPath(model.path.replace("\\", "/")).as_posix().endswith(shown.lstrip("./")):
        return False
    caller = model.enclosing_function(call)
    owner = _owner(model, caller) if caller is not None else None
    if owner is None:
        return False
    info = model.classes.get(owner.name.value)
    callee = info.methods.get(call.func.attr.value) if info is not None else None  # type: ignore[attr-defined]
    if callee is None:
        return False
    target = _method_at(model, info.methods, int(line))
    if target is None or target is callee:
        return False  # the wait is in the callee itself, on every path
    known = _facts_at(model, call, info.methods, 0)
    if not known:
        return False
    known = {attr: value for attr, value in known.items() if _fixed(model, owner, attr)}
    # reached at all through the class's own calls (else through something not read: kept), but not on this path
    return bool(known) and _reaches(model, callee, target, info.methods, {}, 0) and not _reaches(model, callee, target, info.methods, known, 0)


def _calls_own_method(call: cst.Call) -> bool:
    func = call.func
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"


def _owner(model: SemanticModel, function: cst.FunctionDef) -> Optional[cst.ClassDef]:
    holder = model.parent.get(model.parent.get(function))  # FunctionDef -> IndentedBlock -> ClassDef
    return holder if isinstance(holder, cst.ClassDef) else None


def _method_at(model: SemanticModel, methods: dict, line: int) -> Optional[cst.FunctionDef]:
    for method in methods.values():
        where = model.range(method)
        if where.start.line <= line <= where.end.line:
            return method
    return None


def _condition(model: SemanticModel, node: cst.CSTNode, stop: cst.CSTNode) -> dict[str, object]:
    """`{attr: value}` for each `if self.attr == value:` whose body holds `node` (or `!=` whose `else` does), up to `stop`."""
    facts: dict[str, object] = {}
    child = node
    for ancestor in model.ancestors(node):
        if ancestor is stop:
            break
        if isinstance(ancestor, cst.If) and child is not ancestor.test:
            equal = _equality(ancestor.test)
            if equal is not None:
                attr, value, positive = equal
                in_body = child is ancestor.body
                if in_body == positive:
                    facts.setdefault(attr, value)
        child = ancestor
    return facts


def _equality(test: cst.BaseExpression) -> Optional[tuple[str, object, bool]]:
    """(attr, value, True) for `self.attr == value`, (attr, value, False) for `self.attr != value`."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    operator = test.comparisons[0].operator
    if not isinstance(operator, (cst.Equal, cst.NotEqual)):
        return None
    left, right = test.left, test.comparisons[0].comparator
    if not _self_attribute(left):
        left, right = right, left
    if not _self_attribute(left):
        return None
    known, value = literal_value(right)
    if not known:
        return None
    return left.attr.value, value, isinstance(operator, cst.Equal)  # type: ignore[attr-defined]


def _self_attribute(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _own_calls(model: SemanticModel, name: str) -> Optional[list[cst.Call]]:
    """The calls `self.<name>(...)` of the module; None when the name is used any other way (handed on, another receiver)."""
    calls = list(model.method_calls(name))
    if not calls or not all(_calls_own_method(c) for c in calls):
        return None
    uses = [a for a in model.attributes_inside(model.module) if a.attr.value == name]
    return calls if len(uses) == len(calls) else None


def _facts_at(model: SemanticModel, node: cst.CSTNode, methods: dict, depth: int) -> dict[str, object]:
    """The settings known at `node`: its own branch conditions, and those every call of its method is under."""
    function = model.enclosing_function(node)
    if function is None:
        return {}
    facts = _condition(model, node, function)
    if depth >= _MAX_CHAIN or methods.get(function.name.value) is not function or function.name.value.startswith("__"):
        return facts
    calls = _own_calls(model, function.name.value)
    if not calls:
        return facts
    shared: Optional[dict[str, object]] = None
    for outer in calls:
        here = _facts_at(model, outer, methods, depth + 1)
        shared = here if shared is None else {k: v for k, v in shared.items() if k in here and here[k] == v}
    for attr, value in (shared or {}).items():
        facts.setdefault(attr, value)
    return facts


def _fixed(model: SemanticModel, owner: cst.ClassDef, attr: str) -> bool:
    """`self.<attr>` is assigned only in `__init__` of its class (a setting fixed at construction)."""
    for target in model.attributes_inside(owner):
        if target.attr.value != attr or not _self_attribute(target):
            continue
        holder = model.parent.get(target)
        if isinstance(holder, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)) or isinstance(holder, cst.Del):
            function = model.enclosing_function(target)
            if function is None or function.name.value != "__init__":
                return False
    return True


def _reaches(model: SemanticModel, function: cst.FunctionDef, target: cst.FunctionDef, methods: dict, known: dict, depth: int) -> bool:
    """Some call in `function` whose branch conditions agree with `known` leads to `target` (unknown: True)."""
    if depth > _MAX_CHAIN:
        return True
    for inner in model.calls_inside(function):
        if not _calls_own_method(inner):
            if isinstance(inner.func, cst.Attribute) and inner.func.attr.value == target.name.value:
                return True  # the method through another receiver: not read
            continue
        name = inner.func.attr.value  # type: ignore[attr-defined]
        method = methods.get(name)
        if method is None:
            continue
        conditions = _condition(model, inner, function)
        if any(attr in known and known[attr] != value for attr, value in conditions.items()):
            continue  # a branch the path has ruled out
        if method is target or (method is not function and _reaches(model, method, target, methods, known, depth + 1)):
            return True
    return False
