"""Factories whose tensor reaches the GPU after it is built: a later statement, or a project helper that moves it.

    z = torch.randn(n, 100)                      # GPU201 here: filled on the CPU ...
    if self.cuda:
        z = Variable(z).cuda()                   # ... and copied by this move, two lines later
    x = self.to_gpu(torch.zeros(n))              # ... or by a project helper that moves its argument

`moved_later(model, factory)` answers where the tensor a fill factory builds is copied to the GPU, when that is
not the factory's own `.cuda()` / `.to(device)` (GPU201 reports those directly): the first move of the name
it is bound to that this binding alone reaches, or the project helper (`model.callee`) it is handed to whose
summary moves that parameter to the GPU. `Variable(t)` and dtype conversions in between are the same tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import libcst as cst

from gpulint.analysis.model import SemanticModel
from gpulint.analysis.residency import CPU


# Views of a tensor: moving one copies the CPU tensor's data just the same.
_VIEWS = frozenset({
    "expand", "expand_as", "view", "view_as", "reshape", "unsqueeze", "squeeze", "permute", "transpose", "flatten", "contiguous",
})  # fmt: skip
# In-place writes that return the tensor they write (`torch.zeros(n, k).scatter_(1, y, 1)`, a one-hot): the CPU
# tensor the factory filled, written on the CPU too.
_IN_PLACE_FILLS = frozenset({
    "scatter_", "scatter_add_", "index_fill_", "index_put_", "masked_fill_", "fill_", "zero_", "uniform_", "normal_",
    "bernoulli_", "random_", "exponential_",
})  # fmt: skip


@dataclass(frozen=True)
class LaterMove:
    call: cst.Call  # the move (`z.cuda()`) or the helper call (`self.to_gpu(z)`) that copies it
    what: str  # how the message names it: "`.cuda()` at line 134", "`self.to_gpu()`"
    where: str = ""  # a helper's move: `utils.py:12`


def moved_later(model: SemanticModel, factory: cst.Call) -> Optional[LaterMove]:
    residency = model.residency
    built = _outermost_conversion(model, factory)
    parent = model.parent.get(built)
    if isinstance(parent, cst.Arg):
        call = model.parent.get(parent)
        if isinstance(call, cst.Call):
            return _helper_move(model, call, parent)
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
        read = _outermost_conversion(model, name)
        above = model.parent.get(read)
        if isinstance(above, cst.Attribute) and above.value is read:
            call = model.parent.get(above)
            if isinstance(call, cst.Call) and call.func is above:
                move = residency.move(call)
                if move is not None and move[0] != CPU:
                    return LaterMove(call, f"`.{above.attr.value}()` at line {model.line_of(call)}")
        elif isinstance(above, cst.Arg):
            call = model.parent.get(above)
            if isinstance(call, cst.Call):
                found = _helper_move(model, call, above)
                if found is not None:
                    return found
    return None


def _outermost_conversion(model: SemanticModel, node: cst.BaseExpression) -> cst.BaseExpression:
    """`Variable(torch.randn(n))`, `torch.arange(n).long()`: the outermost expression that is still `node`'s tensor."""
    residency = model.residency
    while True:
        parent = model.parent.get(node)
        if isinstance(parent, cst.Arg):
            call = model.parent.get(parent)
            if isinstance(call, cst.Call) and residency.is_variable_wrapper(call):
                node = call
                continue
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = model.parent.get(parent)
            if isinstance(call, cst.Call) and call.func is parent and (
                parent.attr.value in _VIEWS or parent.attr.value in _IN_PLACE_FILLS or (not call.args and residency.converted_factory(call) is not None)
            ):
                node = call  # `alpha.expand_as(x)`, `t.long()`: still the CPU tensor the factory filled
                continue
        return node


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
