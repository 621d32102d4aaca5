"""Loops whose every iteration steps a collection of environments on the host (reinforcement learning rollouts).

`steps_environments(model, loop)`: each iteration of `loop` steps several environments, one of:

- it steps each environment of a collection it iterates (`for e_idx, e in enumerate(envs): o, r, done, _ =
  e.step(a[e_idx])`, `[e.step(a) for e, a in zip(envs, actions)]`);
- it steps a vectorized environment (`envs.step(actions)` with `envs = gym.vector.make(...)`, `SubprocVecEnv(...)`,
  `DummyVecEnv(...)`, `make_vec_env(...)`, `envpool.make(...)`);
- it iterates what a source built on such environments hands out (ptan's `ExperienceSourceFirstLast(envs, agent)`:
  each transition it yields comes from stepping every environment of the list with the agent's actions).

Such an iteration is bound by the environments: each step of an Atari environment with its frame skip and
preprocessing costs the host about 2 ms (bench/results/cost_facts.md section 9), a batch of 16 or 32 of them tens
of milliseconds, and the agent's actions are read to the host every step anyway (the read that steps them,
`host_reads.steps_an_environment`). A logging read of a scalar in such a loop, or in the training step it runs
once per batch of transitions, waits for a GPU that has been idle while the environments stepped: tens of
microseconds, a share under a few per cent (twenty-second corpus: the Pong policy-gradient loops over 32 and 16
Atari environments, noise for both judges). A loop that steps a single environment is not one: a cheap simulator
steps in microseconds and its reads keep their evidence. Nor is a copy of the model's gradients or parameters in
such a loop left out (`amid_environment_steps`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.hot_loops import assigned_names, wrapper_kind
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.summary import ENVIRONMENT

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel
    from gpulint.analysis.residency import HostSync

# Constructors of vectorized environments: one `step` steps every environment they hold.
_VECTORIZED = re.compile(r"VecEnv|VectorEnv|(^|\.)vector\.make$|make_vec_env|^envpool\.make")
_COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp, cst.SetComp)
_MAX_DEPTH = 3
# How `residency.HostSync.kind` names a copy of a tensor to the host (not a number read from it).
_COPIES = ("`.cpu()`", "`.numpy()`", "`.tolist()`", "`.to(", "`.type()`")
# Builtins given the environments that hand out the environments or numbers, not transitions.
_NOT_SOURCES = frozenset({"range", "len", "iter", "list", "tuple", "reversed", "sorted"})


def steps_environments(model: SemanticModel, loop: Loop) -> bool:
    """Each iteration of `loop` steps a collection of environments (module docstring)."""
    if not isinstance(loop, (cst.For, cst.While)):
        return False
    memo = model.memo("steps environments")
    if id(loop) not in memo:
        memo[id(loop)] = _steps_environments(model, loop)
    return memo[id(loop)]


def _steps_environments(model: SemanticModel, loop: cst.For | cst.While) -> bool:
    if isinstance(loop, cst.For) and _environment_source(model, loop.iter, 0):
        return True
    for call in model.calls_inside(loop.body):
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "step" and call.args):
            continue
        receiver = func.value
        if _environment_collection(model, receiver, vectorized_only=True):
            return True  # `envs.step(actions)` on a vectorized environment
        if isinstance(receiver, cst.Subscript) and ENVIRONMENT.search(dotted_name(receiver.value) or ""):
            return True  # `envs[e_idx].step(a)`: an element of a collection of them
        collection = _iterated_collection(model, receiver, call)
        key = dotted_name(collection) if collection is not None else None
        if key is not None and ENVIRONMENT.search(key):
            return True  # `e.step(a)` for each `e` of `envs`: iterated, so several of them (a parameter too)
    return False


def _environment_source(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> bool:
    """Iterating `expr` hands out transitions of a collection of environments: a call given one (through
    `enumerate`, `tqdm` and the like), or a name bound to such a call."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, cst.Name):
        writes = model.dataflow.reaching_writes(expr.value, expr)
        return bool(writes) and all(w.value is not None and _environment_source(model, w.value, depth + 1) for w in writes)
    if not isinstance(expr, cst.Call):
        return False
    if wrapper_kind(model, expr) is not None:  # `enumerate(exp_source)`, `tqdm(exp_source)`: what it wraps
        return any(not a.star and a.keyword is None and _environment_source(model, a.value, depth + 1) for a in expr.args)
    if (model.call_name(expr) or "") in _NOT_SOURCES:
        return False  # `range(len(envs))`, `iter(envs)`: the environments themselves, or their count
    return any(not a.star and _environment_collection(model, a.value) for a in expr.args)


