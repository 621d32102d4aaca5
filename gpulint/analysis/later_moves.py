"""Factories whose tensor reaches the GPU after it is built: a later statement, or a project helper that moves it.

    z = torch.randn(n, 100)                      # GPU201 here: filled on the CPU ...
    if self.cuda:
        z = Variable(z).cuda()                   # ... and copied by this move, two lines later
    x = self.to_gpu(torch.zeros(n))              # ... or by a project helper that moves its argument
    t = (torch.ones(n) * i).to(x.device)         # ... or by its own move after host arithmetic (`host_computed.py`)
    s = torch.zeros(1, n).fill_(k).type_as(x)    # ... or by `type_as(x)`, a copy to x's device
    def _init_context(self, b): return torch.zeros(b, h)   # ... or by the caller that moves what a helper returns

`moved_later(model, factory)` answers where the tensor a fill factory builds is copied to the GPU, when that is
not the factory's own `.cuda()` / `.to(device)` (GPU201 reports those directly): the first move of the name
it is bound to that this binding alone reaches, or the project helper (`model.callee`) it is handed to whose
summary moves that parameter to the GPU, or, when the factory is what a function of this module returns, the move
of that result in a caller (`returned_by`; also a name bound to the factory's tensor and returned:
`input_z = torch.rand(n, k) * 2 - 1; return input_z`; a method's caller may hold an instance of its class:
`t = diffusion.sample_timesteps(n).to(device)` with `diffusion = Diffusion(...)`, here or, as the project index
answers, in a step loop of another module). Conversions, views and host arithmetic in between are the same CPU work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import libcst as cst

from gpulint.analysis.host_computed import copies_to_other_device, host_computed
from gpulint.analysis.model import SemanticModel
from gpulint.analysis.residency import CPU


@dataclass(frozen=True)
class LaterMove:
    call: cst.Call  # the move (`z.cuda()`) or the helper call (`self.to_gpu(z)`) that copies it
    what: str  # how the message names it: "`.cuda()` at line 134", "`self.to_gpu()`"
    where: str = ""  # a helper's move: `utils.py:12`
    returned_by: Optional[cst.Call] = None  # the factory is what this call's function returns; the caller moves it


def moved_later(model: SemanticModel, factory: cst.Call, per_step: Optional[Callable[[cst.Call], bool]] = None) -> Optional[LaterMove]:
    """`per_step(move)` prefers, among the callers that move what a helper returns, one that moves it every step."""
    built = host_computed(model, factory)
    found = _moved_from(model, built.node, same_expression=built.computed)
    if found is not None:
        return found
    returned = model.parent.get(built.node)
    func = model.enclosing_function(returned) if isinstance(returned, cst.Return) or _returned_name(model, returned) else None
    if func is None:
        return None
    first = None
    for call in _calls_of(model, func):  # `return torch.zeros(b, k)` in a helper whose caller moves the result
        found = _moved_from(model, host_computed(model, call).node, same_expression=True)
        if found is not None:
            how = f"{found.what} (of what `{model.code(call.func)}()` returns at line {model.line_of(call)})"
            moved = LaterMove(found.call, how, found.where, returned_by=call)
            if per_step is None or per_step(moved.call):
                return moved  # (a caller that moves it every step before one that moves it once)
            first = first or moved
    where = model.project.moved_returns.get(_project_key(model, func)) if first is None else None
    if where is not None:  # a step loop of another module moves what it returns (`analysis/moved_returns.py`)
        return LaterMove(factory, f"the move of what `{func.name.value}()` returns at {where}")
    return first


def _project_key(model: SemanticModel, func: cst.FunctionDef) -> str:
    """How the project index names `func`: `make_noise`, `Diffusion.sample_timesteps` (a method of a class at module level)."""
    owner = model.parent.get(model.parent.get(func))
    if model.parent.get(func) is model.module:
        return func.name.value
    if isinstance(owner, cst.ClassDef) and model.parent.get(owner) is model.module:
        return f"{owner.name.value}.{func.name.value}"
    return ""


def _returned_name(model: SemanticModel, statement: cst.CSTNode) -> bool:
    """`input_z = torch.rand(n, k) * 2 - 1` (in one branch or all), then `return input_z`: what this binding holds
    is what the function returns."""
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0].target, cst.Name)):
        return False
    func = model.enclosing_function(statement)
    if func is None:
        return False
    name = statement.targets[0].target.value
    flow = model.residency.flow
    return any(
        isinstance(r.value, cst.Name) and r.value.value == name
        and any(w.statement is statement for w in flow.reaching_writes(name, r.value))
        for r in model.returns_of(func)
    )  # fmt: skip


def _moved_from(model: SemanticModel, built: cst.BaseExpression, same_expression: bool) -> Optional[LaterMove]:
    """The move that copies the CPU tensor `built` to the GPU: its own `.to(...)` when `same_expression` (arithmetic
    or a view in between, which the direct GPU201 shape does not cover) or `.type_as(x)`, the argument of a project
    helper that moves it, or a later move of the one name it is bound to."""
    residency = model.residency
    parent = model.parent.get(built)
    if isinstance(parent, cst.Arg):
        call = model.parent.get(parent)
        if isinstance(call, cst.Call):
            return _helper_move(model, call, parent)
        return None
    if isinstance(parent, cst.Attribute) and parent.value is built:
        call = model.parent.get(parent)
        if isinstance(call, cst.Call) and call.func is parent:
            move = residency.move(call)
            if copies_to_other_device(model, call) or (same_expression and move is not None and move[0] != CPU):
                return LaterMove(call, f"`.{parent.attr.value}()`")  # the same expression: named as the direct shape is
        return None
    if not (isinstance(parent, cst.Assign) and parent.value is built and len(parent.targets) == 1):
        return None
    target = parent.targets[0].target
    if not isinstance(target, cst.Name):
        return None
    flow = residency.flow
    for name in flow.reads_in(target.value, model.enclosing_function(parent) or model.module):
        if not flow.before(parent, name):
            continue
        writes = flow.reaching_writes(target.value, name)
        if len(writes) != 1 or writes[0].statement is not parent:
            continue
        read = host_computed(model, name).node
        above = model.parent.get(read)
        if isinstance(above, cst.Attribute) and above.value is read:
            call = model.parent.get(above)
            if isinstance(call, cst.Call) and call.func is above:
                move = residency.move(call)
                if (move is not None and move[0] != CPU) or copies_to_other_device(model, call):
                    return LaterMove(call, f"`.{above.attr.value}()` at line {model.line_of(call)}")
        elif isinstance(above, cst.Arg):
            call = model.parent.get(above)
            if isinstance(call, cst.Call):
                found = _helper_move(model, call, above)
                if found is not None:
                    return found
    return None


def _calls_of(model: SemanticModel, func: cst.FunctionDef) -> list[cst.Call]:
    """The calls of this module that run `func`: `name(...)` of a module-level function, `self.name(...)` of a method,
    or `obj.name(...)` / `self.obj.name(...)` on an instance of its class (`diffusion = Diffusion(...)`, as
    `model.project_ref` resolves the receiver: every write that reaches it builds that class)."""
    name = func.name.value
    owner = model.parent.get(model.parent.get(func))
    if model.parent.get(func) is model.module:
        return list(model.calls_of(name)) if model.functions.get(name) == [func] else []
    if not isinstance(owner, cst.ClassDef):
        return []
    info = model.classes.get(owner.name.value)
    at_top = info is not None and info.node is owner and model.parent.get(owner) is model.module
    ref = f"{owner.name.value}.{name}" if at_top else None  # how `project_ref` names a call of it on an instance
    return [
        call for call in model.method_calls(name)
        if isinstance(call.func.value, cst.Name) and call.func.value.value == "self" and model.is_inside(call, owner)
        or ref is not None and model.project_ref(call) == ref
    ]  # fmt: skip


def _helper_move(model: SemanticModel, call: cst.Call, arg: cst.Arg) -> Optional[LaterMove]:
    """`self.get_torch_variable(z)`: a project function that moves the parameter `arg` lands on to the GPU."""
    callee = model.callee(call)
    if callee is None or callee.kind != "function":
        return None
    for given, param in model.arguments_to(call, callee):
        if given is not arg:
            continue
        for effect in callee.effects.get(param, ()):
            if effect[0] == "move":
                return LaterMove(call, f"`{model.code(call.func)}()`", effect[1])
    return None
