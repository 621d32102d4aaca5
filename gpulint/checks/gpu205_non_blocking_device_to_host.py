"""GPU205 non-blocking-device-to-host: `t.to("cpu", non_blocking=True)` read before any synchronize."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name
from gpulint.analysis.residency import CPU
from gpulint.checks.base import Rule
from gpulint.diagnostics import Diagnostic, Severity


class NonBlockingDeviceToHost(Rule):
    code = "GPU205"
    name = "non-blocking-device-to-host"
    summary = "A `non_blocking=True` copy to the CPU is read before any synchronize"
    requires = (r"non_blocking",)
    applies_to_tests = True  # a garbage read is a bug in a test too
    default_severity = Severity.ERROR

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        residency = model.residency
        for call in model.calls:
            move = residency.move(call)
            if move is None or move[0] != CPU or not self._non_blocking(call):
                continue
            if not residency.is_gpu(call.func.value):
                continue
            read = self._unsynced_read(call)
            if read is None:
                continue
            if read is call:
                where = "its result is used right away"
            else:
                where = f"`{model.code(read)}` is read at line {model.line_of(read)} without a synchronize"
            message = f"`{model.code(call)}` may not have finished when {where}"
            help = (
                "The host may read garbage. Call `torch.cuda.synchronize()` (or record an event after the copy and "
                "`event.synchronize()`) before reading it, or drop `non_blocking=True`"
            )
            yield self.diagnostic(call, message, help=help)

    def _non_blocking(self, call: cst.Call) -> bool:
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "non_blocking":
                resolved = self.model.values.resolve(arg.value)
                return resolved is not None and resolved.value is True
        return False

    def _unsynced_read(self, call: cst.Call) -> Optional[cst.CSTNode]:
        model, flow = self.model, self.model.dataflow
        parent = model.parent.get(call)
        if isinstance(parent, (cst.Expr, cst.Return)):
            return None  # discarded, or the caller's business
        if not isinstance(parent, cst.Assign):
            return call  # `x.to("cpu", non_blocking=True).numpy()`, `print(...)`: read at once
        if len(parent.targets) != 1:
            return None
        key = dotted_name(parent.targets[0].target)
        if key is None:
            return None
        scope = model.scope_of(parent)
        reads = sorted(
            (r for r in flow.reads.get(key, ()) if model.scope_of(r) is scope and flow.before(parent, r)),
            key=lambda r: flow.order[r],
        )
        for read in reads:
            if not any(w.statement is parent for w in flow.reaching_writes(key, read)):
                return None
            if any(self._synchronizes(c) for c in flow.calls_between(parent, read, scope)):
                return None
            return read
        return None

    def _synchronizes(self, call: cst.Call) -> bool:
        model = self.model
        if model.call_name(call) == "torch.cuda.synchronize":
            return True
        func = call.func
        return isinstance(func, cst.Attribute) and func.attr.value == "synchronize"
