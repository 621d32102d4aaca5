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
on every call of the function (no `if`, loop or `try` around it inside the function, but an `if args.cuda:` on a
flag that is the same at every call: it runs on every call or on none) and `source` is built only
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

`method_copies(model)`: the same for methods that run every step, of attributes only `__init__` writes (below).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterator, NamedTuple, Optional

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


def _copies_used(model: SemanticModel) -> Iterator[cst.Call]:
    """`x.cuda()` / `x.to(device)` whose result the code uses: not `net.cuda()` alone, a module moved in place
    (GPU203)."""
    residency = model.residency
    for move in model.calls:
        if residency.moves_to_cuda(move) and isinstance(move.func, cst.Attribute) and not isinstance(model.parent.get(move), cst.Expr):
            yield move


def invariant_copies(model: SemanticModel) -> Iterator[InvariantCopy]:
    residency = model.residency
    for move in _copies_used(model):
        if model.enclosing_loops(move):
            continue  # a loop of its own inside the helper: GPU204's loop case, or a per-item copy
        found = helper_step_call(model, move)
        if found is None:
            continue
        helper, call, loop, role = found
        if not isinstance(loop, (cst.For, cst.While)):
            continue
        if not _every_call(model, move, helper, lambda flag: _same_at_every_call(model, flag, helper, call, loop)):
            continue
        source = move.func.value
        if residency.is_module(source) or not _plain(source) or _on_the_gpu(model, source):
            continue
        if _same_at_every_call(model, source, helper, call, loop) and _device_fixed(model, move, helper, loop):
            yield InvariantCopy(move, source, helper, call, loop, role)


def _every_call(
    model: SemanticModel, move: cst.Call, func: cst.FunctionDef, same_flag: Callable[[cst.BaseExpression], bool]
) -> bool:
    """The copy runs on every call of `func`, or on none: nothing of `_NOT_EVERY_CALL` between them but an
    `if cuda:` / `x.cuda() if self.use_gpu else x` on a flag that is the same at every call (`same_flag`), which
    chooses the device once for the whole run (DropEdge's `_preprocess_fea(self, fea, cuda)`)."""
    child: cst.CSTNode = move
    for ancestor in model.ancestors(move):
        if ancestor is func:
            return True
        if isinstance(ancestor, _NOT_EVERY_CALL):
            if not isinstance(ancestor, (cst.If, cst.IfExp)) or child is ancestor.test:
                return False
            flag = ancestor.test
            if isinstance(flag, cst.UnaryOperation) and isinstance(flag.operator, cst.Not):
                flag = flag.expression
            if not isinstance(flag, (cst.Name, cst.Attribute)) or not _plain(flag) or not same_flag(flag):
                return False
        child = ancestor
    return False


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


def _argument(helper: cst.FunctionDef, call: cst.Call, name: str, bound: int = 0) -> Optional[cst.BaseExpression]:
    """The expression `call` passes for parameter `name` (positionally or by keyword); None when not plain or not
    given. `bound`: leading parameters the call does not pass (1 for `self` of a method called on an object)."""
    if any(a.star for a in call.args):
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    positional = [a.value for a in call.args if a.keyword is None]
    names = [p.name.value for p in helper.params.params][bound:]
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


