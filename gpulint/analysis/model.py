"""The semantic model: facts about one module's training code, collected in a single pass."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import operator
import typing

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterator, Optional, Union

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

from gpulint.analysis.imports import ImportTable, dotted_name
from gpulint.lines import LINE_BREAK

Scope = Union[cst.Module, cst.FunctionDef, cst.Lambda, cst.ClassDef]
Loop = Union[cst.For, cst.While]


@dataclass
class ClassInfo:
    node: cst.ClassDef
    bases: list[str]  # qualified (or local) names of the bases
    methods: dict[str, cst.FunctionDef] = field(default_factory=dict)


# ---- the walk ----------------------------------------------------------------------------------
#
# LibCST's own `module.visit(visitor)` rebuilds every node it passes (each `_visit_and_replace_children`
# calls the node's constructor and validation), which costs more than parsing. The model only reads the
# tree, so it walks the node fields directly, in the order LibCST visits them, and skips whitespace,
# comments and punctuation (nothing the rules ask about lives below those).

_TRIVIA: tuple[type, ...] = (
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.EmptyLine, cst.Comment,
    cst.Newline, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
    cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual,
)  # fmt: skip
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
_GETTERS: dict[type, typing.Callable[[cst.CSTNode], tuple] | None] = {}
# type -> whether values of that type are walked (a non-trivia node). Keyed by exact type because
# `isinstance` against LibCST's classes (ABCMeta) costs several times a dict lookup.
_WALKED: dict[type, bool] = {}
# `is_inside` answers the first questions by walking ancestors; past this many, from pre-order spans.
_SPANS_AFTER = 32


def _node_types(annotation: object) -> Iterator[type]:
    """The CSTNode classes a field's annotation allows (through Union, Optional, Sequence, ...)."""
    if isinstance(annotation, type):
        if issubclass(annotation, cst.CSTNode):
            yield annotation
        return
    if isinstance(annotation, (str, typing.ForwardRef)):  # a forward reference: it may hold anything
        yield cst.CSTNode
        return
    for argument in typing.get_args(annotation):
        yield from _node_types(argument)


def _child_fields(cls: type) -> tuple[str, ...]:
    """The fields of `cls` that can hold non-trivia child nodes, in LibCST's visiting order (cached)."""
    fields = _CHILD_FIELDS.get(cls)
    if fields is not None:
        return fields
    declared = {f.name: f.type for f in dataclasses.fields(cls)}
    # LibCST's visiting order is the keyword order of the constructor call in `_visit_and_replace_children`.
    order: tuple[str, ...] = tuple(declared)
    for constant in reversed(cls._visit_and_replace_children.__code__.co_consts):
        if isinstance(constant, tuple) and constant and set(constant) == set(declared):
            order = constant
            break
    fields = tuple(
        name
        for name in order
        if any(not issubclass(t, _TRIVIA) for t in _node_types(declared[name]))
    )
    _CHILD_FIELDS[cls] = fields
    return fields


def _getter(cls: type) -> typing.Callable[[cst.CSTNode], tuple] | None:
    """A function returning the values of `cls`'s child fields as a tuple; None for leaves."""
    if cls not in _GETTERS:
        fields = _child_fields(cls)
        if not fields:
            _GETTERS[cls] = None
        elif len(fields) == 1:
            single = operator.attrgetter(fields[0])
            _GETTERS[cls] = lambda node: (single(node),)
        else:
            _GETTERS[cls] = operator.attrgetter(*fields)
    return _GETTERS[cls]


def _is_walked(cls: type) -> bool:
    walked = issubclass(cls, cst.CSTNode) and not issubclass(cls, _TRIVIA)
    _WALKED[cls] = walked
    return walked


def _walk(model: SemanticModel, module: cst.Module) -> None:
    """Pre-order over every non-trivia node: parents (in pre-order), and the node kinds the model indexes."""
    parent = model.parent
    handlers = _HANDLERS
    getters = _GETTERS
    walked = _WALKED
    # (node, its parent): the parent map is filled as nodes are reached, so it is in pre-order (source
    # order), which other analyses rely on when they iterate it.
    stack: list[tuple[cst.CSTNode, cst.CSTNode | None]] = [(module, None)]
    pop, extend = stack.pop, stack.extend
    while stack:
        node, up = pop()
        if up is not None:
            parent[node] = up
        cls = type(node)
        handler = handlers.get(cls)
        if handler is not None:
            handler(model, node)
        getter = getters.get(cls, _getter)
        if getter is _getter:
            getter = _getter(cls)
        if getter is None:
            continue
        children: list[cst.CSTNode] = []
        append = children.append
        for value in getter(node):
            kind = type(value)
            if kind is tuple or kind is list:
                for item in value:
                    wanted = walked.get(type(item))
                    if wanted is None:
                        wanted = _is_walked(type(item))
                    if wanted:
                        append(item)
            else:
                wanted = walked.get(kind)
                if wanted is None:
                    wanted = _is_walked(kind)
                if wanted:
                    append(value)
        if children:
            children.reverse()
            extend(zip(children, itertools.repeat(node)))


