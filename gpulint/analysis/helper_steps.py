"""Module-level helpers a step loop calls: their bodies are per-step code.

Tutorials and research scripts split a step into functions of the same file and call them per batch:

    def d_train(x):                        # <- per-step code, though no loop is around it
        z = create_noise(x.size(0)).to(device)
        d_loss = loss_fn(disc_model(x.to(device)), real)
        d_loss.backward(); d_optimizer.step()
        return d_loss.item()               # read on the host every step
    for x, _ in loader:
        d_losses.append(d_train(x))

A call by name in a step loop, on every iteration (no `if step % N == 0:` around it), runs the body once per
iteration; a helper called from another helper that is per-step code is per-step code too. Only a `def` at module
level that is the one binding of its name counts (a closure or method inside it is not), and a name bound locally
where it is called is out of sight. Two views of that one fact:

- `helper_step`: the helper's only call runs per step, so its host reads wait every step and are reported at their
  own line (the call in the loop then stays quiet: `Residency._per_step_helper`). A helper several loops share
  (`compute_accuracy` in the training, validation and test loops) waits at each call and is reported there.
- `step_helper`: at least one call runs per step (a training call before an evaluation one), so a CPU tensor its
  body makes and moves is made every step (GPU201/GPU202, through `step_code.per_step`). Code under
  `if self.x is None:` is answered by `per_step` before this (`analysis/cached_values.py`): made once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional

import libcst as cst

from gpulint.analysis.first_iterations import first_few_iterations

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_TRAIN, _EVAL = "training", "evaluation"  # residency.TRAIN / EVAL (not imported: residency imports this module)


class _Calls(NamedTuple):
    count: int  # calls of the helper by its name, outside its own body
    per_step: list[tuple[cst.Call, cst.CSTNode, str]]  # (call, loop, role) of those that run on every iteration


def _only_call_per_step(
    model: SemanticModel, func: Optional[cst.FunctionDef], calls: Optional[_Calls]
) -> Optional[tuple[cst.FunctionDef, str, int]]:
    """(`func`, the role of its only call's loop, that call's line) when its one call runs on every iteration."""
    if calls is None or calls.count != 1 or not calls.per_step:
        return None
    call, _, role = calls.per_step[0]
    return func, role, model.line_of(call)  # type: ignore[return-value]


def helper_step(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.FunctionDef, str, int]]:
    """(the module-level function around `node`, the role of the loop of its only call, the line of that call)
    when that call runs on every iteration of a step loop, or None."""
    func = _helper_around(model, node)
    return _only_call_per_step(model, func, _calls(model, func) if func is not None else None)


def helper_step_call(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.FunctionDef, cst.Call, cst.CSTNode, str]]:
    """`helper_step`'s answer with the call itself: (the function, its only call, that call's step loop, its role)."""
    func = _helper_around(model, node)
    calls = _calls(model, func) if func is not None else None
    if _only_call_per_step(model, func, calls) is None:
        return None
    call, loop, role = calls.per_step[0]  # type: ignore[union-attr]
    return func, call, loop, role  # type: ignore[return-value]


def step_helper(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.CSTNode, str, cst.FunctionDef]]:
    """(the step loop, its role, the module-level function around `node`) when at least one call of the function
    runs on every iteration of a step loop (a training loop before an evaluation one), or None."""
    func = _helper_around(model, node)
    calls = _calls(model, func) if func is not None else None
    if calls is None or not calls.per_step:
        return None
    _, loop, role = next((c for c in calls.per_step if c[2] == _TRAIN), calls.per_step[0])
    return loop, role, func  # type: ignore[return-value]


def _helper_around(model: SemanticModel, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The function around `node` when it is a `def` at module level that is the one binding of its name."""
    func = next((a for a in model.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef))), None)
    if not isinstance(func, cst.FunctionDef) or model.parent.get(func) is not model.module:
        return None
    name = func.name.value
    if model.functions.get(name) != [func] or model.module_bindings(name) not in ([], [func]):
        return None  # another `def` or an assignment binds the name too: which one a call runs is not known
    return func


def _calls(model: SemanticModel, func: cst.FunctionDef) -> Optional[_Calls]:
    answers = model.memo("helper_step_calls")
    if func not in answers:
        answers[func] = None  # (also what a helper that calls itself, directly or in a cycle, finds this way)
        answers[func] = _find_calls(model, func)
    return answers[func]  # type: ignore[return-value]


