"""Reads and writes of names and attributes in source order: which write a read sees, what a loop assigns.

Keys are the dotted text of a name or attribute (`loss`, `self.next_input`). The analysis is textual and
flow-insensitive inside a statement list: a read sees the last write before it in the same scope, or, when
there is none, the writes a loop carries around to it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Iterator, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel


@dataclass(frozen=True)
class Write:
    key: str
    target: cst.BaseExpression  # the Name/Attribute written
    statement: cst.CSTNode  # Assign, AnnAssign, AugAssign, For, NamedExpr, With, Param
    value: Optional[cst.BaseExpression]  # the expression assigned to exactly this target, when known
    source: Optional[cst.BaseExpression] = None  # `model(x)` in `out, feats = model(x)`: what it unpacks

    @property
    def is_augmented(self) -> bool:
        return isinstance(self.statement, cst.AugAssign)

    @property
    def unpacked_position(self) -> Optional[int]:
        """The place of this target in the tuple its one-target assignment unpacks (`a, b = f()` -> 0 for `a`);
        None for any other write, or an unpacking with a starred target."""
        statement = self.statement
        if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
            return None
        target = statement.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)) or any(isinstance(e, cst.StarredElement) for e in target.elements):
            return None
        return next((i for i, e in enumerate(target.elements) if e.value is self.target), None)


def _key(node: cst.BaseExpression) -> str | None:
    return dotted_name(node)


_INTERESTING = frozenset({
    cst.Name, cst.Attribute, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr, cst.WithItem,
    cst.FormattedStringExpression, cst.Call, cst.If, cst.While, cst.Assert,
})  # fmt: skip


class DataFlow:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.order: dict[cst.CSTNode, int] = {}
        self.end: dict[cst.CSTNode, int] = {}
        self.writes: dict[str, list[Write]] = {}
        self.reads: dict[str, list[cst.BaseExpression]] = {}
        self.item_writes: dict[str, list[cst.CSTNode]] = {}  # `x[...] = v`, `x[...] += v`
        self.conditions: list[cst.CSTNode] = []  # `if` / `while` / `assert` statements
        self.formatted: list[cst.FormattedStringExpression] = []  # `{x}` in f-strings
        self.method_calls: dict[str, list[cst.Call]] = {}  # receiver key -> `<receiver>.method(...)` calls
        self._targets: set[int] = set()
        self._starts: dict[tuple[str, str], list[int]] = {}  # source positions, to slice `method_calls` and `writes`
        self._index(model)

    def _index(self, model: SemanticModel) -> None:
        """One pass over the model's parent map, which the collector filled in source (pre-)order."""
        order, end = self.order, self.end
        order[model.module] = 0
        nodes = [model.module, *model.parent]
        interesting = _INTERESTING
        for i, node in enumerate(nodes):
            order[node] = i
            end[node] = i + 1
            kind = type(node)
            if kind not in interesting:
                continue
            if kind is cst.Name or kind is cst.Attribute:
                self._maybe_read(node)
                continue
            if kind is cst.Assign:
                for target in node.targets:
                    self._record(target.target, node, node.value)
            elif kind is cst.AnnAssign or kind is cst.AugAssign:
                self._record(node.target, node, node.value)
            elif kind is cst.For:
                self._record(node.target, node, None)
            elif kind is cst.NamedExpr:
                self._record(node.target, node, node.value)
            elif kind is cst.WithItem:
                if node.asname is not None:
                    self._record(node.asname.name, node, None)
            elif kind is cst.FormattedStringExpression:
                self.formatted.append(node)
            elif kind is cst.Call:
                if isinstance(node.func, cst.Attribute):
                    key = _key(node.func.value)
                    if key is not None:
                        self.method_calls.setdefault(key, []).append(node)
            else:
                self.conditions.append(node)  # If, While, Assert
        parent = model.parent
        for node in reversed(nodes):
            up = parent.get(node)
            if up is not None and end[node] > end[up]:
                end[up] = end[node]

    # ---- collection ---------------------------------------------------------------------------

    def _record(
        self,
        target: cst.BaseExpression,
        statement: cst.CSTNode,
        value: cst.BaseExpression | None,
        source: cst.BaseExpression | None = None,
    ) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            values: list[cst.BaseExpression | None] = [None] * len(target.elements)
            unpacked = value if not isinstance(statement, cst.For) else None
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                if not any(isinstance(e, cst.StarredElement) for e in (*value.elements, *target.elements)):
                    values = [e.value for e in value.elements]
            for element, element_value in zip(target.elements, values):
                inner = element.value if not isinstance(element, cst.StarredElement) else element
                self._record(
                    inner.value if isinstance(inner, cst.StarredElement) else inner,
                    statement,
                    element_value,
                    None if element_value is not None else unpacked,
                )
            return
        if isinstance(target, cst.Subscript):
            key = _key(target.value)
            if key is not None:
                self.item_writes.setdefault(key, []).append(statement)
            return
        key = _key(target)
        if key is None:
            return
        self._targets.add(id(target))
        if isinstance(target, cst.Attribute):
            self._targets.add(id(target.value))  # `self` in `self.x = ...` is not a read of `self.x`
        self.writes.setdefault(key, []).append(Write(key, target, statement, value, source))

    def _maybe_read(self, node: cst.BaseExpression) -> None:
        if id(node) in self._targets:
            return
        parent = self.model.parent.get(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            return
        if isinstance(node, cst.Name) and isinstance(
            parent, (cst.Arg, cst.Param, cst.FunctionDef, cst.ClassDef, cst.ImportAlias, cst.AsName, cst.Attribute, cst.Global, cst.Nonlocal)
        ):
            if not (isinstance(parent, cst.Arg) and parent.value is node) and not (
                isinstance(parent, cst.Attribute) and parent.value is node
            ):
                return
        key = _key(node)
        if key is not None:
            self.reads.setdefault(key, []).append(node)

    # ---- order --------------------------------------------------------------------------------

    def before(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """`a` ends before `b` starts in the source."""
        return self.end[a] <= self.order[b]

    def inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return self.order[container] <= self.order[node] < self.end[container]

    # ---- queries ------------------------------------------------------------------------------

    def writes_in_scope(self, key: str, scope: cst.CSTNode) -> list[Write]:
        return list(self._writes_by_scope.get((key, id(scope)), ()))

    @cached_property
    def _writes_by_scope(self) -> dict[tuple[str, int], list[Write]]:
        # Built once: scanning every write of `x` in the module per question made analysis quadratic in
        # the number of functions that reuse a local name.
        index: dict[tuple[str, int], list[Write]] = {}
        for key, writes in self.writes.items():
            for write in writes:
                index.setdefault((key, id(self.model.scope_of(write.target))), []).append(write)
        return index

    def method_calls_in(self, key: str, node: cst.CSTNode) -> list[cst.Call]:
        """`<key>.method(...)` calls inside `node`, in source order."""
        return self._slice("call", key, self.method_calls.get(key, []), lambda call: call, node)

    def writes_in(self, key: str, node: cst.CSTNode) -> list[Write]:
        """The writes of `key` whose statement is inside `node`, in source order."""
        return self._slice("write", key, self.writes.get(key, []), lambda write: write.statement, node)

    def reads_in(self, key: str, node: cst.CSTNode) -> list[cst.BaseExpression]:
        """The reads of `key` inside `node`, in source order."""
        return self._slice("read", key, self.reads.get(key, []), lambda read: read, node)

    def _slice(self, kind: str, key: str, items: list, position: Callable, node: cst.CSTNode) -> list:
        """The `items` (kept in source order) that lie inside `node`, by bisection on their positions."""
        starts = self._starts.get((kind, key))
        if starts is None:
            starts = self._starts[(kind, key)] = [self.order[position(item)] for item in items]
        return items[bisect.bisect_left(starts, self.order[node]) : bisect.bisect_left(starts, self.end[node])]

    def reaching_writes(self, key: str, at: cst.CSTNode) -> list[Write]:
        """The writes of `key` a read at `at` may see: the last one before it in its scope, else loop-carried
        ones, else (for a name not written in its function) the module's, else (for `self.x`) the class's."""
        model = self.model
        scope = model.scope_of(at)
        local = self.writes_in_scope(key, scope)
        earlier = [w for w in local if self.before(w.statement, at) or (isinstance(w.statement, cst.For) and self.inside(at, w.statement))]
        if earlier:
            # The last write, and the ones before it back to a write that surely runs before `at`
            # (`if c: x = a` / `else: x = b`: both may reach).
            reaching = []
            for write in sorted(earlier, key=lambda w: self.order[w.statement], reverse=True):
                reaching.append(write)
                if isinstance(write.statement, cst.For) or self._surely_runs_before(write.statement, at):
                    break
            return reaching
        carried = [w for w in local if any(self.inside(w.statement, loop) for loop in model.enclosing_loops(at))]
        if carried:
            return carried
        if local:
            return []
        if "." not in key:
            if scope is not model.module and self._is_parameter(key, scope):
                return []
            return self.writes_in_scope(key, model.module)
        cls = self.enclosing_class(at)
        if cls is not None and key.startswith("self."):
            return self.writes_in(key, cls)
        return []

    def _surely_runs_before(self, statement: cst.CSTNode, at: cst.CSTNode) -> bool:
        """No `if`/`try`/loop branch sits between `statement` and the block it shares with `at`."""
        model = self.model
        for ancestor in model.ancestors(statement):
            if model.is_inside(at, ancestor):
                return True
            if isinstance(ancestor, (cst.If, cst.Else, cst.Try, cst.ExceptHandler, cst.Finally, cst.For, cst.While, cst.Match)):
                return False
        return True

    def exclusive(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """`a` and `b` lie in different branches of one `if`, and no loop around that `if` (in the function)
        can run both: a write in one branch never reaches a read in the other."""
        model = self.model
        for ancestor in model.ancestors(a):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
            if isinstance(ancestor, cst.If) and model.is_inside(b, ancestor):
                if model.is_inside(a, ancestor.test) or model.is_inside(b, ancestor.test):
                    return False
                if model.is_inside(a, ancestor.body) == model.is_inside(b, ancestor.body):
                    return False
                return not model.enclosing_loops(ancestor)
        return False

    def _is_parameter(self, key: str, scope: cst.CSTNode) -> bool:
        return any(isinstance(b, cst.Param) for b in self.model.bindings.get((id(scope), key), ()))

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, cst.ClassDef):
                return ancestor
        return None

    def assigned_in(self, key: str, node: cst.CSTNode) -> bool:
        """`key` is written (or is a loop target) anywhere inside `node`; `x.attr = ...` counts for `x`."""
        for written, writes in self.writes.items():
            if written == key or written.startswith(key + ".") or key.startswith(written + "."):
                if any(self.inside(w.statement, node) for w in writes):
                    return True
        return False

    def mutated_in(self, key: str, node: cst.CSTNode) -> bool:
        """Written, item-assigned, or changed by an in-place method (`x.add_(...)`) inside `node`."""
        if self.assigned_in(key, node):
            return True
        if any(self.inside(s, node) for s in self.item_writes.get(key, ())):
            return True
        return self.changed_in_place(key, node)

    def changed_in_place(self, key: str, node: cst.CSTNode) -> bool:
        """An in-place method (`x.add_(...)`, `x.zero_()`) is called on `key` inside `node`."""
        for call in self.model.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
                if _key(func.value) == key and self.inside(call, node):
                    return True
        return False

    def calls_between(self, start: cst.CSTNode, stop: cst.CSTNode, scope: cst.CSTNode) -> Iterator[cst.Call]:
        """Calls in `scope` that start after `start` ends and end before `stop` starts."""
        for call in self.model.calls:
            if self.end[start] <= self.order[call] and self.end[call] <= self.order[stop] and self.model.scope_of(call) is scope:
                yield call

    def dominates(self, statement: cst.CSTNode, node: cst.CSTNode) -> bool:
        """`statement` always runs before `node`: it comes first in a statement list that contains `node`
        (not in a branch beside it), in the same scope."""
        model = self.model
        block = model.parent.get(statement)
        return (
            block is not None
            and self.before(statement, node)
            and model.is_inside(node, block)
            and model.scope_of(statement) is model.scope_of(node)
        )

    def runs_every_iteration(self, node: cst.CSTNode, loop: cst.CSTNode) -> bool:
        """No branch, handler or inner loop between `node` and `loop`: it runs each time the loop body does."""
        for ancestor in self.model.ancestors(node):
            if ancestor is loop:
                return True
            if isinstance(ancestor, (cst.If, cst.Else, cst.Try, cst.ExceptHandler, cst.Finally, cst.For, cst.While, cst.Match, cst.IfExp, cst.BooleanOperation)):
                return False
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return False
        return False
