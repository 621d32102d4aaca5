"""Loops: which are hot (train steps), which run in eval mode, and what they iterate: the elements a wrapper
(`enumerate`, `zip`, `tqdm`, `islice`, a generator of this module) hands out, and which part of the target gets them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import libcst as cst

from gpulint.analysis.model import Loop
from gpulint.analysis.grad_decorators import disables_autograd

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Calls whose iteration hands out the elements of their first argument (`tqdm(loader)`, `islice(loader, n)`).
PASSTHROUGH_WRAPPERS = frozenset({
    "tqdm", "tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.rich.tqdm", "tqdm.std.tqdm",
    "itertools.islice", "itertools.cycle", "rich.progress.track",
})  # fmt: skip
_BUILTIN_WRAPPERS = {"enumerate": "enumerate", "zip": "zip", "iter": "passthrough"}
_MAX_GENERATOR_DEPTH = 3
# A loop over a literal of at most this many items runs a fixed handful of times (a few hand-written prompts).
FEW_ITEMS = 10
GROWING_METHODS = frozenset({"append", "extend", "insert", "update", "setdefault"})
_NO_GRAD_CONTEXTS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad"})


def is_training_step(model: SemanticModel, call: cst.Call) -> bool:
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
    """`node` runs a backward pass or an optimizer step, directly, through a function of this module, or
    through a project function of another module (`train_one_epoch(...)` from `engine.py`)."""
    return model.through_calls("trains", node, lambda here: any(_trains_here(model, c) for c in model.calls_inside(here)))


def _trains_here(model: SemanticModel, call: cst.Call) -> bool:
    """`call` is a training step, or calls a project function of another module that trains (its summary)."""
    if is_training_step(model, call):
        return True
    if isinstance(call.func, cst.Name) and call.func.value in model.functions:
        return False  # this module's own function: followed by `through_calls`
    callee = model.callee(call)
    return callee is not None and callee.trains


def is_hot(model: SemanticModel, loop: Loop) -> bool:
    return trains(model, loop)


def iterates_a_few_literals(model: SemanticModel, loop: Loop) -> bool:
    """`for prompt in ["a", "b"]:`, or `zip(prompts, answers)` with `prompts = [...]` bound once and never grown:
    the loop runs a handful of times written in the source, once each, not once per batch."""
    if not isinstance(loop, cst.For):
        return False
    pending: list[cst.BaseExpression] = [loop.iter]
    while pending:
        expr = pending.pop()
        if isinstance(expr, cst.Call):
            kind = wrapper_kind(model, expr)
            wrapped = _wrapped(model, expr, kind, 0) if kind is not None else []
            if kind == "zip":
                return any(_few_literal_items(model, arg, loop) for arg in wrapped)  # zip stops at its shortest argument
            pending.extend(wrapped)
            continue
        return _few_literal_items(model, expr, loop)
    return False


def _typed_on_the_command_line(model: SemanticModel, expr: cst.BaseExpression, loop: Loop) -> bool:
    """`opt.weights` of `add_argument("--weights", nargs="+", default="yolov7.pt")`: a list the user types at
    launch, with a few items written as its default (a few weight files, a few sizes), not data (an option
    without such a default may take a shell glob of thousands of files)."""
    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value in model.values.parse_args_names):
        return False
    options = model.values.argparse_options.get(expr.attr.value, [])
    return bool(options) and all(
        any(a.keyword is not None and a.keyword.value == "nargs" and isinstance(a.value, cst.SimpleString)
            and a.value.evaluated_value in ("+", "*") for a in o.call.args)
        and _written_default(model, o.keyword("default"), loop)
        for o in options
    )  # fmt: skip


def _written_default(model: SemanticModel, default, loop: Loop) -> bool:
    if default is None:
        return False
    value = default.value
    return isinstance(value, (cst.SimpleString, cst.BaseNumber)) or _few_literal_items(model, value, loop)


def _one_of_the_items(expr: cst.BaseExpression, displays: list) -> bool:
    """A name the other branch lists as one of its items (the fallback `(last)` of `(last, best)`)."""
    return isinstance(expr, cst.Name) and any(
        isinstance(e.value, cst.Name) and e.value.value == expr.value for d in displays for e in d.elements
    )


def _few_literal_items(model: SemanticModel, expr: cst.BaseExpression, loop: Loop) -> bool:
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return len(expr.elements) <= FEW_ITEMS and not any(isinstance(e, cst.StarredElement) for e in expr.elements)
    if isinstance(expr, cst.Dict):  # its keys (`{"relu": ReLU, "tanh": Tanh}`: one item per hand-written entry)
        return len(expr.elements) <= FEW_ITEMS and not any(isinstance(e, cst.StarredDictElement) for e in expr.elements)
    if (
        isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("keys", "values", "items")
        and not expr.args
    ):  # fmt: skip
        return _few_literal_items(model, expr.func.value, loop)
    if _typed_on_the_command_line(model, expr, loop):
        return True
    if isinstance(expr, cst.IfExp):  # `(last, best) if best.exists() else (last)`: a few items either way
        displays = [b for b in (expr.body, expr.orelse) if isinstance(b, (cst.List, cst.Tuple, cst.Set))]
        return bool(displays) and all(
            _few_literal_items(model, b, loop) or _one_of_the_items(b, displays) for b in (expr.body, expr.orelse)
        )
    if not isinstance(expr, cst.Name):
        return False
    flow = model.dataflow
    scope = model.scope_of(loop)
    writes = flow.writes_in_scope(expr.value, scope)
    if len(writes) != 1 or writes[0].value is None or writes[0].value is expr:
        return False
    grown = any(isinstance(c.func, cst.Attribute) and c.func.attr.value in GROWING_METHODS for c in flow.method_calls_in(expr.value, scope))
    grown = grown or bool(flow.item_writes.get(expr.value))  # `d[key] = value` adds an entry
    return not grown and isinstance(writes[0].value, (cst.List, cst.Tuple, cst.Dict)) and _few_literal_items(model, writes[0].value, loop)


def iterated_expressions(model: SemanticModel, loop: cst.For) -> list[str]:
    """Source text of what the loop iterates, looking through enumerate/zip/tqdm/iter/islice."""
    pending: list[cst.BaseExpression] = [loop.iter]
    found = []
    while pending:
        expr = pending.pop()
        if isinstance(expr, cst.Call):
            kind = wrapper_kind(model, expr)
            if kind is not None:
                pending.extend(_wrapped(model, expr, kind, 0))
                continue
        found.append(model.code(expr))
    return found


def wrapper_kind(model: SemanticModel, call: cst.Call, _depth: int = 0) -> Optional[str]:
    """How iterating `call` hands out the elements of its arguments: "passthrough" (those of the first:
    `iter`, `tqdm`, `islice`, a generator of this module that re-yields an argument's elements), "enumerate"
    (`(i, element)` pairs), "zip" (one element of each argument), or None."""
    func = call.func
    if isinstance(func, cst.Name) and func.value in _BUILTIN_WRAPPERS and not model.module_bindings(func.value):
        return _BUILTIN_WRAPPERS[func.value]
    if model.qualified_name(func) in PASSTHROUGH_WRAPPERS or _reyielded_argument(model, call, _depth) is not None:
        return "passthrough"
    return None


def element_targets(
    model: SemanticModel,
    iterable: cst.BaseExpression,
    target: cst.BaseExpression,
    is_source: Callable[[cst.BaseExpression], bool],
    _depth: int = 0,
) -> Optional[list[cst.BaseExpression]]:
    """The parts of a `for` target that receive the elements of the iterable that `is_source` accepts, looking
    through wrappers: `[target]`; `[]` when they arrive but not as a name (`for item in enumerate(xs)`); None
    when the loop does not iterate it."""
    if is_source(iterable):
        return [target]
    if isinstance(iterable, cst.Name) and _depth < 3:
        # `pbar = enumerate(loader)` (then maybe `pbar = tqdm(pbar)`) and `for i, batch in pbar:`
        for write in model.dataflow.reaching_writes(iterable.value, iterable):
            if isinstance(write.value, cst.Call) and wrapper_kind(model, write.value, _depth) is not None:
                inner = element_targets(model, write.value, target, is_source, _depth + 1)
                if inner is not None:
                    return inner
        return None
    if not isinstance(iterable, cst.Call):
        return None
    kind = wrapper_kind(model, iterable, _depth)
    if kind is None:
        return None
    wrapped = _wrapped(model, iterable, kind, _depth)
    if kind == "passthrough" and wrapped:
        return element_targets(model, wrapped[0], target, is_source, _depth)
    if kind == "enumerate" and wrapped:
        if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
            return element_targets(model, wrapped[0], target.elements[1].value, is_source, _depth)
        inner = element_targets(model, wrapped[0], target, is_source, _depth)
        return inner and []  # `for item in enumerate(xs)`: the element is `item[1]`, not tracked
    if kind == "zip":
        unpacked = isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == len(wrapped)
        for index, arg in enumerate(wrapped):
            part = target.elements[index].value if unpacked else None
            inner = element_targets(model, arg, part, is_source, _depth) if part is not None else None
            if inner is not None:
                return inner
            if not unpacked and element_targets(model, arg, target, is_source, _depth) is not None:
                return []
    return None


def wrapped_arguments(model: SemanticModel, call: cst.Call) -> list[cst.BaseExpression]:
    """The arguments whose elements the wrapper call `call` hands out (none when it is not a wrapper)."""
    kind = wrapper_kind(model, call)
    return _wrapped(model, call, kind, 0) if kind is not None else []


def _wrapped(model: SemanticModel, call: cst.Call, kind: str, depth: int) -> list[cst.BaseExpression]:
    reyielded = _reyielded_argument(model, call, depth) if kind == "passthrough" else None
    if reyielded is not None:
        return [reyielded]
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    return positional if kind == "zip" else positional[:1]


def _reyielded_argument(model: SemanticModel, call: cst.Call, depth: int) -> Optional[cst.BaseExpression]:
    """`infinite(loader)` where `def infinite(data): while True: yield from data` (or `for b in data: yield b`,
    or a part of `b`): the argument whose elements the generator hands out."""
    if depth > _MAX_GENERATOR_DEPTH or not isinstance(call.func, (cst.Name, cst.Attribute)) or any(a.star for a in call.args):
        return None
    functions = model.functions.get(call.func.value, []) if isinstance(call.func, cst.Name) else []
    if not functions:
        return _reyielded_elsewhere(model, call)
    if len(functions) != 1 or isinstance(model.parent.get(model.parent.get(functions[0])), cst.ClassDef):
        return None
    func = functions[0]
    param = _reyielded_parameter(model, func, depth + 1)
    if param is None:
        return None
    positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    for index, arg in enumerate(call.args):
        if (arg.keyword is not None and arg.keyword.value == param) or (
            arg.keyword is None and index < len(positional) and positional[index] == param
        ):
            return arg.value
    return None


def _reyielded_elsewhere(model: SemanticModel, call: cst.Call) -> Optional[cst.BaseExpression]:
    """`synchronized_dataloader_step(train_iter, ...)` of another module of the project, a generator that yields
    the elements of one parameter (the index's `Callee.yields`): the argument given for it."""
    callee = model.callee(call)
    if callee is None or callee.kind != "function" or len(callee.yields) != 1:
        return None
    return next((arg.value for arg, param in model.arguments_to(call, callee) if param == callee.yields[0]), None)


def _reyielded_parameter(model: SemanticModel, func: cst.FunctionDef, depth: int) -> Optional[str]:
    """The parameter of a generator function whose elements (or parts of them) are all it yields."""
    yields = model.yields_of(func)
    params = {p.name.value for p in (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params)}
    found: set[str] = set()
    for node in yields:
        value = node.value
        if isinstance(value, cst.From):
            source = value.item
            if not isinstance(source, cst.Name) or source.value not in params:
                return None
            found.add(source.value)
            continue
        if not isinstance(value, cst.Name):
            return None
        loop = next((a for a in model.ancestors(node) if isinstance(a, cst.For) and value.value in assigned_names(a.target)), None)
        source = _iterated_parameter(model, loop, params, value.value, depth) if loop is not None else None
        if source is None:
            return None
        found.add(source)
    return found.pop() if len(found) == 1 else None


def _iterated_parameter(model: SemanticModel, loop: cst.For, params: set[str], name: str, depth: int) -> Optional[str]:
    """The parameter whose elements the loop hands to `name` (the element or a part of it)."""
    for param in params:
        parts = element_targets(model, loop.iter, loop.target, lambda e, p=param: isinstance(e, cst.Name) and e.value == p, depth)
        if parts and any(name in assigned_names(part) for part in parts):
            return param
    return None


def assigned_names(target: cst.BaseExpression) -> set[str]:
    """The names an assignment or loop target binds (`a`, `a, (b, *c)`; not `a[i]` or `a.x`)."""
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(assigned_names(e.value) for e in target.elements))
    if isinstance(target, cst.StarredElement):
        return assigned_names(target.value)
    return set()


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
                if model.qualified_name(target) in _NO_GRAD_CONTEXTS or disables_autograd(model, target):
                    return True  # (or a decorator of this module whose wrapper runs it under `no_grad`)
    return False


def consuming_loops(model: SemanticModel, value: cst.CSTNode) -> list[cst.For]:
    """`for` loops over the object `value` builds (see `loader_flow`: names, factories, function arguments)."""
    loops: list[cst.For] = []
    for iteration in model.loader_flow.iterations_of(value):
        if iteration.is_for and isinstance(iteration.loop, cst.For) and iteration.loop not in loops:
            loops.append(iteration.loop)
    return loops
