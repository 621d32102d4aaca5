"""Per-step code with no loop around it in sight: an `nn.Module`'s `forward`, which whatever loop runs the
model calls once per batch, and the methods of its class that `forward` calls on `self`
(`self.reparametrize(mu, logvar)`). A method reached only from `__init__` is set-up, run once.

`residency.step_loop` answers for code inside a step loop or a framework's step function; this module
answers for the model's own code, which the loops that run it cannot show.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_MAX_HOPS = 3


def forward_of(model: SemanticModel, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The `forward` of an `nn.Module` subclass of this module that runs `node` on every call: `node` is in
    it, or in a method of the same class that it calls through `self.name(...)` (up to three hops)."""
    method = _method(model, node)
    if method is None:
        return None
    owner = model.parent.get(model.parent.get(method))
    if not isinstance(owner, cst.ClassDef) or not model.is_subclass_of(owner.name.value, "torch.nn.Module"):
        return None
    info = model.classes.get(owner.name.value)
    if info is None:
        return None
    reached, frontier = {method.name.value}, [method.name.value]
    for _ in range(_MAX_HOPS + 1):
        if "forward" in reached:
            forward = info.methods.get("forward")
            return forward if isinstance(forward, cst.FunctionDef) else None
        callers = []
        for name, caller in info.methods.items():
            if name not in reached and name != "__init__" and any(_calls_self(c, frontier) for c in model.calls_inside(caller)):
                callers.append(name)
        if not callers:
            return None
        reached.update(callers)
        frontier = callers
    return None


def _method(model: SemanticModel, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The method (a function defined directly in a class) around `node`."""
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef) and isinstance(model.parent.get(model.parent.get(ancestor)), cst.ClassDef):
            return ancestor
    return None


def _calls_self(call: cst.Call, names: list[str]) -> bool:
    func = call.func
    return (
        isinstance(func, cst.Attribute) and func.attr.value in names
        and isinstance(func.value, cst.Name) and func.value.value == "self"
    )  # fmt: skip
