"""Human formats: `full` (source line, caret, fix hint) and `concise` (one line each).

Every line goes through `printable`: file names, messages (which quote source) and source lines come from the
checked repository.
"""

from __future__ import annotations

from gpulint.diagnostics import Applicability, Diagnostic, Severity, fails
from gpulint.diagnostics import is_applicable
from gpulint.reporters import ReportContext, printable


def _title(d: Diagnostic, context: ReportContext) -> str:
    if d.code is None:
        return f"{d.name}: {d.message}"
    marker = " [*]" if is_applicable(d, context.unsafe_fixes) else ""
    if not fails(d, context.fail_on):
        marker += f" ({Severity(d.severity).value})"  # below `--fail-on`: shown, but it does not fail the run
    return f"{d.code}{marker} {d.message}"


def render_concise(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    return "".join(printable(f"{d.filename}:{context.position(d)}: {_title(d, context)}") + "\n" for d in diagnostics)


def render_full(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    blocks = []
    for d in diagnostics:
        row, column = d.location.row, d.location.column
        shown_row = context.cell_row(d)[1]  # in a notebook, the row in its cell
        gutter = " " * len(str(shown_row))
        lines = [printable(_title(d, context)), printable(f"{gutter}--> {d.filename}:{context.position(d)}")]
        source = context.source_lines(d.filename)
        if source is not None and 1 <= row <= len(source):
            text = source[row - 1].expandtabs(1)
            end = d.end_location.column if d.end_location.row == row else len(text) + 1
            # Measured on the line as shown: an escaped character takes several columns.
            before, marked = text[: column - 1], text[column - 1 : end - 1]
            indent = len(printable(before))
            width = max(1, end - column + len(printable(marked)) - len(marked))
            lines += [
                f"{gutter} |",
                f"{shown_row} | {printable(text)}",
                f"{gutter} | {' ' * indent}{'^' * width}",
                f"{gutter} |",
            ]
        if d.help:
            lines.append(printable(f"help: {d.help}"))
        if d.fix is not None:
            lines.append(printable(f"help: {d.fix.message}"))
            if d.fix.applicability == Applicability.UNSAFE:
                lines.append("note: This is an unsafe fix and may change runtime behavior")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks) + ("\n" if blocks else "")
