"""GPU307 checkpoint-every-step: a checkpoint is written every training step."""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from gpulint.analysis.residency import TRAIN
from gpulint.checks.base import Rule
from gpulint.diagnostics import Diagnostic

# Conditions that only pick the process that writes (rank 0), not how often it writes.
_RANK_CHECK = re.compile(r"rank|is_main_process|is_local_main_process|is_global_zero|is_master|main_process|is_world_process_zero")


class CheckpointEveryStep(Rule):
    code = "GPU307"
    name = "checkpoint-every-step"
    summary = "A checkpoint (`torch.save`, `save_pretrained`, `save_state`, `save_checkpoint`) is written every training step"
    requires = (r"save(_pretrained|_state|_checkpoint|_model)?\(",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        residency = model.residency
        for call in model.calls:
            if not model.frameworks.saves_checkpoint(call):
                continue
            loop, role = residency.step_loop(call)
            if role != TRAIN or residency.rate_limit_guard(call, loop) is not None or self._conditional(call, loop):
                continue
            if isinstance(loop, cst.FunctionDef) and self._called_conditionally(loop):
                continue  # `if time_step.last(): self.save_snapshot()`: the helper runs at episode ends, not every step
            message = f"`{model.code(call.func)}(...)` writes a checkpoint {self.every_step(role, loop)}"
            help = (
                "Every tensor is copied to the host and written to disk while the GPU waits; save every N steps (under "
                "`if step % N == 0:`) or once per epoch"
            )
            yield self.diagnostic(call, message, related=[("the training step", loop)], help=help)

    def _called_conditionally(self, helper: cst.FunctionDef) -> bool:
        """Every call of the helper in a step loop of this module is under a condition (see `_conditional`)."""
        model = self.model
        name = helper.name.value
        sites = [*model.method_calls(name), *model.calls_of(name)]
        looped = [(site, loop) for site in sites if not model.is_inside(site, helper) for loop in [model.residency.step_loop(site)[0]] if loop is not None]
        return bool(looped) and all(self._conditional(site, loop) for site, loop in looped)

    def _conditional(self, call: cst.Call, loop: cst.CSTNode) -> bool:
        """Under a condition other than a rank check (`if loss < best:`, `if epoch_end:`): not every step."""
        model = self.model
        child: cst.CSTNode = call
        for ancestor in model.ancestors(call):
            if ancestor is loop:
                return False
            if isinstance(ancestor, (cst.If, cst.While)) and child is ancestor.body:
                if not _RANK_CHECK.search(model.code(ancestor.test)):
                    return True
            elif isinstance(ancestor, (cst.Else, cst.IfExp, cst.ExceptHandler, cst.BooleanOperation, cst.Lambda, cst.FunctionDef)):
                return True
            child = ancestor
        return False
