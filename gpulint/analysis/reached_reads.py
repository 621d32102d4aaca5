"""How many times a project helper called in a step reads the GPU on each call: the syncs a step pays there.

A call of a helper that waits (`Residency._helper_syncs`) names one read, where the helper first syncs. The
helper may read more than once per call: a segmentation metric's `update` reads the labelled and the correct pixel
counts with `.item()` and copies three maps to the host for a CPU histogram (five reads a validation batch); a
loss that reads its token count and its accuracy count (two). Each read drains the queue and leaves the GPU idle
while the host does what comes after it (cost_facts.md, section 1: a read costs the host work it serializes), so
the count is the finding's cost evidence: the syncs per step the call adds.

`reads_per_call` counts the distinct places in the helper (and the helpers it calls, as the project composes them)
that sync on every call: on a value of its own, or on an argument this call gives as a GPU tensor or module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel
    from gpulint.analysis.residency import HostSync


def reads_per_call(model: SemanticModel, sync: HostSync) -> int:
    """The distinct places where the project helper that `sync` (a call of it) runs reads the GPU on each call;
    0 for a sync that is not a helper call."""
    if sync.via is None or not isinstance(sync.node, cst.Call):
        return 0
    callee = model.callee(sync.node)
    if callee is None:
        return 0
    residency = model.residency
    places = {entry[2] for entry in callee.syncs if entry[0] == "sync" and len(entry) > 2}
    for arg, param in model.arguments_to(sync.node, callee):
        effects = [e for e in callee.effects.get(param, ()) if e[0] == "sync" and len(e) > 3]
        if not effects:
            continue
        module = residency.is_gpu_module(arg.value)
        places.update(e[2] for e in effects if module or residency.is_gpu(arg.value, certain=e[3]))
    places.add(sync.via)
    return len(places)
