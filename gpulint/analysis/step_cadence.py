"""Alternating updates: a `% n` test around a whole training step is the step's cadence, not a logging interval.

GANs train the critic every iteration and the generator every `n_critic` iterations
(`if (i + 1) % self.n_critic == 0:` around the generator's forward, `backward()` and `step()`), and
two-player or multi-task code alternates losses by `step % k`. The guarded block is itself a training step:
what it reads on the host (`G_loss.item()`) is read on every step of that update, a fixed fraction of the
iterations, not once per report. A block that only steps the optimizer (gradient accumulation:
`if (i + 1) % accum == 0: optimizer.step()`) or only logs stays a rate limit: its backward pass runs outside.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel


def runs_own_backward(model: SemanticModel, guard: cst.If) -> bool:
    """The body of `guard` (not its `else`) runs a backward pass itself (`loss.backward()`,
    `scaler.scale(loss).backward()`): each time it passes, a training step of its own runs."""
    return any(
        isinstance(call.func, cst.Attribute) and call.func.attr.value == "backward"
        for call in model.calls_inside(guard.body)
    )  # fmt: skip


def every_step_interval(model: SemanticModel, node: cst.CSTNode, loop: cst.CSTNode) -> Optional[cst.BinaryOperation]:
    """The `iter_num % log_interval` of an `if` between `node` and `loop` whose divisor resolves to 1
    (`log_interval = 1` at module level, an argparse default of 1): the guard reads like a logging interval
    but passes every iteration, so what it guards runs every step."""
    for ancestor in model.ancestors(node):
        if ancestor is loop:
            return None
        if isinstance(ancestor, cst.If) and model.is_inside(node, ancestor.body):
            for modulo in _modulos(ancestor.test):
                resolved = model.values.setting(modulo.right)
                if resolved is not None and type(resolved.value) is int and resolved.value == 1:
                    return modulo
    return None


def _modulos(test: cst.BaseExpression) -> list[cst.BinaryOperation]:
    found: list[cst.BinaryOperation] = []

    class _Scan(cst.CSTVisitor):
        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if isinstance(node.operator, cst.Modulo):
                found.append(node)

    test.visit(_Scan())
    return found
