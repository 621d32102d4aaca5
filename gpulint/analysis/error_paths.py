"""Error paths: code that ends the run when it runs, so it runs at most once per process, not once per step.

A `raise` statement's own expressions (`raise RuntimeError(f"loss is {loss.item()}")`), an `assert`'s message
(evaluated only when the test fails), and a branch of an `if` whose every path raises or exits
(`else: raise ...`, `if bad: log(loss.item()); raise SystemExit(1)`) run when something went wrong, and the
exception leaves the loop: such code is not per-step code for any per-step rule. The test that decides the
branch (`if not torch.isfinite(loss):`) still runs every step. An exception caught inside the loop (a `try`
with handlers around the raise) lets the loop go on, so a raise there proves nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Calls that end the process like a `raise SystemExit` does.
EXITS = frozenset({"sys.exit", "os._exit"})


def error_path(model: SemanticModel, node: cst.CSTNode, stop: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The `raise` / `assert` / branch between `node` and `stop` (a loop or a step function) that ends the run
    whenever `node` runs: `node` then runs at most once per pass of `stop`. None when there is none."""
    child = node
    found: Optional[cst.CSTNode] = None
    for ancestor in model.ancestors(node):
        if ancestor is stop:
            return found
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None  # defined here, run whenever it is called
        if found is None:
            if isinstance(ancestor, cst.Raise) or (isinstance(ancestor, cst.Assert) and child is ancestor.msg):
                found = ancestor
            elif isinstance(child, cst.BaseSuite) and is_branch(model, ancestor, child) and always_ends(model, child):
                found = child
        elif isinstance(ancestor, (cst.Try, cst.TryStar)) and ancestor.handlers and child is ancestor.body:
            return None  # the loop may catch it and go on
        child = ancestor
    return None


def is_branch(model: SemanticModel, holder: cst.CSTNode, suite: cst.BaseSuite) -> bool:
    """`suite` is the body of an `if` / `elif`, or of the `else` of one."""
    if isinstance(holder, cst.If):
        return suite is holder.body
    return isinstance(holder, cst.Else) and suite is holder.body and isinstance(model.parent.get(holder), cst.If)


def always_ends(model: SemanticModel, suite: cst.BaseSuite) -> bool:
    """Every path through `suite` ends in a `raise` or `sys.exit()`: its last statement does (or is an `if`
    whose branches all do), and nothing in it leaves the block another way (`break`, `continue`, `return`)."""
    return _ends(model, suite) and not _leaves(model, suite)


def _ends(model: SemanticModel, suite: cst.BaseSuite) -> bool:
    statements = list(suite.body)
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    if isinstance(last, cst.Raise):
        return True
    if isinstance(last, cst.Expr) and isinstance(last.value, cst.Call):
        return model.call_name(last.value) in EXITS
    if isinstance(last, cst.If):
        return _if_ends(model, last)
    return False


def _if_ends(model: SemanticModel, branch: cst.If) -> bool:
    if branch.orelse is None or not _ends(model, branch.body):
        return False
    orelse = branch.orelse
    return _if_ends(model, orelse) if isinstance(orelse, cst.If) else _ends(model, orelse.body)


def _leaves(model: SemanticModel, suite: cst.BaseSuite) -> bool:
    """A `return` in `suite`, or a `break` / `continue` of a loop around it."""

    def escapes(jump: cst.CSTNode) -> bool:
        loops = model.enclosing_loops(jump)
        return not loops or not model.is_inside(loops[0], suite)

    return any(isinstance(jump, cst.Return) or escapes(jump) for jump in jumps(suite))


def jumps(block: cst.CSTNode) -> list[cst.CSTNode]:
    """The `return`, `break` and `continue` statements of `block`, outside the functions and classes it defines
    (theirs leave another frame)."""

    class _Jumps(cst.CSTVisitor):
        def __init__(self) -> None:
            self.found: list[cst.CSTNode] = []

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Return(self, node: cst.Return) -> None:
            self.found.append(node)

        def visit_Break(self, node: cst.Break) -> None:
            self.found.append(node)

        def visit_Continue(self, node: cst.Continue) -> None:
            self.found.append(node)

    collector = _Jumps()
    block.visit(collector)
    return collector.found
