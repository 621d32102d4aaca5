"""Small batches that are the memory limit, not GPU underuse (GPU103).

A batch size counts samples; what keeps the GPU busy is the work per step. Two facts of the code say that a small
count is already a full step:

- `pretrained_from_config(model)`: the module builds its model from a config file (a call given a `.yaml` / `.yml`
  path, `create_model('./models/cldm_v15.yaml')`, the latent-diffusion and ControlNet codebases'
  `instantiate_from_config` recipes) and loads a checkpoint file into it (`model.load_state_dict(load(path))` with a
  `.ckpt` / `.safetensors` / `.pt` / `.pth` / `.bin` path): a pretrained network of the size its config describes,
  like `X.from_pretrained(...)` (which GPU103 already leaves alone). Fine-tuning such a model (Stable Diffusion with a
  ControlNet, ~1.2 B parameters, at batch 4 of 512 px images) fills the GPU's memory at the batch it ships.
- `tokens_per_batch(model, batch)`: the module sets a training sequence length (a command-line default or a
  constant named `ctx_len`, `seq_len`, `block_size`, `context_length`, ...) of at least `LONG_SEQUENCE` tokens: each
  sample is a sequence, and every matmul of the step has batch x length rows. At `TOKEN_ROWS` rows or more
  (RWKV's `--micro_bsz 12` of `--ctx_len 1024`: 12,288 tokens a step) the kernels are large, not launch-bound.

Small models at small batches of small samples (a custom image folder at batch 8, MNIST at 4) keep GPU103: no
checkpoint built from a config, no sequence length, or sequences short enough that batch x length stays small.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Names of a training sequence length (a command-line option's dest or a module constant, any case).
SEQUENCE_LENGTHS = frozenset({"ctx_len", "context_length", "context_len", "seq_len", "seq_length", "sequence_length",
                              "max_seq_len", "max_seq_length", "block_size", "n_ctx", "n_positions"})  # fmt: skip
LONG_SEQUENCE = 256  # tokens a sample, at least
TOKEN_ROWS = 4096  # batch x length: rows of every matmul of the step
_CONFIG = re.compile(r"\.ya?ml$")
_CHECKPOINT = re.compile(r"\.(ckpt|safetensors|pt|pth|bin)$")


def fills_the_gpu(model: SemanticModel, batch: int) -> bool:
    return pretrained_from_config(model) or tokens_per_batch(model, batch) >= TOKEN_ROWS


def tokens_per_batch(model: SemanticModel, batch: int) -> int:
    length = sequence_length(model)
    return batch * length if length is not None and length >= LONG_SEQUENCE else 0


def sequence_length(model: SemanticModel) -> Optional[int]:
    """The shortest sequence length the module sets as shipped (an `add_argument("--ctx_len", default=1024)` or a
    module-level `BLOCK_SIZE = 256`), None when it sets none."""
    found: list[int] = []
    for dest, options in model.values.argparse_options.items():
        if dest.lower() not in SEQUENCE_LENGTHS:
            continue
        for option in options:
            default = option.keyword("default")
            ok, value = literal_value(default.value) if default is not None else (False, None)
            if not ok or not isinstance(value, int) or isinstance(value, bool):
                return None  # a length not known as shipped
            found.append(value)
    for statement in model.module.body:
        for line in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            if isinstance(line, cst.Assign) and len(line.targets) == 1 and isinstance(line.targets[0].target, cst.Name):
                if line.targets[0].target.value.lower() in SEQUENCE_LENGTHS:
                    ok, value = literal_value(line.value)
                    if ok and isinstance(value, int) and not isinstance(value, bool):
                        found.append(value)
    return min(found) if found else None


def pretrained_from_config(model: SemanticModel) -> bool:
    memo = model.memo("builds a pretrained model from a config file")
    if model.module not in memo:
        memo[model.module] = any(_loads_checkpoint_into_config_model(model, call) for call in model.method_calls("load_state_dict"))
    return memo[model.module]


def _loads_checkpoint_into_config_model(model: SemanticModel, call: cst.Call) -> bool:
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    if not isinstance(receiver, cst.Name) or not call.args:
        return False
    if not any(_path_arguments(model, inner, _CHECKPOINT) for inner in model.calls_inside(call.args[0].value)):
        return False  # `model.load_state_dict(state)` of a state not read from a checkpoint file here
    bindings = model.bindings_of(receiver.value, call)
    values = [b.value for b in bindings if isinstance(b, cst.Assign)]
    return bool(values) and len(values) == len(bindings) and all(
        any(_path_arguments(model, inner, _CONFIG) for inner in model.calls_inside(value)) for value in values
    )


def _path_arguments(model: SemanticModel, call: cst.Call, suffix: re.Pattern) -> bool:
    for arg in call.args:
        if arg.keyword is not None or arg.star:
            continue
        resolved = model.values.resolve(arg.value)
        if resolved is not None and isinstance(resolved.value, str) and suffix.search(resolved.value):
            return True
    return False
