"""Actions returned to an environment loop: a helper of the step (`select_action(state)`) reads the policy's output
back to the host and returns it, and the loop that calls it hands the returned value to an environment's
`step(...)`, directly (`env.step(action)`) or through a function of this module that does (`self.step(action)`,
whose body runs `self.env.step(action)`). A simulator on the host needs the action to produce the next state, which
the next forward reads: the wait is the algorithm's, as for a read that steps the environment in the loop itself
(`host_reads.steps_an_environment`). A loss read a helper returns for logging steps nothing and stays reported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.summary import ENVIRONMENT

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel
    from gpulint.analysis.residency import HostSync


def returned_to_an_environment(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """`sync` lies in a per-step function (`loop` is that function, not a loop around the read), its value is what
    the function returns, and every loop of this module that calls the function hands the returned value to an
    environment's step."""
    function = model.enclosing_function(sync.node)
    if function is None or function is not loop or not _returns_the_read(model, sync.node, function):
        return False
    name = function.name.value
    calling = [(call, l) for l in model.loops for call in model.calls_inside(l) if _calls(call, name) and model.enclosing_function(l) is model.enclosing_function(call)]
    return bool(calling) and all(_hands_to_environment(model, call, l) for call, l in calling)


def _hands_to_environment(model: SemanticModel, call: cst.Call, loop: Loop) -> bool:
    action = _assigned_name(model, call)
    return any(_steps_environment_with(model, step, call, action) for step in model.calls_inside(loop) if step is not call)


def _calls(call: cst.Call, name: str) -> bool:
    """`self.<name>(...)`, `agent.<name>(...)` or `<name>(...)`."""
    func = call.func
    return (isinstance(func, cst.Attribute) and func.attr.value == name) or (isinstance(func, cst.Name) and func.value == name)


def _returns_the_read(model: SemanticModel, node: cst.CSTNode, function: cst.FunctionDef) -> bool:
    """`return <read>` or `name = <read>` ... `return <host value of name>` in `function`."""
    value = _chain_top(model, node)
    parent = model.parent.get(value)
    if isinstance(parent, cst.Return):
        return True
    name = _assigned_name(model, node)
    if name is None:
        return False
    flow = model.dataflow
    returns = [n for n in _returns_in(model, function) if n.value is not None]
    return any(flow.reads_in(name, r.value) for r in returns)


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
    if not any(model.is_inside(call, arg.value) or (action and model.dataflow.reads_in(action, arg.value)) for arg in step.args):
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
    return isinstance(func, cst.Attribute) and func.attr.value == "step" and bool(call.args) and bool(ENVIRONMENT.search(model.code(func.value)))


def _chain_top(model: SemanticModel, node: cst.CSTNode) -> cst.CSTNode:
    """The whole of `x.cpu().numpy()[0]` from the node of its read."""
    value = node
    while True:
        parent = model.parent.get(value)
        if isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is value:
            value = parent
        elif isinstance(parent, cst.Call) and parent.func is value:
            value = parent
        else:
            return value


def _assigned_name(model: SemanticModel, node: cst.CSTNode) -> Optional[str]:
    """`v` in `v = <node...>`."""
    value = _chain_top(model, node)
    assignment = model.parent.get(value)
    if isinstance(assignment, cst.Assign) and assignment.value is value and len(assignment.targets) == 1:
        target = assignment.targets[0].target
        return target.value if isinstance(target, cst.Name) else None
    return None
