"""The semantic model: facts about one module's training code, collected in a single pass."""

from __future__ import annotations

import re

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator, Optional, Union

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider

from gpulint.analysis.imports import ImportTable, dotted_name

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
Scope = Union[cst.Module, cst.FunctionDef, cst.Lambda, cst.ClassDef]
Loop = Union[cst.For, cst.While]


@dataclass
class ClassInfo:
    node: cst.ClassDef
    bases: list[str]  # qualified (or local) names of the bases
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)


class _Collector(cst.CSTVisitor):
    """One walk over the tree that records everything the queries below need."""

    def __init__(self, model: SemanticModel) -> None:
        self.m = model
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        m = self.m
        if self.stack:
            m.parent[node] = self.stack[-1]
        self.stack.append(node)
        if isinstance(node, cst.Call):
            m.calls.append(node)
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            m._record_assignment(node)
        elif isinstance(node, (cst.For, cst.While)):
            m.loops.append(node)
            if isinstance(node, cst.For):
                m._record_targets(node.target, node)
        elif isinstance(node, cst.FunctionDef):
            m.functions[node.name.value].append(node)
            m._record_params(node)
        elif isinstance(node, cst.ClassDef):
            m._record_class(node)
        elif isinstance(node, cst.Import):
            m.imports.add_import(node)
            m.import_statements.append(node)
        elif isinstance(node, cst.ImportFrom):
            m.imports.add_import_from(node)
            m.import_statements.append(node)
        elif isinstance(node, cst.SimpleString):
            m.strings.append(node)
        elif isinstance(node, cst.Attribute):
            m.attributes.append(node)
        elif isinstance(node, (cst.With, cst.If)):
            m.blocks.append(node)
        elif isinstance(node, cst.NamedExpr):
            m._record_targets(node.target, node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


class SemanticModel:
    """Answers the rules' questions about a module. Built once per file; positions only on demand."""

    def __init__(self, module: cst.Module, path: str = "<stdin>", source: str | None = None) -> None:
        self.module = module
        self.path = path
        self.source = source if source is not None else module.code
        self.imports = ImportTable()
        self.import_statements: list[cst.CSTNode] = []
        self.parent: dict[cst.CSTNode, cst.CSTNode] = {}
        self.calls: list[cst.Call] = []
        self.loops: list[Loop] = []
        self.blocks: list[cst.CSTNode] = []
        self.strings: list[cst.SimpleString] = []
        self.attributes: list[cst.Attribute] = []
        self.functions: dict[str, list[cst.FunctionDef]] = defaultdict(list)
        self.classes: dict[str, ClassInfo] = {}
        # (scope, name) -> the nodes that bind it: Assign/AnnAssign/AugAssign/For/Param/NamedExpr
        self.bindings: dict[tuple[int, str], list[cst.CSTNode]] = defaultdict(list)
        self._pending_classes: list[cst.ClassDef] = []
        module.visit(_Collector(self))
        for node in self._pending_classes:
            self._finish_class(node)

    # ---- collection helpers -------------------------------------------------------------------

    def _scope_key(self, node: cst.CSTNode) -> int:
        return id(self.scope_of(node))

    def _record_targets(self, target: cst.BaseExpression, binder: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            self._pending_bind(target.value, binder)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._record_targets(element.value, binder)
        elif isinstance(target, cst.StarredElement):
            self._record_targets(target.value, binder)

    def _pending_bind(self, name: str, binder: cst.CSTNode) -> None:
        # The binder is visited already, so its parents are known.
        self.bindings[(self._scope_key(binder), name)].append(binder)

    def _record_assignment(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self._record_targets(target.target, node)
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign)):
            self._record_targets(node.target, node)

    def _record_params(self, func: cst.FunctionDef) -> None:
        params = func.params
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            self.bindings[(id(func), param.name.value)].append(param)
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                self.bindings[(id(func), star.name.value)].append(star)

    def _record_class(self, node: cst.ClassDef) -> None:
        self._pending_classes.append(node)
        self.bindings[(self._scope_key(node), node.name.value)].append(node)

    def _finish_class(self, node: cst.ClassDef) -> None:
        bases = []
        for arg in node.bases:
            dotted = dotted_name(arg.value)
            if dotted is not None:
                bases.append(self.imports.resolve(dotted) or dotted)
        methods = {}
        for stmt in node.body.body:
            if isinstance(stmt, cst.FunctionDef):
                methods[stmt.name.value] = stmt
        self.classes[node.name.value] = ClassInfo(node, bases, methods)

    # ---- tree navigation ----------------------------------------------------------------------

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parent.get(node)
        while current is not None:
            yield current
            current = self.parent.get(current)

    def scope_of(self, node: cst.CSTNode) -> Scope:
        """The function, lambda or module whose local namespace `node` lives in (class bodies skipped)."""
        child = node
        for ancestor in self.ancestors(node):
            # Only a body opens a scope: defaults and decorators are evaluated in the outer one.
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)) and child is ancestor.body:
                return ancestor
            child = ancestor
        return self.module

    def enclosing_function(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return None

    def enclosing_loops(self, node: cst.CSTNode) -> list[Loop]:
        """Loops around `node`, innermost first, stopping at the enclosing function."""
        loops: list[Loop] = []
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if isinstance(ancestor, (cst.For, cst.While)):
                loops.append(ancestor)
        return loops

    def enclosing_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        for ancestor in (node, *self.ancestors(node)):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return ancestor
        return node

    def is_inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return node is container or any(a is container for a in self.ancestors(node))

    @cached_property
    def has_main_guard(self) -> bool:
        for stmt in self.module.body:
            if isinstance(stmt, cst.If) and "__name__" in self.module.code_for_node(stmt.test):
                return True
        return False

    def is_module_level_code(self, node: cst.CSTNode) -> bool:
        """True when `node` runs at import time: not inside a function or the `__main__` guard."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return False
            if isinstance(ancestor, cst.If) and self.parent.get(ancestor) is self.module:
                if "__name__" in self.module.code_for_node(ancestor.test):
                    return False
        return True

    # ---- names --------------------------------------------------------------------------------

    def qualified_name(self, expr: cst.BaseExpression) -> str | None:
        """`torch.utils.data.DataLoader` for `DL`, `tud.DataLoader`, ...; local classes as `<module>.Name`."""
        dotted = dotted_name(expr)
        if dotted is None:
            return None
        resolved = self.imports.resolve(dotted)
        if resolved is not None:
            return resolved
        if "." not in dotted and dotted in self.classes:
            return f"<module>.{dotted}"
        return None

    def call_name(self, call: cst.Call) -> str | None:
        return self.qualified_name(call.func)

    def is_subclass_of(self, class_name: str, base: str, _seen: frozenset = frozenset()) -> bool:
        info = self.classes.get(class_name)
        if info is None or class_name in _seen:
            return False
        for b in info.bases:
            if b == base:
                return True
            if b in self.classes and self.is_subclass_of(b, base, _seen | {class_name}):
                return True
        return False

    def local_class_of(self, qualified: str | None) -> ClassInfo | None:
        if qualified and qualified.startswith("<module>."):
            return self.classes.get(qualified[len("<module>.") :])
        return None

    def bindings_of(self, name: str, at: cst.CSTNode) -> list[cst.CSTNode]:
        """The binders of `name` visible from `at`: its own scope first, then the module."""
        scope = self.scope_of(at)
        found = self.bindings.get((id(scope), name))
        if found:
            return found
        return self.bindings.get((id(self.module), name), [])

    def module_bindings(self, name: str) -> list[cst.CSTNode]:
        return self.bindings.get((id(self.module), name), [])

    def calls_named(self, *qualified: str) -> Iterator[cst.Call]:
        wanted = set(qualified)
        for call in self.calls:
            if self.call_name(call) in wanted:
                yield call

    def method_calls(self, attr: str) -> Iterator[cst.Call]:
        """Calls of the form `<anything>.attr(...)`."""
        for call in self.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == attr:
                yield call

    # ---- positions (computed only when a rule reports) -----------------------------------------

    @cached_property
    def _positions(self):
        wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
        return wrapper.resolve(PositionProvider)

    def range(self, node: cst.CSTNode) -> CodeRange:
        return self._positions[node]

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    @cached_property
    def lines(self) -> list[str]:
        """Source lines without their line endings, split the way LibCST counts rows."""
        return _LINE_BREAK.split(self.source)

    def text_between(self, start, end) -> str:
        """The source text between two 1-based (row, column) locations."""
        lines = self.lines
        if start.row == end.row:
            return lines[start.row - 1][start.column - 1 : end.column - 1]
        newline = self.module.default_newline
        middle = lines[start.row : end.row - 1]
        return newline.join([lines[start.row - 1][start.column - 1 :], *middle, lines[end.row - 1][: end.column - 1]])

    def line_of(self, node: cst.CSTNode) -> int:
        return self.range(node).start.line

    # ---- derived facts, each computed once and only when a rule asks -----------------------------

    @cached_property
    def values(self):
        from gpulint.analysis.value_resolution import ValueResolver

        return ValueResolver(self)

    @cached_property
    def uses_cuda(self) -> bool:
        from gpulint.analysis.devices import module_uses_cuda

        return module_uses_cuda(self)

    @cached_property
    def dataloaders(self):
        from gpulint.analysis.dataloaders import find_dataloaders

        return find_dataloaders(self)

    @cached_property
    def deprecated_amp(self):
        from gpulint.analysis.amp import find_deprecated_amp

        return find_deprecated_amp(self)

    @cached_property
    def data_parallel_calls(self):
        from gpulint.analysis.parallel import find_data_parallel

        return find_data_parallel(self)

    @cached_property
    def eval_forwards(self):
        from gpulint.analysis.evaluation import find_eval_forwards

        return find_eval_forwards(self)

    @cached_property
    def training_setup(self):
        from gpulint.analysis.training_setup import find_training_setup

        return find_training_setup(self)

    @cached_property
    def loader_flow(self):
        from gpulint.analysis.loader_flow import LoaderFlow

        return LoaderFlow(self)

    @cached_property
    def dataflow(self):
        from gpulint.analysis.dataflow import DataFlow

        return DataFlow(self)

    @cached_property
    def residency(self):
        from gpulint.analysis.residency import Residency

        return Residency(self)

    @cached_property
    def streams(self):
        from gpulint.analysis.streams import StreamAnalysis

        return StreamAnalysis(self)
