"""Code that never runs with the settings the project ships: `if ngpu > 1:` with `ngpu = 0` written in the
module, `if flag:` with `flag = 0`, `IS_PARALLEL = True if ngpu > 1 else False`.

A file test decides nothing: the training branch of `if os.path.isfile(ckpt): load else: train` runs for whoever
trains, even in a tutorial that downloads its trained checkpoints first (the lesson is that training).

Only tests whose every input is written in the code count (a literal, a module constant, a local set once,
a parameter every call in the project leaves at the same literal: `analysis/call_arguments.py`): a value
chosen at run time (`torch.cuda.device_count()`) or meant to be changed at launch (a command-line option,
whatever its default, except a diagnostic switch off as shipped: `analysis/off_options.py`; a YAML setting)
leaves the branch possible, and the code is reported as usual.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.namespace_settings import UNKNOWN as NAMESPACE_UNKNOWN
from gpulint.analysis.namespace_settings import namespace_value
from gpulint.analysis.off_options import flag_spelled_near, off_as_shipped
from gpulint.analysis.self_tests import self_test_rows
from gpulint.analysis.stored_items import UNKNOWN as ITEM_UNKNOWN
from gpulint.analysis.stored_items import item_value
from gpulint.analysis.notebook_probes import asks_for_a_notebook
from gpulint.analysis.value_resolution import (
    ARGPARSE_DEFAULT, CONFIG_DICT, IMPORTED_ARGPARSE_DEFAULT, LITERAL, LOCAL_VARIABLE, MODULE_CONSTANT, SETTINGS_FILE,
)  # fmt: skip

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_MAX_DEPTH = 6
# Values only an edit of the code changes (a command-line default is changed at launch).
_WRITTEN_IN_CODE = frozenset({LITERAL, MODULE_CONSTANT, LOCAL_VARIABLE})
_UNKNOWN = object()
UNKNOWN = _UNKNOWN  # what `shipped_value` returns for a value not known as shipped
_COMPARE = {
    cst.GreaterThan: operator.gt, cst.GreaterThanEqual: operator.ge, cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le, cst.Equal: operator.eq, cst.NotEqual: operator.ne,
}  # fmt: skip


def never_runs(model: SemanticModel, node: cst.CSTNode) -> bool:
    """An enclosing `if` (or conditional expression) takes the other branch with the shipped settings."""
    child = node
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.If) and child is not ancestor.test:
            value = shipped_value(model, ancestor.test)
            if value is not _UNKNOWN and bool(value) != (child is ancestor.body):
                return True
        elif isinstance(ancestor, cst.IfExp) and child in (ancestor.body, ancestor.orelse):
            value = shipped_value(model, ancestor.test)
            if value is not _UNKNOWN and bool(value) != (child is ancestor.body):
                return True
        child = ancestor
    return False


def unshipped_rows(model: SemanticModel) -> list[tuple[int, int]]:
    """The line spans of the branches that never run with the shipped settings (findings there are dropped)."""
    memo = model.memo("unshipped rows")
    if model.module not in memo:
        spans = []
        for node in if_statements(model):
            value = shipped_value(model, node.test)
            if value is _UNKNOWN:
                continue
            dead = node.orelse if value else node.body
            if dead is not None:
                first, last = model.range(dead).start.line, model.range(dead).end.line
                spans.append((first + 1 if isinstance(dead, cst.Else) else first, last))
        if runs_as_a_script(model) or not model.project.imported:
            spans += _hooks_never_called(model)  # a script no module imports runs only what it calls itself
        if runs_as_a_script(model) and spans:
            spans += _functions_only_called_there(model, spans)
        spans += _uncalled_functions(model) + self_test_rows(model)
        memo[model.module] = spans  # type: ignore[assignment]
    return memo[model.module]  # type: ignore[return-value]


def shipped_value(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> object:
    """The value `expr` has with the shipped settings, or `_UNKNOWN`."""
    if depth > _MAX_DEPTH:
        return _UNKNOWN
    if isinstance(expr, cst.Call):
        if model.is_notebook and asks_for_a_notebook(model, expr):
            return True  # `in_ipynb()`: `get_ipython()` answers in the notebook's kernel
        return _UNKNOWN  # `os.path.isfile(ckpt)`: the file may be missing (see the module's docstring)
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.BaseNumber, cst.SimpleString)):
        resolved = model.values.resolve(expr)
        if resolved is not None and resolved.origin in _WRITTEN_IN_CODE:
            return resolved.value
        if isinstance(expr, cst.Subscript):
            if off_as_shipped(model, expr) is False:
                return False
            if runs_as_a_script(model):  # `config['gpu']['use']` with `gpu['use'] = use_gpu; config['gpu'] = gpu`
                stored = item_value(model, expr, lambda value, d: shipped_value(model, value, d), depth + 1)
                return _UNKNOWN if stored is ITEM_UNKNOWN else stored
            return _UNKNOWN
        if isinstance(expr, cst.Attribute):
            param = init_parameter_held(model, expr)
            if param is not None:
                return _argument_value(model, param, depth + 1)
            held = init_literal_held(model, expr)  # `self.stratified = False` in `__init__`, never changed
            if held is not _UNKNOWN:
                return held
            written = namespace_value(model, expr)  # `args = Namespace(cuda=False)` in a notebook
            if written is not NAMESPACE_UNKNOWN:
                return written
            return False if off_as_shipped(model, expr) is False else _UNKNOWN
        if isinstance(expr, cst.Name):  # `IS_PARALLEL = True if ngpu > 1 else False`, set once
            binders = model.bindings_of(expr.value, expr)
            if len(binders) == 1 and isinstance(binders[0], cst.Assign) and len(binders[0].targets) == 1:
                if isinstance(binders[0].targets[0].target, cst.Name):
                    return shipped_value(model, binders[0].value, depth + 1)
            if len(binders) == 1 and isinstance(binders[0], cst.Param):
                return _argument_value(model, binders[0], depth + 1)
        return _UNKNOWN
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = shipped_value(model, expr.expression, depth + 1)
        return _UNKNOWN if inner is _UNKNOWN else not inner
    if isinstance(expr, cst.BooleanOperation):
        left = shipped_value(model, expr.left, depth + 1)
        right = shipped_value(model, expr.right, depth + 1)
        if isinstance(expr.operator, cst.And):  # one false side decides, whatever the other is
            if (left is not _UNKNOWN and not left) or (right is not _UNKNOWN and not right):
                return False
            return _UNKNOWN if _UNKNOWN in (left, right) else True
        if (left is not _UNKNOWN and left) or (right is not _UNKNOWN and right):
            return True
        return _UNKNOWN if _UNKNOWN in (left, right) else False
    if isinstance(expr, cst.IfExp):
        test = shipped_value(model, expr.test, depth + 1)
        if test is _UNKNOWN:
            return _UNKNOWN
        return shipped_value(model, expr.body if test else expr.orelse, depth + 1)
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        operator_ = expr.comparisons[0].operator
        left = shipped_value(model, expr.left, depth + 1)
        right = shipped_value(model, expr.comparisons[0].comparator, depth + 1)
        if isinstance(operator_, (cst.Is, cst.IsNot)) and None in (left, right) and _UNKNOWN not in (left, right):
            return (left is right) == isinstance(operator_, cst.Is)  # `criterion is not None` with `criterion=None`
        compare = _COMPARE.get(type(operator_))
        if compare is None or _UNKNOWN in (left, right) or not (_number(left) and _number(right)):
            return _UNKNOWN
        return compare(left, right)
    return _UNKNOWN


# Where a count may come from and still be the count every run uses unless the command line changes it.
_SHIPPED_SETTINGS = frozenset({ARGPARSE_DEFAULT, IMPORTED_ARGPARSE_DEFAULT, CONFIG_DICT, SETTINGS_FILE})


def one_as_shipped(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`args.accumulation_steps` (or a constant, a config entry, a parameter every call leaves at 1) that is 1
    as the project ships it: its default, and no command file near the script passes the flag."""
    value = shipped_value(model, expr)
    if value is not _UNKNOWN:
        return type(value) is int and value == 1
    resolved = model.values.resolve(expr)
    if resolved is None or resolved.origin not in _SHIPPED_SETTINGS or type(resolved.value) is not int or resolved.value != 1:
        return False
    return not (isinstance(expr, cst.Attribute) and flag_spelled_near(model.path, expr.attr.value))