def _find_calls(model: SemanticModel, func: cst.FunctionDef) -> _Calls:
    name = func.name.value
    calls = [c for c in model.calls_of(name) if isinstance(c.func, cst.Name) and not model.is_inside(c, func)]
    calls = [c for c in calls if model.bindings_of(name, c) in ([], [func])]  # a local name shadowing it is not it
    from gpulint.analysis.shipped_paths import never_runs  # (it reads settings through modules that import this one)

    calls = [c for c in calls if not never_runs(model, c)]  # `if False: train(...)`: a call that never runs is no call
    per_step = []
    for call in calls:
        loop, role = model.residency.step_loop(call)
        if role not in (_TRAIN, _EVAL) or model.residency.rate_limit_guard(call, loop) is not None:
            continue
        if first_few_iterations(model, call, loop) is not None:
            continue  # `if logged < 10: log_batch(...)`: called on the first few iterations only
        if isinstance(loop, (cst.FunctionDef, cst.Lambda)) and not _is_helper_step(model, loop):
            continue  # called from a model's forward or a framework's step: those say how often it runs
        per_step.append((call, loop, role))
    return _Calls(len(calls), per_step)


def calling_loop(model: SemanticModel, loop: cst.CSTNode) -> cst.CSTNode:
    """The loop whose iterations run `loop`'s body: for a helper `helper_step` answers for (also one called by
    such a helper), the step loop of its only call; otherwise `loop` itself."""
    seen = set()
    while isinstance(loop, cst.FunctionDef) and loop not in seen:
        seen.add(loop)
        found = helper_step(model, loop.body)
        if found is None or found[0] is not loop:
            break
        loop = _calls(model, loop).per_step[0][1]  # type: ignore[union-attr]
    return loop


def _is_helper_step(model: SemanticModel, func: cst.CSTNode) -> bool:
    found = helper_step(model, func.body) if isinstance(func, cst.FunctionDef) else None
    return found is not None and found[0] is func


def called_helper(model: SemanticModel, call: cst.Call) -> Optional[cst.FunctionDef]:
    """The module-level function `call` runs by name when `helper_step` answers for it: its waits are reported at
    their own lines, so the call stays quiet."""
    func = call.func
    functions = model.functions.get(func.value, []) if isinstance(func, cst.Name) else []
    if len(functions) != 1 or helper_step(model, functions[0].body) is None:
        return None
    return functions[0]


# ---- methods a step loop of their class calls on `self` --------------------------------------------------------
#
# A trainer class splits an epoch into methods: `_eval_epoch` iterates the dev loader and calls
# `self._eval_step(batch)` per batch (ParallelWaveGAN's Trainer). The project's `stepped` methods answer for
# training loops; `method_step` answers for the method that a loop of another method of its class calls on `self`,
# once, on every iteration (no `if self.steps % N == 0:` around the call): per-step code with that loop's role.


def method_step(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.FunctionDef, str, int]]:
    """(the method around `node`, the role of the loop of its only `self.<name>(...)` call, the line of that call)
    when that call runs on every iteration of a step loop in another method of the class, or None."""
    func = _method_around(model, node)
    return _only_call_per_step(model, func, _method_calls(model, func) if func is not None else None)


def step_method(model: SemanticModel, call: cst.Call) -> Optional[cst.FunctionDef]:
    """The method of this class that `call` (`self.<name>(...)`) runs: the one `def` of that name in the class
    around the call, not a dunder, without loops of its own (one step, not a whole pass), or None."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return None
    name = func.attr.value
    cls = next((a for a in model.ancestors(call) if isinstance(a, cst.ClassDef)), None)
    if cls is None or name.startswith("__"):
        return None
    defs = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name]
    if len(defs) != 1 or any(True for _ in model.loops_inside(defs[0])):
        return None
    return defs[0]


def _method_around(model: SemanticModel, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    func = next((a for a in model.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef))), None)
    if not isinstance(func, cst.FunctionDef) or func.name.value.startswith("__"):
        return None
    cls = model.parent.get(model.parent.get(func))
    if not isinstance(cls, cst.ClassDef):
        return None
    defs = [s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == func.name.value]
    return func if defs == [func] else None


def _method_calls(model: SemanticModel, func: cst.FunctionDef) -> Optional[_Calls]:
    answers = model.memo("method_step_calls")
    if func not in answers:
        answers[func] = None  # (a method that calls itself, directly or in a cycle)
        answers[func] = _find_method_calls(model, func)
    return answers[func]  # type: ignore[return-value]


def _find_method_calls(model: SemanticModel, func: cst.FunctionDef) -> _Calls:
    cls = model.parent.get(model.parent.get(func))
    name = func.name.value
    calls = [
        c for c in model.calls_inside(cls)
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == name and isinstance(c.func.value, cst.Name)
        and c.func.value.value == "self" and not model.is_inside(c, func)
    ]  # fmt: skip
    per_step = []
    for call in calls:
        loop, role = model.residency.step_loop(call)
        if role not in (_TRAIN, _EVAL) or not isinstance(loop, (cst.For, cst.While)):
            continue  # (a method the project's `stepped` answers for, or a framework's step: those say how often)
        if model.residency.rate_limit_guard(call, loop) is not None:
            continue
        per_step.append((call, loop, role))
    return _Calls(len(calls), per_step)
