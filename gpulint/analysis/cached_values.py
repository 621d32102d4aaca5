"""Values a method builds on its first call and keeps on the object: `if self.pos is None: self.pos = ...`.

`cached_on_first_use(model, node)`: the `if` around `node` (in its own function, inside any loop there) that
tests whether an attribute of `self` is still unset (`self.pos is None`, `not hasattr(self, "pos")`) and whose
body sets it (`self.pos = ...`, `setattr(self, "pos", ...)`, `self.register_buffer("pos", ...)`). Its body runs
on the first call only: a factory there and its copy to the GPU are paid once, not on every call of the model
(S4's CKConv builds its relative positions so). A class that sets the attribute back to `None` (or deletes it)
anywhere but `__init__` may rebuild it every call, and keeps the finding; so does a test that also lets later
calls through (`if self.pos is None or self.pos.shape[-1] != n:`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.For, cst.While)


def cached_on_first_use(model: SemanticModel, node: cst.CSTNode) -> Optional[cst.If]:
    child: cst.CSTNode = node
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, _SCOPES):
            return None
        if isinstance(ancestor, cst.If) and child is ancestor.body:
            attribute = _unset_attribute(model, ancestor.test)
            if attribute is not None and _sets(model, ancestor.body, attribute) and not _reset(model, ancestor, attribute):
                return ancestor
        child = ancestor
    return None


def _unset_attribute(model: SemanticModel, test: cst.BaseExpression) -> Optional[str]:
    """`self.pos is None` or `not hasattr(self, "pos")`: "pos"."""
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        if isinstance(target.operator, cst.Is) and isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
            return _self_attribute(test.left)
        return None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not) and isinstance(test.expression, cst.Call):
        call = test.expression
        if model.code(call.func) == "hasattr" and len(call.args) == 2 and model.code(call.args[0].value) == "self":
            return _string(call.args[1].value)
    return None


def _sets(model: SemanticModel, body: cst.CSTNode, attribute: str) -> bool:
    """The body stores `self.<attribute>` (not inside a nested function)."""
    found = False

    class _Stores(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            nonlocal found
            found = found or _self_attribute(node.target) == attribute

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            nonlocal found
            found = found or (node.value is not None and _self_attribute(node.target) == attribute)

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            name = model.code(node.func)
            if name == "setattr" and len(node.args) >= 2 and model.code(node.args[0].value) == "self":
                found = found or _string(node.args[1].value) == attribute
            elif name == "self.register_buffer" and node.args:
                found = found or _string(node.args[0].value) == attribute

    body.visit(_Stores())
    return found


def _reset(model: SemanticModel, guard: cst.If, attribute: str) -> bool:
    """A method of the class other than `__init__` sets `self.<attribute>` to None or deletes it."""
    cls = next((a for a in model.ancestors(guard) if isinstance(a, cst.ClassDef)), None)
    if cls is None:
        return True  # not a method: who else sets the attribute is not known
    reset = False

    class _Resets(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node.name.value != "__init__"

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal reset
            if isinstance(node.value, cst.Name) and node.value.value == "None":
                reset = reset or any(_self_attribute(t.target) == attribute for t in node.targets)

        def visit_Del(self, node: cst.Del) -> None:
            nonlocal reset
            targets = node.target.elements if isinstance(node.target, cst.Tuple) else [node.target]
            reset = reset or any(_self_attribute(getattr(t, "value", t)) == attribute for t in targets)

    cls.body.visit(_Resets())
    return reset


def _self_attribute(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def _string(node: cst.BaseExpression) -> Optional[str]:
    return node.evaluated_value if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str) else None
