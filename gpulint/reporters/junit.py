"""`junit`: JUnit XML (one test suite per file, one failing test case per finding), as ruff writes it."""

from __future__ import annotations

from itertools import groupby
from xml.sax.saxutils import escape, quoteattr

from gpulint.diagnostics import Diagnostic
from gpulint.reporters import ReportContext
from gpulint.reporters.common import rule_id


def _classname(path: str) -> str:
    return path[:-3] if path.endswith(".py") else path


def render_junit(diagnostics: list[Diagnostic], context: ReportContext) -> str:
    total = len(diagnostics)
    out = ['<?xml version="1.0" encoding="UTF-8"?>']
    if not diagnostics:
        out += [
            '<testsuites name="gpulint" tests="1" failures="0" errors="0">',
            '  <testsuite name="gpulint" tests="1" failures="0" errors="0">',
            '    <testcase name="No errors found" classname="gpulint"/>',
            "  </testsuite>",
            "</testsuites>",
        ]
        return "\n".join(out) + "\n"
    out.append(f'<testsuites name="gpulint" tests="{total}" failures="{total}" errors="0">')
    for path, group in groupby(diagnostics, key=lambda d: d.filename):
        items = list(group)
        out.append(f'  <testsuite name={quoteattr(path)} tests="{len(items)}" failures="{len(items)}" errors="0">')
        for d in items:
            at = context.file_location(d, d.location)  # a notebook's: in its JSON text
            cell, row = context.cell_row(d)
            where = f"cell {cell}, line {row}" if cell is not None else f"line {row}"
            out.append(
                f'    <testcase name={quoteattr("org.gpulint." + rule_id(d))} classname={quoteattr(_classname(path))} '
                f'line="{at.row}" column="{at.column}">'
            )
            out.append(
                f"      <failure message={quoteattr(d.message)}>"
                f"{escape(f'{where}, col {d.location.column}, {rule_id(d)} {d.message}')}</failure>"
            )
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"
