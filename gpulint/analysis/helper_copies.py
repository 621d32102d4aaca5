"""Copies to the GPU, inside a helper a step loop calls, of host data that is the same at every call.

Full-batch scripts (GCNII, the citation-graph tutorials) keep the labels on the host and slice them in the step:

    labels = load_labels()                                # module level: a CPU tensor, never rebound
    def train():
        out = model(features, adj)
        loss = F.nll_loss(out[idx_train], labels[idx_train].to(device))   # <- the same copy every epoch
        ...
    for epoch in range(epochs):
        train()

`invariant_copies(model)`: every `<source>.to(<CUDA device>)` / `.cuda()` in a module-level function whose only
call runs on every iteration of a `for` / `while` step loop (`helper_steps.helper_step_call`), where the copy runs
on every call of the function (no `if`, loop or `try` around it inside the function) and `source` is built only
from names, attributes and subscripts (no call: a draw or a loader read may differ each time) of names that are
the same at every call:

- a module-level name, written only at module level and outside the loop, never item-assigned or changed in place
  inside the loop or the function (`labels`, `idx_train` above);
- a parameter the function never rebinds, whose argument at the call is built only from names the loop never
  rebinds or changes in place (`train_step(model, optimizer, features, labels, adj, idx_train)` in
  `for epoch in range(...)`).

The source must not be known to be on the GPU already (`features = features.to(device)` before the loop: a copy
to the same device is free). A copy of the step's batch (`x.to(device)` of `for x, y in loader: train_step(x, y)`),
of a value the function makes (`batch = data[i]` inside it), or in a function called before the loop stays silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, NamedTuple, Optional

import libcst as cst

from gpulint.analysis.full_batch import names_in, rebound_in
from gpulint.analysis.helper_steps import helper_step_call

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# What may skip the copy on some calls, or run it several times a call.
# (A comprehension copies each of its items: `{k: v.to(device) for k, v in batch.items()}`.)
_NOT_EVERY_CALL = (
    cst.If, cst.IfExp, cst.Try, cst.BooleanOperation, cst.For, cst.While, cst.Lambda, cst.Match,
    cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp,
)  # fmt: skip


class InvariantCopy(NamedTuple):
    move: cst.Call  # `labels[idx_train].to(device)`
    source: cst.BaseExpression  # `labels[idx_train]`
    helper: cst.FunctionDef  # `train`
    call: cst.Call  # `train()` in the step loop
    loop: cst.CSTNode  # that loop
    role: str


def invariant_copies(model: SemanticModel) -> Iterator[InvariantCopy]:
    residency = model.residency
    for move in model.calls:
        if not residency.moves_to_cuda(move) or not isinstance(move.func, cst.Attribute):
            continue
        if model.enclosing_loops(move):
            continue  # a loop of its own inside the helper: GPU204's loop case, or a per-item copy
        if isinstance(model.parent.get(move), cst.Expr):
            continue  # `net.cuda()` alone: a module moved in place (GPU203), not a copy used in the step
        found = helper_step_call(model, move)
        if found is None:
            continue
        helper, call, loop, role = found
        if not isinstance(loop, (cst.For, cst.While)) or model.has_ancestor_below(move, _NOT_EVERY_CALL, helper):
            continue
        source = move.func.value
        if residency.is_module(source) or not _plain(source) or _on_the_gpu(model, source):
            continue
        if _same_at_every_call(model, source, helper, call, loop) and _device_fixed(model, move, helper, loop):
            yield InvariantCopy(move, source, helper, call, loop, role)


def _on_the_gpu(model: SemanticModel, source: cst.BaseExpression) -> bool:
    """`source`, or what it slices (`features` of `features[idx]`), is known to be on the GPU: a copy is free."""
    residency = model.residency
    while isinstance(source, (cst.Subscript, cst.Attribute)) and not residency.is_gpu(source):
        source = source.value
    if residency.is_gpu(source):
        return True
    # A module-level name read in a function sees every write of it: any that puts it on the GPU may be the one.
    writes = model.dataflow.writes.get(source.value, ()) if isinstance(source, cst.Name) else ()
    return any(w.value is not None and residency.is_gpu(w.value) for w in writes if model.scope_of(w.statement) is model.module)


def _plain(expr: cst.BaseExpression) -> bool:
    """Names, attributes, subscripts with plain or literal indices: nothing that computes a new value."""
    if isinstance(expr, cst.Name):
        return True
    if isinstance(expr, cst.Attribute):
        return _plain(expr.value)
    if isinstance(expr, cst.Subscript):
        return _plain(expr.value) and all(_plain_index(e.slice) for e in expr.slice)
    return False


def _plain_index(index: cst.BaseSlice) -> bool:
    if isinstance(index, cst.Index):
        return isinstance(index.value, (cst.Integer, cst.SimpleString)) or _plain(index.value)
    parts = (index.lower, index.upper, index.step)
    return all(p is None or isinstance(p, cst.Integer) or _plain(p) for p in parts)


def _same_at_every_call(
    model: SemanticModel, source: cst.BaseExpression, helper: cst.FunctionDef, call: cst.Call, loop: cst.CSTNode
) -> bool:
    rebound_here = rebound_in(model, helper)
    parameters = {p.name.value: p for p in (*helper.params.params, *helper.params.kwonly_params)}
    if isinstance(helper.params.star_arg, cst.Param) or helper.params.star_kwarg is not None:
        return False  # (what `*args` carries is not followed)
    for name in names_in(source):
        if isinstance(source, (cst.Attribute, cst.Subscript)) and _methods_called(model, name, (helper, loop)):
            return False  # `env.state` with `env.step()` in the step: an object's methods may change what it holds
        if name in rebound_here or _changed(model, name, helper):
            return False  # made or changed in the function (`batch = data[i]`, `x += 1`)
        if name in parameters:
            argument = _argument(helper, call, name)
            if argument is None or _on_the_gpu(model, argument) or not _invariant_argument(model, argument, loop):
                return False
        elif not _module_constant(model, name, loop):
            return False
    return True


def _argument(helper: cst.FunctionDef, call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    """The expression `call` passes for parameter `name` (positionally or by keyword); None when not plain."""
    if any(a.star for a in call.args):
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    positional = [a.value for a in call.args if a.keyword is None]
    names = [p.name.value for p in helper.params.params]
    index = names.index(name) if name in names else len(positional)
    return positional[index] if index < len(positional) else None


def _invariant_argument(model: SemanticModel, argument: cst.BaseExpression, loop: cst.CSTNode) -> bool:
    if not _plain(argument):
        return False
    rebound = rebound_in(model, loop)  # type: ignore[arg-type]
    for name in names_in(argument):
        if name in rebound or _changed(model, name, loop):
            return False
        if not model.bindings_of(name, argument):
            return False  # where it comes from is not in sight
    return True


def _module_constant(model: SemanticModel, name: str, loop: cst.CSTNode) -> bool:
    """`name` is written only at module level, outside the step loop, and never changed in place in the loop."""
    flow = model.dataflow
    writes = flow.writes.get(name, [])
    if not writes or not model.module_bindings(name):
        return False
    for write in writes:
        if model.scope_of(write.statement) is not model.module or model.is_inside(write.statement, loop):
            return False  # (also a `global name` rebinding it in a function)
    if _changed(model, name, loop):
        return False
    return not _changed_in_a_function(model, name)


def _changed_in_a_function(model: SemanticModel, name: str) -> bool:
    """Changed in place inside some function (`labels[mask] = pseudo` in another step helper), or by one of that
    name: it may differ from one call to the next."""
    flow = model.dataflow
    places = [*flow.item_writes.get(name, ()), *_in_place_calls(flow, name)]
    places += [w.statement for k, ws in flow.writes.items() if k.startswith(name + ".") for w in ws]
    return any(model.scope_of(p) is not model.module for p in places)


def _in_place_calls(flow, name: str) -> list[cst.Call]:
    return [
        c for c in flow.method_calls.get(name, ())
        if isinstance(c.func, cst.Attribute) and c.func.attr.value.endswith("_") and not c.func.attr.value.startswith("_")
    ]  # fmt: skip


def _methods_called(model: SemanticModel, name: str, places: tuple[cst.CSTNode, ...]) -> bool:
    """A method of `name` or of one of its attributes is called in one of `places`, other than a copy to a device."""
    flow = model.dataflow
    for key, calls in flow.method_calls.items():
        if key == name or key.startswith(name + "."):
            for call in calls:
                if not model.residency.moves_to_cuda(call) and any(model.is_inside(call, p) for p in places):
                    return True
    return False


def _changed(model: SemanticModel, name: str, where: cst.CSTNode) -> bool:
    """Item-assigned, attribute-assigned or changed by an in-place method inside `where`."""
    flow = model.dataflow
    if any(model.is_inside(s, where) for s in flow.item_writes.get(name, ())):
        return True
    if any(k.startswith(name + ".") and any(model.is_inside(w.statement, where) for w in ws) for k, ws in flow.writes.items()):
        return True
    return flow.changed_in_place(name, where)


def _device_fixed(model: SemanticModel, move: cst.Call, helper: cst.FunctionDef, loop: cst.CSTNode) -> bool:
    """The device the copy goes to is not rebound in the function or the loop (`device`, `args.dev`)."""
    rebound = rebound_in(model, helper) | rebound_in(model, loop)  # type: ignore[arg-type]
    return not any(name in rebound for arg in move.args for name in names_in(arg.value))