def _number(value: object) -> bool:
    return isinstance(value, (int, float))


def _argument_value(model: SemanticModel, param: cst.Param, depth: int = 0) -> object:
    """What every call of the function gives `param` (a literal, or the literal default), when they agree: in a
    notebook `train_model(net, name, overwrite=False)` makes `overwrite` False in `train_model`, and
    `gpu_setup(config['gpu']['use'], ...)` gives `use_gpu` what the notebook stored there (a call that never runs
    as shipped gives nothing); in a project, `ComputeLoss(model)` at every construction leaves `autobalance=False`
    (`analysis/call_arguments.py`)."""
    func = model.parent.get(model.parent.get(param))
    if not isinstance(func, cst.FunctionDef):
        return _UNKNOWN
    if not runs_as_a_script(model):
        return _agreed_in_project(model, func, param)
    given = shipped_arguments(model, param)
    if not given:
        return _UNKNOWN
    default = _literal(param.default) if param.default is not None else _UNKNOWN
    values = set()
    for arg in given:
        value = default if arg is None else _literal(arg)
        if value is _UNKNOWN and arg is not None and depth <= _MAX_DEPTH:
            value = shipped_value(model, arg, depth + 1)
        try:
            values.add(value)
        except TypeError:  # a list or dict as shipped: not one value to compare
            return _UNKNOWN
    return values.pop() if len(values) == 1 and _UNKNOWN not in values else _UNKNOWN


