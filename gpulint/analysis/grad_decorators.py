"""Project decorators that switch autograd off: `@nograd` over `def nograd(f): def new_f(*a, **k): with torch.no_grad():
return f(*a, **k); return new_f` (simple-faster-rcnn-pytorch's `predict`).

`disables_autograd(model, target)`: `target` (a decorator's name) names a function of this module, and only that one
(a name bound once), that defines an inner function, returns it, and calls the decorated function (its first
parameter) only under `with torch.no_grad()` / `torch.inference_mode()` in it. The decorated function then runs
without autograd, as under `@torch.no_grad()` itself. A decorator that also calls the function outside the context
(`if training: return f(...)`), returns something else, or is defined in another module is not known to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel


def disables_autograd(model: SemanticModel, target: cst.BaseExpression) -> bool:
    from gpulint.analysis.hot_loops import in_no_grad

    if not isinstance(target, cst.Name):
        return False
    definitions = model.functions.get(target.value, ())
    if len(definitions) != 1 or not isinstance(model.parent.get(definitions[0]), cst.Module) or model.module_bindings(target.value):
        return False  # a method, a nested function, or a name also bound by assignment
    decorator = definitions[0]
    params = decorator.params.params
    if not params or decorator.decorators:
        return False
    wrapped = params[0].name.value
    inner = [s for s in decorator.body.body if isinstance(s, cst.FunctionDef)]
    returned = [
        r.value.value
        for s in decorator.body.body
        if isinstance(s, cst.SimpleStatementLine)
        for r in s.body
        if isinstance(r, cst.Return) and isinstance(r.value, cst.Name)
    ]
    if len(inner) != 1 or returned != [inner[0].name.value]:
        return False
    calls = [c for c in model.calls_inside(inner[0]) if isinstance(c.func, cst.Name) and c.func.value == wrapped]
    return bool(calls) and all(in_no_grad(model, c) for c in calls)