def _pre_order_spans(module: cst.Module) -> dict[int, tuple[int, int]]:
    """The same walk as `_walk`, numbering nodes: id -> (pre-order number, number of last descendant)."""
    spans: dict[int, tuple[int, int]] = {}
    getters = _GETTERS
    walked = _WALKED
    counter = 0
    stack: list = [module]
    pop, append, extend = stack.pop, stack.append, stack.extend
    while stack:
        item = pop()
        if type(item) is tuple:  # leaving a node: all its descendants are numbered
            spans[item[0]] = (item[1], counter - 1)
            continue
        start = counter
        counter += 1
        cls = type(item)
        getter = getters.get(cls, _getter)
        if getter is _getter:
            getter = _getter(cls)
        children: list[cst.CSTNode] = []
        if getter is not None:
            add = children.append
            for value in getter(item):
                kind = type(value)
                if kind is tuple or kind is list:
                    for child in value:
                        wanted = walked.get(type(child))
                        if wanted is None:
                            wanted = _is_walked(type(child))
                        if wanted:
                            add(child)
                else:
                    wanted = walked.get(kind)
                    if wanted is None:
                        wanted = _is_walked(kind)
                    if wanted:
                        add(value)
        if children:
            append((id(item), start))
            children.reverse()
            extend(children)
        else:
            spans[id(item)] = (start, start)
    return spans


def _on_call(m: SemanticModel, node: cst.Call) -> None:
    m.calls.append(node)


def _on_assignment(m: SemanticModel, node: cst.CSTNode) -> None:
    m._record_assignment(node)


def _on_for(m: SemanticModel, node: cst.For) -> None:
    m.loops.append(node)
    m._record_targets(node.target, node)


def _on_while(m: SemanticModel, node: cst.While) -> None:
    m.loops.append(node)


def _on_function(m: SemanticModel, node: cst.FunctionDef) -> None:
    m.functions[node.name.value].append(node)
    m._record_params(node)


def _on_class(m: SemanticModel, node: cst.ClassDef) -> None:
    m._record_class(node)


def _on_import(m: SemanticModel, node: cst.Import) -> None:
    for name in m.imports.add_import(node):
        m.import_binders[name].append(node)
    m.import_statements.append(node)


def _on_import_from(m: SemanticModel, node: cst.ImportFrom) -> None:
    for name in m.imports.add_import_from(node):
        m.import_binders[name].append(node)
    m.import_statements.append(node)


def _on_string(m: SemanticModel, node: cst.SimpleString) -> None:
    m.strings.append(node)


def _on_formatted_string(m: SemanticModel, node: cst.FormattedString) -> None:
    m.formatted_strings.append(node)


def _on_attribute(m: SemanticModel, node: cst.Attribute) -> None:
    m.attributes.append(node)


def _on_block(m: SemanticModel, node: cst.CSTNode) -> None:
    m.blocks.append(node)


def _on_named_expr(m: SemanticModel, node: cst.NamedExpr) -> None:
    m._record_targets(node.target, node)


