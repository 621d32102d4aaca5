"""Pass one (CPython `ast`): the torchvision image transforms a module's functions return, for other modules.

`batch_bytes.py` reads the bytes of a torchvision dataset's sample from its transform, written out in the
module (`transforms.Compose([transforms.RandomCrop(32, padding=4), transforms.ToTensor()])`). Training scripts
often take the transforms from a helper of another module (`transform_train, transform_test =
utils.data_transforms_cifar10(args)`); this module records, in the module's summary, the steps of each transform
such a helper returns, and the project index hands them on (`Callee.transforms`).

A function is recorded when it has one `return`, of a name or a tuple of names, each bound once in the function
to `Compose([...])` or to one transform call. A step is `[qualified name, [height, width] or None, written as
one int, optional]`; what it does is `batch_bytes`'s to judge. A step appended to the list (`train_transform.
transforms.append(Cutout(16))`) is one more step, optional under an `if` (`if args.cutout:`): it may change a
sample's bytes, and it adds no work a setting cannot leave out (`epoch_length.py` counts the least work); any other use of `.transforms` (an
insert, an assignment) makes the transform unknown (None), and so does a step that is not a call. A class of the
module whose `__call__` hands back the image it is given, changed only in place (`img *= mask; return img`, a
`Cutout`), is recorded as `KEEPS_SHAPE`: a step that keeps the sample's shape and dtype.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional

Qualify = Callable[[ast.AST], Optional[str]]


# The name recorded for a step that is a class of the module whose `__call__` hands back the image it is given,
# changed only in place (`img *= mask`): the same shape and dtype (`Cutout`).
KEEPS_SHAPE = "<keeps-shape>"


def returned_transforms(tree: ast.Module, qualify: Qualify) -> dict[str, Any]:
    """Function name -> ["one", steps] or ["tuple", [steps or None, ...]]; only module-level functions whose
    return is known (absent: unknown)."""
    kept = {stmt.name for stmt in tree.body if isinstance(stmt, ast.ClassDef) and _keeps_shape(stmt)}

    def named(node: ast.AST) -> Optional[str]:
        if isinstance(node, ast.Name) and node.id in kept:
            return KEEPS_SHAPE
        return qualify(node)

    found: dict[str, Any] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            recorded = _function(stmt, named)
            if recorded is not None:
                found[stmt.name] = recorded
    return found


def _keeps_shape(cls: ast.ClassDef) -> bool:
    """`def __call__(self, img): ...; img *= mask; return img`: every `return` hands back the parameter, which
    the method never binds again (an in-place update keeps a tensor's shape and dtype)."""
    call = next((s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__call__"), None)
    if call is None or len(call.args.args) != 2 or call.args.vararg or call.args.kwarg or call.args.kwonlyargs:
        return False
    name = call.args.args[1].arg
    returns = [n for n in _own_nodes(call) if isinstance(n, ast.Return)]
    if not returns or not all(isinstance(r.value, ast.Name) and r.value.id == name for r in returns):
        return False
    for node in _own_nodes(call):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for target in targets for t in _names_bound(target)):
                return False
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            if any(t.id == name for t in _names_bound(node.optional_vars)):
                return False
        elif isinstance(node, (ast.Global, ast.Nonlocal)) and name in node.names:
            return False
    return True


def _names_bound(target: ast.AST) -> list[ast.Name]:
    """The names an assignment target binds (`a`, `a, b`; not `a[i]` or `a.x`, which change the object)."""
    if isinstance(target, ast.Name):
        return [target]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _names_bound(e)]
    if isinstance(target, ast.Starred):
        return _names_bound(target.value)
    return []


def _function(func: ast.FunctionDef, qualify: Qualify) -> Optional[list]:
    returns = [n for n in _own_nodes(func) if isinstance(n, ast.Return)]
    if len(returns) != 1 or returns[0].value is None:
        return None
    value = returns[0].value
    if isinstance(value, ast.Tuple):
        parts = [_named_transform(func, e, qualify) for e in value.elts]
        return ["tuple", parts] if any(p is not None for p in parts) else None
    steps = _named_transform(func, value, qualify)
    return ["one", steps] if steps is not None else None


def _named_transform(func: ast.FunctionDef, value: ast.AST, qualify: Qualify) -> Optional[list]:
    """The steps of the transform `value` names: a name bound once in `func`, or the transform call itself."""
    if isinstance(value, ast.Call):
        return _steps(value, qualify)
    if not isinstance(value, ast.Name):
        return None
    name = value.id
    binders = []
    appended: list[list] = []
    for node in _own_nodes(func):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
                binders.append(node)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.NamedExpr, ast.withitem)) and any(
            isinstance(n, ast.Name) and n.id == name for n in ast.walk(_bound_by(node))
        ):
            return None  # bound by a loop, a `with`, a walrus: not one known value
        elif isinstance(node, ast.Attribute) and node.attr == "transforms" and isinstance(node.value, ast.Name) and node.value.id == name:
            step = _appended(func, node, qualify)
            if step is None:
                return None  # `t.transforms.insert(0, ...)`, `t.transforms = [...]`: not read here
            appended.append(step)
    if len(binders) != 1 or not isinstance(binders[0], ast.Assign) or len(binders[0].targets) != 1:
        return None
    if not isinstance(binders[0].targets[0], ast.Name) or not isinstance(binders[0].value, ast.Call):
        return None
    steps = _steps(binders[0].value, qualify)
    return None if steps is None else steps + appended


