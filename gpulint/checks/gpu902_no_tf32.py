"""GPU902 no-tf32 (preview): float32 matrix multiplications on CUDA without TF32."""

from __future__ import annotations

from typing import Iterator

from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import add_torch_setting

STATEMENT = '{torch}.set_float32_matmul_precision("high")'


class NoTf32(Rule):
    code = "GPU902"
    name = "no-tf32"
    summary = "CUDA float32 training without TF32 (`torch.set_float32_matmul_precision`)"
    preview = True
    fix_applicability = Applicability.UNSAFE
    requires = (r"backward|step\(",)
    default_severity = Severity.INFO

    def check(self) -> Iterator[Diagnostic]:
        setup = self.model.training_setup
        if not setup.cuda_training_script or setup.tf32_configured or setup.non_float32_parameters or setup.toy_models:
            return  # a toy model: its matmuls are too small for the Tensor Cores to matter
        if setup.engine_half_precision:
            return  # DeepSpeed with an fp16/bf16 config: its matmuls run in half precision, not float32
        message = "float32 matrix multiplications on CUDA run without TF32"
        help = (
            'TF32 is off by default for matmuls since torch 1.12; call `torch.set_float32_matmul_precision("high")` '
            "at start-up to use the Tensor Cores of Ampere and newer GPUs"
        )
        edit = add_torch_setting(self.model, STATEMENT)
        fix = self.fix("Enable TF32 matmuls after the imports", [edit], Applicability.UNSAFE)
        yield self.diagnostic(setup.model_moves[0], message, fix=fix, help=help)

