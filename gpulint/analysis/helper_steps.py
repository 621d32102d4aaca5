"""Module-level helpers a step loop calls: their bodies are per-step code.

Tutorials and research scripts split a step into functions of the same file and call them per batch:

    def d_train(x):                        # <- per-step code, though no loop is around it
        d_loss = loss_fn(disc_model(x.to(device)), real)
        d_loss.backward(); d_optimizer.step()
        return d_loss.item()               # read on the host every step
    for x, _ in loader:
        d_losses.append(d_train(x))

The loop that calls the helper by name, on every iteration (no `if step % N == 0:` around the call), runs its
body once per iteration, so what the body reads on the host is read every step, and is reported at its own line
(the call in the loop then stays quiet: `Residency._helper_syncs`). The role is the calling loop's (a helper
that logs a training loss runs per training step); a helper called from another helper that is per-step code
is per-step code too. Only a `def` at module level that is the one binding of its name counts, called by that
name from one place: a helper several loops share (`compute_accuracy` in the training, validation and test loops)
waits at each of its calls and is reported there (`Residency._helper_syncs`), and a helper called only outside
step loops (once after training) is not per-step code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_TRAIN, _EVAL = "training", "evaluation"  # residency.TRAIN / EVAL (not imported: residency imports this module)


def helper_step(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.FunctionDef, str, int]]:
    """(the module-level function around `node`, the role of the loop that calls it on every iteration, the
    line of that call), or None."""
    func = _top_level_function(model, node)
    if func is None:
        return None
    answers = model.memo("helper_step")
    if func not in answers:
        answers[func] = None  # (also what a helper that calls itself, directly or in a cycle, finds this way)
        answers[func] = _calling_step(model, func)  # type: ignore[assignment]
    return answers[func]  # type: ignore[return-value]


def _top_level_function(model: SemanticModel, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The outermost function around `node` when it is defined at module level (a method or closure: None)."""
    func = None
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            func = ancestor
    if not isinstance(func, cst.FunctionDef) or model.parent.get(func) is not model.module:
        return None
    name = func.name.value
    if model.functions.get(name) != [func] or model.module_bindings(name) not in ([], [func]):
        return None  # another `def` or an assignment binds the name too: which one a call runs is not known
    return func


def _calling_step(model: SemanticModel, func: cst.FunctionDef) -> Optional[tuple[cst.FunctionDef, str, int]]:
    name = func.name.value
    calls = [c for c in model.calls_of(name) if isinstance(c.func, cst.Name) and not model.is_inside(c, func)]
    if len(calls) != 1 or model.bindings_of(name, calls[0]) not in ([], [func]):
        return None  # a helper several loops share (train, validation, test) waits at each call: reported there
    loop, role = model.residency.step_loop(calls[0])
    if role in (_TRAIN, _EVAL) and model.residency.rate_limit_guard(calls[0], loop) is None:
        return func, role, model.line_of(calls[0])
    return None
