"""GPU301 stream-without-wait: a side-stream block reads GPU values the current stream may still be writing."""

from __future__ import annotations

from typing import Iterator

from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import insert_statement_before, module_alias


class StreamWithoutWait(Rule):
    code = "GPU301"
    name = "stream-without-wait"
    summary = "`with torch.cuda.stream(s):` reads GPU values from the current stream without `s.wait_stream(...)` first"
    fix_applicability = Applicability.UNSAFE
    requires = (r"[Ss]tream",)
    applies_to_tests = True  # a race is a bug in a test too
    default_severity = Severity.ERROR

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        for block in model.streams.blocks:
            if not block.inputs:
                continue
            stream = model.code(block.stream)
            names = ", ".join(f"`{i.key}`" for i in block.inputs[:3]) + (", ..." if len(block.inputs) > 3 else "")
            message = f"Stream `{stream}` reads {names} (written at line {model.line_of(block.inputs[0].write.statement)}) without waiting for the current stream"
            help = f"The side stream may read them before the current stream has written them; call `{stream}.wait_stream(torch.cuda.current_stream())` before the block"
            if block.self_waits:
                help += f" (the wait at line {model.line_of(block.self_waits[0])} is inside the block, where it does nothing)"
            yield self.diagnostic(block.context, message, fix=self._fix(block, stream), help=help)

    def _fix(self, block, stream: str):
        """`s.wait_stream(torch.cuda.current_stream())` before the block, or before the loops around it when
        neither the stream nor the inputs change in them; never inside a loop (a stall every iteration)."""
        model, flow = self.model, self.model.dataflow
        anchor = block.node
        loops = model.enclosing_loops(block.node)
        if loops:
            outermost = loops[-1]
            keys = [block.key, *(i.key for i in block.inputs)]
            if any(flow.assigned_in(key, outermost) for key in keys):
                return None
            anchor = outermost
        torch, import_edit = module_alias(model, "torch")
        wait = f"{stream}.wait_stream({torch}.cuda.current_stream())"
        where = "before the block" if anchor is block.node else "before the loop"
        return self.fix(f"Insert `{wait}` {where}", [insert_statement_before(model, anchor, wait), *([import_edit] if import_edit else [])], Applicability.UNSAFE)
