"""GPU305 empty-cache-in-loop: `torch.cuda.empty_cache()` in a loop syncs and re-allocates every time."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.residency import EVAL, TRAIN
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import delete_statement

EMPTY_CACHE = frozenset({"torch.cuda.empty_cache", "torch.mps.empty_cache", "torch.xpu.empty_cache", "torch.cuda.memory.empty_cache"})


class EmptyCacheInLoop(Rule):
    code = "GPU305"
    name = "empty-cache-in-loop"
    summary = "`torch.cuda.empty_cache()` inside a loop: a device sync and fresh `cudaMalloc`s every time"
    fix_applicability = Applicability.UNSAFE
    requires = (r"empty_cache",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        residency = model.residency
        for call in model.calls:
            if model.call_name(call) not in EMPTY_CACHE or not model.enclosing_loops(call):
                continue
            loop, role = residency.step_loop(call)
            if loop is None:
                continue  # a loop over models, configurations or out-of-memory retries: a phase boundary
            guard = residency.rate_limit_guard(call, loop)
            if isinstance(guard, (cst.ExceptHandler, cst.Try, cst.Finally)):
                continue  # recovering from an out-of-memory error, or cleaning up
            every_step = role in (TRAIN, EVAL) and guard is None
            how_often = f"every iteration of the {role} loop" if every_step else f"inside the {role} loop"
            message = (
                f"`{model.code(call)}` {how_often} (line {model.line_of(loop)}) synchronizes the device and hands "
                "the cached memory back, so the next iteration pays `cudaMalloc` again; it does not give PyTorch "
                "more memory. Remove it (for fragmentation, try `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`)"
            )
            fix = None
            statement = model.parent.get(call)
            if isinstance(statement, cst.Expr):
                fix = self.fix("Remove the `empty_cache()` call", [delete_statement(model, statement)], Applicability.UNSAFE)
            yield self.diagnostic(
                call, message, severity=Severity.WARNING if every_step else Severity.INFO, fix=fix, related=[(f"the {role} loop", loop)]
            )
