"""Evaluations that run a few samples per epoch beside the epoch's training: `for _ in range(5): sent =
generate_sent()` after a pass of training steps over the data, in the same epoch loop.

GPU405's cost is the autograd graph an evaluation's forward records: host bookkeeping per operation and the
activations it keeps, a fraction of that forward. An evaluation loop of a handful of iterations written in the
code (`range(5)`, five generated sentences, a few hand-picked prompts) inside the epoch loop, whose body also runs
a training loop over the epoch's data (one forward, backward and update per batch, a number of batches the code
does not bound), records a few graphs per epoch against the epoch's training steps: a small share of the run
whatever the model (judged noise on the fourteenth corpus, "one-off-generation": five sampled sentences per epoch
beside an epoch of training over Penn Treebank). A per-epoch evaluation over a data set is not a few samples and
stays reported; so does a sampling loop beside a training loop that itself runs a handful of steps.

`every_few_steps(model, node)`: an evaluation the training loop runs only under a rate-limit guard (`if (i + 1) %
EVAL_EVERY == 0:`, `if step % 100 == 0:`, or only on an error path), so a few passes a run against the run's
training steps. How long each pass is, the code rarely shows; on the fourteenth and fifteenth corpora both judges
called every such GPU405 finding they read noise (x-transformers' six batches every 500 steps, a validation of
~100 samples every 100 iterations: 2 of 2), none right, so the rule takes it as cheap. An evaluation run every step
or every epoch is not, and neither is one every few epochs (`if epoch % 20 == 0:` in an epoch loop whose body runs
the epoch's training loop): a pass per N epochs of steps, not per N steps, whose share the code does not show
(SASRec's evaluation over up to 10,000 users one forward each, every 20 epochs: labelled a real share).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.hot_loops import FEW_ITEMS, iterates_a_few_literals, trains
from gpulint.analysis.loop_bounds import SHORT_LOOP, trip_count

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel

# At most this many iterations of the evaluation loop each epoch: "a few samples".
FEW_SAMPLES = FEW_ITEMS


def every_few_steps(model: SemanticModel, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The rate-limit guard (`if step % N == 0:`) between `node` and an enclosing loop that trains a step an
    iteration, if any. A guard of an epoch loop (`if epoch % 20 == 0:` in a loop whose body runs a training loop of
    its own) is none: each pass it skips is an epoch, not a step, so the evaluation is a per-epoch one thinned out,
    whose share the code does not show (reported, as a per-epoch evaluation is)."""
    for loop in model.enclosing_loops(node):
        if trains(model, loop):
            guard = model.residency.rate_limit_guard(node, loop)
            if guard is not None:
                return None if runs_a_training_loop(model, loop, node) else guard
    return None


def runs_a_training_loop(model: SemanticModel, loop: Loop, besides: cst.CSTNode) -> bool:
    """`loop` (an epoch loop) runs, in its own body and outside `besides`, a loop of the same function that trains."""
    return any(
        inner is not loop and isinstance(inner, (cst.For, cst.While)) and not model.is_inside(besides, inner)
        and not model.is_inside(inner, besides) and model.enclosing_function(inner) is model.enclosing_function(loop)
        and trains(model, inner)
        for inner in model.loops_inside(loop)
    )  # fmt: skip


def few_samples_per_epoch(model: SemanticModel, loop: Loop) -> bool:
    """`loop` runs at most `FEW_SAMPLES` times each time it is entered (a `range` or items written in the code),
    trains nothing, and sits in the body of an outer loop that also runs, outside `loop`, a training loop over data
    (a loop that trains and whose trip count is unknown or above `SHORT_LOOP`)."""
    if not isinstance(loop, cst.For) or trains(model, loop):
        return False
    if not iterates_a_few_literals(model, loop):
        count = trip_count(model, loop)
        if count is None or count > FEW_SAMPLES:
            return False
    outer = model.repeating_loops(loop)
    if not outer:
        return False  # once in the run: GPU405 does not reach it through a loop anyway
    epoch = outer[0]
    for sibling in model.loops_inside(epoch):
        if sibling is epoch or sibling is loop or model.is_inside(sibling, loop) or not isinstance(sibling, cst.For):
            continue
        if model.enclosing_function(sibling) is not model.enclosing_function(loop) or not trains(model, sibling):
            continue
        count = trip_count(model, sibling)
        if count is None or count > SHORT_LOOP:
            return True
    return False
