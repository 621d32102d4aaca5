"""Optimizers: `torch.optim.Adam` / `AdamW` constructions, their implementation switches (`fused`, `foreach`),
and whether the parameters they update live on the GPU."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.frameworks import LIGHTNING_MODULE
from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

ADAM = {"torch.optim.Adam": "Adam", "torch.optim.AdamW": "AdamW", "torch.optim.adam.Adam": "Adam", "torch.optim.adamw.AdamW": "AdamW"}
_PARAMETER_METHODS = ("parameters", "named_parameters")
_ENGINE_NAME = re.compile(r"deepspeed|megatron|DummyOptim", re.IGNORECASE)
# accelerate/state.py and accelerate/utils: the names code that runs under DeepSpeed or Megatron-LM reads
_ACCELERATE_ENGINE_ATTRIBUTE = re.compile(r"deepspeed_plugin|megatron_lm_plugin|DummyOptim|deepspeed_config")


@dataclass(frozen=True)
class AdamCall:
    call: cst.Call
    name: str  # `Adam` or `AdamW`
    arguments: dict[str, cst.Arg]  # the implementation switches given: `fused`, `foreach`, `differentiable`
    on_gpu: bool  # its parameters are on a CUDA device when it steps
    on_gpu_when_built: bool  # ... already when it is constructed (older torch checks `fused` there)
    few_tensors: bool  # it updates a handful of tensors: a frozen model's new head, adapters (`analysis/model_size.py`)
    by_setting: bool = False  # the class is named by a setting (`getattr(optim, args.optim)`): another run may pick another


def adam_calls(model: SemanticModel) -> list[AdamCall]:
    """Adam/AdamW constructions, except where DeepSpeed or Megatron-LM take over the optimizer (accelerate hands
    them the model and optimizer; they build their own, `DummyOptim` or not)."""
    if _engine_owns_optimizer(model):
        return []
    found = []
    for call in model.calls:
        name = ADAM.get(model.call_name(call) or "")
        by_setting = name is None
        if by_setting:
            name = _named_by_setting(model, call)
        if name is None or any(a.star for a in call.args):
            continue
        switches = {a.keyword.value: a for a in call.args if a.keyword is not None and a.keyword.value in ("fused", "foreach", "differentiable")}
        params = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "params"), None)
        owners = _parameter_owners(model, params) if params is not None else []
        placement = [_placement(model, receiver, call) for receiver in owners]
        few = model.model_size.trains_few_tensors(owners)
        found.append(AdamCall(
            call, name, switches, bool(placement) and all(p is not None for p in placement), bool(placement) and all(placement), few,
            by_setting=by_setting,
        ))  # fmt: skip
    return found


def _named_by_setting(model: SemanticModel, call: cst.Call) -> Optional[str]:
    """`getattr(optim, args.optim)(...)` whose setting defaults to "Adam" / "AdamW": the class it builds as
    shipped (an argparse default, a config entry), or None."""
    func = call.func
    if not (isinstance(func, cst.Call) and isinstance(func.func, cst.Name) and func.func.value == "getattr" and len(func.args) == 2):
        return None
    if model.qualified_name(func.args[0].value) != "torch.optim":
        return None
    resolved = model.values.resolve(func.args[1].value)
    if resolved is None or not isinstance(resolved.value, str):
        return None
    return ADAM.get(f"torch.optim.{resolved.value}")


def _parameter_owners(model: SemanticModel, params: cst.BaseExpression, depth: int = 0) -> list[cst.BaseExpression]:
    """The modules whose `.parameters()` / `.named_parameters()` make up `params` (also through a name bound
    once to a list of parameter groups, and, in the groups, through names bound once to parameters:
    `param_dict = {pn: p for pn, p in self.transformer.named_parameters()}` then `param_dict[pn]`)."""
    if isinstance(params, cst.Name):
        binders = model.bindings_of(params.value, params)
        if len(binders) == 1 and isinstance(binders[0], cst.Assign):
            params = binders[0].value
    owners = []
    for call in model.calls_inside(params):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _PARAMETER_METHODS:
            owners.append(func.value)
    if not owners and depth < 2 and isinstance(params, (cst.List, cst.Tuple)):
        for name in _names_read(params):
            owners.extend(_parameter_owners(model, name, depth + 1))
    return owners


def _names_read(expr: cst.BaseExpression) -> list[cst.Name]:
    """The names read in `expr`, in order, each once (attributes' roots, not their attribute names)."""
    found: dict[str, cst.Name] = {}

    class _Names(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            found.setdefault(node.value, node)

    expr.visit(_Names())
    return list(found.values())


def _placement(model: SemanticModel, module: cst.BaseExpression, optimizer: cst.Call) -> Optional[bool]:
    """None when the module's parameters are not known to be on the GPU; True when they are already there
    when the optimizer is built; False when they get there later (a framework, a later `.cuda()`)."""
    residency = model.residency
    frameworks = model.frameworks
    if (dotted_name(module) or "").split(".", 1)[0] == "self":
        owner = next((a for a in model.ancestors(optimizer) if isinstance(a, cst.ClassDef)), None)
        # Lightning moves the module (its submodules `self.encoder`, `self.loss.discriminator` with it) to the
        # device before `configure_optimizers` runs.
        if owner is not None and frameworks.class_kind(owner.name.value) is LIGHTNING_MODULE and frameworks.lightning_places:
            return True
        if isinstance(module, cst.Name):
            return None  # `self` of another class: where it lives is its callers' business
    if residency.is_gpu_module(module):
        key = dotted_name(module)
        flow = model.dataflow
        moved_before = any(
            (isinstance(w.value, cst.Call) and residency.moves_to_cuda(w.value)) for w in flow.reaching_writes(key, optimizer)
        ) or any(
            residency.is_discarded_move(c) and residency.moves_to_cuda(c) and flow.before(c, optimizer) for c in flow.method_calls.get(key, ())
        )
        return moved_before
    return False if _prepared_later(model, module, optimizer) else None


def _prepared_later(model: SemanticModel, module: cst.BaseExpression, optimizer: cst.Call) -> bool:
    """`accelerator.prepare(model, optimizer)` / `fabric.setup(model, optimizer)` places the model on the device
    after the optimizer is built."""
    key = dotted_name(module)
    for call in model.calls:
        wrapper = model.frameworks.wrapper(call)
        if wrapper is not None and wrapper[1] and model.dataflow.before(optimizer, call):
            if any(not a.star and dotted_name(a.value) == key for a in call.args):
                return True
        callee = model.callee(call) if wrapper is None else None
        if callee is not None and callee.effects and model.dataflow.before(optimizer, call):
            # `d2l.train_ch5(net, ..., optimizer, device)`: a project helper that moves the model it is given
            if any(
                dotted_name(arg.value) == key and any(e[0] == "move" for e in callee.effects.get(param, ()))
                for arg, param in model.arguments_to(call, callee)
            ):
                return True
    return False


def _engine_owns_optimizer(model: SemanticModel) -> bool:
    """The module uses DeepSpeed or Megatron-LM: the library imported, or accelerate's `deepspeed_plugin` /
    `DummyOptim` / `megatron_lm` names. A project's own wrapper module or switch named after DeepSpeed
    (`from .utilities.deepspeed import ...`, `self.deepspeed_sharding = False`) is not the engine: off by
    default, the optimizer built here is the one that steps."""
    for qualified in model.imports.bindings.values():
        root = qualified.split(".", 1)[0]
        if root in ("deepspeed", "megatron") or root == "accelerate" and _ENGINE_NAME.search(qualified):
            return True
    return any(_ACCELERATE_ENGINE_ATTRIBUTE.fullmatch(attribute.attr.value) for attribute in model.attributes)
