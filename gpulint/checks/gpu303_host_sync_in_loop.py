"""GPU303 host-sync-in-loop: `.item()`, `.cpu()`, `print(tensor)`, `if tensor:` ... every step of a loop."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.residency import TRAIN, EVAL
from gpulint.checks.base import Rule
from gpulint.diagnostics import Diagnostic, Severity


class HostSyncInLoop(Rule):
    code = "GPU303"
    name = "host-sync-in-loop"
    summary = "A host-device synchronization (`.item()`, `.cpu()`, `print(tensor)`, `if tensor:`) every loop iteration"
    requires = (r"\.(item|cpu|tolist|numpy|to)\(|print|float|int|bool|if |while |assert |f['\"]",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        residency = model.residency
        for sync in residency.host_syncs:
            loop, role = residency.step_loop(sync.node)
            if role not in (TRAIN, EVAL) or residency.rate_limit_guard(sync.node, loop) is not None:
                continue
            message = (
                f"{self._subject(sync)} waits for the GPU {residency.every_step(loop, role)}: "
                f"the CPU stops queueing work until the GPU has drained; {self._advice(sync)}"
            )
            yield self.diagnostic(sync.node, message, severity=Severity.WARNING if role == TRAIN else Severity.INFO)

    def _advice(self, sync) -> str:
        model = self.model
        node = sync.node
        accumulation = self._accumulation(node)
        if accumulation is not None:
            target = model.code(accumulation.target)
            replacement = f"{model.code(sync.value)}.detach()"
            value = model.code(accumulation.value).replace(model.code(node), replacement, 1)
            return (
                f"accumulate on the GPU instead (`{target} {model.code(accumulation.operator).strip()} {value}`, "
                f"with `{target}` a GPU tensor) and convert it with `.item()` every N steps or after the loop"
            )
        if not isinstance(self.model.parent.get(node), (cst.If, cst.While, cst.Assert)):
            return "keep the value on the GPU and convert it only every N steps (under `if step % N == 0:`)"
        return "compute the condition on the GPU (`torch.where`, masks) or check it only every N steps (under `if step % N == 0:`)"

    def _subject(self, sync) -> str:
        """`loss.item()`, `if torch.isnan(loss):` on a GPU tensor, formatting `{loss}` in an f-string."""
        model = self.model
        node = sync.node
        parent = model.parent.get(node)
        if isinstance(node, cst.FormattedStringExpression):
            code = _short(model.code(node.expression))
            return f"formatting `{{{code}}}` in an f-string" if code else sync.kind
        if isinstance(parent, (cst.If, cst.While, cst.Assert)):
            keyword = "if" if isinstance(parent, cst.If) else "while" if isinstance(parent, cst.While) else "assert"
            code = _short(model.code(node))
            return f"`{keyword} {code}{'' if keyword == 'assert' else ':'}` on a GPU tensor" if code else sync.kind
        code = _short(model.code(node))
        return f"`{code}`" if code else sync.kind

    def _accumulation(self, node: cst.CSTNode) -> cst.AugAssign | None:
        """`total += loss.item()` (also `total += loss.item() * n`): a running sum that could stay on the GPU."""
        if not (isinstance(node, cst.Call) and (
            (isinstance(node.func, cst.Attribute) and node.func.attr.value == "item")
            or (isinstance(node.func, cst.Name) and node.func.value in ("float", "int"))
        )):  # fmt: skip
            return None
        child = node
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, cst.AugAssign):
                return ancestor if child is ancestor.value and isinstance(ancestor.operator, (cst.AddAssign, cst.SubtractAssign)) else None
            if not isinstance(ancestor, cst.BinaryOperation):
                return None
            child = ancestor
        return None


def _short(code: str) -> str | None:
    code = code.strip()
    return code if len(code) <= 60 and "\n" not in code else None
