"""Human formats: `full` (source line, caret, fix hint) and `concise` (one line each)."""

from __future__ import annotations

from gpulint.diagnostics import Applicability, Diagnostic, Severity, fails
from gpulint.diagnostics import is_applicable
from gpulint.reporters import ReportContext


def _title(d: Diagnostic, context: ReportContext) -> str:
    if d.code is None:
        return f"{d.name}: {d.message}"
    marker = " [*]" if is_applicable(d, context.unsafe_fixes) else ""
    if not fails(d, context.fail_on):
        marker += f" ({Severity(d.severity).value})"  # below `--fail-on`: shown, but it does not fail the run
    return f"{d.code}{marker} {d.message}"


def render_concise(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    return "".join(f"{d.filename}:{context.position(d)}: {_title(d, context)}\n" for d in diagnostics)


def render_full(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    blocks = []
    for d in diagnostics:
        row, column = d.location.row, d.location.column
        shown_row = context.cell_row(d)[1]  # in a notebook, the row in its cell
        gutter = " " * len(str(shown_row))
        lines = [_title(d, context), f"{gutter}--> {d.filename}:{context.position(d)}"]
        source = context.source_lines(d.filename)
        if source is not None and 1 <= row <= len(source):
            text = source[row - 1].expandtabs(1)
            end = d.end_location.column if d.end_location.row == row else len(text) + 1
            width = max(1, end - column)
            lines += [
                f"{gutter} |",
                f"{shown_row} | {text}",
                f"{gutter} | {' ' * (column - 1)}{'^' * width}",
                f"{gutter} |",
            ]
        if d.fix is not None:
            lines.append(f"help: {d.fix.message}")
            if d.fix.applicability == Applicability.UNSAFE:
                lines.append("note: This is an unsafe fix and may change runtime behavior")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks) + ("\n" if blocks else "")