def shipped_arguments(model: SemanticModel, param: cst.Param) -> Optional[list[Optional[cst.BaseExpression]]]:
    """What each call of a module-level function of a notebook that runs as shipped passes for `param` (None where
    it is left out), every call in sight; None when not known (a method, a function passed around as a value)."""
    func = model.parent.get(model.parent.get(param))
    if not isinstance(func, cst.FunctionDef) or not runs_as_a_script(model):
        return None
    if any(isinstance(a, (cst.FunctionDef, cst.ClassDef)) for a in model.ancestors(func)):
        return None  # a method or a nested function: its calls are not all spelled `name(...)`
    positional = [p.name.value for p in func.params.params]
    index = positional.index(param.name.value) if param.name.value in positional else None
    calls = model.calls_of(func.name.value)
    named = model.dataflow.reads.get(func.name.value, [])
    if not calls or any(not isinstance(model.parent.get(read), cst.Call) for read in named):
        return None  # also passed around as a value (a callback): its other callers are out of sight
    busy = model.memo("arguments being read")
    if param in busy:
        return None  # a call that runs only if this parameter has some value: not followed round
    busy[param] = True
    try:
        given: list[Optional[cst.BaseExpression]] = []
        for call in calls:
            if not isinstance(call.func, cst.Name) or any(arg.star for arg in call.args):
                return None
            if never_runs(model, call):
                continue  # `else: main()` under `if notebook_mode == True:`, in a notebook
            passed = [a.value for i, a in enumerate(call.args) if (a.keyword is not None and a.keyword.value == param.name.value)
                      or (a.keyword is None and i == index)]  # fmt: skip
            given.append(passed[0] if passed else None)
        return given
    finally:
        del busy[param]


# Decorators that call the function with the arguments its callers give (`@torch.no_grad()` and the like).
_TRANSPARENT_DECORATORS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.enable_grad", "functools.cache", "functools.lru_cache"})


def _agreed_in_project(model: SemanticModel, func: cst.FunctionDef, param: cst.Param) -> object:
    """The value every call in the project gives `param` of a module-level function or of a module-level class's
    `__init__`, when the project calls it and all calls agree; else `_UNKNOWN` (API: any value may come)."""
    values = project_values(model, func, param)
    return values.pop() if values is not None and len(values) == 1 else _UNKNOWN


def project_values(model: SemanticModel, func: cst.FunctionDef, param: cst.Param) -> Optional[set]:
    """The values the project's calls give `param` (the literal default where a call leaves it out) of a
    module-level function or class `__init__` that other modules call, every call in sight; None: not known."""
    from gpulint.analysis.call_arguments import LEFT_OUT

    ways = project_ways(model, func, param)
    if not ways:
        return None
    default = _literal(param.default) if param.default is not None else _UNKNOWN
    values = {default if way[0] == LEFT_OUT else way[1] for way in ways}
    return None if _UNKNOWN in values else values


def project_ways(model: SemanticModel, func: cst.FunctionDef, param: cst.Param) -> Optional[list]:
    """How the project's calls fill `param` of a module-level function or class `__init__` that other modules call,
    every call in sight (`[["left out"], ["given", "cpu"]]`, `analysis/call_arguments.py`); None: not known."""
    owner = model.parent.get(model.parent.get(func))  # IndentedBlock -> ClassDef
    decorators = [d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator for d in func.decorators]
    if any(model.qualified_name(d) not in _TRANSPARENT_DECORATORS for d in decorators):
        return None  # a decorator may call it with other arguments (`@click.option`, a registry, a wrapper)
    if model.parent.get(func) is model.module:
        key = f"{func.name.value}.{param.name.value}"
    elif isinstance(owner, cst.ClassDef) and func.name.value == "__init__" and model.parent.get(owner) is model.module:
        key = f"{owner.name.value}.{param.name.value}"
    else:
        return None
    return model.project.arguments.get(key) or None


