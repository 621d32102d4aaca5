"""Loaders handed across modules: `train(model, train_dataloader, ...)` in `finetuning.py` runs the loop of
`utils/train_utils.py`, whose batches are copied to the GPU there (`batch[key] = batch[key].to(local_rank)`).

The project index composes, for each parameter of a module's functions, the loaders every call in the project
passes to it (each as the summary records it: `pin_memory`, `num_workers`, the line of its `DataLoader(...)`),
and hands them to the module's analysis in `ModuleContext.loaders_in`; `loader_flow.received_loaders` follows
the parameter into that function's loops. A parameter counts only when every call passes a known loader, in
sight (no `*args` / `**kwargs` at a call, the function never handed on as a value), so a helper that is also
given a list of tensors, or a loader of unknown kind, says nothing; calls in test modules are left aside.

A call may hand on a parameter of its own function, itself filled with loaders by every call of another module:
`main.py` runs `train(flags, model, train_loader, val_loader)`, whose epoch loop in `runtime/training.py` runs
`evaluate(flags, model, val_loader, ...)` of `runtime/inference.py`; `evaluate` then receives what `main.py` built
(at most `_MAX_HOPS` such hand-ons, each held to the same rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulint.analysis.summary import MODULE_BODY

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

_MAX_HOPS = 3  # parameters a loader is handed on through before it reaches the loop that reads it


def loaders_in(index: ProjectIndex, record: ModuleRecord) -> dict[str, list]:
    """`{"train.train_dataloader": [["finetuning.py:350", {"pin_memory": True, ...}]]}`: for each parameter of
    the module's top-level functions that every call in the project (of another module) fills with a loader."""
    summary = record.summary
    found: dict[str, list] = {}
    for name, f in summary.functions.items():
        if name == MODULE_BODY or "." in name or name in summary.handed:
            continue
        callers = _other_callers(index, record, name)
        if not callers:
            continue
        for param in f.params:
            loaders = _passed_loaders(index, f.params, param, callers)
            if loaders:
                found[f"{name}.{param}"] = loaders
    # `Trainer(model, train_loader, device)` in `main.py`: the constructor's parameter, which loader_flow follows
    # into `self.train_loader` and the methods that iterate it
    for name in summary.classes:
        init = summary.functions.get(f"{name}.__init__")
        if init is None or name in summary.handed or not init.params or name in _subclassed(index).get(id(record), ()):
            continue  # no constructor of its own, handed on as a value, or built through subclasses out of sight
        callers = _other_callers(index, record, name)
        if not callers:
            continue
        positional = init.params[1:]  # `self` is not passed
        for param in positional:
            loaders = _passed_loaders(index, positional, param, callers)
            if loaders:
                found[f"{name}.__init__.{param}"] = loaders
    return found


def _subclassed(index: ProjectIndex) -> dict[int, set]:
    """The project's classes that another project class derives from, by module: (id of the record) -> names."""

    def find() -> dict[int, set]:
        found: dict[int, set] = {}
        for record in index.records.values():
            for info in record.summary.classes.values():
                for base in info.bases:  # `Base`, or `models.base.Base` as imported
                    target = index.symbol(record, base) or index.qualified_symbol(record, base)
                    if target is not None and target[0] == "class":
                        found.setdefault(id(target[1]), set()).add(target[2])
        return found

    return index.computed("subclassed classes", find)


def _other_callers(index: ProjectIndex, record: ModuleRecord, name: str) -> list:
    """The calls of the module's top-level function `name` in the project, when all are in other modules."""
    # a unit test that runs `train(model, mock_loader)` says nothing of what training hands it
    callers = [c for c in index.callers(record, name) if not index.is_test(c[0])]
    if any(caller is record for caller, _, _ in callers):
        return []  # its own module's calls are followed by loader_flow itself
    return callers


def _passed_loaders(index: ProjectIndex, positional: tuple, param: str, callers: list, hops: int = 0) -> list:
    at = positional.index(param)
    loaders: list = []
    for caller, key, position in callers:
        caller_f = caller.summary.functions[key]
        call = caller_f.calls[position]
        if len(call) > 6 and call[6]:
            return []  # `f(*args, **kwargs)`: what lands where is not known
        slot = at if at < len(call[2]) else param
        value = call[2][at] if at < len(call[2]) else call[3].get(param)
        if value is None:
            return []
        own = caller_f.names.get(position, {}).get(slot)
        if own in caller_f.params and value == ("src", f"p:{own}"):  # the caller's own parameter, handed on as it is
            handed = _handed_on(index, caller, key, own, hops)
            if not handed:
                return []
            loaders.extend(entry for entry in handed if entry not in loaders)
            continue
        resolved = index.value(caller, caller_f, value)
        if resolved is None or resolved[0] != "loader" or not isinstance(resolved[1], dict):
            return []
        built = _built_in(index, caller, caller_f, value) or caller
        entry = [f"{built.shown}:{resolved[1].get('line', '?')}", resolved[1]]
        if entry not in loaders:
            loaders.append(entry)
    return loaders


def _handed_on(index: ProjectIndex, record: ModuleRecord, key: str, param: str, hops: int) -> list:
    """The loaders every call of another module hands to `param` of `record`'s top-level function `key`."""
    if hops >= _MAX_HOPS or key == MODULE_BODY or "." in key or key in record.summary.handed:
        return []  # a method, the module body, or a function handed on as a value: its callers are out of sight
    callers = _other_callers(index, record, key)
    if not callers:
        return []
    return _passed_loaders(index, record.summary.functions[key].params, param, callers, hops + 1)


def _built_in(index: ProjectIndex, record: ModuleRecord, f, value, depth: int = 0):
    """The module whose code builds the loader `value` stands for: `data_loading/data_loader.py` for
    `train_loader, val_loader = get_data_loaders(flags)` (the line a loader's facts name is in that module), or
    None when more than one or none is seen."""
    if not isinstance(value, tuple) or depth > _MAX_HOPS:
        return None
    if value[0] == "loader":
        return record
    if value[0] != "src" or "|" in value[1] or not value[1].startswith("c:"):
        return None
    position, _, element = value[1][2:].partition(".")
    target = index.symbol(record, f.calls[int(position)][0])
    if target is None or target[0] != "function":
        return None
    g = target[1].summary.functions.get(target[2])
    found = set()
    for returned in g.returns if g is not None else ():
        if element:
            if not (returned is not None and returned[0] == "tuple" and int(element) < len(returned[1])):
                continue  # the other branch's shape (`return test_loader`): not what this unpacking takes
            returned = returned[1][int(element)]
        built = _built_in(index, target[1], g, returned, depth + 1)
        if built is None:
            return None
        found.add(built)
    return found.pop() if len(found) == 1 else None
