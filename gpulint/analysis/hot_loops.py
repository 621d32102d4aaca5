"""Loops: which are hot (train steps), which iterate a given loader, which run in eval mode."""

from __future__ import annotations

from typing import TYPE_CHECKING

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


def trains(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`node` runs a backward pass or an optimizer step, directly or through a function of this module."""
    return model.through_calls("trains", node, lambda here: any(_is_training_step(model, c) for c in model.calls_inside(here)))


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


def consuming_loops(model: SemanticModel, value: cst.CSTNode) -> list[cst.For]:
    """`for` loops over the object `value` builds (see `loader_flow`: names, factories, function arguments)."""
    loops: list[cst.For] = []
    for iteration in model.loader_flow.iterations_of(value):
        if iteration.is_for and isinstance(iteration.loop, cst.For) and iteration.loop not in loops:
            loops.append(iteration.loop)
    return loops
