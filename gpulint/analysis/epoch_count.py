"""How many times an epoch loop runs, when the code says so: `for epoch in range(2)` (also `tqdm(range(2))`,
`trange(2)`), `range(num_epochs)` with `num_epochs = 1`, `range(epochs)` where the call that handed the loader
in passes `epochs=2` (or the parameter's default), `range(args.epochs)` with the value the repository's job
files pass (`settings_files.launch_values`) or else the argparse default (or a YAML setting the script reads,
through `values.setting`), `range(1, args.epochs + 1)`.

Per-epoch costs (worker start-up, GPU104) only add up over many epochs; a run of one or two pays them once or
twice. Anything else (a `while` loop, a count computed at run time, a loop over a list) is unknown: None, never
guessed; but a `while step < num_steps:` whose counter starts at or past a known bound (`num_steps = 0`) runs none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.hot_loops import PASSTHROUGH_WRAPPERS
from gpulint.analysis.value_resolution import as_int

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_MAX_DEPTH = 6
_TRANGE = frozenset({"tqdm.trange", "tqdm.auto.trange", "tqdm.notebook.trange", "tqdm.std.trange"})  # `range` with a bar


def epoch_count(model: SemanticModel, loop: cst.CSTNode, via: tuple[cst.Call, ...] = ()) -> Optional[int]:
    """The number of passes of `loop` (a `for` over `range(...)`, maybe wrapped in `tqdm`), reading
    parameters through `via`, the calls that passed the loader into the loop's function; None when unknown."""
    if isinstance(loop, cst.While):
        return 0 if _never_entered(model, loop, via) else None
    if not isinstance(loop, cst.For):
        return None
    iterated = loop.iter
    while isinstance(iterated, cst.Call) and model.call_name(iterated) in PASSTHROUGH_WRAPPERS and iterated.args:
        iterated = iterated.args[0].value  # `tqdm(range(n))`
    if not isinstance(iterated, cst.Call) or any(a.star or a.keyword is not None for a in iterated.args):
        return None
    builtin = isinstance(iterated.func, cst.Name) and iterated.func.value == "range" and not model.bindings_of("range", iterated)
    if not builtin and model.call_name(iterated) not in _TRANGE:
        return None
    bounds = [_integer(model, a.value, via, 0) for a in iterated.args]
    if not bounds or any(b is None for b in bounds):
        return None
    if len(bounds) == 1:
        return max(bounds[0], 0)
    if len(bounds) == 2:
        return max(bounds[1] - bounds[0], 0)
    return None  # a step: rare for epochs


def _never_entered(model: SemanticModel, loop: cst.While, via: tuple[cst.Call, ...]) -> bool:
    """`step = 0` then `while step < num_steps:` with `num_steps = 0` (an exercise shipped with its training off):
    the counter's every value before the loop (a known integer) already fails the test, so the loop runs no pass."""
    test = loop.test
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.left, cst.Name)):
        return False
    target = test.comparisons[0]
    if not isinstance(target.operator, (cst.LessThan, cst.LessThanEqual)):
        return False
    bound = _integer(model, target.comparator, via, 0)
    if bound is None:
        return False
    writes = [w for w in model.dataflow.reaching_writes(test.left.value, test) if not model.is_inside(w.statement, loop)]
    if not writes or any(w.value is None or w.is_augmented for w in writes):
        return False
    starts = [as_int(getattr(model.values.resolve(w.value), "value", None)) for w in writes]
    if any(start is None for start in starts):
        return False
    strict = isinstance(target.operator, cst.LessThan)
    return all(start >= bound if strict else start > bound for start in starts)  # type: ignore[operator]


def shipped_integer(model: SemanticModel, expr: cst.BaseExpression) -> Optional[int]:
    """The integer `expr` has as shipped (a literal, a name bound once, a command-line option's value in the job
    files or its default, a setting, a sum of such values); None when unknown."""
    return _integer(model, expr, (), 0)


def _integer(model: SemanticModel, expr: cst.BaseExpression, via: tuple[cst.Call, ...], depth: int) -> Optional[int]:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        left, right = _integer(model, expr.left, via, depth + 1), _integer(model, expr.right, via, depth + 1)
        if left is None or right is None:
            return None
        return left + right if isinstance(expr.operator, cst.Add) else left - right
    if isinstance(expr, cst.Name):
        binders = model.bindings_of(expr.value, expr)
        if len(binders) == 1 and isinstance(binders[0], cst.Param):
            return _parameter(model, binders[0], via, depth)
    if isinstance(expr, cst.Attribute) and _stored_in_module(model, expr):
        # `args.num_train_epochs = ceil(args.max_train_steps / steps_per_epoch)`: computed at run time; one
        # module-level `config.num_samples = 20` (a notebook's settings cell) is what the code ships
        return _set_once_at_module_level(model, expr)
    launched = _launched(model, expr)
    if launched is not _NOT_LAUNCHED:
        return launched  # what the job files pass (None: a value they take from elsewhere)
    resolved = model.values.setting(expr)
    return as_int(resolved.value) if resolved is not None else None


