"""Value resolution: follow an expression to the literal that defines it, remembering where that is."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

LITERAL = "literal"
MODULE_CONSTANT = "module constant"
LOCAL_VARIABLE = "local variable"
FUNCTION_DEFAULT = "function default"
ARGPARSE_DEFAULT = "argparse default"
CONFIG_DICT = "config dict"

# Parameters that conventionally hold the parsed command line (`def main(args): ...`).
ARGS_PARAMETER_NAMES = frozenset({"args", "opt", "opts", "options", "hparams", "flags", "hp"})
_MAX_DEPTH = 6


@dataclass(frozen=True)
class ResolvedValue:
    value: object
    node: cst.BaseExpression  # the literal to edit when a fix changes this value
    origin: str

    def describe(self, model: SemanticModel) -> str:
        """`argparse default at train.py:21`; empty for a literal written at the use site."""
        if self.origin == LITERAL:
            return ""
        return f"{self.origin} at {model.path}:{model.line_of(self.node)}"


@dataclass(frozen=True)
class ArgparseOption:
    call: cst.Call
    dest: str

    def keyword(self, name: str) -> cst.Arg | None:
        for arg in self.call.args:
            if arg.keyword is not None and arg.keyword.value == name:
                return arg
        return None


def literal_value(node: cst.BaseExpression) -> tuple[bool, object]:
    """(True, value) for int/float/str/bool/None literals and their negations."""
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
        try:
            return True, ast.literal_eval(node.value)
        except (ValueError, SyntaxError):
            return False, None
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return True, {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        ok, value = literal_value(node.expression)
        if ok and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, -value
    return False, None


def _string_value(node: cst.BaseExpression) -> str | None:
    ok, value = literal_value(node)
    return value if ok and isinstance(value, str) else None


def _dest_of(call: cst.Call) -> str | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dest":
            return _string_value(arg.value)
    flags = [s for s in (_string_value(a.value) for a in call.args if a.keyword is None) if s is not None]
    if not flags:
        return None
    long_flags = [f for f in flags if f.startswith("--")]
    chosen = long_flags[0] if long_flags else flags[0]
    return re.sub(r"^-+", "", chosen).replace("-", "_")


class ValueResolver:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model

    @cached_property
    def argparse_options(self) -> dict[str, list[ArgparseOption]]:
        options: dict[str, list[ArgparseOption]] = {}
        for call in self.model.method_calls("add_argument"):
            dest = _dest_of(call)
            if dest:
                options.setdefault(dest, []).append(ArgparseOption(call, dest))
        return options

    @cached_property
    def parse_args_names(self) -> frozenset[str]:
        """Names bound to `parser.parse_args()` (or the first element of `parse_known_args()`)."""
        names = set()
        for call in [*self.model.method_calls("parse_args"), *self.model.method_calls("parse_known_args")]:
            parent = self.model.parent.get(call)
            target = None
            if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
                target = parent.targets[0].target
            if isinstance(target, cst.Tuple) and target.elements:
                target = target.elements[0].value
            if isinstance(target, cst.Name):
                names.add(target.value)
        return frozenset(names)

    def resolve(self, expr: cst.BaseExpression, depth: int = 0) -> ResolvedValue | None:
        if depth > _MAX_DEPTH:
            return None
        ok, value = literal_value(expr)
        if ok:
            return ResolvedValue(value, expr, LITERAL)
        if isinstance(expr, cst.Name):
            return self._resolve_name(expr, depth)
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name):
            return self._resolve_argparse(expr, depth)
        if isinstance(expr, cst.Subscript):
            return self._resolve_config_item(expr, depth)
        return None

    def _single_binding(self, name: cst.Name) -> cst.CSTNode | None:
        binders = self.model.bindings_of(name.value, name)
        return binders[0] if len(binders) == 1 else None

    def _resolve_name(self, name: cst.Name, depth: int) -> ResolvedValue | None:
        binder = self._single_binding(name)
        if isinstance(binder, cst.Assign) and len(binder.targets) == 1 and isinstance(binder.targets[0].target, cst.Name):
            inner = self.resolve(binder.value, depth + 1)
            if inner is None:
                return None
            if inner.origin != LITERAL:
                return inner
            in_module = self.model.scope_of(binder) is self.model.module
            return ResolvedValue(inner.value, inner.node, MODULE_CONSTANT if in_module else LOCAL_VARIABLE)
        if isinstance(binder, cst.AnnAssign) and binder.value is not None and isinstance(binder.target, cst.Name):
            inner = self.resolve(binder.value, depth + 1)
            if inner is None:
                return None
            in_module = self.model.scope_of(binder) is self.model.module
            origin = inner.origin if inner.origin != LITERAL else (MODULE_CONSTANT if in_module else LOCAL_VARIABLE)
            return ResolvedValue(inner.value, inner.node, origin)
        if isinstance(binder, cst.Param) and binder.default is not None:
            if self._callers_pass(binder):
                return None
            inner = self.resolve(binder.default, depth + 1)
            if inner is None:
                return None
            origin = inner.origin if inner.origin != LITERAL else FUNCTION_DEFAULT
            return ResolvedValue(inner.value, inner.node, origin)
        return None

    def _callers_pass(self, param: cst.Param) -> bool:
        """True when some call in the module passes this parameter, so its default may not apply."""
        func = self.model.parent.get(self.model.parent.get(param))
        if not isinstance(func, cst.FunctionDef):
            return True
        positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
        index = positional.index(param.name.value) if param.name.value in positional else None
        if index is not None and positional and positional[0] in ("self", "cls"):
            index -= 1
        for call in self.model.calls:
            callee = call.func
            callee_name = callee.attr.value if isinstance(callee, cst.Attribute) else getattr(callee, "value", None)
            if callee_name != func.name.value:
                continue
            for i, arg in enumerate(call.args):
                if arg.star:
                    return True
                if arg.keyword is not None and arg.keyword.value == param.name.value:
                    return True
                if arg.keyword is None and index is not None and i == index:
                    return True
        return False

    def _resolve_argparse(self, attr: cst.Attribute, depth: int) -> ResolvedValue | None:
        base = attr.value
        assert isinstance(base, cst.Name)
        if base.value not in self.parse_args_names:
            binder = self._single_binding(base)
            if not (isinstance(binder, cst.Param) and base.value in ARGS_PARAMETER_NAMES):
                return None
        options = self.argparse_options.get(attr.attr.value, [])
        if len(options) != 1:
            return None
        default = options[0].keyword("default")
        if default is None:
            return None
        inner = self.resolve(default.value, depth + 1)
        if inner is None:
            return None
        origin = ARGPARSE_DEFAULT if inner.origin == LITERAL else inner.origin
        return ResolvedValue(inner.value, inner.node, origin)

    def _resolve_config_item(self, sub: cst.Subscript, depth: int) -> ResolvedValue | None:
        """`config["workers"]` where `config = {"workers": 0, ...}` is bound once."""
        if not isinstance(sub.value, cst.Name) or len(sub.slice) != 1:
            return None
        index = sub.slice[0].slice
        if not isinstance(index, cst.Index):
            return None
        key = _string_value(index.value)
        binder = self._single_binding(sub.value)
        if key is None or not isinstance(binder, cst.Assign) or not isinstance(binder.value, cst.Dict):
            return None
        for element in binder.value.elements:
            if isinstance(element, cst.DictElement) and _string_value(element.key) == key:
                inner = self.resolve(element.value, depth + 1)
                if inner is None:
                    return None
                origin = CONFIG_DICT if inner.origin == LITERAL else inner.origin
                return ResolvedValue(inner.value, inner.node, origin)
        return None
