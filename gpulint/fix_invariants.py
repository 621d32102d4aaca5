"""Invariants every fix must keep, whatever rule made it; a fix that breaks one is dropped (its finding stays).

Checked on the text each fix produces, so they hold for every rule, present and future:

- no name the fix inserts is unbound where it is inserted (a local of another function, a name only bound
  further down, or no binding at all): the fixed file would raise `NameError` / `UnboundLocalError`;
- no statement the fix inserts runs inside a loop when it waits or synchronizes (`wait_stream`,
  `wait_event`, `synchronize`, `wait`: a stall every iteration), or when nothing it reads changes in the
  loop (it belongs before the loop).

The linter applies this to every finding, so `check` and `fix` agree on what is fixable.
"""

from __future__ import annotations

import ast
import builtins
import warnings
from dataclasses import dataclass, field, replace

from gpulint.analysis.streams import WAIT_METHODS
from gpulint.diagnostics import Applicability, Diagnostic, Edit
from gpulint.lines import LINE_BREAK, line_starts

# Names every module has without binding them.
_IMPLICIT = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__package__", "__spec__", "__loader__", "__builtins__", "__path__", "__annotations__"}


@dataclass
class _Scope:
    node: ast.AST
    parent: _Scope | None
    bindings: dict[str, list[int]] = field(default_factory=dict)  # name -> offsets where it becomes bound
    declared_global: set[str] = field(default_factory=set)
    declared_nonlocal: set[str] = field(default_factory=set)

    @property
    def is_function(self) -> bool:
        return isinstance(self.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))

    def bind(self, name: str, offset: int) -> None:
        self.bindings.setdefault(name, []).append(offset)


@dataclass
class _Read:
    name: str
    offset: int
    scope: _Scope