def _environment_collection(model: SemanticModel, expr: cst.BaseExpression, vectorized_only: bool = False) -> bool:
    """`expr` names environments (`envs`, `self.train_envs`) and is bound to several of them: a list or a list
    comprehension (`[make_env() for _ in range(ENV_COUNT)]`), or a vectorized environment's constructor."""
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return False
    key = dotted_name(expr)
    if key is None or not ENVIRONMENT.search(key):
        return False
    writes = model.dataflow.reaching_writes(key, expr)
    if not writes:
        return False
    for write in writes:
        value = write.value
        if isinstance(value, cst.Call) and _VECTORIZED.search(model.call_name(value) or dotted_name(value.func) or ""):
            continue
        if vectorized_only:
            return False
        if isinstance(value, cst.ListComp) or (isinstance(value, cst.List) and len(value.elements) > 1):
            continue
        return False
    return True


def _iterated_collection(model: SemanticModel, receiver: cst.BaseExpression, call: cst.Call) -> Optional[cst.BaseExpression]:
    """What the name `receiver` is an element of, in the innermost `for` or comprehension around `call` that binds
    it: `envs` for `for e in envs`, `for i, e in enumerate(envs)` and `for e, a in zip(envs, actions)`."""
    if not isinstance(receiver, cst.Name):
        return None
    for ancestor in model.ancestors(call):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(ancestor, cst.For):
            target, iterable = ancestor.target, ancestor.iter
        elif isinstance(ancestor, _COMPREHENSIONS):
            target, iterable = ancestor.for_in.target, ancestor.for_in.iter
        else:
            continue
        found = _element_source(target, iterable, receiver.value)
        if found is not None:
            return found
    return None


def _element_source(target: cst.BaseExpression, iterable: cst.BaseExpression, name: str) -> Optional[cst.BaseExpression]:
    if isinstance(target, cst.Name):
        return iterable if target.value == name else None
    if not (isinstance(target, cst.Tuple) and isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name)):
        return None
    args = [a.value for a in iterable.args if a.keyword is None and not a.star]
    if iterable.func.value == "enumerate" and len(target.elements) == 2 and args:
        pairs = [(target.elements[1].value, args[0])]
    elif iterable.func.value == "zip" and len(target.elements) == len(args):
        pairs = [(element.value, arg) for element, arg in zip(target.elements, args)]
    else:
        return None
    return next((arg for element, arg in pairs if isinstance(element, cst.Name) and element.value == name), None)


def amid_environment_steps(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """The read `sync` runs in an iteration that steps a collection of environments: the step loop `loop`, or a loop
    around it inside `loop` (a rollout loop over time steps within an update), steps them every iteration. Not a
    copy of the model's parameters or gradients (`[p.grad.cpu().numpy() for p in net.parameters()]`): megabytes
    copied, and numpy work on them, cost what they cost whatever the environments take (twenty-second corpus: a
    clear label, ~13 MB of gradients a training step for TensorBoard statistics)."""
    if _copies_parameters(model, sync):
        return False
    if steps_environments(model, loop):
        return True
    for enclosing in model.enclosing_loops(sync.node):
        if enclosing is loop or not model.is_inside(enclosing, loop):
            break
        if steps_environments(model, enclosing):
            return True
    return False


def _copies_parameters(model: SemanticModel, sync: HostSync) -> bool:
    """`sync` copies a tensor to the host (`.cpu()`, `.numpy()`, `.tolist()`, `.to("cpu")`), not a number, and the
    tensor is a parameter's gradient or data, or an element of a module's `parameters()` / `named_parameters()`."""
    if not sync.kind.startswith(_COPIES):
        return False
    code = model.code(sync.value)
    if ".grad" in code or "parameters()" in code or "state_dict()" in code:
        return True
    root = sync.value
    while isinstance(root, (cst.Attribute, cst.Call, cst.Subscript)):
        root = root.func if isinstance(root, cst.Call) else root.value
    if not isinstance(root, cst.Name):
        return False
    for ancestor in model.ancestors(sync.node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.For):
            target, iterable = ancestor.target, ancestor.iter
        elif isinstance(ancestor, _COMPREHENSIONS + (cst.DictComp,)):
            target, iterable = ancestor.for_in.target, ancestor.for_in.iter
        else:
            continue
        if root.value in assigned_names(target):
            return "parameters()" in model.code(iterable) or "state_dict()" in model.code(iterable)
    return False

