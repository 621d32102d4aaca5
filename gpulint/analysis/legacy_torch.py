"""Code written for PyTorch before 0.4, where `Variable(x, volatile=True)` was how inference switched autograd off.

PyTorch 0.4 renamed the copy flag `async=` to `non_blocking=` (Python 3.7 then made `async` a keyword) and made
`volatile` a no-op in favour of `torch.no_grad()`. A module that passes `async=` to a copy is written for the
PyTorch before that, so its volatile inputs record no graph; a module on 0.4 APIs that still writes
`volatile=True` runs with autograd on (a warning says so), and stays reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_COPIES = frozenset({"cuda", "to", "cpu", "type"})
_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})


def written_for_torch_before_0_4(model: SemanticModel) -> bool:
    """The module copies with `async=` (`x.cuda(async=True)`): PyTorch 0.3's spelling of `non_blocking`."""
    memo = model.memo("written for PyTorch before 0.4")
    if model.module not in memo:
        memo[model.module] = any(
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value in _COPIES
            and any(a.keyword is not None and a.keyword.value == "async" for a in call.args)
            for call in model.calls
        )
    return memo[model.module]


def volatile_inputs(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`node` wraps values in `Variable(..., volatile=True)`, and the module is written for PyTorch before 0.4:
    what is computed from them records no graph there."""
    if not written_for_torch_before_0_4(model):
        return False
    for call in model.calls_inside(node):
        if model.call_name(call) not in _VARIABLE:
            continue
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "volatile" and literal_value(arg.value) == (True, True):
                return True
    return False