class _Binder(ast.NodeVisitor):
    """Scopes, the offsets where names become bound in them, every name read, and the loops around statements."""

    def __init__(self, text: str) -> None:
        self.starts = line_starts(text)
        self.lines = LINE_BREAK.split(text)
        self.module = _Scope(ast.Module(body=[], type_ignores=[]), None)
        self.scope = self.module
        self.reads: list[_Read] = []
        self.star_import = False
        self.statements: list[tuple[ast.stmt, int, int, list[ast.AST]]] = []  # (stmt, start, end, loops around it)
        self._loops: list[ast.AST] = []

    # ---- offsets ---------------------------------------------------------------------------

    def offset(self, row: int, byte_column: int) -> int:
        line = self.lines[row - 1] if row - 1 < len(self.lines) else ""
        return self.starts[row - 1] + len(line.encode("utf-8")[:byte_column].decode("utf-8", "replace"))

    def start(self, node: ast.AST) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end(self, node: ast.AST) -> int:
        return self.offset(node.end_lineno, node.end_col_offset)

    # ---- scopes ----------------------------------------------------------------------------

    def _enter(self, node: ast.AST, body: list, params: ast.arguments | None = None) -> None:
        outer, outer_loops = self.scope, self._loops
        self.scope, self._loops = _Scope(node, outer), []
        if params is not None:
            for arg in (*params.posonlyargs, *params.args, *params.kwonlyargs, params.vararg, params.kwarg):
                if arg is not None:
                    self.scope.bind(arg.arg, self.start(node))
        for child in body:
            self.visit(child)
        self.scope, self._loops = outer, outer_loops

    def _function(self, node) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
        arguments = node.args
        for default in (*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)):
            self.visit(default)
        self.scope.bind(node.name, self.start(node))
        self._enter(node, node.body, arguments)

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for default in (*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)):
            self.visit(default)
        self._enter(node, [node.body], node.args)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for child in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self.visit(child)
        self.scope.bind(node.name, self.start(node))
        self._enter(node, node.body)

    def _comprehension(self, node) -> None:
        generators = node.generators
        self.visit(generators[0].iter)  # evaluated in the enclosing scope
        outer = self.scope
        self.scope = _Scope(node, outer)
        for index, generator in enumerate(generators):
            if index:
                self.visit(generator.iter)
            self._bind_target(generator.target, self.start(generator.target))
            for condition in generator.ifs:
                self.visit(condition)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)
        self.scope = outer

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    # ---- bindings --------------------------------------------------------------------------

    def _bind_target(self, target: ast.AST, offset: int) -> None:
        if isinstance(target, ast.Name):
            self.scope.bind(target.id, offset)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._bind_target(element, offset)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, offset)
        else:
            self.visit(target)  # `x.attr` / `x[i]` as a target: `x` and `i` are read

    def _assignment(self, node, targets: list, value) -> None:
        if value is not None:
            self.visit(value)
        bound_at = self.end(value) if value is not None else self.start(node)
        for target in targets:
            self._bind_target(target, bound_at)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._statement(node, lambda: self._assignment(node, node.targets, node.value))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._statement(node, lambda: self._assignment(node, [node.target], node.value))

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        def walk() -> None:
            if isinstance(node.target, ast.Name):
                self.reads.append(_Read(node.target.id, self.start(node.target), self.scope))
            self._assignment(node, [node.target], node.value)

        self._statement(node, walk)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        scope = self.scope
        while _is_comprehension(scope.node) and scope.parent:
            scope = scope.parent  # `:=` in a comprehension binds in the enclosing function
        scope.bind(node.target.id, self.end(node.value))

    def _loop(self, node) -> None:
        def walk() -> None:
            if isinstance(node, ast.While):
                self.visit(node.test)
            else:
                self.visit(node.iter)
                self._bind_target(node.target, self.end(node.iter))
            self._loops.append(node)
            for child in node.body:
                self.visit(child)
            self._loops.pop()
            for child in node.orelse:
                self.visit(child)

        self._statement(node, walk)

    visit_For = visit_AsyncFor = visit_While = _loop

    def _with(self, node) -> None:
        def walk() -> None:
            for item in node.items:
                self.visit(item.context_expr)
                if item.optional_vars is not None:
                    self._bind_target(item.optional_vars, self.end(item.context_expr))
            for child in node.body:
                self.visit(child)

        self._statement(node, walk)

    visit_With = visit_AsyncWith = _with

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.scope.bind(node.name, self.start(node))
        for child in node.body:
            self.visit(child)

    def _import(self, node) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.star_import = True
                continue
            self.scope.bind(alias.asname or alias.name.split(".")[0], self.start(node))
        self._statement(node, lambda: None)

    visit_Import = visit_ImportFrom = _import

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.declared_global.update(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.scope.declared_nonlocal.update(node.names)

    def visit_MatchAs(self, node) -> None:
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name:
            self.scope.bind(node.name, self.start(node))

    def visit_MatchStar(self, node) -> None:
        if node.name:
            self.scope.bind(node.name, self.start(node))

    def visit_MatchMapping(self, node) -> None:
        self.generic_visit(node)
        if node.rest:
            self.scope.bind(node.rest, self.start(node))

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.reads.append(_Read(node.id, self.start(node), self.scope))
        elif isinstance(node.ctx, ast.Store):
            self.scope.bind(node.id, self.start(node))

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            self._statement(node, lambda: super(_Binder, self).generic_visit(node))
        else:
            super().generic_visit(node)

    def _statement(self, node: ast.stmt, walk) -> None:
        self.statements.append((node, self.start(node), self.end(node), list(self._loops)))
        walk()

    # ---- questions -------------------------------------------------------------------------

    def bound(self, read: _Read, ignore: list[tuple[int, int]]) -> bool:
        """Python's lookup for `read`: its own scope (bound before the read unless it is a comprehension's),
        enclosing functions (class bodies skipped), the module, builtins. Bindings inside `ignore` (another
        fix's insertions) do not count."""

        def offsets(scope: _Scope) -> list[int]:
            return [o for o in scope.bindings.get(read.name, ()) if not any(a <= o < b for a, b in ignore)]

        def before(found: list[int]) -> bool:
            return any(o <= read.offset for o in found)

        name, scope = read.name, read.scope
        deferred = scope.is_function  # a function body runs after the scopes around it are set up
        if name in scope.declared_global:
            scope = self.module
        elif name in scope.bindings and name not in scope.declared_nonlocal:
            own = offsets(scope)
            if _is_comprehension(scope.node):
                return bool(own)
            if not isinstance(scope.node, ast.ClassDef) or before(own):
                return before(own)  # a local bound only further down is unbound here
        outer = scope.parent if scope is not self.module else None
        while outer is not None and outer is not self.module:
            if (outer.is_function or _is_comprehension(outer.node)) and name in outer.bindings and name not in outer.declared_global:
                return bool(offsets(outer)) if deferred else before(offsets(outer))
            deferred = deferred or outer.is_function
            outer = outer.parent
        module = offsets(self.module)
        if module and (deferred or before(module)):
            return True
        return name in _IMPLICIT or self.star_import


def _is_comprehension(node: ast.AST) -> bool:
    return isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp))


