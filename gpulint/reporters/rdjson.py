"""`rdjson`: reviewdog's Diagnostic Format (`DiagnosticResult`), for review comments with one-click suggestions.

    gpulint check --output-format rdjson | reviewdog -f=rdjson -reporter=github-pr-review

Columns count UTF-8 bytes, as the format requires (gpulint's own columns count characters). Each finding whose
fix `gpulint fix --apply` would apply (safe fixes; unsafe ones too with `--unsafe-fixes`) carries that fix as one
suggestion: whole lines, from the first line the fix touches to the last, with the text they become. GitHub
applies a suggestion to the lines of a review comment, so a fix that edits two places is one suggestion over
the lines between them. Paths are relative to the project root, as in the other CI formats.
"""

from __future__ import annotations

import json

from gpulint.diagnostics import Diagnostic, Edit, Location, Severity, is_applicable, rule_url
from gpulint.reporters import ReportContext
from gpulint.reporters.common import repo_path, rule_id, severity_of
from gpulint.reporters.sarif import INFORMATION_URI

SEVERITIES = {Severity.ERROR: "ERROR", Severity.WARNING: "WARNING", Severity.INFO: "INFO"}


def _position(location: Location, lines: list[str] | None) -> dict:
    """1-based line and UTF-8 byte column (a character column when the line is not known)."""
    column = location.column
    if lines is not None and 1 <= location.row <= len(lines):
        column = len(lines[location.row - 1][: column - 1].encode("utf-8", "surrogatepass")) + 1
    return {"line": location.row, "column": column}


def _range(start: Location, end: Location, lines: list[str] | None) -> dict:
    return {"start": _position(start, lines), "end": _position(end, lines)}


def _suggestion(d: Diagnostic, source: str) -> dict:
    """The fix as one line-wise suggestion: lines `first`..`last` (inclusive) and the text they become."""
    from gpulint.fixer import apply_edits
    from gpulint.lines import LINE_BREAK, lines_with_ends

    rows = lines_with_ends(source)
    first = min(e.location.row for e in d.fix.edits)
    last = min(max(e.end_location.row for e in d.fix.edits), len(rows))  # an insertion at the very end: the last line
    region = "".join(rows[first - 1 : last])
    fixed = apply_edits(region, [_moved_up(e, first - 1) for e in d.fix.edits])
    ending = LINE_BREAK.search(rows[last - 1]) if rows else None
    if ending is not None and fixed.endswith(ending.group()):
        fixed = fixed[: -len(ending.group())]  # the last line keeps its own line break
    return {"range": {"start": {"line": first}, "end": {"line": last}}, "text": fixed}


def _moved_up(edit: Edit, rows: int) -> Edit:
    return Edit(Location(edit.location.row - rows, edit.location.column), Location(edit.end_location.row - rows, edit.end_location.column), edit.content)


def _diagnostic(d: Diagnostic, context: ReportContext) -> dict:
    lines = context.source_lines(d.filename)  # the text is in `context.sources` from here on
    path = repo_path(d.filename, context.root)
    record: dict = {
        "message": d.message,
        "location": {"path": path, "range": _range(d.location, d.end_location, lines)},
        "severity": SEVERITIES[severity_of(d)],
        "code": {"value": rule_id(d), "url": rule_url(d.code)} if d.code else {"value": rule_id(d)},
    }
    if is_applicable(d, context.unsafe_fixes) and d.fix is not None and d.fix.edits and lines is not None:
        record["suggestions"] = [_suggestion(d, context.sources[d.filename])]
    if d.related:
        record["related_locations"] = [
            {"message": text, "location": {"path": path, "range": {"start": _position(at, lines)}}} for text, at in d.related
        ]
    return record


def render_rdjson(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    result = {"source": {"name": "gpulint", "url": INFORMATION_URI}, "diagnostics": [_diagnostic(d, context) for d in diagnostics]}
    return json.dumps(result, indent=2, ensure_ascii=False) + "\n"
