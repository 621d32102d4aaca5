"""Per-step methods that report their own syncs: which calls of another module leave them to the method.

A loss or model class of one module whose method a training loop of another module runs every step
(`ProjectIndex.stepped_methods`: `losses = Loss(batch, output)` runs `FastSpeech2Loss.forward`) takes the
residency of its parameters from the project's calls (`residency._received_tensor_level`), so the method's own
module reports the `masked_select` / `.item()` inside it, at its line, with the loop named. The call in the loop
would report the same op again through the helper's effects (`Residency._helper_syncs`); this tells it which
parameters the method covers, and how surely: the call then stays quiet for those (one finding per statement).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex


def reported_in_callee(index: ProjectIndex, record: ModuleRecord, refs: list[str]) -> dict[str, dict[str, str]]:
    """For each call reference of `record` that runs a per-step method of another module: its parameters the
    project's calls fill with a GPU tensor -> what they receive ("gpu" alone: every call; "gpu+": some)."""
    from gpulint.analysis.residency import received_tensor_level  # (residency imports the project's names)

    found: dict[str, dict[str, str]] = {}
    for ref in refs:
        target = index.symbol(record, ref)
        if target is None or target[0] != "function" or target[1] is record or "." not in target[2]:
            continue
        callee_record, key = target[1], target[2]
        if key not in index.stepped_of(callee_record):
            continue
        params = {}
        for param in callee_record.summary.functions[key].params:
            level = received_tensor_level(index.inputs(callee_record, key, param))
            if level:
                params[param] = "certain" if level > 1 else "likely"
        if params:
            found[ref] = params
    return found
