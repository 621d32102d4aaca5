"""Values a notebook stores in its own dicts and reads back: `gpu = {}; gpu['use'] = use_gpu; config['gpu'] = gpu`,
then `main(True, config)` reads `config['gpu']['use']`, which is `use_gpu` as written in the notebook.

Only what the code fixes counts: a dict built empty (or from a literal with string keys) by the one binding of a
name, each key of the chain stored once where the code runs (`analysis/shipped_paths.py`: a store in a branch
that never runs as shipped does not count), the dict read only as an item base, as a stored value or as an
argument of a function of the same file (which may store into it too: every store of the key in the file is
counted, whatever dict it is written on), and a parameter read through every call that runs. Anything else (a
dict from `json.load`, `.update()`, `setdefault`, a dict handed to a library) leaves the value unknown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import libcst as cst

from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

UNKNOWN = object()
_MAX_HOPS = 6
# Methods that change a dict in place (or hand out a view that can).
_MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"})
Evaluate = Callable[[cst.BaseExpression, int], object]


def item_value(model: SemanticModel, expr: cst.Subscript, evaluate: Evaluate, depth: int = 0) -> object:
    """The value `name['a']['b']` has as shipped, with `evaluate(expr, depth)` giving the stored leaf's value; or UNKNOWN."""
    keys: list[str] = []
    base: cst.BaseExpression = expr
    while isinstance(base, cst.Subscript):
        key = _key(base)
        if key is None:
            return UNKNOWN
        keys.append(key)
        base = base.value
    if not isinstance(base, cst.Name):
        return UNKNOWN
    return _lookup(model, base, list(reversed(keys)), evaluate, depth, 0)


def _lookup(model: SemanticModel, name: cst.Name, keys: list[str], evaluate: Evaluate, depth: int, hops: int) -> object:
    """`name[keys[0]][keys[1]]...`, following at most `_MAX_HOPS` names (dicts stored in dicts, parameters)."""
    from gpulint.analysis.shipped_paths import never_runs, shipped_arguments

    if hops > _MAX_HOPS:
        return UNKNOWN
    binders = [b for b in model.bindings_of(name.value, name) if not never_runs(model, b)]
    if len(binders) != 1:
        return UNKNOWN
    binder = binders[0]
    if isinstance(binder, cst.Param):  # `def main(notebook_mode, config)`: what every call that runs passes
        given = shipped_arguments(model, binder)
        if not given or any(arg is None or not isinstance(arg, cst.Name) for arg in given):
            return UNKNOWN
        values = {_hashable(_lookup(model, arg, keys, evaluate, depth, hops + 1)) for arg in given}
        return values.pop() if len(values) == 1 else UNKNOWN
    if not _built_here(model, binder, name.value):
        return UNKNOWN
    value = _stored(model, binder, name.value, keys[0])
    if value is None:
        return UNKNOWN
    if len(keys) == 1:
        return evaluate(value, depth)
    return _lookup(model, value, keys[1:], evaluate, depth, hops + 1) if isinstance(value, cst.Name) else UNKNOWN


def _built_here(model: SemanticModel, binder: cst.CSTNode, name: str) -> bool:
    """`name = {}` (or a dict literal with string keys), and the dict is only read where its items stay in sight."""
    if not (isinstance(binder, cst.Assign) and len(binder.targets) == 1 and isinstance(binder.targets[0].target, cst.Name)):
        return False
    if not isinstance(binder.value, cst.Dict):
        return False
    if any(not isinstance(e, cst.DictElement) or _string(e.key) is None for e in binder.value.elements):
        return False  # `{**defaults}`, a computed key
    for read in model.dataflow.reads.get(name, []):
        if not isinstance(read, cst.Name) or binder not in model.bindings_of(name, read):
            continue
        parent = model.parent.get(read)
        if isinstance(parent, cst.Subscript) and parent.value is read:
            continue  # `config['gpu']`
        stored = isinstance(parent, cst.Assign) and parent.value is read
        if stored and all(isinstance(t.target, cst.Subscript) for t in parent.targets):
            continue  # `config['gpu'] = gpu`: stored in another dict of the file
        call = model.parent.get(parent) if isinstance(parent, cst.Arg) else None
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in model.functions:
            continue  # `main(True, config)`: a function of this file, whose stores are counted by key
        return False
    return True


def _stored(model: SemanticModel, binder: cst.Assign, name: str, key: str) -> Optional[cst.BaseExpression]:
    """The one value stored under `key` in the dict `binder` builds: in its literal, or by `name[key] = value`
    where the code runs (no other store of that key anywhere in the file, on any dict)."""
    found = [e.value for e in binder.value.elements if isinstance(e, cst.DictElement) and _string(e.key) == key]  # type: ignore[union-attr]
    for statement, target in _key_stores(model).get(key, []):
        if never_runs(model, statement):
            continue
        if not (isinstance(target.value, cst.Name) and target.value.value == name and model.bindings_of(name, target) == [binder]):
            return None  # the key stored on another dict (an alias, a parameter): not known to be a different one
        if not isinstance(statement, cst.Assign):
            return None  # `config['gpu'] += ...`, an annotated store: not one plain value
        found.append(statement.value)
    return found[0] if len(found) == 1 else None


def _key_stores(model: SemanticModel) -> dict[str, list[tuple[cst.CSTNode, cst.Subscript]]]:
    """Every item store of the file with a string key (also augmented, annotated and `del`), by key."""
    memo = model.memo("item stores by key")
    if model.module not in memo:
        found: dict[str, list[tuple[cst.CSTNode, cst.Subscript]]] = {}

        def add(statement: cst.CSTNode, target: cst.BaseExpression) -> None:
            if isinstance(target, cst.Subscript):
                key = _key(target)
                found.setdefault(key if key is not None else "", []).append((statement, target))

        class _Stores(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                for t in node.targets:
                    add(node, t.target)

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                add(node, node.target)

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                add(node, node.target)

            def visit_Del(self, node: cst.Del) -> None:
                add(node, node.target)

            def visit_Attribute(self, node: cst.Attribute) -> None:
                # (`self.update(kwds)` in a dict subclass: a plain dict built by `{}` is never `self`)
                on_self = isinstance(node.value, cst.Name) and node.value.value in ("self", "cls")
                if node.attr.value in _MUTATORS and not on_self:
                    found.setdefault("", []).append((node, node))  # type: ignore[arg-type]

        model.module.visit(_Stores())
        memo[model.module] = found  # type: ignore[assignment]
    stores = memo[model.module]  # type: ignore[assignment]
    if stores.get(""):  # a store with a computed key, `.update()`: any key may change
        return {key: [*v, *stores[""]] for key, v in stores.items()} | {"": stores[""]}  # type: ignore[union-attr]
    return stores  # type: ignore[return-value]


def never_runs(model: SemanticModel, node: cst.CSTNode) -> bool:
    from gpulint.analysis.shipped_paths import never_runs as _never_runs

    return _never_runs(model, node)


def _key(subscript: cst.Subscript) -> Optional[str]:
    if len(subscript.slice) != 1 or not isinstance(subscript.slice[0].slice, cst.Index):
        return None
    return _string(subscript.slice[0].slice.value)


def _string(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    if expr is None:
        return None
    ok, value = literal_value(expr)
    return value if ok and isinstance(value, str) else None


def _hashable(value: object) -> object:
    try:
        hash(value)
    except TypeError:
        return UNKNOWN
    return value
