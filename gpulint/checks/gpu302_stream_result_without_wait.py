"""GPU302 stream-result-without-wait: the current stream reads what a side-stream block produced, unsynced."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.streams import GRADIENTS
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import insert_statement_after, insert_statement_before, module_alias


class StreamResultWithoutWait(Rule):
    code = "GPU302"
    name = "stream-result-without-wait"
    summary = "A value produced on a side stream is read without `torch.cuda.current_stream().wait_stream(s)`"
    fix_applicability = Applicability.SAFE
    requires = (r"[Ss]tream",)
    default_severity = Severity.ERROR

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        for block in model.streams.blocks:
            stream = model.code(block.stream)
            torch, import_edit = module_alias(model, "torch")
            wait = f"{torch}.cuda.current_stream().wait_stream({stream})"
            # One wait covers every output read in the same function: all fixes insert it before the first read.
            first_read = {}
            for output in block.unsynced_outputs:
                scope = model.scope_of(output.read)
                if scope not in first_read or model.dataflow.order[output.read] < model.dataflow.order[first_read[scope]]:
                    first_read[scope] = output.read
            for output in block.unsynced_outputs:
                line = model.line_of(block.node)
                if output.key == GRADIENTS:
                    what = f"The gradients of the `backward()` run on stream `{stream}` (line {line}) are used here"
                else:
                    what = f"`{output.key}` is produced on stream `{stream}` (line {line}) and read here"
                message = (
                    f"{what} with no `{wait}` (or event wait, or synchronize) in between: the current stream may "
                    f"read it before `{stream}` has written it"
                )
                if output.key != GRADIENTS and not block.records_streams:
                    message += (
                        f"; `{output.key}` was allocated on `{stream}`, so also call "
                        f"`{output.key}.record_stream(torch.cuda.current_stream())` (or keep it alive until "
                        f"`{stream}` is synced) before the allocator can reuse its memory"
                    )
                edit = self._wait_edit(block, first_read[model.scope_of(output.read)], wait)
                fix = self.fix(f"Insert `{wait}` before the first use", [edit, *([import_edit] if import_edit else [])], Applicability.SAFE)
                yield self.diagnostic(output.read, message, fix=fix)

    def _wait_edit(self, block, read: cst.CSTNode, wait: str):
        """Just before the first use when it is in the block's own statement list (the side stream keeps
        overlapping the work in between); otherwise right after the block, or before the reading statement
        in another method."""
        model = self.model
        container = model.parent.get(block.node)
        if model.scope_of(read) is model.scope_of(block.node):
            for ancestor in model.ancestors(read):
                if model.parent.get(ancestor) is container and model.dataflow.before(block.node, ancestor):
                    return insert_statement_before(model, ancestor, wait)
            if model.dataflow.before(block.node, read):
                return insert_statement_after(model, block.node, wait)
        return insert_statement_before(model, model.enclosing_statement(read), wait)
