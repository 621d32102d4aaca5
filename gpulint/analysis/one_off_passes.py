"""Evaluation passes that run once as shipped, beside training: a final test pass after the epochs, a feature
extraction, `trainer.test(model, test_loader)`. Each is one pass over its data in a run of many training
passes, so worker start-up and pinning for its loader cost next to nothing in the run (GPU101, GPU102). Its
per-batch reads stay GPU303's: issue 13 asks for the accumulate-on-the-GPU advice in such loops."""

from __future__ import annotations

from pathlib import PurePath
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.evaluation import grad_mode_decided
from gpulint.analysis.hot_loops import PASSTHROUGH_WRAPPERS, trains
from gpulint.analysis.loop_bounds import SHORT_LOOP, runs_once, trip_count
from gpulint.analysis.residency import EPOCH, TRAIN

if TYPE_CHECKING:
    from gpulint.analysis.loader_flow import LoaderInfo
    from gpulint.analysis.model import SemanticModel
    from gpulint.analysis.residency import Loop


def one_off_pass(model: SemanticModel, loop: Loop) -> bool:
    """`loop` is a `for` with autograd off that trains nothing, inside no other loop, in code that runs once
    (module level, a notebook cell, a plain function every call of which in the module sits outside any loop),
    in a module that trains for several epochs in another loop or through a framework's fit."""
    if not isinstance(loop, cst.For) or model.repeating_loops(loop):
        return False  # once per pass of an outer loop: a per-epoch evaluation
    if trains(model, loop) or not (grad_mode_decided(model, loop) or _switches_grad_off_inside(model, loop)):
        return False  # a training loop, or a loop whose gradient mode its callers decide
    return runs_once(model, model.enclosing_function(loop)) and trains_elsewhere(model, loop)


def once_per_training_call(model: SemanticModel, loop: Loop) -> bool:
    """`one_off_pass`, or the same pass run once per call of a function that trains for several epochs itself:
    `loop` is a `for` with autograd off that trains nothing, inside no other loop of its function F, and every call
    of F (`test(...)`, or `self.test(...)` for a method: at least one, none in another module's reach) sits outside
    any loop of a function G that also runs an epoch loop (`for epoch in range(n): for batch in loader: ...`) not
    holding the call: a `train()` that ends with `self._test(model, test_loader)`. However often G runs (a driver
    that fine-tunes once per target), each run makes one test pass beside its epochs (both judges of the sixteenth
    and twentieth corpora: noise)."""
    if one_off_pass(model, loop):
        return True
    if not isinstance(loop, cst.For) or model.repeating_loops(loop):
        return False
    if trains(model, loop) or not (grad_mode_decided(model, loop) or _switches_grad_off_inside(model, loop)):
        return False
    return _called_beside_epochs(model, model.enclosing_function(loop), 0)


def _called_beside_epochs(model: SemanticModel, func: Optional[cst.FunctionDef], depth: int) -> bool:
    """Every call of `func` (by name, or as a method of `self` when `func` is a method) is outside any loop, in a
    function that runs an epoch loop beside it (or whose every call is such, one level up)."""
    if func is None or depth > 2 or model.enclosing_function(func) is not None:
        return False
    name = func.name.value
    if name.startswith("__"):
        return False
    method = any(isinstance(a, cst.ClassDef) for a in model.ancestors(func))
    if method:
        calls = list(model.method_calls(name))
        if any(not (isinstance(c.func, cst.Attribute) and isinstance(c.func.value, cst.Name) and c.func.value.value == "self") for c in calls):
            return False  # called on another object: whoever holds it may call it per step
    else:
        calls = list(model.calls_of(name))
    if not calls:
        return False
    for call in calls:
        caller = model.enclosing_function(call)
        if caller is None or caller is func or model.repeating_loops(call):
            return False
        epochs = any(
            model.is_inside(loop, caller) and not model.is_inside(call, loop) and model.residency.loop_role(loop) == EPOCH
            for loop in model.loops
        )  # fmt: skip
        if not epochs and not _called_beside_epochs(model, caller, depth + 1):
            return False
    return True


def _switches_grad_off_inside(model: SemanticModel, loop: cst.For) -> bool:
    """The loop's own body opens `with torch.no_grad():` (or `inference_mode`) around its work: an evaluation
    that switches autograd off per batch (`for batch in test_loader: with torch.no_grad(): out = model(**batch)`)."""
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    return any(isinstance(s, cst.With) and s.body.body and grad_mode_decided(model, s.body.body[0]) for s in body)


