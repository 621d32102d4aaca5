"""GPU204 loop-invariant-transfer: `y = s.cuda()` in a loop where `s` never changes: the same copy every time."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.helper_copies import invariant_copies, method_copies
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.residency import CERTAIN, TRAIN
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import delete_statement, insert_statement_before, statement_code


class LoopInvariantTransfer(Rule):
    code = "GPU204"
    name = "loop-invariant-transfer"
    summary = "The same tensor is copied to the GPU every loop iteration (`mask = cpu_mask.cuda()` in the loop)"
    fix_applicability = Applicability.UNSAFE
    requires = (r"\.(cuda|to)\(",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        residency, flow = model.residency, model.dataflow
        for call, move, loop in residency.moves_in_loops():
            statement = model.parent.get(call)
            if not (isinstance(statement, cst.Assign) and statement.value is call and len(statement.targets) == 1):
                continue
            target = dotted_name(statement.targets[0].target)
            source = call.func.value
            key = dotted_name(source)
            if target is None or key is None or target == key:
                continue
            if residency.is_module(source) or residency.level(source) == CERTAIN:
                continue  # modules are GPU203's; moving a GPU tensor to the GPU is free
            if not flow.runs_every_iteration(call, loop) or flow.mutated_in(key, loop):
                continue
            device_key = dotted_name(move[1]) if move[1] is not None else None
            if device_key is not None and flow.assigned_in(device_key, loop):
                continue
            if any(flow.inside(w.statement, loop) and w.statement is not statement for w in flow.writes.get(target, ())):
                continue
            if not flow.reaching_writes(key, call) and not self._is_parameter(key, call):
                continue  # where `source` comes from is unknown
            _, role = residency.step_loop(call)
            message = f"`{model.code(call)}` copies `{key}` to the GPU every iteration of the loop (line {model.line_of(loop)})"
            yield self.diagnostic(
                call,
                message,
                help=f"`{key}` does not change in the loop: copy it once before the loop",
                severity=Severity.WARNING if role == TRAIN else Severity.INFO,
                fix=self._fix(statement, target, loop),
                related=[("the loop", loop)],
            )

        yield from self._helper_copies()
        yield from self._method_copies()

    def _helper_copies(self) -> Iterator[Diagnostic]:
        """The same copy made on every call of a helper that the step loop calls every iteration (no fix: the copy
        would have to move out of the function into its caller)."""
        model = self.model
        for copy in invariant_copies(model):
            source = model.code(copy.source)
            name = copy.helper.name.value
            message = (
                f"`{model.code(copy.move)}` copies the same `{source}` to the GPU on every call of `{name}`, "
                f"run every iteration by the call at line {model.line_of(copy.call)}"
            )
            yield self.diagnostic(
                copy.move,
                message,
                help=f"`{source}` does not change between calls: copy it to the GPU once, before the loop, and use that copy",
                severity=Severity.WARNING if copy.role == TRAIN else Severity.INFO,
                related=[("the call", copy.call), ("the loop", copy.loop)],
            )

    def _method_copies(self) -> Iterator[Diagnostic]:
        """The same copy made every step by a method that runs every step, of data that only `__init__` writes
        (no fix: the copy would have to be kept on the object)."""
        model = self.model
        for copy in method_copies(model):
            value = model.code(copy.value)
            owner = model.parent.get(model.parent.get(copy.method))
            name = f"{owner.name.value}.{copy.method.name.value}"  # type: ignore[union-attr]
            passed = f" (passed by the call at line {model.line_of(copy.call)})" if copy.call is not None else ""
            message = (
                f"`{model.code(copy.move)}` copies the same `{value}`{passed} to the GPU on every call of `{name}`, "
                f"which runs every step ({copy.where})"
            )
            related = [("the call", copy.call)] if copy.call is not None else []
            yield self.diagnostic(
                copy.move,
                message,
                help=f"only `__init__` writes `{value}`: copy it to the GPU once (in `__init__`, or the first time) and keep that copy",
                severity=Severity.WARNING if copy.role == TRAIN else Severity.INFO,
                related=related,
            )

    def _is_parameter(self, key: str, at: cst.CSTNode) -> bool:
        return any(isinstance(b, cst.Param) for b in self.model.bindings_of(key, at)) if "." not in key else False

    def _fix(self, statement: cst.Assign, target: str, loop):
        """Hoist the copy above the loop, unless the copy is changed in place or read before it in the loop."""
        model, flow = self.model, self.model.dataflow
        line = model.parent.get(statement)
        code = statement_code(model, line)
        if code is None or model.parent.get(line) is not loop.body:
            return None
        # (`check` already skips a target written again in the loop.)
        if any(flow.inside(s, loop) for s in flow.item_writes.get(target, ())) or flow.changed_in_place(target, loop):
            return None
        if any(flow.inside(r, loop) and flow.before(r, statement) for r in flow.reads.get(target, ())):
            return None
        return self.fix(
            "Copy it once, before the loop",
            [delete_statement(model, line), insert_statement_before(model, loop, code)],
            Applicability.UNSAFE,
        )
