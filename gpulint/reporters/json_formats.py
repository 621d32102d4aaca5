"""`json` (an array, ruff's shape) and `json-lines` (one object per line)."""

from __future__ import annotations

import json

from gpulint.diagnostics import Diagnostic
from gpulint.reporters import ReportContext, absolute


def _record(d: Diagnostic) -> dict:
    record = d.to_dict()
    record["filename"] = absolute(d.filename)
    return record


def render_json(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    if not diagnostics:
        return "[]\n"
    return json.dumps([_record(d) for d in diagnostics], indent=2) + "\n"


def render_json_lines(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    return "".join(json.dumps(_record(d)) + "\n" for d in diagnostics)
