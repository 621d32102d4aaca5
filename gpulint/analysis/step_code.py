"""Per-step code: what runs once per batch. `residency.step_loop` answers for code inside a step loop or a
framework's step function; this module adds the code that runs per batch with no loop around it in sight:

- a generator that a step loop iterates (`for indices, target in get_next_batch(rank):`): the part of its body
  that runs again for each item it yields (inside a loop that contains the `yield`);
- an `nn.Module`'s `forward`, which whatever loop runs the model calls once per batch, and the methods of its
  class that `forward` calls on `self` (`self.reparametrize(mu, logvar)`). A method reached only from
  `__init__` is set-up, run once.

Code under `if self.pos is None: self.pos = ...` runs on the first call only (`analysis/cached_values.py`): never per step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.cached_values import cached_on_first_use
from gpulint.analysis.forward_helpers import LIBRARY_MODULES
from gpulint.analysis.hot_loops import PASSTHROUGH_WRAPPERS
from gpulint.analysis.residency import EVAL, TRAIN
from gpulint.analysis.helper_steps import step_helper

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

FORWARD = "forward"  # the role of a model's `forward`: training or evaluation, out of sight
_MAX_HOPS = 3
_BUILTIN_WRAPPERS = frozenset({"enumerate", "zip", "iter"})


def per_step(model: SemanticModel, node: cst.CSTNode) -> tuple[Optional[cst.CSTNode], Optional[str]]:
    """(what runs `node` once per batch, its role): a step loop and TRAIN / EVAL (`residency.step_loop`, also
    the loop that iterates a generator `node` is in), a framework step function, a model's `forward` and
    FORWARD, or a function of this module that a step loop calls (`analysis/helper_steps.py`) and the loop's
    role; (None, None) for one-time code."""
    if cached_on_first_use(model, node) is not None:
        return None, None  # built on the first call and kept on the object
    loop, role = model.residency.step_loop(node)
    if role in (TRAIN, EVAL):
        if model.residency.rate_limit_guard(node, loop) is not None:
            return None, None  # under `if step % 100 == 0:` (or an except block): every N steps, not every step
        return loop, role
    consumer = _generator_consumer(model, node)
    if consumer is not None:
        return consumer
    forward = forward_of(model, node)
    if forward is not None:
        return forward, FORWARD
    helper = forward_helper(model, node)
    if helper is not None:
        return helper[0], FORWARD
    stepped = step_helper(model, node)  # a function of this module that a step loop calls by name
    return (stepped[2], stepped[1]) if stepped is not None else (None, None)


def forward_helper(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.FunctionDef, str]]:
    """(the module-level function around `node`, where a model's `forward` calls it) when a `forward` of
    this project calls it on every call (`analysis/forward_helpers.py`)."""
    called = model.project.forward_called
    func = model.enclosing_function(node) if called else None
    if func is None or model.parent.get(func) is not model.module or model.functions.get(func.name.value) != [func]:
        return None
    where = called.get(func.name.value)
    return (func, where) if where is not None else None


def forward_when(model: SemanticModel, function: cst.FunctionDef) -> str:
    """How often per-step code of the FORWARD role runs, for messages: `on every call of the model (`forward`
    at line 12)`, or, for a helper a `forward` calls, `(`rand_slice_segments` at line 58, called by the
    `forward` at models.py:512)`."""
    helper = forward_helper(model, function.body)
    if helper is not None and helper[0] is function:
        return f"on every call of the model (`{function.name.value}` at line {model.line_of(function)}, called by the `forward` at {helper[1]})"
    return f"on every call of the model (`forward` at line {model.line_of(function)})"


def _generator_consumer(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.CSTNode, str]]:
    """The step loop that iterates the generator `node` is in, when `node` runs once per item (it is in a loop
    of the generator that yields)."""
    func = model.enclosing_function(node)
    yields = model.yields_of(func) if func is not None else []
    if not yields:
        return None
    if not any(any(model.is_inside(y, loop) for y in yields) for loop in model.enclosing_loops(node) if model.is_inside(loop, func)):
        return None  # before or after the per-item loop: once per pass over the generator
    if model.functions.get(func.name.value) != [func]:
        return None  # another function of the same name: which one a call runs is not known
    for call in model.calls:
        if not (isinstance(call.func, cst.Name) and call.func.value == func.name.value) or model.bindings_of(call.func.value, call):
            continue
        loop = _iterating_for(model, call)
        if loop is not None:
            role = model.residency.loop_role(loop)
            if role in (TRAIN, EVAL):
                return loop, role
        advanced = _advanced_in_step(model, call)
        if advanced is not None:
            return advanced
    return None


def _advanced_in_step(model: SemanticModel, call: cst.Call) -> Optional[tuple[cst.CSTNode, str]]:
    """The step loop that advances the generator `call` makes, when it is kept in a name (`train_dl =
    cycle(n)`) that a step loop hands to `next` on every iteration (`seq = next(train_dl)`)."""
    assign = model.parent.get(call)
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    name = assign.targets[0].target.value
    if model.bindings_of(name, assign) != [assign]:
        return None  # bound elsewhere too: which generator a `next` advances is not known
    for advance in model.calls_of("next"):
        if model.bindings_of("next", advance) or not advance.args or model.code(advance.args[0].value) != name:
            continue
        if model.scope_of(advance) is not model.scope_of(assign) and model.bindings_of(name, advance) != [assign]:
            continue
        loop, role = model.residency.step_loop(advance)
        if role in (TRAIN, EVAL) and model.residency.rate_limit_guard(advance, loop) is None:
            return loop, role
    return None


def _iterating_for(model: SemanticModel, call: cst.Call) -> Optional[cst.For]:
    """The `for` whose iterable is `call`, directly or through `enumerate` / `zip` / `tqdm`."""
    node: cst.CSTNode = call
    for _ in range(3):
        parent = model.parent.get(node)
        if isinstance(parent, cst.Arg):
            wrapper = model.parent.get(parent)
            name = model.call_name(wrapper) if isinstance(wrapper, cst.Call) else None
            if not (name in PASSTHROUGH_WRAPPERS or isinstance(wrapper.func, cst.Name) and wrapper.func.value in _BUILTIN_WRAPPERS):
                return None
            node = wrapper
            continue
        return parent if isinstance(parent, cst.For) and parent.iter is node else None
    return None


def forward_of(model: SemanticModel, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The `forward` of an `nn.Module` subclass of this module that runs `node` on every call: `node` is in
    it, or in a method of the same class that it calls through `self.name(...)` (up to three hops)."""
    method = _method(model, node)
    if method is None:
        return None
    owner = model.parent.get(model.parent.get(method))
    if not isinstance(owner, cst.ClassDef) or not _is_module_class(model, owner.name.value):
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


def _is_module_class(model: SemanticModel, name: str) -> bool:
    """An `nn.Module` subclass: through `torch.nn.Module` or a library module class (a PyG `MessagePassing` layer)."""
    return model.is_subclass_of(name, "torch.nn.Module") or model.derives_from(
        name, "subclass of a library nn.Module", lambda bases: any(b in LIBRARY_MODULES for b in bases)
    )


def called_per_step(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.FunctionDef, str]]:
    """(the method around `node`, where a training loop runs it) when the project proves the method runs on
    every step: an instance of its class called in a training loop here or in another module
    (`crit = ComputeLoss(model)`, then `loss = crit(pred, y)` runs `ComputeLoss.__call__`), or a method that one
    calls on `self` (`ModuleContext.stepped`)."""
    stepped = model.project.stepped
    method = None
    if stepped:
        method = node if isinstance(node, cst.FunctionDef) and isinstance(model.parent.get(model.parent.get(node)), cst.ClassDef) else _method(model, node)
    if method is None:
        return None
    owner = model.parent.get(model.parent.get(method))
    where = stepped.get(f"{owner.name.value}.{method.name.value}")
    return (method, where) if where is not None else None


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
