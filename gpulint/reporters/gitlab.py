"""`gitlab`: GitLab Code Quality (a CodeClimate subset) with project-relative paths and stable fingerprints.

Paths are relative to `CI_PROJECT_DIR` when GitLab sets it, else to the project root (where the gpulint
configuration lives, or the working directory).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from gpulint.diagnostics import Diagnostic, Severity
from gpulint.reporters import ReportContext
from gpulint.reporters.common import fingerprints, repo_path, rule_id, severity_of

SEVERITIES = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.INFO: "info"}


def _root(context: ReportContext) -> Path:
    project_dir = os.environ.get("CI_PROJECT_DIR")
    return Path(project_dir) if project_dir else Path(context.root)


def render_gitlab(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    root = _root(context)
    records = [
        {
            "check_name": rule_id(d),
            "description": f"{rule_id(d)}: {d.message}",
            "severity": SEVERITIES[severity_of(d)],
            "fingerprint": fingerprint,
            "location": {
                "path": repo_path(d.filename, root),
                "positions": _positions(d, context),
            },
        }
        for d, fingerprint in zip(diagnostics, fingerprints(diagnostics, context, root))
    ]
    return json.dumps(records, indent=2, ensure_ascii=False) + "\n"


def _positions(d: Diagnostic, context: ReportContext) -> dict:
    """Lines and columns in the file as stored (a notebook's: in its JSON text)."""
    begin, end = context.file_location(d, d.location), context.file_location(d, d.end_location)
    return {"begin": {"line": begin.row, "column": begin.column}, "end": {"line": end.row, "column": end.column}}
