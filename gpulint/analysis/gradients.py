"""Gradients: `zero_grad` calls, code that works on `.grad` tensors, code that needs autograd."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Receivers that are optimizers or modules by name, when their construction is not in sight.
_OPTIMIZER_OR_MODULE_NAME = re.compile(
    r"(^|_)(opt|optim|optimizer|optimiser|model|net|network|module|generator|discriminator|encoder|decoder)s?($|_|\d)",
    re.I,
)
# In-place work on a gradient tensor: `p.grad += g`, `p.grad.add_(g)`, `p.grad.data.mul_(s)`, `p.grad[...] = ...`.
_GRADIENT_TENSOR_METHODS = frozenset({"add_", "sub_", "mul_", "div_", "copy_", "zero_", "data", "clamp_", "addcmul_", "lerp_"})
# Classes of adversarial-attack libraries and projects (`LinfPGDAttack`, `torchattacks.PGD`, `FGSM`): calling
# one, or its `perturb`/`attack`, takes gradients with respect to the input.
_ATTACK_CLASS = re.compile(r"attack|adversary|pgd|fgsm", re.I)  # not `Adversarial*` (a DANN model)
_ATTACK_METHODS = frozenset({"perturb", "attack", "forward", "__call__"})
_AUTOGRAD_CALLS = frozenset(
    {"torch.autograd.grad", "torch.autograd.backward", "torch.enable_grad", "torch.autograd.functional.jacobian"}
)


@dataclass
class ZeroGradCall:
    call: cst.Call
    set_to_none: cst.Arg | None  # the argument, by keyword or position


def zero_grad_calls(model: SemanticModel) -> list[ZeroGradCall]:
    found = []
    for call in model.method_calls("zero_grad"):
        if any(a.star for a in call.args):
            continue
        argument = None
        for index, arg in enumerate(call.args):
            if (arg.keyword is not None and arg.keyword.value == "set_to_none") or (arg.keyword is None and index == 0):
                argument = arg
        found.append(ZeroGradCall(call, argument))
    return found


def is_torch_optimizer_or_module(model: SemanticModel, receiver: cst.BaseExpression) -> bool:
    """`optimizer` bound to `torch.optim.X(...)`, a module of this file, or a conventional name (`opt_g`, `model`)."""
    if isinstance(receiver, cst.Name):
        binders = model.bindings_of(receiver.value, receiver)
        constructed = [b.value for b in binders if isinstance(b, cst.Assign) and isinstance(b.value, cst.Call)]
        for value in constructed:
            qualified = model.call_name(value)
            if qualified is not None and not qualified.startswith(("torch.", "<module>.")):
                return False  # another library's optimizer (apex FusedAdam): its signature may differ
            if qualified is not None and qualified.startswith(("torch.optim.", "torch.nn.")):
                return True
            info = model.local_class_of(qualified)
            if info is not None and model.is_subclass_of(info.node.name.value, "torch.nn.Module"):
                return True
    if isinstance(receiver, cst.Attribute):
        return bool(_OPTIMIZER_OR_MODULE_NAME.search(receiver.attr.value))
    return isinstance(receiver, cst.Name) and bool(_OPTIMIZER_OR_MODULE_NAME.search(receiver.value))


def works_on_gradient_tensors(model: SemanticModel) -> bool:
    """The module does arithmetic on `.grad` tensors, which a `None` gradient would break."""
    for attr in model.attributes:
        if attr.attr.value != "grad":
            continue
        parent = model.parent.get(attr)
        if isinstance(parent, cst.AugAssign) and parent.target is attr:
            return True
        if isinstance(parent, cst.Attribute) and parent.value is attr and parent.attr.value in _GRADIENT_TENSOR_METHODS:
            return True
        if isinstance(parent, cst.Subscript) and parent.value is attr:
            return True
    return False


def needs_gradients(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`node` runs autograd: `backward()`, `torch.autograd.grad`, `requires_grad_()`, `requires_grad = True`,
    an optimizer step, directly or through a function of this module it calls, a project function or method
    whose summary runs backward, or an adversarial attack (`adversary.perturb(x, y)`)."""
    return model.through_calls("needs gradients", node, lambda here: _runs_autograd(model, here))


def _runs_autograd(model: SemanticModel, node: cst.CSTNode) -> bool:
    for call in model.calls_inside(node):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("backward", "requires_grad_", "step"):
            return True
        if model.call_name(call) in _AUTOGRAD_CALLS:
            return True
        if any(a.keyword is not None and a.keyword.value == "requires_grad" and _may_require(model, a.value, call) for a in call.args):
            return True
        if not (isinstance(func, cst.Name) and func.value in model.functions):  # this module's own: followed by `through_calls`
            callee = model.callee(call)
            if callee is not None and callee.trains:
                return True
        if _calls_an_attack(model, call):
            return True
    for attr in model.attributes_inside(node):
        if attr.attr.value == "requires_grad":
            parent = model.parent.get(model.parent.get(attr))
            if isinstance(parent, cst.Assign):
                return True
    return False


def _may_require(model: SemanticModel, value: cst.BaseExpression, call: cst.Call) -> bool:
    """`requires_grad=<value>` may switch gradients on: not a literal `False`, nor a bare parameter of the function
    the call sits in, never rebound there (`torch.zeros(..., requires_grad=if_train)` in a batching helper that
    evaluation calls with `False`): which value it gets, its callers decide, and a caller that needs gradients
    differentiates something too (a backward pass, `torch.autograd.grad`, an optimizer step), which counts on its own."""
    if not isinstance(value, cst.Name):
        return True
    if value.value == "False":
        return False
    function = model.enclosing_function(call)
    binders = model.bindings.get((id(function), value.value), []) if function is not None else []
    return not (binders and all(isinstance(b, cst.Param) for b in binders))


def _calls_an_attack(model: SemanticModel, call: cst.Call) -> bool:
    """`adversary.perturb(x, y)` / `atk(images, labels)` on an object every reaching write built from a class
    named like an attack (`LinfPGDAttack(...)`, `torchattacks.PGD(...)`): it differentiates the loss."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in _ATTACK_METHODS:
        receiver = func.value
    elif isinstance(func, (cst.Name, cst.Attribute)):
        receiver = func
    else:
        return False
    name = model.code(receiver)
    if not isinstance(receiver, (cst.Name, cst.Attribute)) or name.count(".") > (1 if name.startswith("self.") else 0):
        return False
    writes = model.dataflow.reaching_writes(name, receiver)
    built = [w.value.func for w in writes if isinstance(w.value, cst.Call)]
    if not writes or len(built) != len(writes):
        return False
    return all(_ATTACK_CLASS.search(model.code(f).rsplit(".", 1)[-1]) and model.code(f).rsplit(".", 1)[-1][:1].isupper() for f in built)


_CUDA_GRAPH_NAMES = frozenset({"torch.cuda.graph", "torch.cuda.CUDAGraph", "torch.cuda.make_graphed_callables"})


def uses_cuda_graphs(model: SemanticModel) -> bool:
    """CUDA graphs replay fixed memory: gradients must stay in the same buffers (zeroed, never `None`)."""
    if any(model.qualified_name(a) in _CUDA_GRAPH_NAMES for a in model.attributes):
        return True
    if any(q in _CUDA_GRAPH_NAMES for q in model.imports.bindings.values()):
        return True
    for string in model.strings:
        if "reduce-overhead" in string.value or "cudagraph" in string.value.lower():
            return True
    return any("cudagraph" in a.attr.value.lower() for a in model.attributes)
