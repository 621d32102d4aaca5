"""Data sets a library builds on the device it is given: `OnDeviceDataset(data, device=device)`,
`get_tasksets(name, device=device)` and what they hold (`tasks.dataset`, `splits[0]`).

A library call given `device=` places what it builds there: that is what a device argument to a constructor
means (learn2learn's `OnDeviceDataset` copies every sample to the device when it is built; its task sets hand
the same `device=` to it). When the device may be CUDA (`"cuda"`, `torch.device("cuda")`, or a device chosen at
run time: `device`, `args.device`, as `default_device.py` counts a CUDA default set under a flag), the data set
holds CUDA tensors: DataLoader workers forked from the training process cannot make them ("Cannot re-initialize
CUDA in forked subprocess"), `pin_memory` cannot pin them, and GPU101's advice does not apply
(`dataloaders.produces_cuda_batches`).

Not counted: a device that is certainly the host (`"cpu"`, `torch.device("cpu")`) or another one (`"mps"`),
`device=None`, a call of this module's own function or class (its code is read instead: it may keep the device
for later), and a value taken from such a call through anything but attributes and subscripts (`len(tasks)`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name
from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_MAX_DEPTH = 4


def made_on_given_device(model: SemanticModel, source: cst.BaseExpression) -> Optional[cst.Call]:
    """The library call given a device that may be CUDA which built `source` (the call itself, or a value it
    returned read through attributes and subscripts: `tasks.dataset`, `splits["train"]`); None otherwise."""
    return _built_on_device(model, source, 0)


def _built_on_device(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> Optional[cst.Call]:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Call):
        return expr if _library_call_on_cuda(model, expr) else None
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        expr = expr.value
    if isinstance(expr, cst.Call):
        return _built_on_device(model, expr, depth + 1)
    if not isinstance(expr, cst.Name):
        return None
    writes = model.dataflow.reaching_writes(expr.value, expr)
    if not writes:
        return None
    found = None
    for write in writes:
        value = write.value if write.value is not None else write.source
        if value is None or write.is_augmented:
            return None
        found = _built_on_device(model, value, depth + 1)
        if found is None:
            return None  # every write that reaches the read must build it on the device
    return found


def _library_call_on_cuda(model: SemanticModel, call: cst.Call) -> bool:
    from gpulint.analysis.residency import CPU, OTHER

    name = model.call_name(call)
    if name is None:
        return False  # a method of a value of this module, a local function: its code decides
    if model.local_class_of(name) is not None or name in model.functions or name.startswith("torch.utils.data."):
        return False
    if isinstance(call.func, cst.Name) and call.func.value in model.functions:
        return False
    device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
    if device is None:
        return False
    ok, value = literal_value(device)
    if ok and (value is None or isinstance(value, bool)):
        return False
    if not ok and dotted_name(device) is None and not isinstance(device, (cst.Call, cst.IfExp, cst.Subscript, cst.FormattedString)):
        return False
    kind = model.residency.device_kind(device)
    return kind not in (CPU, OTHER)
