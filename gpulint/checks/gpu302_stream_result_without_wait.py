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
    fix_applicability = Applicability.UNSAFE
    requires = (r"[Ss]tream",)
    applies_to_tests = True  # a race is a bug in a test too
    default_severity = Severity.ERROR

    def check(self) -> Iterator[Diagnostic]:
        """One finding per block and reading function, at its first unsynced read."""
        model = self.model
        for block in model.streams.blocks:
            by_scope: dict[int, list] = {}
            for output in block.unsynced_outputs:
                by_scope.setdefault(id(model.scope_of(output.read)), []).append(output)
            stream = model.code(block.stream)
            line = model.line_of(block.node)
            for outputs in by_scope.values():
                first = min(outputs, key=lambda o: model.dataflow.order[o.read])
                values = [o for o in outputs if o.key != GRADIENTS]
                if values:
                    names = ", ".join(f"`{o.key}`" for o in values[:3]) + (", ..." if len(values) > 3 else "")
                    what = f"{names} {'is' if len(values) == 1 else 'are'} produced on stream `{stream}` (line {line})"
                else:
                    what = f"The gradients of the `backward()` on stream `{stream}` (line {line}) are"
                message = f"{what} and read here without waiting for `{stream}`"
                help = f"The current stream may read them before `{stream}` has written them; call `torch.cuda.current_stream().wait_stream({stream})` before the read"
                tensors = [o.key for o in values if o.write is None or o.write.value is None or not model.residency.is_module(o.write.value)]
                if tensors and not block.records_streams:
                    help += f", and `{tensors[0]}.record_stream(torch.cuda.current_stream())` so its memory is not reused too early"
                yield self.diagnostic(first.read, message, fix=self._fix(block, first.read, stream), help=help)

    def _fix(self, block, read: cst.CSTNode, stream: str):
        model = self.model
        torch, import_edit = module_alias(model, "torch")
        wait = f"{torch}.cuda.current_stream().wait_stream({stream})"
        anchor, after = self._wait_anchor(block, read)
        if model.enclosing_loops(anchor):
            return None  # a wait every iteration: only its author knows whether the overlap is worth it
        edit = insert_statement_after(model, anchor, wait) if after else insert_statement_before(model, anchor, wait)
        return self.fix(f"Insert `{wait}` before the first use", [edit, *([import_edit] if import_edit else [])], Applicability.UNSAFE)

    def _wait_anchor(self, block, read: cst.CSTNode) -> tuple[cst.CSTNode, bool]:
        """Where the wait goes (and whether after that statement): just before the first use when it is in the
        block's own statement list (the side stream keeps overlapping the work in between); otherwise right
        after the block, or before the reading statement in another function."""
        model = self.model
        container = model.parent.get(block.node)
        if model.scope_of(read) is model.scope_of(block.node):
            for ancestor in model.ancestors(read):
                if model.parent.get(ancestor) is container and model.dataflow.before(block.node, ancestor):
                    return ancestor, False
            if model.dataflow.before(block.node, read):
                return block.node, True
        return model.enclosing_statement(read), False