def _declared_global(func: cst.FunctionDef) -> set[str]:
    """The names a function's `global` statements declare (its own body, not nested functions')."""
    names: set[str] = set()
    stack = list(func.body.body) if isinstance(func.body, cst.IndentedBlock) else [func.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            continue
        if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            names.update(n.name.value for item in node.body if isinstance(item, cst.Global) for n in item.names)
            continue
        stack.extend(child for child in node.children if isinstance(child, (cst.BaseSuite, cst.BaseStatement, cst.BaseCompoundStatement, cst.Else, cst.ExceptHandler, cst.Finally)))
    return names


# Compound statements whose blocks may not run (an `if` body, an `else`, a loop body, an `except` handler, a
# `case`): an assignment in one binds the name only for what runs inside it.
_CONDITIONAL_BLOCKS = (cst.If, cst.Else, cst.For, cst.While, cst.ExceptHandler, cst.ExceptStarHandler, cst.MatchCase)


# Exact node classes -> what the walk records (one dict lookup per node, built once).
_HANDLERS: dict[type, typing.Callable[[SemanticModel, typing.Any], None]] = {
    cst.Call: _on_call,
    cst.Assign: _on_assignment,
    cst.AnnAssign: _on_assignment,
    cst.AugAssign: _on_assignment,
    cst.For: _on_for,
    cst.While: _on_while,
    cst.FunctionDef: _on_function,
    cst.ClassDef: _on_class,
    cst.Import: _on_import,
    cst.ImportFrom: _on_import_from,
    cst.SimpleString: _on_string,
    cst.FormattedString: _on_formatted_string,
    cst.Attribute: _on_attribute,
    cst.With: _on_block,
    cst.If: _on_block,
    cst.NamedExpr: _on_named_expr,
}


# ---- positions ----------------------------------------------------------------------------------
#
# The same ranges as LibCST's `PositionProvider` (syntactic positions where a node records them,
# whitespace-inclusive ones otherwise), from one code generation pass with a leaner state: tuples
# instead of CodePosition/CodeRange objects, no `@contextmanager` per node, no regex split for tokens
# without a line break, and no MetadataWrapper. About 4x cheaper; still only computed when a rule reports.


class _SyntacticPosition:
    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: _PositionState, node: cst.CSTNode, start_node, end_node) -> None:
        self.state = state
        self.node = node
        self.start_node = start_node
        self.end_node = end_node

    def __enter__(self) -> None:
        self.start = (self.state.line, self.state.column)

    def __exit__(self, *exc: object) -> None:
        state = self.state
        ranges = state.ranges
        start = ranges[self.start_node][:2] if self.start_node is not None else self.start
        end = ranges[self.end_node][2:] if self.end_node is not None else (state.line, state.column)
        ranges[self.node] = (*start, *end)


class _PositionState(CodegenState):
    __slots__ = ("line", "column", "starts", "ranges")

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.line = 1  # one-indexed
        self.column = 0  # zero-indexed
        self.starts: list[tuple[int, int]] = []
        self.ranges: dict[cst.CSTNode, tuple[int, int, int, int]] = {}

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        if "\n" in value or "\r" in value:
            segments = LINE_BREAK.split(value)
            self.line += len(segments) - 1
            self.column = len(segments[-1])
        else:
            self.column += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self.starts.pop()
        if node not in self.ranges:  # a syntactic position recorded inside wins
            self.ranges[node] = (*start, self.line, self.column)

    def record_syntactic_position(self, node, *, start_node=None, end_node=None) -> _SyntacticPosition:
        return _SyntacticPosition(self, node, start_node, end_node)


class _Positions(Mapping):
    """node -> CodeRange for every node of the module, as `PositionProvider` gives them."""

    def __init__(self, module: cst.Module) -> None:
        state = _PositionState(module)
        module._codegen(state)
        self._raw = state.ranges
        self._ranges: dict[cst.CSTNode, CodeRange] = {}

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._ranges.get(node)
        if found is None:
            line, column, end_line, end_column = self._raw[node]
            found = self._ranges[node] = CodeRange(CodePosition(line, column), CodePosition(end_line, end_column))
        return found

    def __iter__(self):
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)


