"""GPU408 debug-api-in-training: anomaly detection, the autograd profiler, sync debug mode or
`CUDA_LAUNCH_BLOCKING=1` left on in training code."""

from __future__ import annotations

from typing import Iterator

from gpulint.analysis.debugging import debug_switches
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic
from gpulint.edits import delete_statement

_COST = {
    "autograd anomaly detection": "records a Python traceback for every autograd node of the forward pass and checks "
    "every gradient of the backward pass for NaN, which slows training many times over",
    "CUDA sync debug mode": "checks every CUDA call for a host synchronization and warns (or raises) on each one",
    "`CUDA_LAUNCH_BLOCKING=1`": "makes every kernel launch wait until the kernel has finished, so the CPU can never "
    "queue work ahead of the GPU",
    "the autograd profiler": "records every operator with its inputs, every step",
}


class DebugApiInTraining(Rule):
    code = "GPU408"
    name = "debug-api-in-training"
    summary = "A debugging switch (anomaly detection, autograd profiler, sync debug mode, `CUDA_LAUNCH_BLOCKING=1`) is on in training code"
    fix_applicability = Applicability.UNSAFE
    requires = (r"anomaly|profiler|emit_nvtx|set_sync_debug_mode|CUDA_LAUNCH_BLOCKING",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        for switch in debug_switches(model):
            cost = next(text for what, text in _COST.items() if switch.what.startswith(what))
            message = f"{switch.what} is left on in training code"
            help = f"It {cost}; remove it, or turn it on only under a debug flag (`if args.debug:`)"
            fix = None
            if switch.removable is not None:
                fix = self.fix(f"Remove the line that turns on {switch.what}", [delete_statement(model, switch.removable)], Applicability.UNSAFE)
            yield self.diagnostic(switch.node, message, fix=fix, help=help)
