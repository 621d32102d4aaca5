"""Steps that run an autoregressive generation: every iteration already waits on the host, token by token.

A model's `generate(...)` decodes one token at a time and checks its stopping criteria (EOS, max length) on the
host after each, so the iteration that runs it waits for the GPU hundreds of times. RL fine-tuning of language
models (PPO, GRPO, online DPO) generates a rollout every step and then runs a small update:

    for step, batch in enumerate(loader):
        rollout = rollout_engine.rollout(batch["input_ids"])   # its method runs `self.policy.generate(ids)`
        loss = ppo_loss(policy, rollout); loss.backward(); opt.step()
        total += loss.item()                                   # one more wait after hundreds: no stall worth a report

Two sides of one fact:

- project side (`generating_names`): the names of the project's methods whose own body runs `<x>.generate(...)`
  (not of an imported module: `shipname.generate(0)`) outside an `if` that rate-limits it (the summary's
  `generates`). A method call by that name in a step (`rollout_engine.rollout(...)`, whose receiver is a parameter)
  is taken to generate: the name is how a loop that receives its engine from a factory reaches the method. Names
  libraries use for other things (`model.train()`, `dist.sample()`) are not matched.
- module side (`generates_every_iteration`): an unguarded call in the loop's iteration generates: `.generate(...)`
  on a module (`accelerator.unwrap_model(model).generate(ids)`), a call by a generating name, or a function of this
  module that does either, transitively. `generate` of a random source (`torch.Generator`, `np.random.default_rng`)
  is not generation, and a generation under `if step % eval_every == 0:` runs on some iterations only.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel
    from gpulint.analysis.project import ProjectIndex

# Receivers whose `generate` draws random numbers or seeds, not tokens.
_RANDOM_SOURCE = re.compile(r"rng|random|seed|generator|np\.|numpy", re.IGNORECASE)
# Names libraries use for other things (`dist.sample()`, `env.step(a)`): a project method so named is not matched by name.
_LIBRARY_NAMES = frozenset({
    "sample", "step", "forward", "__call__", "run", "apply", "update", "get", "call", "predict", "backward", "train", "eval",
    "test", "evaluate", "validate", "main", "fit", "to", "cuda",
})  # fmt: skip


def generates_text(receiver: ast.AST) -> bool:
    """`receiver.generate(...)` (summary side, `ast`) is a model's generation, not a random source's."""
    return not _RANDOM_SOURCE.search(ast.unparse(receiver))


def generating_names(index: ProjectIndex) -> tuple[str, ...]:
    """The names of the project's methods whose own body runs a model's `generate(...)`."""
    return index.computed("generating names", lambda: _find_generating_names(index))


def _find_generating_names(index: ProjectIndex) -> tuple[str, ...]:
    from gpulint.analysis.summary import MODULE_BODY  # the summary imports `generates_text` from here

    # methods only (`Class.method`): a step reaches them through an instance (`rollout_engine.rollout(...)`)
    found = {
        key.rsplit(".", 1)[-1]
        for record in index.records.values()
        for key, f in record.summary.functions.items()
        if f.generates and "." in key and key != MODULE_BODY
    }
    return tuple(sorted(found))


def generates_every_iteration(model: SemanticModel, loop: Loop, own_body: bool = False) -> bool:
    """Each iteration of `loop` runs a generation (not under a rate-limiting `if`): it waits on the host per token.
    `own_body`: only calls in the loop's own body count, not in a loop inside it (an epoch loop whose evaluation
    pass generates does not make its training loop's steps wait)."""
    residency = model.residency
    for call in model.calls_inside(loop):
        if residency.rate_limit_guard(call, loop) is not None or (own_body and model.enclosing_loops(call)[:1] != [loop]):
            continue
        if _generates(model, call) or any(model.through_calls("generates", f, lambda f: _generates_in(model, f)) for f in model.callees(call)):
            return True
    return False


def generation_bound(model: SemanticModel, loop: Loop) -> bool:
    """`loop`, or a loop of the same function around it in its own body, generates every iteration: a read in it is
    one more wait after the rollout's per-token ones (PPO's minibatch updates in the loop over rollouts)."""
    memo = model.memo("generation-bound")  # asked once per read: answered once per loop
    if loop not in memo:
        memo[loop] = generates_every_iteration(model, loop) or any(
            isinstance(outer, (cst.For, cst.While)) and generates_every_iteration(model, outer, own_body=True) for outer in model.enclosing_loops(loop)
        )
    return memo[loop]


def _generates_in(model: SemanticModel, func: cst.CSTNode) -> bool:
    """A function of this module runs a generation: as in a step, or `<param>.generate(...)` as the summary counts it
    (`def rollout(policy, ids): return policy.generate(ids)`: the policy its callers pass is a model)."""
    return any(_generates(model, call) or _generates_on_argument(model, call, func) for call in model.calls_inside(func))


def _generates_on_argument(model: SemanticModel, call: cst.Call, helper: cst.CSTNode) -> bool:
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "generate") or model.residency.rate_limit_guard(call, helper) is not None:
        return False
    receiver = func.value
    return not _RANDOM_SOURCE.search(model.code(receiver)) and model.imports.resolve(dotted_name(receiver) or "") is None


def _generates(model: SemanticModel, call: cst.Call) -> bool:
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    if name is None:
        return False
    if name == "generate" and isinstance(func, cst.Attribute):
        residency = model.residency
        receiver = func.value
        if residency.is_module(receiver) or (isinstance(receiver, cst.Call) and any(not a.star and residency.is_module(a.value) for a in receiver.args)):
            return True  # `model.generate(ids)`, `accelerator.unwrap_model(model).generate(ids)`
    if isinstance(func, cst.Attribute) and _RANDOM_SOURCE.search(model.code(func.value)):
        return False  # `rng.generate(...)`, `torch.Generator(...).generate`: random numbers, not tokens
    return isinstance(func, cst.Attribute) and name not in _LIBRARY_NAMES and name in model.project.generating
