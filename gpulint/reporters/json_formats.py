"""`json` (an array, ruff's shape) and `json-lines` (one object per line).

Each record has ruff's `cell`: null for a Python file; for a notebook, the cell's 1-based number in the
notebook, and then every row (location, end, fix edits, noqa_row) counts in that cell, as ruff writes them.
A finding with related places (the later reads of a GPU303 run, the default a value comes from) also has
`related`: `[{"message", "location", "cell"}]`, places in the same file; absent when there are none.
"""

from __future__ import annotations

import json

from gpulint.diagnostics import Diagnostic, Location
from gpulint.reporters import ReportContext, absolute


def _record(d: Diagnostic, context: ReportContext) -> dict:
    record = d.to_dict()
    record["filename"] = absolute(d.filename)
    record["cell"] = None
    notebook = context.notebook(d.filename)
    if notebook is not None:
        record["cell"] = notebook.cell_location(d.location)[0]
        for place in (record, *(record["fix"]["edits"] if record["fix"] else ())):
            for key in ("location", "end_location"):
                _, inner = notebook.cell_location(Location(place[key]["row"], place[key]["column"]))
                place[key] = {"row": inner.row, "column": inner.column}
        if d.noqa_row is not None:
            record["noqa_row"] = notebook.cell_location(Location(d.noqa_row, 1))[1].row
    if d.related:
        record["related"] = [_related(text, at, notebook) for text, at in d.related]
    return record


def _related(text: str, at: Location, notebook) -> dict:
    cell = None
    if notebook is not None:
        cell, at = notebook.cell_location(at)
    return {"message": text, "location": {"row": at.row, "column": at.column}, "cell": cell}


def render_json(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    if not diagnostics:
        return "[]\n"
    return json.dumps([_record(d, context) for d in diagnostics], indent=2) + "\n"


def render_json_lines(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    return "".join(json.dumps(_record(d, context)) + "\n" for d in diagnostics)