class SemanticModel:
    """Answers the rules' questions about a module. Built once per file; positions only on demand.

    `project` is what the rest of the project tells this module (`analysis/project.py`): the facts of the
    functions and classes it calls from other modules, what other modules do with what it builds, and
    whether it is GPU code. Without it, the module is read alone (its own functions and evidence only)."""

    def __init__(self, module: cst.Module, path: str = "<stdin>", source: str | None = None, project=None) -> None:
        self.module = module
        self.path = path
        self.source = source if source is not None else module.code
        self._project = project
        self.imports = ImportTable()
        if project is not None:
            self.imports.bindings.update(project.star_imports)  # `from models import *`: its `torch`, `nn`
        self.import_statements: list[cst.CSTNode] = []
        self.import_binders: dict[str, list[cst.CSTNode]] = defaultdict(list)  # local name -> its import statements
        self.parent: dict[cst.CSTNode, cst.CSTNode] = {}
        self.calls: list[cst.Call] = []
        self.loops: list[Loop] = []
        self.blocks: list[cst.CSTNode] = []
        self.strings: list[cst.SimpleString] = []
        self.formatted_strings: list[cst.FormattedString] = []
        self.attributes: list[cst.Attribute] = []
        self.functions: dict[str, list[cst.FunctionDef]] = defaultdict(list)
        self.classes: dict[str, ClassInfo] = {}
        # (scope, name) -> the nodes that bind it: Assign/AnnAssign/AugAssign/For/NamedExpr, Param, ClassDef.
        # Not recorded: imports (see `imports`), `def` (see `functions`), `with ... as`, `except ... as`.
        self.bindings: dict[tuple[int, str], list[cst.CSTNode]] = defaultdict(list)
        self._pending_classes: list[cst.ClassDef] = []
        self._inside_questions = 0
        self._qualified: dict[int, tuple[cst.BaseExpression, str | None]] = {}
        self._scopes: dict[int, Scope] = {}
        self._memos: dict[str, dict[cst.CSTNode, bool]] = {}
        _walk(self, module)
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
        found = self._scopes.get(id(node))  # asked for most nodes, many times: once per node is linear
        if found is not None:
            return found
        found = self.module
        child = node
        for ancestor in self.ancestors(node):
            # Only a body opens a scope: defaults and decorators are evaluated in the outer one.
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)) and child is ancestor.body:
                found = ancestor
                break
            child = ancestor
        self._scopes[id(node)] = found
        return found

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

    def repeating_loops(self, node: cst.CSTNode) -> list[Loop]:
        """The loops that run `node` once per iteration, innermost first: `enclosing_loops` without a `for` whose
        iterable (evaluated once, before the first iteration) or `else` holds `node`, nor a `while` whose `else` does."""
        loops: list[Loop] = []
        child = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if isinstance(ancestor, cst.For) and child is not ancestor.iter and child is not ancestor.orelse:
                loops.append(ancestor)
            elif isinstance(ancestor, cst.While) and child is not ancestor.orelse:
                loops.append(ancestor)
            child = ancestor
        return loops

    def enclosing_statement(self, node: cst.CSTNode) -> cst.CSTNode:
        for ancestor in (node, *self.ancestors(node)):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return ancestor
        return node

    def has_ancestor_below(self, node: cst.CSTNode, kinds: tuple[type, ...], stop: cst.CSTNode) -> bool:
        """An ancestor of `node` below `stop` (any ancestor, when `stop` is none of them) is one of `kinds`."""
        for ancestor in self.ancestors(node):
            if ancestor is stop:
                return False
            if isinstance(ancestor, kinds):
                return True
        return False

    def is_inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        if node is container:
            return True
        # Rules ask this in loops (every call x every loop): after a few questions, answer from
        # pre-order intervals in O(1) instead of walking the ancestors.
        self._inside_questions += 1
        if self._inside_questions > _SPANS_AFTER:
            spans = self._spans
            inner = spans.get(id(node))
            outer = spans.get(id(container))
            if inner is not None and outer is not None:
                return outer[0] <= inner[0] <= outer[1]
        return any(a is container for a in self.ancestors(node))

    def calls_inside(self, node: cst.CSTNode) -> list[cst.Call]:
        """The calls in `node`'s subtree (`node` included), in source order."""
        return self._slice_inside(self.calls, self._call_starts, node)

    def memo(self, fact: str) -> dict[cst.CSTNode, bool]:
        """This module's table of answers to `fact` per node (a function), for questions that follow calls."""
        return self._memos.setdefault(fact, {})

    def through_calls(self, fact: str, node: cst.CSTNode, here: typing.Callable[[cst.CSTNode], bool]) -> bool:
        """`here(node)`, or `here(f)` for a function `f` of this module that `node` calls by name, transitively.

        Each function is answered once per `fact` (a name for `here`): following the call graph path by path
        costs 2^n on n functions that each call the two before."""
        memo = self.memo(fact)
        return here(node) or any(any_reachable(memo, func, here, self.callees) for func in self.callees(node))

    def callees(self, node: cst.CSTNode) -> list[cst.FunctionDef]:
        """The functions of this module that calls inside `node` name (`train(...)`)."""
        return [f for call in self.calls_inside(node) if isinstance(call.func, cst.Name) for f in self.functions.get(call.func.value, ())]

    def attributes_inside(self, node: cst.CSTNode) -> list[cst.Attribute]:
        """The attributes (`a.b`) in `node`'s subtree, in source order."""
        return self._slice_inside(self.attributes, self._attribute_starts, node)

    def loops_inside(self, node: cst.CSTNode) -> list[Loop]:
        """The loops in `node`'s subtree (`node` included), in source order."""
        return self._slice_inside(self.loops, self._loop_starts, node)

    def _slice_inside(self, nodes: list, starts: list[int], node: cst.CSTNode) -> list:
        span = self._spans.get(id(node))
        if span is None:
            return [n for n in nodes if self.is_inside(n, node)]
        return nodes[bisect.bisect_left(starts, span[0]) : bisect.bisect_right(starts, span[1])]

    @cached_property
    def _call_starts(self) -> list[int]:
        spans = self._spans
        return [spans[id(call)][0] for call in self.calls]

    @cached_property
    def _attribute_starts(self) -> list[int]:
        spans = self._spans
        return [spans[id(attribute)][0] for attribute in self.attributes]

    @cached_property
    def _loop_starts(self) -> list[int]:
        spans = self._spans
        return [spans[id(loop)][0] for loop in self.loops]

    @cached_property
    def _spans(self) -> dict[int, tuple[int, int]]:
        """id(node) -> (its pre-order number, the number of its last descendant), for every walked node."""
        return _pre_order_spans(self.module)

    @property
    def is_notebook(self) -> bool:
        """The module is a Jupyter notebook's code cells: run by a kernel, never imported or run as a script."""
        return self.path.lower().endswith(".ipynb")

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
        # Rules ask this for the same calls again and again (every rule, every loop): remember answers.
        # The entry keeps the node alive, so its id cannot be reused by another node.
        known = self._qualified.get(id(expr))
        if known is not None and known[0] is expr:
            return known[1]
        name = self._qualified_name(expr)
        self._qualified[id(expr)] = (expr, name)
        return name

    def _qualified_name(self, expr: cst.BaseExpression) -> str | None:
        dotted = dotted_name(expr)
        if dotted is None:
            return None
        resolved = self.imports.resolve(dotted)
        if resolved is not None and not self._import_rebound(dotted.partition(".")[0], expr):
            return resolved
        if "." not in dotted and dotted in self.classes:
            return f"<module>.{dotted}"
        return None

    def _import_rebound(self, root: str, use: cst.CSTNode) -> bool:
        """The imported name `root` no longer names the import at `use`: an assignment after the import binds it
        on every path to `use` (`import models.crnn as crnn` then `crnn = crnn.CRNN(...)`: `crnn` is the model
        from there on), or the function of `use` binds it locally (then the name is local throughout it)."""
        scope = self.scope_of(use)
        local = scope is not self.module and self.bindings.get((id(scope), root))
        binders = local or self.bindings.get((id(self.module), root))
        if local and isinstance(scope, cst.FunctionDef) and root in _declared_global(scope):
            # `global crnn` then `crnn = crnn.CRNN(...)`: the function binds the module's name
            binders, local = [*local, *self.bindings.get((id(self.module), root), ())], None
        if not binders:  # the common case: an imported name nothing assigns
            return False
        spans = self._spans
        at = spans.get(id(use))
        if at is None:
            return False
        home = scope if local else self.module
        imports = [node for node in self.import_binders.get(root, ()) if self.scope_of(node) is home]
        if local:
            # A local binder makes the name local in the whole function: only an import inside it binds it there.
            before = [spans[id(node)][1] for node in imports if spans[id(node)][1] < at[0]]
            if not before:
                return True
        elif scope is not self.module:
            # A function reads the module's name when it is called, after the module's own code has run: the
            # module's last unconditional binding (an import or an assignment) is the one it sees.
            before = [spans[id(node)][1] for node in imports]
            if not before:
                before = [-1]  # a name of the project's star import: bound before the module's code
            latest = max(before)
            return any(spans[id(b)][0] > latest and self._always_binds(b, use, module_code=True) for b in binders)
        else:
            before = [spans[id(node)][1] for node in imports if spans[id(node)][1] < at[0]] or [-1]
        latest = max(before)
        return any(latest < spans[id(b)][0] and self._always_binds(b, use) for b in binders)

    def _always_binds(self, binder: cst.CSTNode, use: cst.CSTNode, module_code: bool = False) -> bool:
        """`binder` (an assignment, loop, parameter or class) has bound the name whenever `use` runs: it ends
        before `use` and every branch, loop or handler it sits in also holds `use`. With `module_code`, `use` runs
        after the module's code (a function's body), so only the branches matter; the `__main__` guard runs."""
        if isinstance(binder, cst.Param):
            return True
        if isinstance(binder, cst.AnnAssign) and binder.value is None:
            return False  # `crnn: nn.Module` only annotates
        spans = self._spans
        at = spans[id(use)][0]
        if module_code and self.scope_of(binder) is self.scope_of(use):
            module_code = False  # `global crnn` in the function that assigns it: its own order holds there
        if isinstance(binder, cst.For):
            # The loop variable is bound in the loop's body only (the loop may run no time).
            body = spans[id(binder.body)]
            if not (module_code or body[0] <= at <= body[1]):
                return False
        elif not module_code and spans[id(binder)][1] >= at:
            return False  # `crnn = crnn.CRNN(...)`: its own value reads the name before the assignment binds it
        child = binder
        for ancestor in self.ancestors(binder):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.Module)):
                return True
            # A branch, loop body or handler: the binding holds only for uses inside it.
            if isinstance(ancestor, _CONDITIONAL_BLOCKS) and child is not getattr(ancestor, "test", None):
                guard = module_code and isinstance(ancestor, cst.If) and self.parent.get(ancestor) is self.module
                if not (guard and "__name__" in self.module.code_for_node(ancestor.test)):
                    span = spans[id(child)]
                    if not span[0] <= at <= span[1]:
                        return False
            child = ancestor
        return True

    def call_name(self, call: cst.Call) -> str | None:
        return self.qualified_name(call.func)

    def is_subclass_of(self, class_name: str, base: str) -> bool:
        return self.derives_from(class_name, f"subclass of {base}", lambda bases: base in bases)

    def derives_from(self, class_name: str, fact: str, direct: typing.Callable[[list[str]], bool]) -> bool:
        """`direct(bases)` holds for the class of this module named `class_name` or a class of this module it
        derives from; each class answered once per `fact` (a diamond of bases is not a path per ancestor)."""
        info = self.classes.get(class_name)
        if info is None:
            return False

        def bases(node: cst.ClassDef) -> list[str]:
            return self.classes[node.name.value].bases

        return any_reachable(
            self.memo(fact),
            info.node,
            lambda node: direct(bases(node)),
            lambda node: [self.classes[b].node for b in bases(node) if b in self.classes],
        )

    def local_class_of(self, qualified: str | None) -> ClassInfo | None:
        if qualified and qualified.startswith("<module>."):
            return self.classes.get(qualified[len("<module>.") :])
        return None

    @cached_property
    def assigned_methods(self) -> dict[tuple[str, str], cst.FunctionDef]:
        """Methods a module-level statement puts on a class of this module (`AMD_dataset.__getitem__ =
        __getitem__`, a notebook that writes the class as stubs, then each method in a cell of its own): the
        function of the module taking `self` that the class calls from then on, by (class, method). The last
        such assignment of a method wins; one of anything but a module-level function of that name leaves it out."""
        found: dict[tuple[str, str], cst.FunctionDef] = {}
        defined: dict[str, cst.FunctionDef] = {}  # the module's last `def` of each name so far (cell after cell)
        for line in self.module.body:
            if isinstance(line, cst.FunctionDef):
                defined[line.name.value] = line
            if not isinstance(line, cst.SimpleStatementLine):
                continue
            for item in line.body:
                if not (isinstance(item, cst.Assign) and len(item.targets) == 1):
                    continue
                target = item.targets[0].target
                if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value in self.classes):
                    continue
                key = (target.value.value, target.attr.value)
                func = defined.get(item.value.value) if isinstance(item.value, cst.Name) else None
                params = func.params.params if func is not None else ()
                if params and params[0].name.value == "self":
                    found[key] = func
                else:
                    found.pop(key, None)
        return found

    def bindings_of(self, name: str, at: cst.CSTNode) -> list[cst.CSTNode]:
        """The binders of `name` visible from `at`: its own scope first, then the module."""
        scope = self.scope_of(at)
        found = self.bindings.get((id(scope), name))
        if found:
            return found
        return self.bindings.get((id(self.module), name), [])

    def module_bindings(self, name: str) -> list[cst.CSTNode]:
        return self.bindings.get((id(self.module), name), [])

    def method_calls(self, attr: str) -> Iterator[cst.Call]:
        """Calls of the form `<anything>.attr(...)`."""
        yield from self._calls_by_callee.get((True, attr), ())

    def calls_of(self, name: str) -> list[cst.Call]:
        """Calls of the form `name(...)`, in source order."""
        return self._calls_by_callee.get((False, name), [])

    @cached_property
    def _calls_by_callee(self) -> dict[tuple[bool, str], list[cst.Call]]:
        # (is a method call, the name called) -> calls: asked per function and loop, so never a scan of every call.
        index: dict[tuple[bool, str], list[cst.Call]] = defaultdict(list)
        for call in self.calls:
            func = call.func
            if isinstance(func, cst.Attribute):
                index[(True, func.attr.value)].append(call)
            elif isinstance(func, cst.Name):
                index[(False, func.value)].append(call)
        return dict(index)

    # ---- positions (computed only when a rule reports) -----------------------------------------

    @cached_property
    def _positions(self) -> _Positions:
        return _Positions(self.module)

    def range(self, node: cst.CSTNode) -> CodeRange:
        return self._positions[node]

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    @cached_property
    def lines(self) -> list[str]:
        """Source lines without their line endings, split the way LibCST counts rows."""
        return LINE_BREAK.split(self.source)

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

    # ---- the project around the module ---------------------------------------------------------

    @cached_property
    def project(self):
        """The module's `ModuleContext` (see `analysis/project.py`)."""
        if self._project is not None:
            return self._project
        from gpulint.analysis.project import lone_context
        from gpulint.analysis.summary import summarize

        return lone_context(summarize(self.source), self.path)

    def project_ref(self, call: cst.Call) -> str | None:
        """How the project summary names what `call` calls: `make_loaders`, `utils.to_device`, `Trainer.step`
        for `self.step(...)`; None for a name bound locally (a parameter, a variable)."""
        dotted = dotted_name(call.func)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if head == "self" and rest and "." not in rest:
            owner = next((a for a in self.ancestors(call) if isinstance(a, cst.ClassDef)), None)
            if owner is not None and rest not in self._methods_of(owner):
                called = self._instance_method_ref(call)  # `self.criterion(out, y)`: an instance held in `self`
                if called is None:  # `self.model(x)`, `self.model = model` in `__init__`: what its callers hand it
                    called = self._handed_ref(owner, rest, "__call__")
                if called is not None:
                    return called
            return f"{owner.name.value}.{rest}" if owner is not None else None
        if head == "self" and rest.count(".") == 1:
            owner = next((a for a in self.ancestors(call) if isinstance(a, cst.ClassDef)), None)
            attribute, _, method = rest.partition(".")
            if owner is not None and attribute not in self._methods_of(owner) and self._instance_method_ref(call) is None:
                called = self._handed_ref(owner, attribute, method)  # `self.vocab.label_to_string(row)`
                if called is not None:
                    return called
        scope = self.scope_of(call)
        local = scope is not self.module and (id(scope), head) in self.bindings or head == "self"
        called = not rest and (id(self.module), head) in self.bindings and head not in self.functions and head not in self.classes
        if local or (rest and "." not in rest) or called:
            # `trainer = Trainer(...)` then `trainer.fit(loader)`, the receiver bound here or at module level; `crit(...)`
            instance = self._instance_method_ref(call)
            if instance is not None or local:
                return instance
        return dotted

    def _instance_method_ref(self, call: cst.Call) -> str | None:
        """`AverageMeter.update` for `meter.update(...)` / `self.meter.update(...)`, and `ComputeLoss.__call__` for
        `crit(pred, y)` / `self.crit(pred, y)` (a module's `forward`, as the index resolves it), when every write
        that reaches the receiver is a call of the same project class (`meter = AverageMeter()`), as the summary
        records it."""
        func = call.func
        if isinstance(func, cst.Attribute) and not self._holds_instance(func):
            receiver_node, method = func.value, func.attr.value
        else:
            receiver_node, method = func, "__call__"  # the instance itself is called
        receiver = dotted_name(receiver_node)
        if receiver is None or receiver.count(".") > (1 if receiver.startswith("self.") else 0):
            return None
        writes = self._made_writes(receiver, receiver_node)
        made = {dotted_name(w.value.func) if isinstance(w.value, cst.Call) else None for w in writes}
        if len(made) != 1 or None in made:
            return None
        factory = made.pop()
        head = factory.split(".", 1)[0]
        scope = self.scope_of(writes[0].value)
        if head == "self" or (scope is not self.module and (id(scope), head) in self.bindings):
            return None  # made by a callable bound locally (`x = x.next()`): not followed
        ref = f"{factory}.{method}"
        callee = self.project.callee(ref)
        return ref if callee is not None and callee.kind == "function" else None

    def _made_writes(self, receiver: str, at: cst.CSTNode) -> list:
        """The writes that reach `receiver` at `at`, an attribute that another attribute of the same object
        aliases followed to that one's writes (`self.integrator = self.train_integrator`, made as
        `self.train_integrator = Integrator(...)` in `__init__`): one hop, the writes of `self.<other>` in the class."""
        writes = self.dataflow.reaching_writes(receiver, at)
        if not receiver.startswith("self.") or not writes:
            return writes
        followed = []
        for write in writes:
            other = dotted_name(write.value) if isinstance(write.value, cst.Attribute) else None
            if other is None or not other.startswith("self.") or other.count(".") != 1 or other == receiver:
                followed.append(write)
                continue
            cls = self.dataflow.enclosing_class(write.value)
            aliased = self.dataflow.writes_in(other, cls) if cls is not None else []
            if not aliased or any(isinstance(w.value, cst.Attribute) for w in aliased):
                return writes  # unknown, or an alias of an alias: not followed
            followed.extend(aliased)
        return followed

    def _handed_ref(self, owner: cst.ClassDef, attribute: str, method: str) -> str | None:
        """The reference pass one records a call on `self.<attribute>` under when the constructor was handed that
        object (`analysis/handed_instances.py`), if the index resolved it to a method of a project class."""
        from gpulint.analysis.handed_instances import handed

        ref = f"{handed(owner.name.value, attribute)}.{method}"
        callee = self.project.callee(ref)
        return ref if callee is not None and callee.kind == "function" else None

    def _holds_instance(self, func: cst.Attribute) -> bool:
        """`self.criterion` (called as `self.criterion(...)`), not a method of the class around it."""
        if not (isinstance(func.value, cst.Name) and func.value.value == "self"):
            return False
        owner = next((a for a in self.ancestors(func) if isinstance(a, cst.ClassDef)), None)
        return owner is not None and func.attr.value not in self._methods_of(owner)

    def _methods_of(self, owner: cst.ClassDef) -> dict:
        info = self.classes.get(owner.name.value)
        return info.methods if info is not None and info.node is owner else {}

    def calls_instance(self, call: cst.Call) -> bool:
        """`crit(pred, y)` / `self.crit(pred, y)`: the call runs an instance's `__call__` (or `forward`)."""
        ref = self.project_ref(call)
        return ref is not None and ref.endswith(".__call__")

    def callee(self, call: cst.Call):
        """The composed facts of the project function or class `call` calls (`analysis/project.Callee`), or None."""
        return self.project.callee(self.project_ref(call))

    def arguments_to(self, call: cst.Call, callee) -> list[tuple[cst.Arg, str]]:
        """The arguments of `call` with the parameters of `callee` they land on (`self` skipped for methods
        and classes); none after a `*args` (positions unknown from there)."""
        params = list(callee.params)
        if params[:1] == ["self"] and (callee.kind == "class" or isinstance(call.func, cst.Attribute) or self.calls_instance(call)):
            params = params[1:]
        found = []
        for position, arg in enumerate(call.args):
            if arg.star:
                break
            if arg.keyword is not None:
                found.append((arg, arg.keyword.value))
            elif position < len(params):
                found.append((arg, params[position]))
        return found

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
    def frameworks(self):
        from gpulint.analysis.frameworks import Frameworks

        return Frameworks(self)

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

    @cached_property
    def model_size(self):
        from gpulint.analysis.model_size import ModelSize

        return ModelSize(self)

    @cached_property
    def batch_cost(self):
        from gpulint.analysis.batch_cost import BatchCost

        return BatchCost(self)

    @cached_property
    def test_code(self):
        from gpulint.analysis.test_code import TestCode

        return TestCode(self)

    @cached_property
    def _returns(self) -> dict[cst.FunctionDef, list[cst.Return]]:
        return {}  # keyed by the node itself, which the model keeps alive (an id could be reused)

    def returns_of(self, func: cst.FunctionDef) -> list[cst.Return]:
        """The `return` statements of `func` itself, not of functions nested in it."""
        found = self._returns.get(func)
        if found is None:
            found = self._returns[func] = _collect_own(func, cst.Return)
        return found

    def yields_of(self, func: cst.FunctionDef) -> list[cst.Yield]:
        """The `yield` expressions of `func` itself (it is a generator when there are any)."""
        return _collect_own(func, cst.Yield)


