"""GPU902 no-tf32 (preview): float32 matrix multiplications on CUDA without TF32."""

from __future__ import annotations

from typing import Iterator

from gpulint.analysis.matmul_work import convolutions_only, launch_bound_training
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import add_torch_setting

# Matmuls stopped using TF32 by default, and `torch.set_float32_matmul_precision` appeared, in torch 1.12.
TF32_OFF_SINCE = (1, 12)
STATEMENT = '{torch}.set_float32_matmul_precision("high")'
HELP = (
    'TF32 is off by default for matmuls since torch 1.12; call `torch.set_float32_matmul_precision("high")` '
    "at start-up to use the Tensor Cores of Ampere and newer GPUs"
)


class NoTf32(Rule):
    code = "GPU902"
    name = "no-tf32"
    summary = "CUDA float32 training without TF32 (`torch.set_float32_matmul_precision`)"
    preview = True
    fix_applicability = Applicability.UNSAFE
    requires = (r"backward|step\(|Trainer",)
    project_tags = ("helper-trains",)  # the training step is a project function of another module
    default_severity = Severity.INFO

    def check(self) -> Iterator[Diagnostic]:
        if self.pinned_below(TF32_OFF_SINCE):
            return  # before torch 1.12 matmuls use TF32 by default, and `set_float32_matmul_precision` does not exist
        setup = self.model.training_setup
        if setup.tf32_configured or setup.non_float32_parameters:
            return
        if convolutions_only(self.model):
            return  # cuDNN's convolutions use TF32 by default (`cudnn.allow_tf32`): the setting reaches the head only
        trainers = [p for p in self.model.frameworks.precision if p.float32 and p.leaves_tf32]
        for index, precision in enumerate(trainers):
            # a framework's Trainer on the GPU in float32: it places the model, so a move is rarely in this file
            fix = self._fix() if index == 0 else None  # one setting at start-up serves every Trainer
            message = f"{precision.framework} runs float32 matrix multiplications on CUDA without TF32"
            # the model's own move to CUDA before the framework takes it (not one for inference after training)
            before = [m for m in setup.model_moves if self.model.line_of(m) < self.model.line_of(precision.call)]
            anchor = before[0] if before and index == 0 else precision.call
            if anchor is not precision.call:  # the model's move here, the framework's settings elsewhere
                message = f"{message} (`{self.model.code(precision.call.func)}(...)` at line {self.model.line_of(precision.call)})"
            yield self.diagnostic(anchor, message, fix=fix, help=HELP)
        if trainers or not setup.cuda_training_script or setup.toy_models:
            return  # a toy model: its matmuls are too small for the Tensor Cores to matter
        if setup.time_steps:
            return  # each step loops over time steps of small recurrent kernels from Python: launches are its cost
        if launch_bound_training(self.model):
            return  # kernels of a few microseconds: the host's launches set the pace, not the Tensor Cores
        if setup.engine_half_precision:
            return  # DeepSpeed with an fp16/bf16 config: its matmuls run in half precision, not float32
        message = "float32 matrix multiplications on CUDA run without TF32"
        yield self.diagnostic(setup.model_moves[0], message, fix=self._fix(), help=HELP)

    def _fix(self):
        return self.fix("Enable TF32 matmuls after the imports", [add_torch_setting(self.model, STATEMENT)], Applicability.UNSAFE)

