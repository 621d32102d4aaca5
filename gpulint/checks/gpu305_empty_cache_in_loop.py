"""GPU305 empty-cache-in-loop: `torch.cuda.empty_cache()` in a loop syncs and re-allocates every time."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.host_bound import host_bound_iteration
from gpulint.analysis.phases import starts_evaluation_beside
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
            if loop is None or role not in (TRAIN, EVAL):
                continue  # once per epoch, or a loop over models, configurations or retries: a phase boundary
            guard = residency.rate_limit_guard(call, loop)
            if isinstance(guard, (cst.ExceptHandler, cst.Try, cst.Finally)) or residency.runs_once(guard, loop):
                continue  # recovering from an out-of-memory error, cleaning up, or once per pass
            if any(residency.measures_memory(outer) for outer in model.enclosing_loops(call)):
                continue  # emptying the cache is part of measuring memory
            if role == EVAL and residency.deletes_model_beside(call):
                continue  # a loop over concepts or configurations, each with its own model: released per phase
            if role == EVAL and host_bound_iteration(model, loop) is not None:
                continue  # each iteration encodes, decodes or writes images on the host: re-allocating is a sliver of it
            every_step = guard is None
            if not every_step and residency.frees_memory_beside(call):
                continue  # `del pipeline; gc.collect()` at validation intervals: a deliberate release
            if not every_step and role == TRAIN and starts_evaluation_beside(model, call):
                continue  # released once per evaluation, as the training phase hands over to the evaluation pass
            where = self.every_step(role, loop) if every_step else f"in the loop at line {model.line_of(loop)}"
            message = f"`{model.code(call)}` {where} syncs the device and empties the cache"
            help = "The next step allocates the freed memory again, through the slower CUDA allocator; remove it"
            fix = None
            statement = model.parent.get(call)
            if isinstance(statement, cst.Expr):
                fix = self.fix("Remove the `empty_cache()` call", [delete_statement(model, statement)], Applicability.UNSAFE)
            yield self.diagnostic(
                call, message, severity=Severity.WARNING if every_step else Severity.INFO, fix=fix, related=[(f"the {role} loop", loop)], help=help
            )
