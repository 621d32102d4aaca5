"""Loaders handed across modules: `train(model, train_dataloader, ...)` in `finetuning.py` runs the loop of
`utils/train_utils.py`, whose batches are copied to the GPU there (`batch[key] = batch[key].to(local_rank)`).

The project index composes, for each parameter of a module's functions, the loaders every call in the project
passes to it (each as the summary records it: `pin_memory`, `num_workers`, the line of its `DataLoader(...)`),
and hands them to the module's analysis in `ModuleContext.loaders_in`; `loader_flow.received_loaders` follows
the parameter into that function's loops. A parameter counts only when every call passes a known loader, in
sight (no `*args` / `**kwargs` at a call, the function never handed on as a value), so a helper that is also
given a list of tensors, or a loader of unknown kind, says nothing; calls in test modules are left aside.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulint.analysis.summary import MODULE_BODY

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex


def loaders_in(index: ProjectIndex, record: ModuleRecord) -> dict[str, list]:
    """`{"train.train_dataloader": [["finetuning.py:350", {"pin_memory": True, ...}]]}`: for each parameter of
    the module's top-level functions that every call in the project (of another module) fills with a loader."""
    summary = record.summary
    found: dict[str, list] = {}
    for name, f in summary.functions.items():
        if name == MODULE_BODY or "." in name or name in summary.handed:
            continue
        # a unit test that runs `train(model, mock_loader)` says nothing of what training hands it
        callers = [c for c in index.callers(record, name) if not index.is_test(c[0])]
        if not callers or any(caller is record for caller, _, _ in callers):
            continue  # its own module's calls are followed by loader_flow itself
        for param in f.params:
            loaders = _passed_loaders(index, f.params, param, callers)
            if loaders:
                found[f"{name}.{param}"] = loaders
    return found


def _passed_loaders(index: ProjectIndex, positional: tuple, param: str, callers: list) -> list:
    at = positional.index(param)
    loaders: list = []
    for caller, key, position in callers:
        caller_f = caller.summary.functions[key]
        call = caller_f.calls[position]
        if len(call) > 6 and call[6]:
            return []  # `f(*args, **kwargs)`: what lands where is not known
        value = call[2][at] if at < len(call[2]) else call[3].get(param)
        if value is None:
            return []
        resolved = index.value(caller, caller_f, value)
        if resolved is None or resolved[0] != "loader" or not isinstance(resolved[1], dict):
            return []
        entry = [f"{caller.shown}:{resolved[1].get('line', '?')}", resolved[1]]
        if entry not in loaders:
            loaders.append(entry)
    return loaders
