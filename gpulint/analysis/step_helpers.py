"""Module-level functions that a step loop of the same module calls by name: their body runs once per batch.

    def d_train(x):                                   # <- per-step code, though no loop is around it
        z = create_noise(x.size(0)).to(device)
        ...; d_loss.backward(); d_optimizer.step()

    for epoch in range(n):
        for x, _ in loader:
            d_train(x)                                # unguarded, in a training loop

`step_helper(model, node)` answers (the loop, its role, the helper) for `node` in such a function, when at least
one call of it runs in a step loop on every iteration (not under `if step % N == 0:`). A name defined twice at
module level, or bound locally where it is called, is out of sight. Code under `if self.x is None:` is answered by
`per_step` before this (`analysis/cached_values.py`): made once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.residency import EVAL, TRAIN

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel


def step_helper(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.CSTNode, str, cst.FunctionDef]]:
    func = model.enclosing_function(node)
    if func is None or model.parent.get(func) is not model.module or model.functions.get(func.name.value) != [func]:
        return None
    answers = model.memo("step_helper")
    if func not in answers:
        answers[func] = None  # (a helper that calls itself finds nothing this way)
        answers[func] = _calling_step_loop(model, func)  # type: ignore[assignment]
    found = answers[func]
    return (found[0], found[1], func) if found is not None else None  # type: ignore[index]


def _calling_step_loop(model: SemanticModel, func: cst.FunctionDef) -> Optional[tuple[cst.CSTNode, str]]:
    residency = model.residency
    training = None
    for call in model.calls_of(func.name.value):
        if model.is_inside(call, func) or model.bindings_of(call.func.value, call):
            continue  # a recursive call, or a local name that shadows the function
        loop, role = residency.step_loop(call)
        if role not in (TRAIN, EVAL) or residency.rate_limit_guard(call, loop) is not None:
            continue
        if role == TRAIN:
            return loop, role
        training = training or (loop, role)
    return training
