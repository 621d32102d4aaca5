"""GPU901 no-mixed-precision (preview): a CUDA training script that never uses autocast."""

from __future__ import annotations

from typing import Iterator

from gpulint.analysis.loader_bound import training_waits_on_loaders
from gpulint.analysis.matmul_work import launch_bound_training, small_network_steps
from gpulint.checks.base import Rule
from gpulint.diagnostics import Diagnostic, Severity

AUTOCAST_SINCE = (1, 6)  # torch.cuda.amp (autocast, GradScaler) arrived in torch 1.6


class NoMixedPrecision(Rule):
    code = "GPU901"
    name = "no-mixed-precision"
    summary = "CUDA training in float32 only: no `torch.autocast` in the training script"
    preview = True
    requires = (r"backward|Trainer|TrainingArguments",)
    default_severity = Severity.INFO

    def check(self) -> Iterator[Diagnostic]:
        if self.pinned_below(AUTOCAST_SINCE):
            return  # a project pinned to an older torch has no autocast to turn on
        setup = self.model.training_setup
        if small_network_steps(self.model):
            return  # an ImageNet network on CIFAR-size images: a host-bound step of small kernels
        if training_waits_on_loaders(self.model):
            return  # workers decoding photographs set the pace: a faster step waits for them just the same
        for precision in self.model.frameworks.precision:
            if precision.float32 and not setup.non_float32_parameters:
                message = f"{precision.framework} trains in float32 ({precision.reason})"
                help = (
                    f"Pass {precision.setting} to run the forward pass and the loss under autocast on the Tensor Cores "
                    "and halve activation memory"
                )
                yield self.diagnostic(precision.call, message, help=help)
        if not setup.cuda_training_script or setup.first_backward is None:
            return
        if setup.mixed_precision or setup.non_float32_parameters:
            return  # already mixed or reduced precision, or a framework decides, or float64 on purpose
        if setup.toy_models:
            return  # a few thousand parameters: launch-bound, the Tensor Cores change nothing
        if setup.time_steps:
            return  # each step loops over time steps of small recurrent kernels from Python: launches are its cost
        if launch_bound_training(self.model):
            return  # kernels of a few microseconds: the host's launches set the pace, not the Tensor Cores
        help = (
            'Run the forward pass and the loss under `torch.autocast("cuda", dtype=torch.bfloat16)` (or float16 with '
            '`torch.amp.GradScaler("cuda")`) to use the Tensor Cores and halve activation memory'
        )
        yield self.diagnostic(setup.first_backward, "this script trains on CUDA in float32 only", help=help)
