"""Code under a guard that leaves right after it: `if count_steps >= max_steps: evaluate(model); return`.

`leaving_guard(model, node, loop)`: the branch (the body of an `if` / `elif` / `else`) between `node` and `loop`
whose last statement is an unconditional `return`, or a `break` out of `loop` itself, with no `continue` in it
that could skip that statement. When `node` runs, the loop ends right after: a final evaluation under the
last-step test, a save before stopping. It runs once per pass of the loop (`break`: the loop around `loop`
decides how often), or once per call of the function (`return`: no loop of the function repeats it), never once
per iteration. The test that decides the branch still runs every iteration. A `break` of a loop nested between
the branch and `loop` leaves only that loop, so proves nothing about `loop`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.error_paths import is_branch
from gpulint.analysis.loop_bounds import ContinueFinder

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel

RETURN, BREAK = "return", "break"


def leaving_guard(model: SemanticModel, node: cst.CSTNode, loop: Loop) -> Optional[str]:
    """RETURN or BREAK when a branch between `node` and `loop` ends by leaving the function or `loop` (see the
    module's docstring); None when there is none."""
    child: cst.CSTNode = node
    found: Optional[str] = None
    for ancestor in model.ancestors(node):
        if ancestor is loop:
            return found
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(ancestor, (cst.For, cst.While)):
            if found == BREAK:
                found = None  # the `break` leaves this inner loop only
        elif found is None and isinstance(child, cst.IndentedBlock) and is_branch(model, ancestor, child):
            leaves = _last_leaves(child)
            if leaves is not None and not _continues(child):
                found = leaves
        child = ancestor
    return None


def _last_leaves(suite: cst.IndentedBlock) -> Optional[str]:
    if not suite.body:
        return None
    last = suite.body[-1]
    if not isinstance(last, cst.SimpleStatementLine) or not last.body:
        return None
    statement = last.body[-1]
    if isinstance(statement, cst.Return):
        return RETURN
    if isinstance(statement, cst.Break):
        return BREAK
    return None


def _continues(suite: cst.BaseSuite) -> bool:
    finder = ContinueFinder()
    suite.visit(finder)
    return finder.found