def _stored_in_module(model: SemanticModel, expr: cst.Attribute) -> bool:
    """The module assigns `args.epochs` (as spelled at `expr`) somewhere: its option default is not the count."""
    spelled = model.code(expr)
    for node in model.attributes:
        parent = model.parent.get(node)
        stored = isinstance(parent, cst.AssignTarget) or (isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is node)
        if stored and node is not expr and model.code(node) == spelled:
            return True
    return False


def _set_once_at_module_level(model: SemanticModel, expr: cst.Attribute) -> Optional[int]:
    """The integer literal of the one store of `expr` as spelled, when that store is a statement of the module's
    own body (not in a function, a branch or a loop); None otherwise."""
    spelled = model.code(expr)
    stores = []
    for node in model.attributes:
        parent = model.parent.get(node)
        if node is not expr and model.code(node) == spelled and isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
            stores.append(parent)
    if len(stores) != 1 or not isinstance(stores[0], cst.AssignTarget):
        return None
    assign = model.parent.get(stores[0])
    line = model.parent.get(assign)
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or model.parent.get(line) is not model.module:
        return None
    return int(assign.value.evaluated_value) if isinstance(assign.value, cst.Integer) else None


_NOT_LAUNCHED = object()


def _launched(model: SemanticModel, expr: cst.BaseExpression) -> object:
    """`args.epochs` where the repository's job files launch the script with `--epochs ...`: the largest value
    they pass (the argparse default for a job that leaves the flag out), None when one passes a value not
    written there; `_NOT_LAUNCHED` when no job file launches the script."""
    from gpulint.analysis import settings_files

    if not (isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and _command_line(model, expr.value)):
        return _NOT_LAUNCHED
    options = model.values.argparse_options.get(expr.attr.value, [])
    if len(options) != 1:
        return _NOT_LAUNCHED
    flags = [v for a in options[0].call.args if a.keyword is None and isinstance(v := _string(a.value), str) and v.startswith("-")]
    files = [p for p in settings_files.launch_files(model.path) if p in model.project.settings]
    found = settings_files.launch_values(model.path, flags, files) if flags and files else []
    if found is None:
        return None
    if not found:
        return _NOT_LAUNCHED
    counts = []
    for entry in found:
        if entry is None:
            default = options[0].keyword("default")
            resolved = model.values.resolve(default.value) if default is not None else None
            entry = (resolved.value, 0, "") if resolved is not None else None
        count = as_int(entry[0]) if entry is not None else None
        if count is None:
            return None
        counts.append(count)
    return max(counts)


def _command_line(model: SemanticModel, name: cst.Name) -> bool:
    """`args` bound to `parser.parse_args()`, or a parameter named like the parsed command line (`def main(args)`)."""
    from gpulint.analysis.value_resolution import ARGS_PARAMETER_NAMES

    if name.value in model.values.parse_args_names:
        return True
    binders = model.bindings_of(name.value, name)
    return name.value in ARGS_PARAMETER_NAMES and len(binders) == 1 and isinstance(binders[0], cst.Param)


def _string(expr: cst.BaseExpression) -> Optional[str]:
    from gpulint.analysis.value_resolution import literal_value

    ok, value = literal_value(expr)
    return value if ok and isinstance(value, str) else None


def _parameter(model: SemanticModel, param: cst.Param, via: tuple[cst.Call, ...], depth: int) -> Optional[int]:
    """What the call in `via` that runs the parameter's function passes for it (its default when it passes
    nothing); without such a call, the largest of what every call of this module passes."""
    func = model.parent.get(model.parent.get(param))
    if not isinstance(func, cst.FunctionDef):
        return None
    calls = [c for c in via if _calls(c, func)]
    if not calls:
        calls = [c for c in model.calls if _calls(c, func)]
    if not calls:
        return None
    found = []
    for call in calls:
        given = argument_for(func, param, call)
        if given is None:
            return None
        value = _integer(model, given, (), depth + 1)
        if value is None:
            return None
        found.append(value)
    return max(found)


def _calls(call: cst.Call, func: cst.FunctionDef) -> bool:
    """`train(...)` or `self.train(...)` of a function named like `func`."""
    callee = call.func
    if isinstance(callee, cst.Name):
        return callee.value == func.name.value
    return (
        isinstance(callee, cst.Attribute) and callee.attr.value == func.name.value
        and isinstance(callee.value, cst.Name) and callee.value.value == "self"
    )  # fmt: skip


def argument_for(func: cst.FunctionDef, param: cst.Param, call: cst.Call) -> Optional[cst.BaseExpression]:
    if any(a.star for a in call.args):
        return None
    name = param.name.value
    given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
    if given is not None:
        return given
    positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    if positional and positional[0] in ("self", "cls") and isinstance(call.func, cst.Attribute):
        positional = positional[1:]
    plain = [a for a in call.args if a.keyword is None]
    if name in positional and positional.index(name) < len(plain):
        return plain[positional.index(name)].value
    return param.default
