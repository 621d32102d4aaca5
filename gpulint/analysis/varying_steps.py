"""Training steps whose autograd graph changes from step to step, so the parameters DDP sees unused change too.

Inside a loop that trains, a branch (`if`, or `a if test else b`) that runs a backward pass or calls a module
only from some epoch or step on (`if epoch >= tma_epoch:`, a comparison `<`, `<=`, `>`, `>=` of an enclosing
loop's target) or on random steps (`random.getrandbits(1)`, `np.random.rand() < p`, `torch.rand(1) < p`): the
parameters that get no gradient differ between steps. DDP then needs `find_unused_parameters=True`, and
`static_graph=True`, which assumes the same set on every step, cannot replace it (StyleTTS2's first stage: a
head trained only after `TMA_epoch`, a coin flip between a soft and a hard alignment). Periodic work (`if step
% 100 == 0:`, `if epoch == 0:`) is not such a branch: evaluation and logging, not the step's own graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

import libcst as cst

from gpulint.analysis.hot_loops import trains

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_RANDOM_ROOTS = ("random.", "numpy.random.", "torch.rand", "torch.bernoulli", "torch.multinomial")
_THRESHOLDS = (cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


def varying_step_branch(model: SemanticModel) -> Optional[Union[cst.If, cst.IfExp]]:
    """The first branch of a training loop of this module that makes the step's graph change between steps:
    it runs a backward pass or a module, or computes a loss term (a name the loop's backward pass reads)."""
    for loop in model.loops:
        if not isinstance(loop, cst.For) or not trains(model, loop):
            continue
        losses = _loss_names(model, loop)
        for branch in _branches(loop.body):
            parts = [branch.body] + ([branch.orelse] if branch.orelse is not None else [])
            if not (any(_builds_graph(model, c) for part in parts for c in model.calls_inside(part)) or _assigns(model, branch) & losses):
                continue
            if _varies_per_step(model, branch):
                return branch
    return None


def _branches(node: cst.CSTNode) -> list[Union[cst.If, cst.IfExp]]:
    return _nodes_of(node, (cst.If, cst.IfExp))


def _loss_names(model: SemanticModel, loop: cst.For) -> set[str]:
    """The names a backward pass of `loop` reads, and those their assignments in the loop read (`g_loss = a +
    loss_s2s`, then `accelerator.backward(g_loss)`)."""
    names = {n.value for c in model.calls_inside(loop) if isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward" for n in _names(c)}
    names.discard("backward")
    assigns = [a for a in _statements(loop.body) if isinstance(a, (cst.Assign, cst.AugAssign))]
    for _ in range(3):
        more = set(names)
        for a in assigns:
            targets = [t.target for t in a.targets] if isinstance(a, cst.Assign) else [a.target]
            if any(isinstance(t, cst.Name) and t.value in names for t in targets):
                more.update(n.value for n in _names(a.value))
        if more == names:
            break
        names = more
    return names


def _statements(node: cst.CSTNode) -> list[cst.CSTNode]:
    return _nodes_of(node, (cst.Assign, cst.AugAssign))


def _nodes_of(node: cst.CSTNode, kinds: tuple) -> list:
    """The nodes of `kinds` inside `node`, not inside a nested function, class or lambda (they run elsewhere)."""
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(current, kinds):
            found.append(current)
        stack.extend(current.children)
    return found


def _assigns(model: SemanticModel, branch: Union[cst.If, cst.IfExp]) -> set[str]:
    """The names a branch binds: the assignments in an `if`'s body, the target an `a if t else b` is assigned to."""
    if isinstance(branch, cst.If):
        statements = _statements(branch.body) + (_statements(branch.orelse) if branch.orelse is not None else [])
    else:
        statements = next(([a] for a in model.ancestors(branch) if isinstance(a, (cst.Assign, cst.AugAssign))), [])
    names = set()
    for a in statements:
        targets = [t.target for t in a.targets] if isinstance(a, cst.Assign) else [a.target]
        names.update(t.value for t in targets if isinstance(t, cst.Name))
    return names


def _builds_graph(model: SemanticModel, call: cst.Call) -> bool:
    """A backward pass, or a module run (`model(x)`, `model.forward(x)`)."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "backward":
        return True
    residency = model.residency
    return residency.is_module(func) or isinstance(func, cst.Attribute) and func.attr.value == "forward" and residency.is_module(func.value)


def _varies_per_step(model: SemanticModel, branch: Union[cst.If, cst.IfExp]) -> bool:
    loops = [loop for loop in model.enclosing_loops(branch) if isinstance(loop, cst.For)]
    if not loops or not any(trains(model, loop) for loop in loops):
        return False
    test = branch.test
    if any((model.call_name(c) or "").startswith(_RANDOM_ROOTS) for c in model.calls_inside(test)):
        return True  # `if random.random() < p:`: a random subset of the steps
    targets = {n.value for loop in loops for n in _names(loop.target)}
    comparisons = [test] if isinstance(test, cst.Comparison) else []
    if isinstance(test, cst.BooleanOperation):
        comparisons = [side for side in (test.left, test.right) if isinstance(side, cst.Comparison)]
    for comparison in comparisons:
        if all(isinstance(t.operator, _THRESHOLDS) for t in comparison.comparisons):
            if targets & {n.value for n in _names(comparison)}:
                return True  # `if epoch >= warmup_epochs:`: from some epoch on
    return False


def _names(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            found.append(current)
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)  # `args.epoch` reads no loop target
        else:
            stack.extend(current.children)
    return found
