"""Loops the code itself bounds to a handful of iterations.

A per-step cost (a host read, a tensor made on the CPU, a blocking copy) matters because the loop around it
runs once per batch, thousands of times. Some loops say in the source that they run only a few times: a
robustness or smoke check that stops after a few batches (`for i, (x, y) in enumerate(loader): ... if i > 5:
break`), a loop over a handful of hand-written items (`for name in ["relu", "tanh"]`, a dict literal of six
activation functions). What such a loop repeats runs a handful of times in all: the loop around it, if any,
decides how often.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.hot_loops import _FEW_ITEMS, iterates_a_few_literals
from gpulint.analysis.model import Loop

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# A loop that breaks by its counter within this many iterations runs "a handful" of times.
FEW_ITERATIONS = _FEW_ITEMS


def runs_a_handful(model: SemanticModel, loop: Loop) -> bool:
    """The loop's body runs at most a handful of times, as written: it iterates a few hand-written items, or
    it stops by its `enumerate` counter after a few iterations."""
    if not isinstance(loop, (cst.For, cst.While)):
        return False
    known = model.memo("runs a handful")  # asked for every node a per-step rule looks at: once per loop
    if loop not in known:
        if isinstance(loop, cst.For) and iterates_a_few_literals(model, loop):
            known[loop] = True
        else:
            bound = break_bound(model, loop)
            known[loop] = bound is not None and bound <= FEW_ITERATIONS
    return known[loop]


def break_bound(model: SemanticModel, loop: cst.For | cst.While) -> Optional[int]:
    """How many times at most the loop's body runs when one of its own statements (every iteration reaches
    it: no `continue` in the body) is `if i > N: break` (`>=`, `==` too, N a literal) on a counter that counts
    iterations: the `enumerate` index of a `for` (N - start + 2 for `>`, N - start + 1 otherwise), or a name
    set to a literal before the loop and raised by one among the body's own statements (`step += 1`; one more
    iteration allowed, whichever comes first). None when the code does not say."""
    if not isinstance(loop.body, cst.IndentedBlock) or _continues(model, loop):
        return None
    counter, start = _enumerate_counter(model, loop) if isinstance(loop, cst.For) else (None, 0)
    slack = 0
    if counter is None:
        counter, start = _raised_counter(model, loop)
        slack = 1
    if counter is None:
        return None
    bounds = []
    for statement in loop.body.body:
        if not isinstance(statement, cst.If) or statement.orelse is not None or not _ends_in_break(statement.body):
            continue
        test = statement.test
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            continue
        if not isinstance(test.left, cst.Name) or test.left.value != counter:
            continue
        target = test.comparisons[0]
        limit = _literal_int(target.comparator)
        if limit is None:
            continue
        if isinstance(target.operator, cst.GreaterThan):
            bounds.append(limit - start + 2 + slack)
        elif isinstance(target.operator, (cst.GreaterThanEqual, cst.Equal)):
            bounds.append(limit - start + 1 + slack)
    return min(bounds) if bounds else None


def _raised_counter(model: SemanticModel, loop: cst.For | cst.While) -> tuple[Optional[str], int]:
    """`n` and its smallest start for `n = 0` (literals only) before the loop and `n += 1` among the body's own
    statements, the only write of `n` in the loop."""
    for statement in loop.body.body:  # type: ignore[union-attr]
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            continue
        raised = statement.body[0]
        if not (isinstance(raised, cst.AugAssign) and isinstance(raised.operator, cst.AddAssign) and isinstance(raised.target, cst.Name)):
            continue
        if _literal_int(raised.value) != 1:
            continue
        name = raised.target.value
        flow = model.dataflow
        if len(flow.writes_in(name, loop)) != 1:
            continue  # reset or changed elsewhere in the loop
        starts = [w for w in flow.reaching_writes(name, loop) if not model.is_inside(w.statement, loop)]
        values = [_literal_int(w.value) if w.value is not None and not w.is_augmented else None for w in starts]
        if not values or any(v is None for v in values):
            continue
        return name, min(values)  # type: ignore[type-var]
    return None, 0


def _enumerate_counter(model: SemanticModel, loop: cst.For) -> tuple[Optional[str], int]:
    """`i` and the start of `for i, x in enumerate(it[, start])` (the builtin, not a rebinding of it)."""
    iterable, target = loop.iter, loop.target
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate"):
        return None, 0
    if model.module_bindings("enumerate") or not isinstance(target, (cst.Tuple, cst.List)) or not target.elements:
        return None, 0
    first = target.elements[0].value
    if not isinstance(first, cst.Name):
        return None, 0
    start = 0
    rest = [a for a in iterable.args[1:]]
    if rest:
        value = _literal_int(rest[0].value)
        if value is None or (rest[0].keyword is not None and rest[0].keyword.value != "start"):
            return None, 0
        start = value
    if model.dataflow.writes_in(first.value, loop.body):
        return None, 0  # the counter is rebound in the body: it no longer counts iterations
    return first.value, start


def _ends_in_break(block: cst.BaseSuite) -> bool:
    statements = block.body
    if not statements:
        return False
    last = statements[-1]
    if isinstance(block, cst.SimpleStatementSuite):
        return isinstance(last, cst.Break)
    return isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Break)


class _ContinueFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found = False

    def visit_Continue(self, node: cst.Continue) -> None:
        self.found = True

    def visit_For(self, node: cst.For) -> bool:
        return False  # a nested loop's `continue` is its own

    def visit_While(self, node: cst.While) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _continues(model: SemanticModel, loop: cst.For | cst.While) -> bool:
    span = model.range(loop)
    if not any("continue" in line for line in model.lines[span.start.line - 1 : span.end.line]):
        return False  # (most loops: no need to walk the body)
    finder = _ContinueFinder()
    loop.body.visit(finder)
    return finder.found


def _literal_int(expr: cst.BaseExpression) -> Optional[int]:
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    return None
