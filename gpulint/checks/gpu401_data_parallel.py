"""GPU401 data-parallel: `nn.DataParallel` replicates the model and gathers on GPU 0 every step, under the GIL."""

from __future__ import annotations

from typing import Iterator

from gpulint.analysis.hot_loops import is_hot
from gpulint.checks.base import Rule
from gpulint.diagnostics import Diagnostic, Severity


class DataParallel(Rule):
    code = "GPU401"
    name = "data-parallel"
    summary = "`nn.DataParallel` on several GPUs: use `DistributedDataParallel` with `torchrun`"
    requires = (r"DataParallel|data_parallel",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        trains = any(is_hot(model, loop) for loop in model.loops)
        for wrapper in model.data_parallel_calls:
            if not wrapper.several_gpus:
                continue
            message = f"`DataParallel` ({wrapper.why}) runs one process with a thread per GPU"
            help = (
                "It copies the model to every GPU and gathers outputs on GPU 0 each step; use `DistributedDataParallel` "
                "launched with `torchrun` (one process per GPU), which PyTorch recommends even on a single machine"
            )
            # Training pays the gather and the replication every step; inference scripts use it for convenience.
            yield self.diagnostic(wrapper.call, message, severity=Severity.WARNING if trains else Severity.INFO, help=help)
