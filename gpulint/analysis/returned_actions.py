"""Actions returned to an environment loop: a helper of the step (`select_action(state)`) reads the policy's output
back to the host and returns it, and the loop that calls it hands the returned value to an environment's
`step(...)`, directly (`env.step(action)`) or through a function of this module that does (`self.step(action)`,
whose body runs `self.env.step(action)`). A simulator on the host needs the action to produce the next state, which
the next forward reads: the wait is the algorithm's, as for a read that steps the environment in the loop itself
(`host_reads.steps_an_environment`; GPU303 asks both). A loss read a helper returns for logging steps nothing and
stays reported.

The loops that call an agent's method often lie in another module: a base class's `train_episode` runs
`action = self.explore(state)` then `self.env.step(action)` for the `explore` a subclass defines, a script or a
notebook runs `action = model.get_action(obs, eps)` then `env.step(action)` for the `get_action` of
`agents/DQN.py`. The project side (`needed_results`) names the functions and methods a call of which in the
project hands its result to an environment's step or a tensor's size (the summary's "sizes" tag of a call); a
method of that name that returns its read is silent when no loop of its own module calls it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.host_reads import assigned_name
from gpulint.analysis.summary import ENVIRONMENT

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel
    from gpulint.analysis.project import ProjectIndex
    from gpulint.analysis.residency import HostSync


# Names too common to stand for one method across a project (a library's `get`, `run`, `forward`): a call of one
# whose result sizes a tensor says nothing of the project's methods of that name.
_GENERIC_NAMES = frozenset({
    "step", "forward", "__call__", "run", "apply", "update", "get", "call", "backward", "train", "eval", "test",
    "evaluate", "validate", "main", "fit", "to", "cuda", "item", "size", "numel", "len",
})  # fmt: skip


def needed_results(index: ProjectIndex) -> tuple[str, ...]:
    """The names of project functions and methods a call of which, in the project's modules or notebooks, hands
    the result to an environment's `step(...)` or sizes a tensor with it. Calls are matched by name: agents of one
    project share a method name (`get_action` of each DQN variant) while other agents of the same project unpack
    a tuple from theirs (A2C's `values, actions, log_prob = model.get_action(obs)`), so one such call names it."""
    return index.computed("needed results", lambda: _find_needed_results(index))


def _find_needed_results(index: ProjectIndex) -> tuple[str, ...]:
    from gpulint.analysis.summary import MODULE_BODY

    defined = {key.rsplit(".", 1)[-1] for record in index.records.values() for key in record.summary.functions if key != MODULE_BODY}
    needed: dict[str, bool] = {}
    for record in index.records.values():
        for f in record.summary.functions.values():
            for call in f.calls:
                ref = call[0]
                name = ref.rsplit(".", 1)[-1] if isinstance(ref, str) else None
                if name in defined and name not in _GENERIC_NAMES and tuple(call[7:]) == ("sizes",):
                    needed[name] = True
    return tuple(sorted(needed))


def returned_to_an_environment(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """`sync` lies in a per-step function (`loop` is that function, not a loop around the read), its value is what
    the function returns, and every loop of this module that calls the function hands the returned value to an
    environment's step."""
    function = model.enclosing_function(sync.node)
    if function is None or function is not loop or not _returns_the_read(model, sync.node, function):
        return False
    name = function.name.value
    calling = [
        (call, outer) for outer in model.loops for call in model.calls_inside(outer)
        if _calls(call, name) and model.enclosing_function(outer) is model.enclosing_function(call)
    ]  # fmt: skip
    if not calling:  # called from other modules (a base class's episode loop, a script, a notebook)
        return name in model.project.needed_results
    return all(_hands_to_environment(model, call, outer) for call, outer in calling)


def _hands_to_environment(model: SemanticModel, call: cst.Call, loop: Loop) -> bool:
    action = assigned_name(model, call)
    steps = [step for step in model.calls_inside(loop) if step is not call]
    return any(_steps_environment_with(model, step, call, action) for step in steps)


def _calls(call: cst.Call, name: str) -> bool:
    """`self.<name>(...)`, `agent.<name>(...)` or `<name>(...)`."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value == name
    return isinstance(func, cst.Name) and func.value == name


def _returns_the_read(model: SemanticModel, node: cst.CSTNode, function: cst.FunctionDef) -> bool:
    """`return <read>` or `name = <read>` ... `return <host value of name>` in `function`."""
    returns = [r for r in _returns_in(model, function) if r.value is not None]
    if any(model.is_inside(node, r.value) for r in returns):
        return True
    name = assigned_name(model, node)
    return name is not None and any(model.dataflow.reads_in(name, r.value) for r in returns)


def _returns_in(model: SemanticModel, function: cst.FunctionDef) -> list[cst.Return]:
    found: list[cst.Return] = []

    class _Collect(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> Optional[bool]:
            return node is function  # not the returns of nested functions

        def visit_Lambda(self, node: cst.Lambda) -> Optional[bool]:
            return False

        def visit_Return(self, node: cst.Return) -> None:
            found.append(node)

    function.visit(_Collect())
    return found


def _steps_environment_with(model: SemanticModel, step: cst.Call, call: cst.Call, action: Optional[str]) -> bool:
    """`step` is `env.step(...)` or a call of a function that runs one with its parameters, and one of its
    arguments is `call` itself or reads the name `call`'s value was assigned to."""
    flow = model.dataflow
    if not any(model.is_inside(call, arg.value) or (action and flow.reads_in(action, arg.value)) for arg in step.args):
        return False
    if _is_environment_step(model, step):
        return True
    func = step.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    defs = model.functions.get(name, ()) if name else ()
    return bool(defs) and all(_steps_with_parameters(model, d) for d in defs)


def _steps_with_parameters(model: SemanticModel, function: cst.FunctionDef) -> bool:
    """`function` runs `env.step(...)` with one of its own parameters."""
    params = [p.name.value for p in function.params.params if p.name.value != "self"]
    flow = model.dataflow
    return any(
        _is_environment_step(model, c) and any(flow.reads_in(p, a.value) for p in params for a in c.args)
        for c in model.calls_inside(function)
    )  # fmt: skip


def _is_environment_step(model: SemanticModel, call: cst.Call) -> bool:
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "step" and call.args):
        return False
    return bool(ENVIRONMENT.search(model.code(func.value)))
