"""Module-level functions whose result the project only runs for inference.

`load_patched_inception_v3()` of an FID module builds an Inception network, wraps it in `DataParallel`, puts it
in eval mode and returns it; each script that calls it hands the network to `extract_inception_features(...)`
(a `no_grad` feature extractor) and trains nothing. What such a function returns is an inference model in this
project: every call of it is in a function that trains nothing (no loop running a backward pass or an optimizer
step there, no project function it calls that trains), and the result goes nowhere but into project functions that train nothing.
A result handed to code out of sight (`trainer.fit(model)`), returned on, stored, or never used says nothing.

`inference_results(index, record)`: the names of `record`'s module-level functions that the project calls, each
call so (methods are called through instances, whose calls are not all in sight: never listed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex


def inference_results(index: ProjectIndex, record: ModuleRecord) -> list[str]:
    found = []
    for name in record.summary.functions:
        if "." in name or name.startswith("<"):
            continue  # methods and the module body
        callers = index.direct_callers(record, name)
        if callers and all(_only_inference(index, caller, key, position) for caller, key, position in callers):
            found.append(name)
    return found


def _only_inference(index: ProjectIndex, record: ModuleRecord, key: str, position: int) -> bool:
    """The call at `position` of `record`'s function `key` is in code that trains nothing, and its result is only
    handed to project functions that train nothing."""
    f = record.summary.functions.get(key)
    if f is None or any(loop[1] for loop in f.loops) or any(_trains(index, record, call) for call in f.calls):
        return False  # a loop that runs a training step, or a project function that trains
    # (`f.trains` alone is not asked: it also holds for any call handed a name like an optimizer's, and the options
    # dict of many projects is `opt`, as in `create_dataset(opt)`; a training step outside any loop trains nothing
    # worth spreading over GPUs)
    effects = f.effects.get(f"c:{position}", ())
    if not effects:
        return False  # not used, or used out of sight: who runs it is not known
    for effect in effects:
        if effect[0] != "pass" or not 0 <= effect[1] < len(f.calls):
            return False
        callee = index.callee(record, f.calls[effect[1]][0])
        if callee is None or callee.kind != "function" or callee.trains:
            return False
    return True


def _trains(index: ProjectIndex, record: ModuleRecord, call: tuple) -> bool:
    callee = index.callee(record, call[0])
    return callee is not None and callee.trains
