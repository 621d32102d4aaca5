"""`grouped` (findings under their file, for people) and `pylint` (`path:line: [CODE] message`)."""

from __future__ import annotations

from itertools import groupby

from gpulint.diagnostics import Diagnostic
from gpulint.diagnostics import is_applicable
from gpulint.reporters import ReportContext
from gpulint.reporters.common import rule_id


def render_grouped(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    blocks = []
    for path, group in groupby(diagnostics, key=lambda d: d.filename):
        items = list(group)
        positions = [context.position(d) for d in items]
        width = max(len(p) for p in positions)
        lines = [f"{path}:"]
        for d, position in zip(items, positions):
            marker = " [*]" if is_applicable(d, context.unsafe_fixes) else ""
            lines.append(f"  {position.ljust(width)} {rule_id(d)}{marker} {d.message}")
        blocks.append("\n".join(lines) + "\n")
    return "".join(block + "\n" for block in blocks)


def render_pylint(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    return "".join(f"{d.filename}:{_row(d, context)}: [{rule_id(d)}] {d.message}\n" for d in diagnostics)


def _row(d: Diagnostic, context: ReportContext) -> str:
    cell, row = context.cell_row(d)
    return f"cell {cell}:{row}" if cell is not None else str(row)
