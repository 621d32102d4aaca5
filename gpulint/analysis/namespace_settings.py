"""Settings written as a namespace in the code, the way notebooks ship them: `args = Namespace(cuda=False, ...)`
(or `SimpleNamespace`, `EasyDict`), read as `args.cuda`. Such a value is written in the code like a
constant, not passed at launch, so it is the value every run has, when nothing else may change it: the name is
bound once, and every store of that setting in the module (`if not torch.cuda.is_available(): args.cuda = False`,
on whatever object) writes the same literal; no `setattr`, `vars(args)` or `args.__dict__` may set it another way.
`"cuda" if args.cuda else "cpu"` then picks the CPU as shipped (analysis/shipped_paths.py).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

UNKNOWN = object()
_NAMESPACES = frozenset({"argparse.Namespace", "types.SimpleNamespace", "easydict.EasyDict"})
# Ways to set an attribute that the stores below do not see.
_INDIRECT_SETTERS = frozenset({"setattr", "vars"})


def namespace_value(model: SemanticModel, attr: cst.Attribute) -> object:
    """The literal `args.cuda` holds with `args = Namespace(cuda=False)`, or UNKNOWN."""
    if not isinstance(attr.value, cst.Name):
        return UNKNOWN
    binders = model.bindings_of(attr.value.value, attr)
    if len(binders) != 1 or not isinstance(binders[0], cst.Assign) or not isinstance(binders[0].value, cst.Call):
        return UNKNOWN
    call = binders[0].value
    if model.call_name(call) not in _NAMESPACES:
        return UNKNOWN
    given = [a for a in call.args if a.keyword is not None and a.keyword.value == attr.attr.value]
    if len(given) != 1 or any(a.star for a in call.args):
        return UNKNOWN
    ok, value = literal_value(given[0].value)
    if not ok or not isinstance(value, (bool, int, float, str, type(None))):
        return UNKNOWN
    stored = _stores(model).get(attr.attr.value, [])
    if any(s is None or s != (True, value) or type(s[1]) is not type(value) for s in stored):
        return UNKNOWN  # `args.cuda = torch.cuda.is_available()`: decided at run time
    if _sets_indirectly(model, attr.value.value):
        return UNKNOWN
    return value


def _stores(model: SemanticModel) -> dict[str, list]:
    """Every `x.name = value` of the module: name -> the literal stored ((ok, value)), None for `+=`."""
    memo = model.memo("namespace stores")
    if model.module not in memo:
        found: dict[str, list] = {}

        class _Stores(cst.CSTVisitor):
            def visit_Assign(self, node: cst.Assign) -> None:
                for target in node.targets:
                    _add(target.target, node.value)

            def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                _add(node.target, node.value)

            def visit_AugAssign(self, node: cst.AugAssign) -> None:
                _add(node.target, None)

        def _add(target: cst.BaseExpression, value) -> None:
            if isinstance(target, cst.Attribute):
                found.setdefault(target.attr.value, []).append(literal_value(value) if value is not None else None)
            elif isinstance(target, (cst.Tuple, cst.List)):
                for element in target.elements:
                    _add(element.value, None)  # unpacked: not a literal we pair here

        model.module.visit(_Stores())
        memo[model.module] = found  # type: ignore[assignment]
    return memo[model.module]  # type: ignore[return-value]


def _sets_indirectly(model: SemanticModel, name: str) -> bool:
    """`setattr(args, ...)`, `vars(args)`, `args.__dict__`, `args.update(...)` anywhere in the module."""
    for call in model.calls:
        func = call.func
        if isinstance(func, cst.Name) and func.value in _INDIRECT_SETTERS:
            if call.args and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == name:
                return True
        if isinstance(func, cst.Attribute) and func.attr.value in ("update", "__setattr__", "setdefault"):
            if isinstance(func.value, cst.Name) and func.value.value == name:
                return True
    return f"{name}.__dict__" in model.source


def namespace_flags(tree: ast.Module) -> dict[str, object]:
    """The same fact for the module summary (`ast`): {"args.cuda": False} for every setting of a namespace bound
    once in the module whose every store writes the literal it was built with (for reads in the module body: a
    function's parameter `args` is another variable)."""
    bound: dict[str, list[ast.AST]] = {}
    stores: dict[str, list] = {}
    indirect: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.setdefault(node.id, []).append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.alias):
            bound.setdefault((node.asname or node.name).split(".")[0], []).append(node)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            indirect.update(node.names)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            stores.setdefault(node.attr, []).append(node)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _INDIRECT_SETTERS and node.args and isinstance(node.args[0], ast.Name):
                indirect.add(node.args[0].id)
            if isinstance(func, ast.Attribute) and func.attr in ("update", "__setattr__", "setdefault") and isinstance(func.value, ast.Name):
                indirect.add(func.value.id)
        if isinstance(node, ast.Attribute) and node.attr == "__dict__" and isinstance(node.value, ast.Name):
            indirect.add(node.value.id)
    values: dict[int, object] = {}  # id of a store target -> its literal (or UNKNOWN)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and node.value is not None:
                    values[id(target)] = _ast_literal(node.value)
    found: dict[str, object] = {}
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name, call = node.targets[0].id, node.value
        if len(bound.get(name, [])) != 1 or name in indirect or not isinstance(call, ast.Call):
            continue
        func = ast.unparse(call.func)
        if func not in _AST_NAMESPACES or any(k.arg is None for k in call.keywords):
            continue
        for keyword in call.keywords:
            value = _ast_literal(keyword.value)
            if value is UNKNOWN or not isinstance(value, (bool, int, float, str, type(None))):
                continue
            written = [values.get(id(s), UNKNOWN) for s in stores.get(keyword.arg, [])]
            if all(w is not UNKNOWN and w == value and type(w) is type(value) for w in written):
                found[f"{name}.{keyword.arg}"] = value
    return found


# How the namespace classes are spelled where the summary cannot qualify a name (`from argparse import Namespace`).
_AST_NAMESPACES = frozenset({"Namespace", "argparse.Namespace", "SimpleNamespace", "types.SimpleNamespace", "EasyDict", "edict"})


def _ast_literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return UNKNOWN