def init_parameter_held(model: SemanticModel, attr: cst.Attribute) -> Optional[cst.Param]:
    """`self.autobalance` in a method, where the class's `__init__` sets it once from its own parameter
    (`self.autobalance = autobalance`, or a tuple assignment) and nothing else in the module or the project
    assigns that attribute: the parameter."""
    if not (isinstance(attr.value, cst.Name) and attr.value.value == "self"):
        return None
    name = attr.attr.value
    owner = next((a for a in model.ancestors(attr) if isinstance(a, cst.ClassDef)), None)
    if owner is None or f"*.{name}" in model.project.arguments:
        return None
    stores = [s for s in _attribute_stores(model) if s[0] == name and (not s[3] or model.is_inside(s[2], owner))]
    if len(stores) != 1:
        return None  # set twice in the class, or on another object (`loss.autobalance = True`)
    _, value, where, _ = stores[0]
    init = model.enclosing_function(where)
    if init is None or init.name.value != "__init__" or model.parent.get(model.parent.get(init)) is not owner:
        return None
    if not isinstance(value, cst.Name) or value.value != name:
        return None  # `self.x = x`: the project fact lists outside stores by the parameter's name
    param = next((p for p in [*init.params.params, *init.params.kwonly_params] if p.name.value == value.value), None)
    if param is None or f"*.{param.name.value}" in model.project.arguments or len(model.bindings_of(value.value, value)) != 1:
        return None
    return param


def init_literal_held(model: SemanticModel, attr: cst.Attribute) -> object:
    """`self.stratified` in a method, where the class's `__init__` sets it to a literal (`self.stratified = False`)
    and nothing else assigns that attribute: no other store in the module (on any object), none from outside
    its class in the project, no `setattr`: the literal. Else `_UNKNOWN`."""
    if not (isinstance(attr.value, cst.Name) and attr.value.value == "self"):
        return _UNKNOWN
    name = attr.attr.value
    owner = next((a for a in model.ancestors(attr) if isinstance(a, cst.ClassDef)), None)
    if owner is None or f"*.{name}" in model.project.arguments or _sets_attributes_by_name(model):
        return _UNKNOWN
    stores = [s for s in _attribute_stores(model) if s[0] == name]
    if len(stores) != 1 or not stores[0][3] or stores[0][1] is None:
        return _UNKNOWN  # set twice, on another object (`rf.stratified = True`), or by `+=`
    _, value, where, _ = stores[0]
    init = model.enclosing_function(where)
    if init is None or init.name.value != "__init__" or model.parent.get(model.parent.get(init)) is not owner:
        return _UNKNOWN
    return _literal(value)


def _sets_attributes_by_name(model: SemanticModel) -> bool:
    """`setattr(obj, key, value)` or `obj.__dict__.update(...)`: an attribute may be set where no store names it."""
    return "__dict__" in model.source or any(isinstance(c.func, cst.Name) and c.func.value == "setattr" for c in model.calls)


def _attribute_stores(model: SemanticModel) -> list[tuple[str, Optional[cst.BaseExpression], cst.CSTNode, bool]]:
    """Every `x.name = value` of the module (tuple targets paired with tuple values): (name, value or None,
    statement, whether `x` is `self`)."""
    memo = model.memo("attribute stores")
    if model.module not in memo:
        found: list = []

        class _Stores(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                for target in node.targets:
                    _pair(target.target, node.value, node)

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                _pair(node.target, None, node)

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                _pair(node.target, node.value, node)

        def _pair(target: cst.BaseExpression, value: Optional[cst.BaseExpression], statement: cst.CSTNode) -> None:
            if isinstance(target, cst.Attribute):
                on_self = isinstance(target.value, cst.Name) and target.value.value == "self"
                found.append((target.attr.value, value, statement, on_self))
            elif isinstance(target, (cst.Tuple, cst.List)):
                values = value.elements if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements) else None
                for i, element in enumerate(target.elements):
                    inner = values[i].value if values is not None and not isinstance(values[i], cst.StarredElement) else None
                    _pair(element.value, inner, statement)

        model.module.visit(_Stores())
        memo[model.module] = found  # type: ignore[assignment]
    return memo[model.module]  # type: ignore[return-value]