def any_reachable(
    memo: dict[cst.CSTNode, bool],
    start: cst.CSTNode,
    here: typing.Callable[[cst.CSTNode], bool],
    successors: typing.Callable[[cst.CSTNode], list[cst.CSTNode]],
) -> bool:
    """`here(n)` for `start` or a node reachable from it through `successors`, each node looked at once.

    Tarjan's strongly connected components, iteratively (a chain of thousands of functions is no recursion):
    the nodes of one cycle reach each other, so they share one answer, stored in `memo` when the cycle closes."""
    if start in memo:
        return memo[start]
    index: dict[cst.CSTNode, int] = {}
    low: dict[cst.CSTNode, int] = {}
    holds: dict[cst.CSTNode, bool] = {}
    depth: dict[cst.CSTNode, int] = {}  # where the node sits on `stack`
    stack: list[cst.CSTNode] = []
    frames: list[tuple[cst.CSTNode, Iterator[cst.CSTNode]]] = []

    def enter(node: cst.CSTNode) -> None:
        index[node] = low[node] = len(index)
        depth[node] = len(stack)
        stack.append(node)
        holds[node] = here(node)
        frames.append((node, iter(successors(node))))

    enter(start)
    while frames:
        node, pending = frames[-1]
        for successor in pending:
            if successor in memo:
                holds[node] = holds[node] or memo[successor]
            elif successor not in index:
                enter(successor)
                break
            else:  # on the stack: the same cycle
                low[node] = min(low[node], index[successor])
        else:
            frames.pop()
            if low[node] == index[node]:  # `node` closes a cycle (or stands alone): every member is answered
                members = stack[depth[node] :]
                del stack[depth[node] :]
                answer = any(holds[m] for m in members)
                for member in members:
                    memo[member] = answer
            if frames:
                caller = frames[-1][0]
                low[caller] = min(low[caller], low[node])
                holds[caller] = holds[caller] or memo.get(node, False)
    return memo[start]


def _collect_own(func: cst.FunctionDef, kind: type) -> list:
    """The nodes of `kind` in `func`, not in the functions and lambdas nested in it."""
    found: list = []

    class _Collector(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is func  # nested functions return (and yield) for themselves

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind):
                found.append(node)
            return super().on_visit(node)

    func.visit(_Collector())
    return found
