"""`sarif`: SARIF 2.1.0 for GitHub code scanning and other SARIF viewers.

URIs are relative to the project root (`%SRCROOT%`, declared in `originalUriBaseIds`), columns count Unicode
code points (LibCST's character columns), and rule metadata comes from the documents in `rules/`.

A finding in a Jupyter notebook has its region in the `.ipynb` file as stored (the line and column of the JSON
string that holds that part of the cell's source), so a viewer opens the notebook at the right place; the
location's `properties` give the cell (`cell`, 1-based among all cells) and the region within the cell
(`cellRegion`). Notebook findings carry no `fixes` (an edit of the JSON text would have to re-escape the code).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

from gpulint import __version__
from gpulint.diagnostics import INTERNAL_ERROR, INVALID_SYNTAX, IO_ERROR, Diagnostic, Severity, rule_url
from gpulint.reporters import ReportContext
from gpulint.reporters.common import fingerprints, is_pseudo_path, json_document, relative_to, rule_id, severity_of

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/gpulint/gpulint"
SRCROOT = "%SRCROOT%"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
PROBLEM_SEVERITY = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "recommendation"}
MAX_DESCRIPTION = 1024  # GitHub code scanning truncates longer descriptions

# Findings that are not rules: a file gpulint could not check at all.
PSEUDO_RULES = {
    INVALID_SYNTAX: "The file does not parse, so it was not checked.",
    IO_ERROR: "The file could not be read, so it was not checked.",
    INTERNAL_ERROR: "A rule failed on this file; please report it.",
}


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def _rule_descriptor(rid: str) -> dict:
    from gpulint.checks import all_rules
    from gpulint.rule_docs import document, sections

    rule = all_rules().get(rid)
    if rule is None:
        text = PSEUDO_RULES.get(rid, rid)
        return {
            "id": rid,
            "name": rid,
            "shortDescription": {"text": text},
            "fullDescription": {"text": text},
            "help": {"text": text},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["gpulint"], "problem.severity": "error"},
        }
    markdown = document(rule.code) or rule.summary
    what = sections(markdown).get("What it does", "").strip() or rule.summary
    severity = rule.default_severity
    tags = ["performance", "gpu", "pytorch"] + (["preview"] if rule.preview else [])
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": _clip(rule.summary)},
        "fullDescription": {"text": _clip(what), "markdown": what},
        "help": {"text": markdown, "markdown": markdown},
        "helpUri": rule_url(rule.code),
        "defaultConfiguration": {"level": LEVELS[severity]},
        "properties": {"tags": tags, "problem.severity": PROBLEM_SEVERITY[severity]},
    }


def _artifact_location(filename: str, root: Path) -> dict:
    rel = relative_to(filename, root)
    if rel is not None:
        return {"uri": quote(rel, errors="surrogateescape"), "uriBaseId": SRCROOT}  # a name's raw bytes, percent-encoded
    if is_pseudo_path(filename):
        return {"uri": quote(filename, errors="surrogateescape")}
    return {"uri": Path(os.path.abspath(filename)).as_uri()}


def _region(start, end) -> dict:
    return {"startLine": start.row, "startColumn": start.column, "endLine": end.row, "endColumn": end.column}


def _fixes(d: Diagnostic, root: Path) -> list[dict]:
    if d.fix is None or not d.fix.edits:
        return []
    return [
        {
            "description": {"text": d.fix.message},
            "artifactChanges": [
                {
                    "artifactLocation": _artifact_location(d.filename, root),
                    "replacements": [
                        {"deletedRegion": _region(e.location, e.end_location), "insertedContent": {"text": e.content}}
                        for e in d.fix.edits
                    ],
                }
            ],
        }
    ]


def _message(d: Diagnostic) -> dict:
    """The short message as text; with the help below it as markdown, which viewers such as GitHub show."""
    if not d.help:
        return {"text": d.message}
    return {"text": d.message, "markdown": f"{d.message}\n\n{d.help}"}


def sarif_log(diagnostics: list[Diagnostic], context: ReportContext) -> dict:
    root = Path(context.root)
    ids = sorted({rule_id(d) for d in diagnostics})
    index = {rid: i for i, rid in enumerate(ids)}
    results = []
    for d, fingerprint in zip(diagnostics, fingerprints(diagnostics, context, root)):
        notebook = context.notebook(d.filename)
        location = {
            "physicalLocation": {
                "artifactLocation": _artifact_location(d.filename, root),
                "region": _region(context.file_location(d, d.location), context.file_location(d, d.end_location)),
            }
        }
        if notebook is not None:
            (cell, start), (_, end) = notebook.cell_location(d.location), notebook.cell_location(d.end_location)
            location["properties"] = {"cell": cell, "cellRegion": _region(start, end)}
        result = {
            "ruleId": rule_id(d),
            "ruleIndex": index[rule_id(d)],
            "level": LEVELS[severity_of(d)],
            "message": _message(d),
            "locations": [location],
            "partialFingerprints": {"gpulint/v1": fingerprint},
        }
        fixes = _fixes(d, root) if notebook is None else []
        if fixes:
            result["fixes"] = fixes
        results.append(result)
    run = {
        "tool": {
            "driver": {
                "name": "gpulint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [_rule_descriptor(rid) for rid in ids],
            }
        },
        "originalUriBaseIds": {SRCROOT: {"uri": root.resolve().as_uri().rstrip("/") + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def render_sarif(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    return json_document(sarif_log(diagnostics, context))