def read_once(model: SemanticModel, info: LoaderInfo) -> bool:
    """Every read of the loader, shipped or not, is such a pass, or a framework's one-off `trainer.test(model, loader)` /
    `.predict` (not per epoch) called outside any loop in code that runs once, beside training."""
    iterations, feeds = model.loader_flow.every_use(info.loader)  # a fit behind a flag off as shipped still trains with it
    if not (iterations or feeds):
        return False
    here = {_place(f"{model.path}:{model.line_of(i.loop)}") for i in iterations if i.loop is not None}
    for feed in feeds:  # the one-off `trainer.test(...)` that runs a test hook takes its batches here, not elsewhere
        if isinstance(feed.node, cst.FunctionDef) and not feed.per_epoch:
            here |= {_place(f"{model.path}:{model.line_of(c)}") for c in model.method_calls(_runner(feed.node))}
    if any(_place(c.where) not in here for c in model.loader_flow.consumed_elsewhere(info)):
        return False  # a loop of another module takes its batches too (this module's own helpers are its iterations)
    for iteration in iterations:
        if iteration.loop is None or not iteration.is_for or not one_off_pass(model, iteration.loop):
            return False
    for feed in feeds:
        call = feed.node
        if isinstance(call, cst.FunctionDef) and not feed.per_epoch and _hook_run_once(model, call):
            continue  # `def test_dataloader(self)`: read by the one `trainer.test(...)` after the fit
        if feed.per_epoch or not isinstance(call, cst.Call) or model.repeating_loops(call):
            return False
        if not runs_once(model, model.enclosing_function(call)) or not trains_elsewhere(model, call):
            return False
    return True


def _hook_run_once(model: SemanticModel, hook: cst.FunctionDef) -> bool:
    """A Lightning `test_dataloader` / `predict_dataloader` hook whose runner, every `.test(...)` /
    `.predict(...)` call of this module (at least one), sits outside any loop in code that runs once, beside
    a fit: each such call reads the loader once."""
    calls = list(model.method_calls(_runner(hook)))
    return bool(calls) and all(
        not model.repeating_loops(c) and runs_once(model, model.enclosing_function(c)) and trains_elsewhere(model, c)
        for c in calls
    )  # fmt: skip


def _runner(hook: cst.FunctionDef) -> str:
    """The Trainer method that runs a loader hook: `test_dataloader` -> `test`."""
    return hook.name.value.split("_")[0]


def _place(where: str) -> str:
    """`file.py:LINE` of a consumption's `path:line` (the project shows paths relative to its root)."""
    path, _, line = where.rpartition(":")
    return f"{PurePath(path).name}:{line}"


def trains_elsewhere(model: SemanticModel, node: cst.CSTNode) -> bool:
    """The module trains for several passes elsewhere: an epoch loop (each iteration runs a training loop,
    `residency.loop_role`) outside `node`, a loop of many counted training steps before it (`_counted_steps_before`),
    or a framework's fit. One pass beside a single training pass (a
    smoke test's `--steps` loop) is no small share of the run."""
    if model.frameworks.drives_training:
        return True
    if any(not model.is_inside(node, loop) and model.residency.loop_role(loop) == EPOCH for loop in model.loops):
        return True
    if _counted_steps_before(model, node):
        return True
    return any(not model.is_inside(node, call) and _trains_for_epochs(model, call) for call in model.calls)


_STEP_COUNTERS = frozenset({"range", "tqdm.trange", "tqdm.auto.trange", "tqdm.notebook.trange", "tqdm.std.trange"})


def _counted_steps_before(model: SemanticModel, node: cst.CSTNode) -> bool:
    """Before `node`, in its function and in no loop of it, a training loop that counts its steps (`for it in
    range(args.iterations): x, y = next(train_iter)`, a `while`) and may run more than `SHORT_LOOP` of them:
    the function trains for a whole run of steps, then reaches `node` once (a final test over 2000 few-shot tasks
    after the meta-training iterations). A loop over a loader is one pass, not a run of many: not counted."""
    function = model.enclosing_function(node)  # (None: the module's own code, a script or a notebook)
    for loop in model.loops:
        if not isinstance(loop, (cst.For, cst.While)) or model.enclosing_function(loop) is not function:
            continue
        if model.is_inside(node, loop) or model.repeating_loops(loop) or not model.dataflow.before(loop, node):
            continue
        if model.residency.loop_role(loop) != TRAIN or not trains(model, loop):
            continue
        if isinstance(loop, cst.For):
            counter = loop.iter
            while isinstance(counter, cst.Call) and model.call_name(counter) in PASSTHROUGH_WRAPPERS and counter.args:
                counter = counter.args[0].value  # `tqdm(range(n))`
            named = model.call_name(counter) if isinstance(counter, cst.Call) else None
            builtin = isinstance(counter, cst.Call) and isinstance(counter.func, cst.Name) and counter.func.value == "range"
            if not (builtin and not model.bindings_of("range", counter)) and named not in _STEP_COUNTERS:
                continue  # a pass over a loader or a list: one pass of training, not a run of steps
        count = trip_count(model, loop)
        if count is None or count > SHORT_LOOP:
            return True
    return False


_EPOCH_COUNTS = frozenset({"epochs", "num_epochs", "n_epochs", "max_epochs", "nb_epochs"})


def _trains_for_epochs(model: SemanticModel, call: cst.Call) -> bool:
    """`train_network(model, loss, loader, epochs=10)`: a project function that trains a whole pass per call (an
    epoch loop of its own, `project.Callee.epoch`), given an epoch count of several, or called in a loop."""
    if not isinstance(call.func, (cst.Name, cst.Attribute)):
        return False
    callee = model.callee(call)
    if callee is None or not callee.trains or not callee.epoch:
        return False
    if model.repeating_loops(call):
        return True
    for arg, param in model.arguments_to(call, callee):
        if param in _EPOCH_COUNTS:
            resolved = model.values.resolve(arg.value)
            value = resolved.value if resolved is not None else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 1:
                return True
    return False
