"""Device facts: does the module use CUDA, which expressions name a CUDA device or produce CUDA values."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.value_resolution import literal_value

# Text every module with GPU context contains. The prefilter skips files without it for the rules that
# need GPU context (Rule.text_requirements), so `module_uses_cuda` must never be true without it.
GPU_CONTEXT_MARKER = "cuda"

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_DEVICE_NAME = re.compile(r"(^|_)device$|^dev$", re.IGNORECASE)  # `DEVICE = "cuda"` constants too


def module_uses_cuda(model: SemanticModel) -> bool:
    """GPU context: `.cuda(...)`, `torch.cuda.*`, or a `"cuda..."` string (`f"cuda:{rank}"` too) anywhere in the module."""
    if GPU_CONTEXT_MARKER not in model.source:
        return False  # keeps the prefilter exact; also the common, cheap answer
    for attr in model.attributes:
        if attr.attr.value == "cuda":
            return True
    for string in model.strings:
        ok, value = literal_value(string)
        if ok and isinstance(value, str) and value.startswith("cuda"):
            return True
    for fstring in model.formatted_strings:
        head = fstring.parts[0] if fstring.parts else None
        if isinstance(head, cst.FormattedStringText) and head.value.startswith("cuda"):
            return True
    return False


def is_cuda_device(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """True for `"cuda"`, `"cuda:0"`, `torch.device("cuda")`, an int ordinal, or a `device`-named variable."""
    ok, value = literal_value(expr)
    if ok:
        return (isinstance(value, str) and value.startswith("cuda")) or (isinstance(value, int) and not isinstance(value, bool))
    if isinstance(expr, cst.Call) and model.call_name(expr) == "torch.device" and expr.args:
        return is_cuda_device(model, expr.args[0].value)
    last = expr.attr.value if isinstance(expr, cst.Attribute) else expr.value if isinstance(expr, cst.Name) else None
    return last is not None and bool(_DEVICE_NAME.search(last))


def moves_to_cuda(model: SemanticModel, call: cst.Call) -> bool:
    """`x.cuda(...)`, `x.to(<cuda device>)`, `x.to(device=<cuda device>)`."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "cuda":
        return True
    if func.attr.value != "to":
        return False
    for arg in call.args:
        if arg.keyword is None or arg.keyword.value == "device":
            return is_cuda_device(model, arg.value)
    return False


def _creates_on_cuda(model: SemanticModel, call: cst.Call) -> bool:
    return any(arg.keyword is not None and arg.keyword.value == "device" and is_cuda_device(model, arg.value) for arg in call.args)


def contains_cuda_move(model: SemanticModel, node: cst.CSTNode) -> bool:
    """Any call under `node` that moves to, or creates on, a CUDA device."""
    for call in model.calls:
        if (moves_to_cuda(model, call) or _creates_on_cuda(model, call)) and model.is_inside(call, node):
            return True
    return False


def is_cuda_value(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """A value that lives on the GPU: a CUDA move/factory, or a name bound once to one."""
    if depth > 4:
        return False
    if isinstance(expr, cst.Call) and (moves_to_cuda(model, expr) or _creates_on_cuda(model, expr)):
        return True
    if isinstance(expr, cst.Name):
        binders = model.bindings_of(expr.value, expr)
        if len(binders) == 1 and isinstance(binders[0], cst.Assign):
            return is_cuda_value(model, binders[0].value, depth + 1)
    return False
