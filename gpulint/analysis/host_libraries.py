"""Host libraries handed a GPU tensor: numpy and `math` read it on the host.

`np.isnan(grad_norm)`, `np.mean(losses_t)`: numpy turns its arguments into host arrays, and a tensor becomes one
through `Tensor.__array__`, which calls `.numpy()`: a CUDA tensor refuses (TypeError, "can't convert cuda:0 device
type tensor to numpy"), so the line needs a `.cpu()` copy, a wait for the GPU each time it runs. `math.isnan(loss)`,
`math.sqrt(t)`: `math` converts its argument with `float()` (`Tensor.__float__` is `.item()`), a copy and a wait.
`clip_grad_norm_` returns a GPU tensor since torch 1.5 (before, a Python float it read parameter by parameter).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name
from gpulint.analysis.legacy_torch import written_for_torch_before_0_4

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# The kinds of host reads this module finds (GPU303 names them in its messages).
NUMPY_OF_GPU = "numpy reads a GPU tensor on the host"
MATH_OF_GPU = "`math` reads a GPU tensor with `float()`"


def host_library_read(model: SemanticModel, call: cst.Call) -> Optional[tuple[str, cst.BaseExpression]]:
    """(kind, the GPU tensor) when `call` is a numpy or `math` function given a tensor that is surely on the GPU."""
    name = model.call_name(call) or ""
    library, _, function = name.partition(".")
    if library not in ("numpy", "math") or not function or "." in function:
        return None  # `np.random.seed(...)`, `np.testing...`: submodules take no tensors worth a report
    residency = model.residency
    for arg in call.args:
        if arg.keyword is not None or arg.star or residency.is_module(arg.value):
            continue
        if residency.is_gpu(arg.value, certain=True) or _gpu_grad_norm(model, arg.value):
            return (NUMPY_OF_GPU if library == "numpy" else MATH_OF_GPU), arg.value
    return None


def _gpu_grad_norm(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`grad_norm` bound only to `clip_grad_norm_(model.parameters(), ...)` of a GPU model: a GPU tensor (torch >= 1.5;
    code written for torch before 0.4 gets a float; a pin between 0.4 and 1.5 is not looked at)."""
    key = dotted_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    writes = model.dataflow.reaching_writes(key, expr) if key else []
    if not writes or written_for_torch_before_0_4(model):
        return False
    residency = model.residency
    for write in writes:
        value = write.value
        if not (isinstance(value, cst.Call) and (model.call_name(value) or "").endswith(".clip_grad_norm_") and value.args):
            return False
        if not residency._gpu_parameters(value.args[0].value):
            return False
    return True
