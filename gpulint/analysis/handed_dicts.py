"""A settings dict handed down to a function's parameter by every call in the module.

    config = {"num_workers": 2, "num_epochs": 5, ...}

    def get_dataflow(config):
        return idist.auto_dataloader(dataset, num_workers=config["num_workers"])   # 2

    def training(local_rank, config):
        train_loader = get_dataflow(config)

    with idist.Parallel(backend=None) as parallel:
        parallel.run(training, config)          # calls training(local_rank, config)

`dict_handed_in(model, param)` is the module-level `config = {...}` assignment when every call of the parameter's
function passes that dict by name for it, directly or through a parameter of another function that is handed it
the same way, or through a launcher that calls the function with the arguments it is given: ignite's
`idist.Parallel(...).run(fn, *args)` (ignite/distributed/launcher.py: `fn(local_rank, *args, **kwargs)`) and
`torch.multiprocessing.spawn(fn, args=(...))` (`fn(i, *args)`). A function handed on any other way (a callback,
a registry) may be called with anything: no answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_MAX_DEPTH = 4
_SPAWNERS = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})
_IGNITE_LAUNCHERS = frozenset({"ignite.distributed.Parallel", "ignite.distributed.launcher.Parallel"})


def dict_handed_in(model: SemanticModel, param: cst.Param, depth: int = 0) -> Optional[cst.Assign]:
    """The module-level `name = {...}` every call in sight passes for `param` (see the module docstring)."""
    func = model.parent.get(model.parent.get(param))
    if depth > _MAX_DEPTH or not isinstance(func, cst.FunctionDef) or model.parent.get(func) is not model.module:
        return None  # a method or a nested function: its calls are not all spelled `name(...)`
    name = func.name.value
    positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    if len(model.functions.get(name, ())) != 1 or param.name.value not in positional:
        return None
    index = positional.index(param.name.value)
    reads = model.dataflow.reads.get(name, [])
    found = set()
    for read in reads:
        call = _arguments_given(model, read)
        if call is None:
            return None  # handed on as a value elsewhere: its other callers are out of sight
        args, offset = call
        given = [a.value for a in args if a.keyword is not None and a.keyword.value == param.name.value]
        plain = [a for a in args if a.keyword is None]
        if not given and any(a.star for a in plain[: index - offset + 1]):
            return None
        if not given and 0 <= index - offset < len(plain):
            given = [plain[index - offset].value]
        if not given or not isinstance(given[0], cst.Name):
            return None
        binders = model.bindings_of(given[0].value, given[0])
        binder = binders[0] if len(binders) == 1 else None
        if isinstance(binder, cst.Param):
            binder = dict_handed_in(model, binder, depth + 1)
        if not _module_dict(model, binder):
            return None
        found.add(binder)
    return found.pop() if len(found) == 1 else None


def _module_dict(model: SemanticModel, binder: Optional[cst.CSTNode]) -> bool:
    return (
        isinstance(binder, cst.Assign) and isinstance(binder.value, cst.Dict) and len(binder.targets) == 1
        and isinstance(binder.targets[0].target, cst.Name) and model.scope_of(binder) is model.module
    )  # fmt: skip


def _arguments_given(model: SemanticModel, read: cst.CSTNode) -> Optional[tuple[list[cst.Arg], int]]:
    """(the arguments the function named at `read` is called with, how many the caller puts before them):
    `fn(a, b)` -> ([a, b], 0); `parallel.run(fn, a)` -> ([a], 1); `mp.spawn(fn, args=(a,))` -> ([a], 1)."""
    parent = model.parent.get(read)
    if isinstance(parent, cst.Call) and parent.func is read:
        return list(parent.args), 0
    if not isinstance(parent, cst.Arg) or parent.keyword is not None or parent.star:
        return None
    call = model.parent.get(parent)
    if not isinstance(call, cst.Call) or call.args[0] is not parent:
        return None
    if model.call_name(call) in _SPAWNERS:
        extra = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "args"), None)
        if extra is None and len(call.args) > 1 and call.args[1].keyword is None:
            extra = call.args[1].value
        if extra is None:
            return [], 1
        if not isinstance(extra, cst.Tuple) or any(isinstance(e, cst.StarredElement) for e in extra.elements):
            return None
        return [cst.Arg(e.value) for e in extra.elements], 1
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "run" and _ignite_launcher(model, func.value):
        return list(call.args[1:]), 1
    return None


def _ignite_launcher(model: SemanticModel, receiver: cst.BaseExpression) -> bool:
    """`idist.Parallel(...)`, or the name a `with idist.Parallel(...) as parallel:` around the call binds."""
    if isinstance(receiver, cst.Call):
        return model.call_name(receiver) in _IGNITE_LAUNCHERS
    if not isinstance(receiver, cst.Name):
        return False
    for ancestor in model.ancestors(receiver):
        if isinstance(ancestor, cst.With):
            for item in ancestor.items:
                target = item.asname.name if item.asname is not None else None
                if isinstance(target, cst.Name) and target.value == receiver.value:
                    return isinstance(item.item, cst.Call) and model.call_name(item.item) in _IGNITE_LAUNCHERS
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            break
    return False
