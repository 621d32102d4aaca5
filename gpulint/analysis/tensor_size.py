"""Tensors the code makes with no elements (`torch.empty(0)`, `torch.zeros(0, d)`, `torch.tensor([])`).

Such a tensor is a start value grown later (`torch.cat([acc, batch])`): moving it copies no bytes and
filling it fills nothing, so advice about where it is made or filled buys nothing.
"""

from __future__ import annotations

import libcst as cst

_SHAPED = frozenset({"empty", "zeros", "ones", "rand", "randn", "full", "FloatTensor", "LongTensor", "Tensor"})
_FROM_DATA = frozenset({"tensor", "as_tensor"})


def makes_empty_tensor(factory: cst.Call, short: str) -> bool:
    """`factory` (a `torch.<short>(...)` call) makes a tensor with no elements: a size of literal 0, or no data."""
    positional = [a.value for a in factory.args if a.keyword is None and not a.star]
    if short in _FROM_DATA:
        return bool(positional) and isinstance(positional[0], (cst.List, cst.Tuple)) and not positional[0].elements
    if short not in _SHAPED:
        return False
    sized = next((a.value for a in factory.args if a.keyword is not None and a.keyword.value == "size"), None)
    dims = positional if sized is None else [sized]
    if short == "full" and sized is None:
        dims = positional[:1]  # `torch.full(size, value)`
    if len(dims) == 1 and isinstance(dims[0], (cst.Tuple, cst.List)):
        dims = [e.value for e in dims[0].elements]
    return any(isinstance(d, cst.Integer) and d.evaluated_value == 0 for d in dims)
