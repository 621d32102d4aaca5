"""Code that runs on the first few iterations of a loop only: `if num_total < 10: print(...)`.

`first_few_iterations(model, node, loop)`: the `if` between `node` and `loop` whose test lets a counter of the
loop's iterations through only below a bound known as shipped (`n < 10`, `i <= 4`, `10 > n`): the loop's own
`enumerate` index or `range` target, or a name set to a literal before the loop and raised by one every iteration
(the counters `loop_bounds` reads break tests with), or raised by one in the guarded body itself and nowhere else
in the loop (`if logged < 10: log_batch(...); logged += 1`: ten batches are logged, then the test fails for good).
Its body runs at most `SHORT_LOOP` times in the whole pass, a debug print of the first examples, however long the
loop is: a wait there is paid a handful of times, not every step. A bound not known (`if i < args.n_vis:` without
a default), a counter reset or lowered in the loop, or a test that lets later iterations through (`if i > 10:`)
keeps the finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.loop_bounds import SHORT_LOOP, index_counter, raised_counter, shipped_bound

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel


def first_few_iterations(model: SemanticModel, node: cst.CSTNode, loop: Loop) -> Optional[cst.If]:
    if not isinstance(loop, (cst.For, cst.While)) or not isinstance(loop.body, cst.IndentedBlock):
        return None
    child: cst.CSTNode = node
    for ancestor in model.ancestors(node):
        if ancestor is loop:
            return None
        if isinstance(ancestor, cst.If) and child is ancestor.body and _below_a_bound(model, ancestor, loop):
            return ancestor
        child = ancestor
    return None


def _below_a_bound(model: SemanticModel, guard: cst.If, loop: cst.For | cst.While) -> bool:
    test = guard.test
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    left, right, operator = test.left, test.comparisons[0].comparator, test.comparisons[0].operator
    if isinstance(operator, (cst.GreaterThan, cst.GreaterThanEqual)):
        left, right = right, left  # `10 > n`
    elif not isinstance(operator, (cst.LessThan, cst.LessThanEqual)):
        return False
    if not isinstance(left, cst.Name):
        return False
    counters = {}
    if isinstance(loop, cst.For):
        name, start = index_counter(model, loop)
        if name is not None:
            counters[name] = start
    name, start, _ = raised_counter(model, loop)
    if name is not None:
        counters.setdefault(name, start)
    name, start, _ = raised_counter(model, guard, within=loop)  # `if logged < 10: log(...); logged += 1`
    if name is not None:
        counters.setdefault(name, start)
    if left.value not in counters:
        return False
    limit = shipped_bound(model, right)
    return limit is not None and limit - counters[left.value] + 1 <= SHORT_LOOP
