"""GPU401 data-parallel: `nn.DataParallel` replicates the model and gathers on GPU 0 every step, under the GIL."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from gpulint.analysis.hot_loops import is_hot
from gpulint.analysis.inference_tools import only_runs_inference
from gpulint.analysis.opt_in_switches import opt_in_off
from gpulint.analysis.parallel import ddp_fallback, forwards_single_items
from gpulint.analysis.shipped_paths import never_runs
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
            if not wrapper.several_gpus or never_runs(model, wrapper.call):
                continue  # one GPU, or a switch the code ships off (`if ngpu > 1:` with `ngpu = 0`)
            if opt_in_off(model, wrapper.call) is not None:
                continue  # behind `if self.data_parallel:` that the class leaves off and nothing near turns on
            if forwards_single_items(model, wrapper.call):
                continue  # a predictor fed one image at a time: a batch of one has nothing to split over GPUs
            if ddp_fallback(model, wrapper.call) is not None:
                continue  # the other arm runs one DDP process per GPU when launched distributed: DP is the fallback
            if only_runs_inference(model, wrapper.call):
                continue  # an evaluation or sampling tool: no gradients to all-reduce, DDP is not what it wants
            wrapped = _wrapped_module(wrapper.call)
            if wrapped is not None and model.model_size.is_toy_model(wrapped) and not _has_ddp_path(model):
                continue  # a toy net (a state_dict demo): there is no step worth spreading over GPUs
            message = f"`DataParallel` ({wrapper.why}) runs one process with a thread per GPU"
            help = (
                "It copies the model to every GPU and gathers outputs on GPU 0 each step; use `DistributedDataParallel` "
                "launched with `torchrun` (one process per GPU), which PyTorch recommends even on a single machine"
            )
            # Training pays the gather and the replication every step; inference scripts use it for convenience.
            yield self.diagnostic(wrapper.call, message, severity=Severity.WARNING if trains else Severity.INFO, help=help)


def _wrapped_module(call: cst.Call) -> Optional[cst.BaseExpression]:
    """The module `DataParallel(module, ...)` / `data_parallel(module, inputs, ...)` replicates."""
    keyword = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "module"), None)
    if keyword is not None:
        return keyword
    first = call.args[0] if call.args else None
    return first.value if first is not None and first.keyword is None and not first.star else None


def _has_ddp_path(model) -> bool:
    """The module also wraps a model in `DistributedDataParallel` (`if is_distributed: DDP(model) else: DataParallel(model)`):
    DataParallel is its fallback on one machine of several GPUs, worth reporting whatever the model's size."""
    return any((model.call_name(c) or "").rsplit(".", 1)[-1] == "DistributedDataParallel" for c in model.calls)