# ---- copies in methods that run every step ---------------------------------------------------------------------
#
# A data class keeps the dataset on the host and hands it out each epoch (DropEdge's `Sampler`):
#
#     class Sampler:
#         def __init__(self, ...):
#             self.train_features = torch.FloatTensor(features)    # written here only: the same at every call
#         def _preprocess_fea(self, fea, cuda):
#             if cuda:                                            # a flag that chooses the device for the run
#                 return fea.cuda()                               # <- the same copy every epoch
#             return fea
#         def randomedge_sampler(self, percent, normalization, cuda):
#             ...
#             return r_adj, self._preprocess_fea(self.train_features, cuda)
#
#     for epoch in range(args.epochs):                            # train.py: full-graph training, an epoch is a step
#         adj, fea = sampler.randomedge_sampler(args.percent, args.normalization, args.cuda)
#
# `method_copies(model)`: a `<source>.to(<CUDA device>)` / `.cuda()` in a method that runs on every step (the
# project's `stepped` methods: an instance's method called in a step loop here or in another module, and the
# methods those call on `self`; or `helper_steps.method_step`: a step loop of another method of the class calls it
# on `self`), that runs on every call of the method (or under a flag the same at every call), whose source is an
# attribute of `self` that only `__init__` writes (never written, item-assigned or changed in place by another
# method, nor written as `<object>.<attribute>` elsewhere in the module), or a parameter that a per-step call
# `self.<method>(...)` fills with such an attribute. Each call is judged alone: `vertex_sampler`'s
# `self._preprocess_fea(self.train_features[samples, :], cuda)` passes a fresh slice, and says nothing.


class MethodCopy(NamedTuple):
    move: cst.Call  # `fea.cuda()`
    source: cst.BaseExpression  # `fea`
    value: cst.BaseExpression  # the data that is the same every step: `self.train_features` (at `call`)
    method: cst.FunctionDef  # `_preprocess_fea`
    call: Optional[cst.Call]  # the per-step `self._preprocess_fea(self.train_features, cuda)`; None when `source` is `value`
    where: str  # what runs the method every step: `train.py:245`, or `line 30` of this module
    role: str


def method_copies(model: SemanticModel) -> Iterator[MethodCopy]:
    residency = model.residency
    for move in _copies_used(model):
        method = _method_around(model, move)
        if method is None:
            continue
        cls: cst.ClassDef = model.parent.get(model.parent.get(method))  # type: ignore[assignment]
        stepped = _method_per_step(model, cls, method)
        if stepped is None:
            continue
        where, role = stepped
        source = move.func.value
        if residency.is_module(source) or not _plain(source) or residency.is_gpu(source):
            continue
        if not _device_fixed_in_method(model, move, method):
            continue
        if not _every_call(model, move, method, lambda flag: _same_in_method(model, flag, cls, method, flags=True)):
            continue
        if _same_in_method(model, source, cls, method, flags=False, parameters=False):
            yield MethodCopy(move, source, source, method, None, where, role)
            continue
        for call, argument in _invariant_calls(model, source, cls, method):
            yield MethodCopy(move, source, argument, method, call, where, role)
            break


