"""GPU106 pin-then-copy: `x.pin_memory().to(device)` pins on the critical path, then copies."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.hot_loops import in_no_grad, trains
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import replace_node, without_keyword_argument


class PinThenCopy(Rule):
    code = "GPU106"
    name = "pin-then-copy"
    summary = "`x.pin_memory().to(device)` in a hot loop: pinning first makes the copy slower"
    fix_applicability = Applicability.UNSAFE
    fix_always = True
    requires = (r"pin_memory\(\)",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        for call in model.calls:
            if not model.residency.moves_to_cuda(call):
                continue
            inner = call.func.value  # a move is always a method call
            if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "pin_memory"):
                continue
            reached_from = self._hot_loops_reaching(call)
            if not reached_from or self._on_side_stream(call):
                continue
            eval_only = all(in_no_grad(model, node) for node in reached_from)
            # Without the pinned source a `non_blocking=True` copy is pageable: it would block anyway.
            plain = without_keyword_argument(call.with_changes(func=call.func.with_changes(value=inner.func.value)), "non_blocking")
            yield self.diagnostic(
                call,
                "`.pin_memory()` right before the copy pins on the critical path",
                help="Usually slower than a plain copy; pin in the `DataLoader` (`pin_memory=True`) instead",
                severity=Severity.INFO if eval_only else Severity.WARNING,
                fix=self.fix("Copy directly (drop `.pin_memory()` and `non_blocking=`)", [replace_node(model, call, plain)], Applicability.UNSAFE),
            )

    def _hot_loops_reaching(self, call: cst.Call) -> list[cst.CSTNode]:
        """The hot loops around `call`, or else the calls (inside hot loops) of the function holding it.
        A loop is hot when it trains or takes a loader's batches."""
        model = self.model
        loader_loops = {id(it.loop) for info in model.loader_flow.infos for it in info.iterations if it.loop is not None}

        def hot(node: cst.CSTNode) -> bool:
            return any(id(loop) in loader_loops or trains(model, loop) for loop in model.enclosing_loops(node))

        if hot(call):
            return [call]
        func = model.enclosing_function(call)
        if func is None:
            return []
        return [c for c in model.calls if isinstance(c.func, cst.Name) and c.func.value == func.name.value and hot(c)]

    def _on_side_stream(self, call: cst.Call) -> bool:
        """A prefetcher copying on its own stream needs the pinned source for the copy to overlap."""
        flow = self.model.dataflow
        return any(flow.inside(call, block.node.body) for block in self.model.streams.blocks)
