"""`github`: GitHub Actions workflow commands, shown as annotations on the pull request.

Escaping follows actions/toolkit (`command.ts`): data escapes `%`, `\\r`, `\\n`; properties also `:` and `,`.
Other control characters (terminal escape sequences, a form feed) are shown as Python escapes, as in the text
formats (`printable`).
"""

from __future__ import annotations

import os

from gpulint.diagnostics import Diagnostic, Severity
from gpulint.reporters import ReportContext, printable
from gpulint.reporters.common import is_pseudo_path, rule_id, severity_of

COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    return printable(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _line(d: Diagnostic, context: ReportContext) -> str:
    file = d.filename if is_pseudo_path(d.filename) else os.path.abspath(d.filename)
    start, end = context.file_location(d, d.location), context.file_location(d, d.end_location)  # a notebook's JSON lines
    properties = {
        "title": f"gpulint ({rule_id(d)})",
        "file": file,
        "line": start.row,
        "col": start.column,
        "endLine": end.row,
        "endColumn": end.column,
    }
    props = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items())
    message = f"{d.filename}:{context.position(d)}: {rule_id(d)} {d.message}"
    if d.help:
        message += f"\n  help: {d.help}"
    if d.fix is not None:
        message += f"\n  help: {d.fix.message}"
    return f"::{COMMANDS[severity_of(d)]} {props}::{escape_data(message)}\n"


def render_github(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    return "".join(_line(d, context) for d in diagnostics)
