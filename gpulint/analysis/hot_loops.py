"""Loops: which are hot (train steps), which iterate a given loader, which run in eval mode."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

from gpulint.analysis.model import Loop

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Wrappers whose iteration yields the wrapped loader's batches.
_ITERATION_WRAPPERS = frozenset({"enumerate", "zip", "tqdm", "iter", "tqdm.tqdm", "tqdm.auto.tqdm", "trange"})
_NO_GRAD_CONTEXTS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"})


def _is_training_step(model: SemanticModel, call: cst.Call) -> bool:
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "backward":
        return True
    if func.attr.value == "step":
        base = model.code(func.value).lower()
        return "opt" in base or "scaler" in base
    return False


def _calls_in(model: SemanticModel, node: cst.CSTNode) -> Iterator[cst.Call]:
    yield from model.calls_inside(node)


def trains(model: SemanticModel, node: cst.CSTNode, _seen: frozenset[str] = frozenset()) -> bool:
    """`node` runs a backward pass or an optimizer step, directly or through a function of this module."""
    for call in _calls_in(model, node):
        if _is_training_step(model, call):
            return True
        if isinstance(call.func, cst.Name) and call.func.value not in _seen:
            for func in model.functions.get(call.func.value, []):
                if trains(model, func, _seen | {call.func.value}):
                    return True
    return False


def is_hot(model: SemanticModel, loop: Loop) -> bool:
    return trains(model, loop)


def iterated_expressions(model: SemanticModel, loop: cst.For) -> list[str]:
    """Source text of what the loop iterates, looking through enumerate/zip/tqdm/iter."""
    pending: list[cst.BaseExpression] = [loop.iter]
    found = []
    while pending:
        expr = pending.pop()
        if isinstance(expr, cst.Call):
            name = model.qualified_name(expr.func) or model.code(expr.func)
            if name in _ITERATION_WRAPPERS or name.split(".")[-1] in _ITERATION_WRAPPERS:
                pending.extend(arg.value for arg in expr.args if arg.keyword is None)
                continue
        found.append(model.code(expr))
    return found


def loops_over(model: SemanticModel, expr_code: str, scope: cst.CSTNode | None = None) -> list[cst.For]:
    """For-loops (inside `scope`, default anywhere) that iterate the expression `expr_code`."""
    return [
        loop
        for loop in model.loops
        if isinstance(loop, cst.For)
        and (scope is None or model.is_inside(loop, scope))
        and expr_code in iterated_expressions(model, loop)
    ]


def in_no_grad(model: SemanticModel, node: cst.CSTNode) -> bool:
    """Under `with torch.no_grad()` / `inference_mode()`, or in a function decorated with one."""
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.With):
            for item in ancestor.items:
                target = item.item.func if isinstance(item.item, cst.Call) else item.item
                if model.qualified_name(target) in _NO_GRAD_CONTEXTS:
                    return True
        if isinstance(ancestor, cst.FunctionDef):
            for decorator in ancestor.decorators:
                target = decorator.decorator
                target = target.func if isinstance(target, cst.Call) else target
                if model.qualified_name(target) in _NO_GRAD_CONTEXTS:
                    return True
    return False


def _assigned_names(model: SemanticModel, value: cst.CSTNode) -> list[str]:
    parent = model.parent.get(value)
    if isinstance(parent, cst.Assign):
        return [model.code(t.target) for t in parent.targets if isinstance(t.target, (cst.Name, cst.Attribute))]
    return []


def consuming_loops(model: SemanticModel, value: cst.CSTNode) -> list[cst.For]:
    """Loops over the variable `value` is assigned to, also inside module functions it is passed to."""
    loops: list[cst.For] = []
    scope = model.scope_of(value)
    for name in _assigned_names(model, value):
        is_attribute = "." in name  # `self.loader` is visible from the class's other methods too
        loops.extend(loops_over(model, name, None if is_attribute else scope))
        for call in model.calls:
            if not isinstance(call.func, cst.Name) or not (is_attribute or model.scope_of(call) is scope):
                continue
            for func in model.functions.get(call.func.value, []):
                params = [p.name.value for p in (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params)]
                for i, arg in enumerate(call.args):
                    if model.code(arg.value) != name:
                        continue
                    param = arg.keyword.value if arg.keyword is not None else (params[i] if i < len(params) and not arg.star else None)
                    if param is not None:
                        loops.extend(loops_over(model, param, func))
    return loops
