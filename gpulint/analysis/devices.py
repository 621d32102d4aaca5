"""GPU context: does the module use CUDA at all. (Which expressions name or move to a device: `residency`.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.frameworks import CONTEXT_MARKERS
from gpulint.analysis.value_resolution import literal_value

# Text every module with GPU context contains (`cuda`, or a framework's import). The prefilter skips files
# without it for the rules that need GPU context (Rule.text_requirements), so `module_uses_cuda` must never
# be true without it.
GPU_CONTEXT_MARKER = "|".join(("cuda", *CONTEXT_MARKERS))

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel


def module_uses_cuda(model: SemanticModel) -> bool:
    """GPU context: `.cuda(...)`, `torch.cuda.*`, or a `"cuda..."` string (`f"cuda:{rank}"` too) anywhere in the
    module, or a framework set up to train on the GPU (`frameworks.gpu_context`)."""
    if model.frameworks.gpu_context:
        return True
    if "cuda" not in model.source:
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