def _literal(expr: cst.BaseExpression) -> object:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[expr.value]
    if isinstance(expr, cst.Integer):
        return int(expr.value)
    return _UNKNOWN


def if_statements(model: SemanticModel) -> list[cst.If]:
    """Every `if` statement of the module, outermost first."""
    found: list[cst.If] = []

    class _Ifs(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            found.append(node)

    model.module.visit(_Ifs())
    return found


def runs_as_a_script(model: SemanticModel) -> bool:
    """A notebook, or a notebook kept as a script (`# %%` cells): run top to bottom, never imported, so its
    functions are not API that other code may call."""
    return model.is_notebook or any(line.startswith("# %%") for line in model.source.splitlines())


def _uncalled_functions(model: SemanticModel) -> list[tuple[int, int]]:
    """The spans of the module-level functions nothing in the project runs (`analysis/uncalled.py`), except
    decorated ones (a registry, a command, a hook calls them) and all of them in a module that looks names up
    in its own namespace (`globals()[name]`)."""
    if not model.project.uncalled or _reads_own_namespace(model):
        return []
    spans = []
    for name in model.project.uncalled:
        funcs = [f for f in model.functions.get(name, ()) if model.parent.get(f) is model.module]
        if len(funcs) != 1:
            continue
        decorators = [d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator for d in funcs[0].decorators]
        if any(model.qualified_name(d) not in _TRANSPARENT_DECORATORS for d in decorators):
            continue
        here = model.range(funcs[0])
        spans.append((here.start.line, here.end.line))
    return spans


# Builtins that reach a module's functions by a name computed at run time (`vars()` without an argument).
_OWN_NAMESPACE = frozenset({"globals", "locals", "eval", "exec"})


def _reads_own_namespace(model: SemanticModel) -> bool:
    """`globals()[name]`, `eval(expr)`, `vars()`, `getattr(sys.modules[__name__], name)` in the module."""
    if "sys.modules[__name__]" in model.source:
        return True
    return any(isinstance(c.func, cst.Name) and (c.func.value in _OWN_NAMESPACE or (c.func.value == "vars" and not c.args)) for c in model.calls)


def _functions_only_called_there(model: SemanticModel, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans of the module's functions that are named only by calls inside `spans` (transitively): the
    `train_epoch(...)` that only the skipped training branch calls."""
    dead = list(spans)
    reads = model.dataflow.reads
    changed = True
    while changed:
        changed = False
        for name, funcs in model.functions.items():
            if len(funcs) != 1 or any(isinstance(a, (cst.FunctionDef, cst.ClassDef)) for a in model.ancestors(funcs[0])):
                continue  # methods and nested functions are reached in other ways
            func = funcs[0]
            here = model.range(func)
            span = (here.start.line, here.end.line)
            if span in dead:
                continue
            named = reads.get(name, [])
            if named and all(any(first <= model.line_of(read) <= last for first, last in dead) for read in named):
                dead.append(span)
                changed = True
    return dead[len(spans):]


# Lightning hooks that only `trainer.test(...)` / `trainer.predict(...)` (or a CLI subcommand) run.
_TEST_OR_PREDICT_HOOKS = frozenset({"test_dataloader", "test_step", "predict_dataloader", "predict_step"})
_TEST_OR_PREDICT_CALLS = frozenset({"test", "predict"})


def _hooks_never_called(model: SemanticModel) -> list[tuple[int, int]]:
    """In a notebook, or a script no module of the project imports, that runs its own Lightning Trainer: the spans
    of `test_dataloader` / `test_step` (and the `predict_` ones) when nothing in it calls `.test(...)`
    (`.predict(...)`), nor builds a `LightningCLI`, whose subcommands can run them (optuna's Lightning examples
    only fit: their test hooks never run as shipped)."""
    frameworks = model.frameworks
    if not frameworks.imported or "CLI" in model.source:
        return []
    called = {c.func.attr.value for c in model.calls if isinstance(c.func, cst.Attribute)} & _TEST_OR_PREDICT_CALLS
    if not any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "fit" for c in model.calls):
        return []  # the Trainer runs elsewhere (or not here): what it runs is not known from this module
    spans = []
    for name, info in model.classes.items():
        kind = frameworks.class_kind(name)
        if kind is None or kind.framework != "Lightning":
            continue
        for method, func in info.methods.items():
            if method in _TEST_OR_PREDICT_HOOKS and method.split("_")[0] not in called:
                here = model.range(func)
                spans.append((here.start.line, here.end.line))
    return spans
