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
    fix_applicability = Applicability.SAFE
    requires = (r"[Ss]tream",)
    default_severity = Severity.ERROR

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        for block in model.streams.blocks:
            if not block.inputs:
                continue
            stream = model.code(block.stream)
            first = block.inputs[0]
            names = ", ".join(f"`{i.key}`" for i in block.inputs[:3]) + (", ..." if len(block.inputs) > 3 else "")
            message = (
                f"The block on stream `{stream}` reads {names} (produced at line {model.line_of(first.write.statement)}) "
                f"with no `{stream}.wait_stream(torch.cuda.current_stream())` before it: `{stream}` may read "
                f"{'it' if len(block.inputs) == 1 else 'them'} before the current stream has finished writing"
            )
            if block.self_waits:
                message += f"; the wait at line {model.line_of(block.self_waits[0])} is inside the block, where the current stream is `{stream}` itself, so it does nothing"
            torch, import_edit = module_alias(model, "torch")
            edit = insert_statement_before(model, block.node, f"{stream}.wait_stream({torch}.cuda.current_stream())")
            fix = self.fix(
                f"Insert `{stream}.wait_stream({torch}.cuda.current_stream())` before the block",
                [edit, *([import_edit] if import_edit else [])],
                Applicability.SAFE,
            )
            yield self.diagnostic(block.context, message, fix=fix)
