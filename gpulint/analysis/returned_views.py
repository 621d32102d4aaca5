"""Results of a project helper that are its own arguments reshaped (`return y_pred.view(-1, n), y_true.view(-1)`).

A helper such as `normalize_sizes(y_pred, y_true)` hands back tensor operations on what it is given: a sync on what
the caller does with its result is a sync on the caller's argument, so the caller's effects follow it through.
"""

from __future__ import annotations

from typing import Any, Optional


def returned_views(returns: Optional[Any], param: str, call_index: int) -> list[str]:
    """The summary sources (`c:3`, `c:3.0`) of call `call_index`'s result that derive from its parameter `param`
    only; `returns` is the callee's agreed return value (`("param", "y_pred")`, or a tuple of such)."""
    if returns is None:
        return []
    if returns == ("param", param):
        return [f"c:{call_index}"]
    if returns[0] == "tuple":
        return [f"c:{call_index}.{k}" for k, part in enumerate(returns[1]) if part == ("param", param)]
    return []
