"""Reporters turn diagnostics into text. Each format is a module with `render(diagnostics, context)`."""

from __future__ import annotations

import importlib
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from gpulint.diagnostics import Applicability, Diagnostic, Location, Severity, fails, is_applicable
from gpulint.lines import split_lines
from gpulint.notebook import Notebook, NotebookError, is_notebook_path

# format name -> module under gpulint.reporters (imported only when used)
FORMATS = {
    "full": "text",
    "concise": "text",
    "json": "json_formats",
    "json-lines": "json_formats",
    "sarif": "sarif",
    "github": "github",
    "gitlab": "gitlab",
    "junit": "junit",
    "grouped": "grouped",
    "pylint": "grouped",
    "rdjson": "rdjson",
}
MACHINE_FORMATS = frozenset({"json", "json-lines", "sarif", "github", "gitlab", "junit", "pylint", "rdjson"})


@dataclass
class ReportContext:
    unsafe_fixes: bool = False
    root: Path = field(default_factory=Path.cwd)  # URIs in SARIF / GitLab are relative to this
    # display path -> text, for source snippets; a notebook's is the parsed Notebook (rows count in its module)
    sources: dict[str, str | Notebook] = field(default_factory=dict)
    fail_on: Severity = Severity.INFO  # findings below it are shown with their severity and do not fail

    def source_lines(self, path: str) -> list[str] | None:
        text = self.sources.get(path)
        if text is None:
            try:
                with open(path, encoding="utf-8", errors="replace", newline="") as handle:
                    text = handle.read()
            except OSError:
                return None
            self.sources[path] = self._parsed(path, text)
            text = self.sources[path]
        return split_lines(text.text if isinstance(text, Notebook) else text)

    def notebook(self, path: str) -> Notebook | None:
        """The notebook a finding's rows count in (None for a Python file, or a notebook that could not be read)."""
        if not is_notebook_path(path):
            return None
        if path not in self.sources:
            self.source_lines(path)
        found = self.sources.get(path)
        return found if isinstance(found, Notebook) else None

    @staticmethod
    def _parsed(path: str, text: str) -> str | Notebook:
        if is_notebook_path(path):
            try:
                return Notebook.parse(text.removeprefix("\ufeff"))
            except NotebookError:
                pass  # its findings say why it could not be read; their rows are the JSON's
        return text

    def position(self, d: Diagnostic) -> str:
        """`row:column`, or in a notebook `cell 3:2:5` (ruff's form)."""
        return self.where(d.filename, d.location)

    def where(self, path: str, location: Location) -> str:
        notebook = self.notebook(path)
        return notebook.label(location) if notebook is not None else f"{location.row}:{location.column}"

    def cell_row(self, d: Diagnostic) -> tuple[int | None, int]:
        """The finding's cell (None outside a notebook) and its row there (the file's row outside one)."""
        notebook = self.notebook(d.filename)
        if notebook is None:
            return None, d.location.row
        cell, location = notebook.cell_location(d.location)
        return cell, location.row

    def file_location(self, d: Diagnostic, location: Location) -> Location:
        """Where `location` lies in the file as stored: in a notebook, its line and column in the JSON text."""
        notebook = self.notebook(d.filename)
        return notebook.file_location(location) if notebook is not None else location


def absolute(path: str) -> str:
    return path if path == "-" or path.startswith("<") else os.path.abspath(path)


def render(format_name: str, diagnostics: list[Diagnostic], context: ReportContext) -> str:
    module = importlib.import_module(f"gpulint.reporters.{FORMATS[format_name]}")
    renderer: Callable[..., str] = getattr(module, "render_" + format_name.replace("-", "_"))
    return renderer(diagnostics, context)


def plural(n: int, word: str) -> str:
    suffix = "" if n == 1 else "es" if word.endswith(("x", "s")) else "s"
    return f"{n} {word}{suffix}"


def fix_enumeration(fixes: dict[str, Counter], header: str, nothing: str) -> str:
    """`--show-fixes`: the fixes per file and rule, under `header` (`{}` is "N errors"), or `nothing`."""
    from gpulint.checks import all_rules

    rules = all_rules()
    total = sum(sum(c.values()) for c in fixes.values())
    if not total:
        return nothing + "\n"
    lines = [header.format(plural(total, "error"))]
    for path, counts in sorted(fixes.items()):
        if counts:
            lines.append(f"- {path}:")
            for code, n in sorted(counts.items()):
                lines.append(f"    {n} × {code} ({rules[code].name})")
    return "\n".join(lines) + "\n"


def summary(diagnostics: list[Diagnostic], unsafe_fixes: bool, fail_on: Severity = Severity.INFO) -> str:
    """ruff's closing lines: `Found 3 errors.` + `[*] 2 fixable with ...`, or `All checks passed!`; and how
    many findings are below `--fail-on`."""
    if not diagnostics:
        return "All checks passed!"
    lines = [f"Found {plural(len(diagnostics), 'error')}."]
    passing = sum(1 for d in diagnostics if not fails(d, fail_on))
    if passing:
        lines[0] = f"Found {plural(len(diagnostics), 'error')} ({passing} below --fail-on {fail_on.value}: shown, not failing)."
    fixable = sum(is_applicable(d, unsafe_fixes) for d in diagnostics)
    hidden = sum(1 for d in diagnostics if d.fix and d.fix.applicability == Applicability.UNSAFE and not unsafe_fixes)
    hint = f" ({plural(hidden, 'hidden fix')} can be enabled with the `--unsafe-fixes` option)" if hidden else ""
    if fixable:
        lines.append(f"[*] {fixable} fixable with the `gpulint fix --apply` command{hint}.")
    elif hidden:
        lines.append(f"No fixes available{hint}.")
    return "\n".join(lines)


def statistics(diagnostics: list[Diagnostic], unsafe_fixes: bool) -> list[dict]:
    counts: Counter = Counter()
    fixable: Counter = Counter()
    names = {}
    for d in diagnostics:
        key = d.code or d.name
        counts[key] += 1
        names[key] = d.name
        fixable[key] += is_applicable(d, unsafe_fixes)
    return [
        {"code": code, "name": names[code], "count": n, "fixable": fixable[code] > 0, "fixable_count": fixable[code]}
        for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]


def render_statistics(diagnostics: list[Diagnostic], unsafe_fixes: bool, as_json: bool) -> str:
    rows = statistics(diagnostics, unsafe_fixes)
    if as_json:
        import json

        return json.dumps(rows, indent=2)
    width = max((len(str(r["count"])) for r in rows), default=1)
    code_width = max((len(r["code"]) for r in rows), default=6)
    return "\n".join(
        f"{str(r['count']).rjust(width)}\t{r['code'].ljust(code_width)}\t{'[*]' if r['fixable'] else '[ ]'} {r['name']}" for r in rows
    )