def _method_around(model: SemanticModel, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The method (a `def` directly in a class body, not a dunder, the one `def` of its name there) around `node`."""
    func = next((a for a in model.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef))), None)
    if not isinstance(func, cst.FunctionDef) or func.name.value.startswith("__"):
        return None
    cls = model.parent.get(model.parent.get(func))
    if not isinstance(cls, cst.ClassDef) or model.parent.get(func) is not cls.body:
        return None
    if [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == func.name.value] != [func]:
        return None
    params = func.params
    if not params.params or params.params[0].name.value != "self":
        return None
    decorators = [_last(d.decorator) for d in func.decorators if isinstance(d.decorator, (cst.Name, cst.Attribute))]
    if any(d in ("staticmethod", "classmethod", "property") for d in decorators):
        return None
    return func


def _last(expr: cst.BaseExpression) -> str:
    return expr.attr.value if isinstance(expr, cst.Attribute) else expr.value  # type: ignore[union-attr]


def _method_per_step(model: SemanticModel, cls: cst.ClassDef, method: cst.FunctionDef) -> Optional[tuple[str, str]]:
    """(what runs `method` every step, its role), or None."""
    from gpulint.analysis.helper_steps import method_step
    from gpulint.analysis.residency import TRAIN

    where = model.project.stepped.get(f"{cls.name.value}.{method.name.value}")
    if where is not None:
        return where.rsplit("/", 1)[-1], TRAIN
    found = method_step(model, method.body)
    if found is not None and found[0] is method:
        return f"line {found[2]}", found[1]
    return None


def _device_fixed_in_method(model: SemanticModel, move: cst.Call, method: cst.FunctionDef) -> bool:
    rebound = _rebound_names(model, method)
    return not any(name in rebound for arg in move.args for name in names_in(arg.value))


def _rebound_names(model: SemanticModel, func: cst.FunctionDef) -> set[str]:
    """Plain names bound in `func`'s body (`self` of `self.x = ...` is not rebound by it)."""
    rebound = rebound_in(model, func)
    if "self" in rebound and not any(
        w.key == "self" and model.is_inside(w.statement, func) for w in model.dataflow.writes.get("self", ())
    ):
        rebound.discard("self")
    return rebound


def _roots(expr: cst.BaseExpression) -> Iterator[tuple[str, Optional[str]]]:
    """(name, attribute) for each name in `expr`: ("self", "train_features") for `self.train_features[idx]`,
    ("idx", None) for its index."""
    if isinstance(expr, cst.Name):
        yield expr.value, None
    elif isinstance(expr, cst.Attribute):
        if isinstance(expr.value, cst.Name):
            yield expr.value.value, expr.attr.value
        else:
            yield from _roots(expr.value)
    elif isinstance(expr, cst.Subscript):
        yield from _roots(expr.value)
        for element in expr.slice:
            index = element.slice
            parts = [index.value] if isinstance(index, cst.Index) else [index.lower, index.upper, index.step]
            for part in parts:
                if part is not None and not isinstance(part, (cst.Integer, cst.SimpleString)):
                    yield from _roots(part)


def _same_in_method(
    model: SemanticModel,
    expr: cst.BaseExpression,
    cls: cst.ClassDef,
    method: cst.FunctionDef,
    flags: bool,
    parameters: bool = True,
    depth: int = 0,
) -> bool:
    """`expr` (plain) is the same at every per-step call of `method`: built from attributes of `self` that only
    `__init__` writes, module-level names written only at module level, and (when `parameters`) parameters the
    method never rebinds that every per-step call fills that way (for a flag, a parameter of the caller it hands
    on, unchanged, counts too: `cuda` handed from `randomedge_sampler(..., cuda)` to `_preprocess_fea`)."""
    if not _plain(expr):
        return False
    if not flags:
        base = expr
        while isinstance(base, cst.Subscript):
            base = base.value
        if isinstance(base, cst.Attribute) and isinstance(base.value, cst.Name) and base.value.value == "self":
            if not _holds_a_tensor(model, cls, base.attr.value):
                return False  # (`self.net` handed to `__init__` may be a module: GPU203's, or anything)
    rebound = _rebound_names(model, method)
    names = [p.name.value for p in (*method.params.params, *method.params.kwonly_params)]
    for name, attribute in _roots(expr):
        if name == "self":
            if attribute is None or not _init_only(model, cls, attribute):
                return False
        elif name in names:
            if not parameters or name in rebound or _changed(model, name, method) or depth > 1:
                return False
            if flags and depth == 1:
                continue  # a flag the caller hands on as it received it
            calls = list(_per_step_calls(model, cls, method))
            if not calls:
                return False
            for call, judge in calls:
                argument = _method_argument(method, call, name)
                if argument is None or not judge(argument, flags, depth + 1):
                    return False
        elif name in rebound or not _module_constant(model, name, method):
            return False
    return True


def _invariant_calls(
    model: SemanticModel, source: cst.BaseExpression, cls: cst.ClassDef, method: cst.FunctionDef
) -> Iterator[tuple[cst.Call, cst.BaseExpression]]:
    """The per-step calls of `method` whose arguments make `source` (a parameter) the same data at every step: (the
    call, what it passes)."""
    if not isinstance(source, cst.Name):
        return  # (`fea[idx]` of two parameters: not followed)
    name = source.value
    parameters = [p.name.value for p in (*method.params.params, *method.params.kwonly_params)]
    if name not in parameters or name == "self" or _written_before(model, name, method, source) or _changed(model, name, method):
        return
    if isinstance(method.params.star_arg, cst.Param) or method.params.star_kwarg is not None:
        return
    for call, judge in _per_step_calls(model, cls, method):
        argument = _method_argument(method, call, name)
        if argument is None or not _plain(argument) or model.residency.is_gpu(argument) or _on_the_gpu(model, argument):
            continue
        if judge(argument, False, 1):
            yield call, argument


def _written_before(model: SemanticModel, name: str, method: cst.FunctionDef, at: cst.CSTNode) -> bool:
    """`name` is bound in `method` before `at` or by `at`'s own statement's other parts: a write after it (the
    copy's own `x = x.cuda()`, with no loop around it in the method) cannot reach it."""
    statement = model.enclosing_statement(at)
    flow = model.dataflow
    for write in flow.writes.get(name, ()):
        if not model.is_inside(write.statement, method) or write.key != name:
            continue
        if model.is_inside(write.statement, statement) or not flow.before(write.statement, statement):
            continue
        return True
    return name in _rebound_names(model, method) and not flow.writes.get(name)


_Judge = Callable[[cst.BaseExpression, bool, int], bool]  # (an argument, is it a flag, depth) -> the same every step


def _per_step_calls(model: SemanticModel, cls: cst.ClassDef, method: cst.FunctionDef) -> Iterator[tuple[cst.Call, _Judge]]:
    """The calls of `method` that run on every step, each with how its arguments are judged: `self.<method>(...)` in
    another method of `cls` that runs every step (not in a loop of its own, nor under a `step % N` guard) or in a step
    loop of the calling method; `<instance>.<method>(...)` in a step loop of this module, on a module-level name bound
    once to `cls(...)` (its arguments: names the loop never rebinds)."""
    name = method.name.value
    for call in model.method_calls(name):
        func = call.func
        receiver = func.value  # type: ignore[attr-defined]
        if not isinstance(receiver, cst.Name) or model.is_inside(call, method):
            continue
        loops = model.enclosing_loops(call)
        step_loop = None
        if loops:
            loop, role = model.residency.step_loop(call)
            if role is None or loop is not loops[0] or model.residency.rate_limit_guard(call, loop) is not None:
                continue
            step_loop = loop
        if receiver.value == "self":
            caller = next((a for a in model.ancestors(call) if isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef))), None)
            if not isinstance(caller, cst.FunctionDef) or model.parent.get(caller) is not cls.body:
                continue
            if step_loop is None and (
                caller.name.value == "__init__" or _method_per_step(model, cls, caller) is None
                or model.residency.rate_limit_guard(call, caller) is not None
            ):
                continue
            yield call, _self_judge(model, cls, caller)
        elif step_loop is not None and _instance_of(model, receiver.value, cls, call):
            yield call, _loop_judge(model, step_loop)