def _applied(text: str, edits: list[Edit]) -> tuple[str, list[tuple[int, int]]]:
    """The text with `edits` applied, and where each edit's new content lies in it (offsets)."""
    from gpulint.fixer import apply_edits

    starts = line_starts(text)

    def offset(location) -> int:
        row = min(max(location.row, 1), len(starts))
        return starts[row - 1] + location.column - 1

    spans = []
    shift = 0
    for edit in sorted(edits, key=lambda e: (e.location, e.end_location)):
        begin, end = offset(edit.location), offset(edit.end_location)
        spans.append((begin + shift, begin + shift + len(edit.content)))
        shift += len(edit.content) - (end - begin)
    return apply_edits(text, edits), spans


def _parse(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # `"\d"` and friends: not ours to report
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _unbound_names(text: str) -> set[str] | None:
    """Names the file already reads where they are unbound (None when `ast` cannot parse it)."""
    tree = _parse(text)
    if tree is None:
        return None
    binder = _Binder(text)
    binder.visit(tree)
    return {read.name for read in binder.reads if not binder.bound(read, [])}


def _violation(binder: _Binder, mine: list[tuple[int, int]], others: list[tuple[int, int]], unbound_before: set[str]) -> str | None:
    """What the edits at `mine` break, or None. A name the file already reads unbound (a star import's, a
    runtime global) is the file's problem, not the fix's."""

    def inside(offset: int) -> bool:
        return any(a <= offset < b for a, b in mine)

    for read in binder.reads:
        if inside(read.offset) and read.name not in unbound_before and not binder.bound(read, others):
            return f"`{read.name}` would be unbound there"
    for statement, start, end, loops in binder.statements:
        if not loops or isinstance(statement, ast.Pass) or not any(a <= start and end <= b for a, b in mine):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
                if called in WAIT_METHODS:
                    return "it would wait on the GPU every loop iteration"
        own = set(map(id, ast.walk(statement)))
        reads = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        assigned = {n.id for n in ast.walk(loops[-1]) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in own}
        if not reads & assigned:
            return "it inserts a loop-invariant statement into a loop"
    return None


def _fixable(diagnostic: Diagnostic) -> bool:
    fix = diagnostic.fix
    return fix is not None and fix.applicability in (Applicability.SAFE, Applicability.UNSAFE)


def _groups(diagnostics: list[Diagnostic]) -> list[list[Diagnostic]]:
    """Fixes whose edits do not overlap, so each group is checked on one text."""
    from gpulint.fixer import edits_overlap

    groups: list[tuple[list[Diagnostic], list[Edit]]] = []
    for diagnostic in diagnostics:
        for members, edits in groups:
            if not any(edits_overlap(new, old) or new == old for new in diagnostic.fix.edits for old in edits):
                members.append(diagnostic)
                edits.extend(diagnostic.fix.edits)
                break
        else:
            groups.append(([diagnostic], list(diagnostic.fix.edits)))
    return [members for members, _ in groups]


def enforce(text: str, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """`diagnostics` with the fixes that break an invariant removed (the findings stay, without a fix)."""
    candidates = [d for d in diagnostics if _fixable(d)]
    if not candidates:
        return diagnostics
    unbound_before = _unbound_names(text)
    if unbound_before is None:
        return diagnostics  # newer syntax than this interpreter's: the fixer holds it to LibCST's grammar
    dropped: set[int] = set()
    for group in _groups(candidates):
        edits = [e for d in group for e in d.fix.edits]
        new_text, spans = _applied(text, edits)
        tree = _parse(new_text)
        if tree is None:
            continue  # the fixer itself drops fixes whose result does not parse
        binder = _Binder(new_text)
        binder.visit(tree)
        by_edit = dict(zip(sorted(edits, key=lambda e: (e.location, e.end_location)), spans))
        for diagnostic in group:
            mine = [by_edit[e] for e in diagnostic.fix.edits]
            others = [s for e, s in by_edit.items() if e not in diagnostic.fix.edits]
            if _violation(binder, mine, others, unbound_before) is not None:
                dropped.add(id(diagnostic))
    if not dropped:
        return diagnostics
    return [replace(d, fix=None) if id(d) in dropped else d for d in diagnostics]
