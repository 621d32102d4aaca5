"""Tensors computed on the CPU from a factory's fresh tensor, and moves that copy to another tensor's device.

    t = (torch.ones(n) * i).to(x.device)                       # arithmetic with a host number: still on the CPU
    emb = torch.exp(torch.arange(half, dtype=torch.float32) * -k)  # an elementwise function of it: still on the CPU
    s = torch.zeros(1, n).fill_(stride).type_as(x)              # `type_as(x)`: copied to x's device (and dtype)

`host_computed(model, node)` walks out from a factory call to the outermost expression that is still computed on
the CPU from that one tensor (dtype conversions, views, in-place fills, `Variable`, arithmetic with an operand that
is no call or a `math` function's float, elementwise `torch.*` functions of it alone); `computed` says whether the
walk passed more than the dtype conversions a direct `torch.zeros(n).long().cuda()` has.
`copies_to_other_device(model, call)` answers whether `t.type_as(x)` / `t.to(x)` copies `t` to the GPU: `x` a tensor
(never a module), as `.to(x.device)` is.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from gpulint.analysis.model import SemanticModel
from gpulint.analysis.residency import DTYPE_CONVERSIONS as CONVERSIONS

# Views of a tensor: moving one copies the CPU tensor's data just the same.
VIEWS = frozenset({
    "expand", "expand_as", "view", "view_as", "reshape", "unsqueeze", "squeeze", "permute", "transpose", "flatten", "contiguous",
})  # fmt: skip
# In-place writes that return the tensor they write (`torch.zeros(n, k).scatter_(1, y, 1)`, a one-hot): the CPU
# tensor the factory filled, written on the CPU too.
IN_PLACE_FILLS = frozenset({
    "scatter_", "scatter_add_", "index_fill_", "index_put_", "masked_fill_", "fill_", "zero_", "uniform_", "normal_",
    "bernoulli_", "random_", "exponential_",
})  # fmt: skip
# Elementwise functions of one tensor: `torch.exp(t)` of a CPU tensor runs on the CPU and stays there.
_ELEMENTWISE = frozenset({
    "exp", "log", "sin", "cos", "sqrt", "rsqrt", "abs", "neg", "sigmoid", "tanh", "floor", "ceil", "round", "reciprocal",
    "log1p", "expm1", "pow",
})  # fmt: skip
_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Power, cst.Modulo)


@dataclass(frozen=True)
class HostComputed:
    node: cst.BaseExpression  # the outermost expression still computed on the CPU from the factory's tensor
    computed: bool  # arithmetic, a view, an in-place fill or a function lies between it and the factory


def host_computed(model: SemanticModel, node: cst.BaseExpression) -> HostComputed:
    residency = model.residency
    computed = False
    while True:
        parent = model.parent.get(node)
        if isinstance(parent, cst.Arg):
            call = model.parent.get(parent)
            if isinstance(call, cst.Call) and residency.is_variable_wrapper(call):
                node = call
                continue
            if isinstance(call, cst.Call) and _elementwise_of(model, call, parent):
                node, computed = call, True  # `torch.exp(t)`: the CPU computes it
                continue
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = model.parent.get(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                method = parent.attr.value
                if not call.args and method in CONVERSIONS:
                    node = call  # `t.long()`: a dtype conversion, the direct move's shape
                    continue
                if method in VIEWS or method in IN_PLACE_FILLS:
                    node, computed = call, True
                    continue
        if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, _ARITHMETIC):
            other = parent.right if parent.left is node else parent.left
            if _host_operand(model, other) and not residency.is_gpu(other):
                node, computed = parent, True  # `torch.ones(n) * i`: a host number times a CPU tensor
                continue
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Minus):
            node, computed = parent, True
            continue
        return HostComputed(node, computed)


def copies_to_other_device(model: SemanticModel, call: cst.Call) -> bool:
    """`t.type_as(x)` (x a tensor, not a module) or `t.to(x)` (x a tensor on the GPU): `t` lands on x's device."""
    func = call.func
    if not isinstance(func, cst.Attribute) or len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return False
    other = call.args[0].value
    residency = model.residency
    if func.attr.value == "type_as":
        # As `.to(x.device)` is a move to the GPU for any `x` that is no module: in step code the tensors are there.
        return isinstance(other, (cst.Name, cst.Attribute, cst.Subscript)) and not residency.is_module(other)
    if func.attr.value == "to":
        return residency.move(call) is None and residency.is_gpu(other)
    return False


def _elementwise_of(model: SemanticModel, call: cst.Call, arg: cst.Arg) -> bool:
    name = model.call_name(call) or ""
    return (
        name.startswith("torch.") and name[len("torch."):] in _ELEMENTWISE
        and call.args and call.args[0] is arg and arg.keyword is None
        and all(a.keyword is None and not a.star and _host_operand(model, a.value) for a in call.args[1:])
    )  # fmt: skip


def _host_operand(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """A number, a name or an attribute (`i`, `self.bos_index`, `-emb`), or a `math` function's Python float
    (`-math.log(max_period)`): no call that may build a GPU tensor."""
    if isinstance(expr, cst.UnaryOperation):
        expr = expr.expression
    if isinstance(expr, cst.Call):
        return (model.call_name(expr) or "").startswith("math.") and all(_host_operand(model, a.value) for a in expr.args)
    return isinstance(expr, (cst.Integer, cst.Float, cst.Name, cst.Attribute))
