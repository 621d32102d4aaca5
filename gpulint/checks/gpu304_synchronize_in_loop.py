"""GPU304 synchronize-in-loop: `torch.cuda.synchronize()` every training step, outside timing code."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.communication import guards_communication
from gpulint.analysis.helper_steps import called_helper
from gpulint.analysis.helper_waits import calls_named, fold_into_helpers
from gpulint.analysis.residency import CPU, TRAIN, HostSync
from gpulint.analysis.streams import CURRENT_STREAM
from gpulint.checks.base import Rule
from gpulint.diagnostics import Diagnostic

SYNCHRONIZE = "torch.cuda.synchronize"


class SynchronizeInLoop(Rule):
    code = "GPU304"
    name = "synchronize-in-loop"
    summary = "`torch.cuda.synchronize()` every step of a training loop, outside timing code"
    requires = (r"synchronize",)
    project_tags = ("helper-syncs",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        residency = model.residency
        accepted = []
        for call in model.calls:
            via = None if self._is_device_sync(call) else self._helper_sync(call)
            if via is None and not self._is_device_sync(call):
                continue
            if via is not None and called_helper(model, call) is not None:
                continue  # a per-step helper of this module: its own line reports the synchronize
            loop, role = residency.step_loop(call)
            if role != TRAIN or residency.rate_limit_guard(call, loop) is not None:
                continue
            if residency.in_timing_code(call) or self._reads_non_blocking_copy(call, loop):
                continue
            if via is None and guards_communication(model, call):
                continue  # the barrier after `batch_isend_irecv` / a work handle's `wait()`: removing it races
            accepted.append((HostSync(call, "synchronize", call, via=via), loop, role))
        # A call of a helper whose synchronize is reported in the helper itself: one wait, reported there.
        accepted, runs_it = fold_into_helpers(model, accepted, "synchronize")
        for sync, loop, role in accepted:
            call, via = sync.node, sync.via
            what = f"`{model.code(call)}`" if via is None else f"`{model.code(call)}` (`torch.cuda.synchronize()` at {via})"
            message = f"{what} blocks the CPU until the GPU is idle, {self.every_step(role, loop)}"
            calls = runs_it.get(id(call), [])
            message += calls_named(model, calls, message)
            help = (
                "The GPU then waits while the CPU queues the next step; remove it, or use `wait_stream` / events to "
                "order streams and synchronize only where the host reads GPU results"
            )
            related = [("the training loop", loop)] + [("a call that runs it every step", c) for c in calls]
            yield self.diagnostic(call, message, related=related, help=help)

    def _helper_sync(self, call: cst.Call) -> str | None:
        """Where a project function called here synchronizes the device on every call (`utils.py:9`)."""
        callee = self.model.callee(call)
        return next((entry[1] for entry in callee.syncs if entry[0] == "synchronize"), None) if callee else None

    def _is_device_sync(self, call: cst.Call) -> bool:
        model = self.model
        if model.call_name(call) == SYNCHRONIZE:
            return True
        func = call.func
        return (
            isinstance(func, cst.Attribute)
            and func.attr.value == "synchronize"
            and isinstance(func.value, cst.Call)
            and model.call_name(func.value) in CURRENT_STREAM
        )

    def _reads_non_blocking_copy(self, call: cst.Call, loop) -> bool:
        """A synchronize after a `non_blocking=True` copy to the host is what makes that copy safe to read."""
        model = self.model
        for other in model.calls:
            if other is call or not model.is_inside(other, loop) or not model.dataflow.before(other, call):
                continue
            move = model.residency.move(other)
            if move is not None and move[0] == CPU and any(
                a.keyword is not None and a.keyword.value == "non_blocking" for a in other.args
            ):
                return True
        return False