def _self_judge(model: SemanticModel, cls: cst.ClassDef, caller: cst.FunctionDef) -> _Judge:
    return lambda argument, flags, depth: _same_in_method(model, argument, cls, caller, flags, parameters=flags, depth=depth)


def _loop_judge(model: SemanticModel, loop: cst.CSTNode) -> _Judge:
    def judge(argument: cst.BaseExpression, flags: bool, depth: int) -> bool:
        if flags and isinstance(argument, cst.Name) and argument.value in ("True", "False"):
            return True
        return _invariant_argument(model, argument, loop)

    return judge


def _instance_of(model: SemanticModel, name: str, cls: cst.ClassDef, at: cst.CSTNode) -> bool:
    """`name`, as `at` sees it, is bound once, in `at`'s scope, to `cls(...)` (`trainer = Trainer(...)`)."""
    scope = model.scope_of(at)
    writes = [w for w in model.dataflow.writes.get(name, []) if model.scope_of(w.statement) is scope]
    if len(model.bindings_of(name, at)) != 1 or len(writes) != 1:
        return False
    value = writes[0].value
    info = model.classes.get(cls.name.value)
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == cls.name.value and info is not None and info.node is cls


def _method_argument(method: cst.FunctionDef, call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    """What `self.<method>(...)` passes for parameter `name` (`self` is the receiver), or its default: None."""
    return _argument(method, call, name, bound=1)


def _init_only(model: SemanticModel, cls: cst.ClassDef, attribute: str) -> bool:
    """`self.<attribute>` is written in `cls`'s `__init__` only, to a value not known to be on the GPU: never
    written, item-assigned or changed in place (`self.x.add_()`) by another method, nor `<obj>.<attribute> = ...`
    outside the class in this module."""
    answers = model.memo("init_only_attributes")
    key = (cls, attribute)
    if key not in answers:  # type: ignore[operator]
        answers[key] = _find_init_only(model, cls, attribute)  # type: ignore[index]
    return answers[key]  # type: ignore[index]


def _find_init_only(model: SemanticModel, cls: cst.ClassDef, attribute: str) -> bool:
    flow = model.dataflow
    init = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
    if init is None or model.project.arguments.get(f"*.{attribute}"):
        return False  # (the project assigns `<object>.<attribute>` outside its class somewhere: it may change)
    own = f"self.{attribute}"
    in_init = False
    for key, writes in flow.writes.items():
        if key == own or key.startswith(own + "."):
            for write in writes:
                if not model.is_inside(write.statement, cls):
                    continue  # another class's `self`
                if not model.is_inside(write.statement, init) or write.is_augmented:
                    return False
                if key == own:
                    in_init = True
                    if write.value is not None and _maybe_on_the_gpu(model, cls, init, write.value):
                        return False  # on the GPU already: a copy to it is free
                    if write.value is not None and (_parameter_or_module(model, write.value) or _known_small(model, write.value)):
                        return False
        if key.endswith("." + attribute) or ("." + attribute + ".") in key:
            if any(not model.is_inside(w.statement, cls) and not _unrelated_self(model, w.statement, cls, key) for w in writes):
                return False  # `sampler.features = ...` elsewhere, or a subclass's method: the attribute may change
    if not in_init:
        return False
    for statement in flow.item_writes.get(own, ()):
        if model.is_inside(statement, cls) and not model.is_inside(statement, init):
            return False
    return not any(
        model.is_inside(call, cls) and not model.is_inside(call, init) for call in _in_place_calls(flow, own)
    )


def _maybe_on_the_gpu(model: SemanticModel, cls: cst.ClassDef, init: cst.FunctionDef, value: cst.BaseExpression) -> bool:
    """`value`, written to an attribute in `__init__`, is on the GPU, or is a parameter of `__init__` that some call
    of the class here or in another module fills with a GPU tensor (`Trainer(model, x.cuda())`)."""
    if model.residency.is_gpu(value):
        return True
    parameters = [p.name.value for p in init.params.params]
    for name in names_in(value) & set(parameters):  # (`torch.as_tensor(features)` keeps a GPU tensor where it is)
        if set(model.project.receives(f"{cls.name.value}.__init__", name)) & {"gpu", "cuda_device", "gpu_module"}:
            return True
        for call in model.calls_of(cls.name.value):
            argument = _method_argument(init, call, name)
            if argument is not None and model.residency.is_gpu(argument):
                return True
    return False


def _unrelated_self(model: SemanticModel, statement: cst.CSTNode, cls: cst.ClassDef, key: str) -> bool:
    """`self.<attribute> = ...` in a class of this module that does not derive from `cls`: another object's."""
    if not key.startswith("self."):
        return False
    owner = model.dataflow.enclosing_class(statement)
    if owner is None:
        return False
    name = cls.name.value
    return not model.derives_from(owner.name.value, f"derives from {name}", lambda bases: name in bases or f"<module>.{name}" in bases)


def _parameter_or_module(model: SemanticModel, value: cst.BaseExpression) -> bool:
    """`nn.Parameter(...)` (a module's `.cuda()` moves it with the module: a copy of it is then free), or a module."""
    if model.residency.is_module(value):
        return True
    return isinstance(value, cst.Call) and (model.call_name(value) or "").endswith("nn.Parameter") or (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "Parameter"
    )


_SHAPED_FACTORIES = frozenset({"zeros", "ones", "empty", "rand", "randn", "full", "eye", "arange", "linspace", "tensor"})


def _known_small(model: SemanticModel, value: cst.BaseExpression) -> bool:
    """`torch.arange(10)`, `torch.zeros(4, 4)`, `torch.tensor([0.1, 0.9])`: a tensor of literal size under
    `SMALL_BATCH_BYTES` (8 bytes an element at most). Copying one every step measured at the noise
    (bench/results/cost_facts.md, section 1: a 32 KB copy is within the steps' variation)."""
    from gpulint.analysis.batch_bytes import SMALL_BATCH_BYTES

    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("float", "long", "double", "int", "half", "bool"):
        value = value.func.value  # `.float()` keeps the size
    if not isinstance(value, cst.Call):
        return False
    name = model.call_name(value) or ""
    if not name.startswith("torch.") or name.rsplit(".", 1)[-1] not in _SHAPED_FACTORIES:
        return False
    short = name.rsplit(".", 1)[-1]
    positional = [a.value for a in value.args if a.keyword is None and not a.star]
    if not positional or any(a.star for a in value.args):
        return False
    if short == "tensor":
        elements = _literal_elements(positional[0])
    elif short == "arange":
        bounds = [_integer(p) for p in positional[:2]]
        elements = None if None in bounds else (bounds[0] if len(bounds) == 1 else bounds[1] - bounds[0])
    elif short == "linspace":
        elements = _integer(positional[2]) if len(positional) > 2 else None
    else:
        dims = positional[:1] if short == "full" else positional
        if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
            dims = [e.value for e in dims[0].elements]
        sizes = [_integer(d) for d in dims]
        elements = None
        if None not in sizes:
            elements = 1
            for size in sizes:
                elements *= size  # type: ignore[operator]
    return elements is not None and elements * 8 < SMALL_BATCH_BYTES


def _integer(expr: cst.BaseExpression) -> Optional[int]:
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and isinstance(expr.expression, cst.Integer):
        return -int(expr.expression.evaluated_value)
    return None


def _literal_elements(expr: cst.BaseExpression) -> Optional[int]:
    """How many numbers a literal (nested) list or tuple holds; None when any item is not a literal."""
    if isinstance(expr, (cst.Integer, cst.Float)) or (isinstance(expr, cst.UnaryOperation) and isinstance(expr.expression, (cst.Integer, cst.Float))):
        return 1
    if isinstance(expr, (cst.List, cst.Tuple)):
        counts = [_literal_elements(e.value) for e in expr.elements]
        return None if None in counts else sum(counts)  # type: ignore[arg-type]
    return None


_NOT_TENSORS = (
    "torch.nn.", "torch.load", "torch.jit.", "torch.compile", "torch.hub.", "torch.optim.", "torch.utils.", "torch.device",
    "torch.cuda.", "torch.distributions.",
)  # fmt: skip
_SAME_SIZE_METHODS = frozenset({
    "float", "long", "double", "int", "half", "bool", "contiguous", "t", "detach", "clone", "to_dense", "coalesce", "type",
})  # fmt: skip


def _holds_a_tensor(model: SemanticModel, cls: cst.ClassDef, attribute: str) -> bool:
    """The last write of `self.<attribute>` in `__init__`, in its body (not in a branch), makes a tensor with a
    `torch` function (`torch.FloatTensor(features)`, `torch.from_numpy(x).float()`)."""
    init = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
    if init is None:
        return False
    writes = [w for w in model.dataflow.writes.get(f"self.{attribute}", ()) if model.is_inside(w.statement, init)]
    if not writes:
        return False
    last = writes[-1]
    if model.parent.get(model.enclosing_statement(last.statement)) is not init.body or last.value is None:
        return False
    value = last.value
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _SAME_SIZE_METHODS:
        value = value.func.value
    name = model.call_name(value) if isinstance(value, cst.Call) else None
    return bool(name) and name.startswith("torch.") and not name.startswith(_NOT_TENSORS)  # type: ignore[union-attr]
