"""Steps of hundreds of milliseconds or seconds: the module loads a pretrained model of billions of parameters
(`LlavaForConditionalGeneration.from_pretrained("llava-hf/llava-1.5-7b-hf")`, a checkpoint whose name gives its
size, or one loaded in 4 or 8 bits, which only pays for models of billions). Pinning a batch of a few megabytes
saves about a millisecond a step, and starting the workers again once an epoch a second or so an epoch: under 1 %
next to such steps (GPU102, GPU104). Per-item work in the training process (GPU101) and per-step waits (GPU303)
stay reported: they cost per step whatever the model."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# The parameter count in a checkpoint's name: `llava-1.5-7b-hf`, `idefics2-8b`, `paligemma-3b-pt-224`, `Mistral-7B-v0.1`.
_BILLIONS = re.compile(r"(?:^|[-_/.])(\d+(?:\.\d+)?)[bB](?:$|[-_.])")
# Classes whose `from_pretrained` loads no network weights (a tokenizer, a processor, a configuration).
_NOT_A_MODEL = re.compile(r"Tokeni[sz]er|Processor|Config|FeatureExtractor|ImageProcessor", re.IGNORECASE)
_QUANTIZED = frozenset({"load_in_4bit", "load_in_8bit", "quantization_config"})
BILLION = 1.0  # at least a billion parameters: steps of hundreds of milliseconds or more on any GPU


def loads_billion_parameter_model(model: SemanticModel) -> bool:
    """Some `X.from_pretrained(checkpoint, ...)` of a model class loads at least a billion parameters, by its
    checkpoint's name (a literal or a constant of this module) or by a 4/8-bit quantization."""
    memo = model.memo("loads a billion-parameter model")
    if model.module not in memo:
        memo[model.module] = any(_billion_parameter_load(model, call) for call in model.calls)
    return memo[model.module]


def _billion_parameter_load(model: SemanticModel, call: cst.Call) -> bool:
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained" and call.args):
        return False
    owner = model.code(func.value)
    if _NOT_A_MODEL.search(owner):
        return False
    for arg in call.args:
        switched_off = isinstance(arg.value, cst.Name) and arg.value.value in ("False", "None")
        if arg.keyword is not None and arg.keyword.value in _QUANTIZED and not switched_off:
            return True
    first = call.args[0]
    if first.keyword is not None or first.star:
        return False
    resolved = model.values.resolve(first.value)
    name = resolved.value if resolved is not None else None
    if not isinstance(name, str):
        return False
    return any(float(size) >= BILLION for size in _BILLIONS.findall(name.rsplit("/", 1)[-1]))
