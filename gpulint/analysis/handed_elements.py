"""Values handed in a list or tuple: `train_and_evaluate(rank, epoch, hps, [net_g, net_d], ...)` then
`net_g, net_d = nets` in the callee. For each element of such a parameter, what every call in the project puts
there ("gpu_module", "gpu", ...), recorded as `inputs["train_and_evaluate.nets[0]"]`.

Only when every caller (tests aside) hands a literal list or tuple of the same length: a caller that passes a
name of unknown contents, or another length, leaves every element unknown; an element some caller fills with
something not known to be on the GPU gets "unplaced" beside what the others give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.dataflow import Write
    from gpulint.analysis.model import SemanticModel
    from gpulint.analysis.project import ModuleRecord, ProjectIndex


def handed_elements(index: ProjectIndex, record: ModuleRecord, key: str, param: str) -> dict[str, list[str]]:
    """`{"nets[0]": ["gpu_module"], "nets[1]": ["gpu_module"]}` for `param` of function `key` of `record`."""
    from gpulint.analysis.project import UNPLACED

    f = record.summary.functions.get(key)
    if f is None or param not in f.params:
        return {}
    init = key.endswith(".__init__")
    callers = [c for c in index.callers(record, key.split(".")[0] if init else key) if not index.is_test(c[0])]
    if not callers:
        return {}
    per_element: list[set[str]] | None = None
    for caller, caller_key, at in callers:
        caller_f = caller.summary.functions[caller_key]
        call = caller_f.calls[at]
        position = f.params.index(param) - (1 if f.params[:1] == ("self",) and ("." in call[0] or init) else 0)
        if len(call) > 6 and call[6]:
            return {}  # `f(*args, **kwargs)`: what lands where is not known
        value = call[2][position] if 0 <= position < len(call[2]) else dict(call[3]).get(param)
        resolved = index.value(caller, caller_f, value) if value is not None else None
        if resolved is None or resolved[0] != "tuple":
            return {}
        kinds = [set() if part is None else {"cuda_device" if part[0] == "device" else part[0]} for part in resolved[1]]
        kinds = [k if k & {"gpu_module", "gpu", "cuda_device"} else k | {UNPLACED} for k in kinds]
        if per_element is None:
            per_element = kinds
        elif len(per_element) != len(kinds):
            return {}
        else:
            per_element = [a | b for a, b in zip(per_element, kinds)]
    return {f"{param}[{i}]": sorted(k) for i, k in enumerate(per_element or ()) if k - {UNPLACED}}


def received_part(model: SemanticModel, write: Write) -> frozenset[str]:
    """For `net_g, net_d = nets` with `nets` a parameter of the function (never rebound there): what the
    project's callers put at this target's place of the sequence they hand in; empty when not known."""
    source, position = write.source, write.unpacked_position
    if not isinstance(source, cst.Name):
        return frozenset()
    binders = model.bindings_of(source.value, source)
    if position is None or len(binders) != 1 or not isinstance(binders[0], cst.Param):
        return frozenset()
    func = model.enclosing_function(binders[0])
    if func is None:
        return frozenset()
    owner = model.parent.get(model.parent.get(func))
    key = f"{owner.name.value}.{func.name.value}" if isinstance(owner, cst.ClassDef) else func.name.value
    return frozenset(model.project.receives(key, f"{source.value}[{position}]"))
