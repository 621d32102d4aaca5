"""Settings an object keeps from a parameter default of its own method, handed to a function of another module.

A library's estimator takes its settings in a public method and keeps them on the instance (pytorch-tabnet:
`def fit(self, X_train, ..., num_workers=0, ...)` sets `self.num_workers = num_workers`); another method hands the
attribute to a module-level factory of another module (`create_dataloaders(X_train, ..., self.num_workers, ...)`
in `_construct_loaders`), which builds `DataLoader(..., num_workers=num_workers)`. What the factory is given, as
the project ships, is that default: every caller that leaves the parameter out runs with it.

The summary records, for each call of a method, the arguments that are `self.<attribute>` where the class (in its
module) stores that attribute once, `self.<attribute> = <parameter>` in one method whose parameter has a literal
default, no call in the module passes that parameter, and nothing else in the module stores the attribute
(`held`: call index -> {slot: [default, line, attribute]}). The project index then gives the factory's module, for a parameter
every call of the factory fills with one literal or one such default (and no module stores the attribute from
outside its class), the value and where it is written (`ModuleContext.held_arguments`:
`"create_dataloaders.num_workers"` -> `[0, "pytorch_tabnet/abstract_model.py:136"]`).

A caller of the method may still pass another value (the method is the library's API): the finding says where the
default is, and no fix is offered (the value is written in another module).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

_LITERALS = (int, float, str, bool, type(None))


def held_attribute_defaults(node: ast.ClassDef) -> dict[str, tuple[Any, int]]:
    """`{"num_workers": (0, 136)}`: the attributes the class stores once, from a parameter of one of its methods
    that has a literal default no call of the class passes (see the module docstring)."""
    stores: dict[str, list[tuple[ast.AST, ast.AST]]] = {}
    calls: list[ast.Call] = []
    methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for method in methods:
        for sub in ast.walk(method):
            targets: list[ast.AST] = []
            if isinstance(sub, ast.Assign):
                targets = [t for target in sub.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
            elif isinstance(sub, (ast.AugAssign, ast.AnnAssign)):
                targets = [sub.target]
            for target in targets:
                if isinstance(target, ast.Attribute):
                    stores.setdefault(target.attr, []).append((method, sub))
            if isinstance(sub, ast.Call):
                calls.append(sub)
    found: dict[str, tuple[Any, int]] = {}
    for attribute, where in stores.items():
        if len(where) != 1:
            continue
        method, assign = where[0]
        if not isinstance(assign, ast.Assign) or len(assign.targets) != 1:
            continue
        target, value = assign.targets[0], assign.value
        receiver = method.args.args[0].arg if method.args.args else None
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == receiver):
            continue
        if not isinstance(value, ast.Name) or any(_passes(call, method, value.id) for call in calls):
            continue
        default = _parameter_default(method, value.id)
        if default is not None and _rebound(method, value.id) == 0:
            found[attribute] = default
    return found


def _passes(call: ast.Call, method: ast.AST, name: str) -> bool:
    """A call of the method (`self.fit(...)`, `fit(...)`) in the class that may give its parameter `name`."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called != method.name:  # type: ignore[attr-defined]
        return False
    if any(k.arg is None or k.arg == name for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return True
    positional = [a.arg for a in (*method.args.posonlyargs, *method.args.args)][1:]  # type: ignore[attr-defined]
    return name in positional[: len(call.args)]


def _parameter_default(method: ast.AST, name: str) -> Optional[tuple[Any, int]]:
    args = method.args  # type: ignore[attr-defined]
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    for arg, default in pairs:
        if arg.arg == name and isinstance(default, ast.Constant) and isinstance(default.value, _LITERALS):
            return default.value, default.lineno
    return None


def _rebound(method: ast.AST, name: str) -> int:
    """How many times the method binds `name` again (`num_workers = 4` after the signature)."""
    count = 0
    for sub in ast.walk(method):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.id == name:
            count += 1
    return count


def held_arguments(index: ProjectIndex, record: ModuleRecord) -> dict[str, list]:
    """`{"create_dataloaders.num_workers": [0, "pytorch_tabnet/abstract_model.py:136"]}`: the parameters of the
    module's functions that every call in the project fills with one value, at least one of them through a method
    default an object holds (the rest with the same literal)."""
    from gpulint.analysis.call_arguments import _handed, _stored_outside
    from gpulint.analysis.summary import MODULE_BODY

    summary = record.summary
    handed = _handed(index)
    if handed is None:
        return {}
    stored = _stored_outside(index)
    found: dict[str, list] = {}
    for name, f in summary.functions.items():
        if name == MODULE_BODY or "." in name or (id(record), name) in handed:
            continue
        callers = index.callers(record, name)
        if not callers or all(caller is record for caller, _, _ in callers):
            continue
        positional = list(f.params)
        ways: dict[str, set] = {p: set() for p in [*positional, *f.kwonly]}
        held_at: dict[str, str] = {}
        for caller, key, position in callers:
            caller_f = caller.summary.functions[key]
            call = caller_f.calls[position]
            if len(call) > 6 and call[6]:
                ways = {}
                break
            literals = caller_f.literals.get(position, {})
            held = caller_f.held.get(position, {})
            for param in list(ways):
                at = positional.index(param) if param in positional else None
                slot = at if at is not None and at < len(call[2]) else (param if param in call[3] else None)
                if slot is None:
                    del ways[param]  # left at the factory's own default: resolved in its module already
                elif slot in literals:
                    ways[param].add(_key(literals[slot]))
                elif slot in held and held[slot][2] not in stored and "*" not in stored:
                    ways[param].add(_key(held[slot][0]))
                    held_at[param] = f"{caller.shown}:{held[slot][1]}"
                else:
                    del ways[param]
        for param, values in ways.items():
            if len(values) == 1 and param in held_at:
                found[f"{name}.{param}"] = [next(iter(values))[1], held_at[param]]
    return found


def _key(value: Any) -> tuple:
    return (type(value).__name__, value)
