"""Settings written as a namespace in the code, the way notebooks ship them: `args = Namespace(cuda=False, ...)`
(or `SimpleNamespace`, `EasyDict`), read as `args.cuda`. Such a value is written in the code like a
constant, not passed at launch, so it is the value every run has, when nothing else may change it: the name is
bound once, and every store of that setting in the module (`if not torch.cuda.is_available(): args.cuda = False`,
on whatever object) writes the same literal; no `setattr`, `vars(args)` or `args.__dict__` may set it another way.
`"cuda" if args.cuda else "cpu"` then picks the CPU as shipped (analysis/shipped_paths.py).
"""

from __future__ import annotations

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
