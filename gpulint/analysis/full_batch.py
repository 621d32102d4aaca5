"""Loops whose every iteration trains on the same data: full-batch training, one step an epoch.

`for epoch in range(1, 1 + epochs): loss = train(model, data, train_idx, optimizer); result = test(...)` with
`train` one forward, backward and optimizer step over tensors already on the GPU and `test` a full evaluation whose
result the host reads (OGB's node-property scripts). The iteration waits for the device at the evaluation's read
anyway; a host read of the step (`return loss.item()`) waits for the step too, and what the host would otherwise do
meanwhile is only launching the evaluation's kernels: there is no batch to load, sample or collate, the inputs are
the same tensors every time. The read costs at most those launches, a sliver of a full-batch step. (Without the
evaluation, the next step's launches are what the read holds up; a loop of fixed-batch steps, a benchmark of a large
model, keeps its reads.)

`same_data_every_step(model, loop)`: `loop` is a `for` over `range(...)` that iterates no loader and whose nested
loops train nothing; it trains, every training call in it is either a step written in the loop or a function of
this module with no loop of its own that steps itself (one step a call) and gives its forwards only its parameters
and the module's tensors; every such call and every module forward in the loop is given only names the loop never
rebinds (`model(data.x, data.adj_t)`, `train(model, x, y, idx, optimizer)`); and every iteration, outside any `if`,
calls a function of this module that runs a module and trains nothing (the evaluation).
A step given a batch made in the loop (`x, y = get_batch()`, `z = torch.randn(...)`), a helper that draws its own
batch (`X, Y = get_batch("train")` inside `train_step()`), a helper with its own loop (an epoch over a loader), a
helper that copies host data to the GPU every call (`labels[idx_train].to(device)` of CPU labels: GCNII), or a
training call into another module (what it does per call is not in sight) keeps the finding.

`waits_every_full_batch_step(model, loop)` (GPU306): the same data every step, and each iteration waits anyway,
at an evaluation's read or at a read of the step itself (`return float(loss)`). A wait added mid-step then costs at
most the launches of the rest of the step (bench/results/cost_facts.md: a read or synchronize every step costs
nothing measurable on launch-bound steps, 2-4 % on GPU-bound ones with no host work to serialize).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.hot_loops import is_training_step, trains

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel


def same_data_every_step(model: SemanticModel, loop: Loop) -> bool:
    return _trains_on_the_same_data(model, loop) and _evaluates_every_epoch(model, loop)  # type: ignore[arg-type]


def waits_every_full_batch_step(model: SemanticModel, loop: Loop) -> bool:
    """`loop` trains on the same data every iteration (as `same_data_every_step`) and every iteration already waits
    for the device: an evaluation whose result the host reads, or a host read of the step itself outside any `if`
    (`return float(loss)` in `train()`, called by name every iteration; `loss.item()` in the loop). A further wait
    in the step (GPU306's `out[data.train_mask]`) then holds up at most the launches of the rest of the step: with
    no batch to make, there is no host work for it to serialize."""
    return _trains_on_the_same_data(model, loop) and (
        _evaluates_every_epoch(model, loop) or _reads_every_step(model, loop)  # type: ignore[arg-type]
    )


def _reads_every_step(model: SemanticModel, loop: cst.For) -> bool:
    """A host read (`.item()`, `float(t)`) runs on every iteration of `loop`: in its body outside any `if`, or in a
    function of this module the body calls by name outside any `if`, outside any `if` there."""
    called = []
    for call in model.calls_inside(loop):
        name = call.func.value if isinstance(call.func, cst.Name) else None
        if name is not None and not model.has_ancestor_below(call, _CONDITIONAL, loop):
            called.extend(model.functions.get(name, ()))
    for sync in model.residency.host_syncs:
        node = sync.node
        if model.is_inside(node, loop):
            if not model.has_ancestor_below(node, _CONDITIONAL, loop) and not _in_inner_loop(model, node, loop):
                return True
            continue
        for function in called:
            if model.is_inside(node, function) and not model.has_ancestor_below(node, _CONDITIONAL, function):
                if not model.loops_inside(function):
                    return True
    return False


def _in_inner_loop(model: SemanticModel, node: cst.CSTNode, loop: Loop) -> bool:
    loops = model.enclosing_loops(node)
    return bool(loops) and loops[0] is not loop


def _trains_on_the_same_data(model: SemanticModel, loop: Loop) -> bool:
    if not isinstance(loop, cst.For) or not _counts(model, loop) or _iterates_a_loader(model, loop):
        return False
    if any(inner is not loop and trains(model, inner) for inner in model.loops_inside(loop)):
        return False  # an inner loop of steps: minibatches
    rebound = rebound_in(model, loop)
    stepped = False
    for call in model.calls_inside(loop):
        if is_training_step(model, call):
            stepped = True
            continue
        if model.residency.is_module(call.func):
            if not _invariant(call, rebound):
                return False  # a forward of data made in the loop
            continue
        if not trains(model, call):
            continue
        name = call.func.value if isinstance(call.func, cst.Name) else None
        functions = model.functions.get(name, ()) if name is not None else ()
        if not functions or any(model.loops_inside(f) for f in functions) or not _invariant(call, rebound):
            return False  # another module's trainer, a helper with its own loop, or a step given a batch made here
        if not all(_steps_here(model, f) and _forwards_given_inputs(model, f) for f in functions):
            return False  # a helper that trains through others, or makes its own batch (`x, y = get_batch()`)
        if any(_copies_to_the_gpu(model, f) for f in functions):
            return False  # its data is not all on the GPU: each step gathers and copies host tensors
        stepped = True
    return stepped


# What may skip a call in some iterations: `if`, `x if c else y`, `try`, `a and f()`.
_CONDITIONAL = (cst.If, cst.IfExp, cst.Try, cst.BooleanOperation)


def _evaluates_every_epoch(model: SemanticModel, loop: cst.For) -> bool:
    """Every iteration, outside any `if`, calls a function of this module that runs a module and trains nothing
    (`result = test(model, x, y_true, split_idx, evaluator)`): an evaluation whose result the host reads anyway."""
    for call in model.calls_inside(loop):
        name = call.func.value if isinstance(call.func, cst.Name) else None
        functions = model.functions.get(name, ()) if name is not None else ()
        if not functions or trains(model, call) or model.has_ancestor_below(call, _CONDITIONAL, loop):
            continue
        if all(any(model.residency.is_module(c.func) for c in model.calls_inside(f)) for f in functions):
            return True
    return False


def _steps_here(model: SemanticModel, function: cst.FunctionDef) -> bool:
    """The function runs the backward pass or the optimizer step itself (not through another function)."""
    return any(is_training_step(model, call) for call in model.calls_inside(function))


def _copies_to_the_gpu(model: SemanticModel, function: cst.FunctionDef) -> bool:
    """The function copies a value not known to be on the GPU to it (`labels[idx_train].to(device)` of CPU labels):
    a host gather and a copy every step, so its data is not the GPU tensors the fact is about."""
    residency = model.residency
    for call in model.calls_inside(function):
        if residency.moves_to_cuda(call) and isinstance(call.func, cst.Attribute):
            if not residency.is_gpu(call.func.value) and not residency.is_module(call.func.value):
                return True
    return False


def _forwards_given_inputs(model: SemanticModel, function: cst.FunctionDef) -> bool:
    """Every module forward in `function` is given only names the function does not bind itself: its parameters
    and the module's tensors (`model(x[train_idx])`, `model(data.x, data.adj_t)`), not a batch it draws."""
    bound = rebound_in(model, function)
    return all(_invariant(call, bound) for call in model.calls_inside(function) if model.residency.is_module(call.func))


def _counts(model: SemanticModel, loop: cst.For) -> bool:
    """`for epoch in range(...)`: the builtin, not a name rebound in the module."""
    it = loop.iter
    return (
        isinstance(it, cst.Call) and isinstance(it.func, cst.Name) and it.func.value == "range"
        and not model.bindings_of("range", it)
    )  # fmt: skip


def _iterates_a_loader(model: SemanticModel, loop: cst.For) -> bool:
    flow = model.loader_flow
    for loader in model.dataloaders:
        for iteration in flow.info(loader).iterations:
            where = iteration.loop if iteration.loop is not None else (iteration.bound_at[0] if iteration.bound_at else None)
            if where is not None and model.is_inside(where, loop):
                return True
    return False


def rebound_in(model: SemanticModel, loop: cst.For | cst.FunctionDef) -> set[str]:
    """Names bound inside the loop (its target included) or the function's body (not its parameters)."""
    names: set[str] = set()

    class Targets(cst.CSTVisitor):
        def _add(self, target: cst.BaseExpression) -> None:
            names.update(names_in(target))

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            self._add(node.target)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            self._add(node.target)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
            self._add(node.target)

        def visit_For(self, node: cst.For) -> None:
            self._add(node.target)

        def visit_AsName(self, node: cst.AsName) -> None:
            self._add(node.name)

        def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
            self._add(node.target)

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is loop  # (a nested function's names are its own)

    loop.visit(Targets())
    return names


def _invariant(call: cst.Call, rebound: set[str]) -> bool:
    """Every name the call's arguments read is one the loop never rebinds."""
    return not any(name in rebound for arg in call.args for name in names_in(arg.value))


def names_in(expr: cst.CSTNode) -> set[str]:
    """The plain names in `expr`: `data` of `data.x` (never the attribute `x`), `x` and `idx` of `x[idx]`."""
    found: set[str] = set()

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False  # the attribute's own name is not a variable

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)
            return False  # (a keyword is not a variable)

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

    expr.visit(Names())
    return found