def _appended(func: ast.FunctionDef, attribute: ast.Attribute, qualify: Qualify) -> Optional[list]:
    """`t.transforms.append(Step(...))`: that step, marked optional under an `if` (`if args.cutout:`: a setting
    may leave it out); None for any other use of `t.transforms`."""
    for node, conditional in _own_nodes_with_branches(func):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.value is attribute
            and node.func.attr == "append"
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], ast.Call)
        ):
            return _step(node.args[0], qualify, conditional)
    return None


def _steps(call: ast.Call, qualify: Qualify) -> Optional[list]:
    name = qualify(call.func) or ""
    if not name.startswith("torchvision.transforms."):
        return None
    if name.rsplit(".", 1)[-1] != "Compose":
        return [_step(call, qualify)]
    if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.List):
        return None
    steps = []
    for element in call.args[0].elts:
        if not isinstance(element, ast.Call):
            return None
        steps.append(_step(element, qualify))
    return steps


def _step(call: ast.Call, qualify: Qualify, optional: bool = False) -> list:
    """[qualified name ("?" when not known), [height, width] or None, the size written as one int, a step only
    some settings add]."""
    given = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "size"), None)
    size, single = None, False
    if isinstance(given, ast.Constant) and type(given.value) is int:
        size, single = [given.value, given.value], True
    elif isinstance(given, (ast.Tuple, ast.List)) and len(given.elts) == 2:
        values = [e.value if isinstance(e, ast.Constant) and type(e.value) is int else None for e in given.elts]
        if None not in values:
            size = values
    return [qualify(call.func) or "?", size, single, optional]


def _own_nodes_with_branches(func: ast.FunctionDef):
    """(node, under an `if` / loop / `try` of `func`) for the nodes of `func`'s own body."""
    pending = [(n, False) for n in func.body]
    while pending:
        node, conditional = pending.pop()
        yield node, conditional
        inner = conditional or isinstance(node, (ast.If, ast.For, ast.While, ast.Try, ast.IfExp))
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                pending.append((child, inner and child is not getattr(node, "test", None)))


def _bound_by(node: ast.AST) -> ast.AST:
    """What a `for`, a walrus or a `with` item binds."""
    if isinstance(node, ast.withitem):
        return node.optional_vars if node.optional_vars is not None else ast.Pass()
    return node.target  # type: ignore[attr-defined]


def _own_nodes(func: ast.FunctionDef):
    """The nodes of `func`'s body, not of the functions, lambdas or classes it defines."""
    pending = list(func.body)
    while pending:
        node = pending.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                pending.append(child)
