"""Code that runs on the first few iterations of a loop only: `if num_total < 10: print(...)`.

`first_few_iterations(model, node, loop)`: the `if` between `node` and `loop` whose test compares a counter that
grows every iteration with a small literal bound (`n < 10`, `i <= 4`, `10 > n`): the loop's own `enumerate`
index, or a name the loop only ever increases (`n += 1`) that starts at a literal before it. Its body runs a
handful of times in the whole run, a debug print of the first examples, however long the loop is; a wait there
is paid a handful of times, not every step. A bound that is not a literal (`if i < args.n_vis:`), a counter
reset or assigned in the loop, or one that may shrink keeps the finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel

# At most this many passes: a handful of debug prints, not a sampled fraction of the run.
FEW_ITERATIONS = 32


def first_few_iterations(model: SemanticModel, node: cst.CSTNode, loop: Loop) -> Optional[cst.If]:
    child: cst.CSTNode = node
    for ancestor in model.ancestors(node):
        if ancestor is loop:
            return None
        if isinstance(ancestor, cst.If) and child is ancestor.body and _bounds_a_counter(model, ancestor.test, loop):
            return ancestor
        child = ancestor
    return None


def _bounds_a_counter(model: SemanticModel, test: cst.BaseExpression, loop: Loop) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    left, right, operator = test.left, target.comparator, target.operator
    if isinstance(operator, (cst.GreaterThan, cst.GreaterThanEqual)):
        left, right = right, left  # `10 > n`
    elif not isinstance(operator, (cst.LessThan, cst.LessThanEqual)):
        return False
    if not (isinstance(right, cst.Integer) and int(right.value) <= FEW_ITERATIONS and isinstance(left, cst.Name)):
        return False
    return _enumerate_index(model, left.value, loop) or _only_grows(model, left.value, loop)


def _enumerate_index(model: SemanticModel, name: str, loop: Loop) -> bool:
    """`for i, x in enumerate(items):` (no `start=`, or a literal one) and `i` is not assigned in the loop."""
    if not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Call) or model.call_name(loop.iter) != "enumerate":
        return False
    target = loop.target
    if not (isinstance(target, cst.Tuple) and target.elements and isinstance(target.elements[0].value, cst.Name)):
        return False
    if target.elements[0].value.value != name:
        return False
    start = [a.value for a in loop.iter.args[1:]]
    if start and not isinstance(start[0], cst.Integer):
        return False
    return not any(write.statement is not loop for write in model.dataflow.writes_in(name, loop))


def _only_grows(model: SemanticModel, name: str, loop: Loop) -> bool:
    """Every write of `name` in the loop is `name += <positive literal>`, and `name` is a literal before it."""
    flow = model.dataflow
    writes = list(flow.writes_in(name, loop))
    if not writes:
        return False
    for write in writes:
        step = write.statement
        if not (
            isinstance(step, cst.AugAssign) and isinstance(step.operator, cst.AddAssign) and dotted_name(step.target) == name
            and isinstance(step.value, cst.Integer) and int(step.value.value) > 0
        ):  # fmt: skip
            return False
    scope = model.scope_of(loop)
    before = [w for w in flow.writes_in_scope(name, scope) if not model.is_inside(w.statement, loop) and flow.before(w.statement, loop)]
    return bool(before) and all(isinstance(w.value, cst.Integer) for w in before)
