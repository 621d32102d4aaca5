"""Helpers shared by the CI formats (SARIF, GitHub, GitLab, JUnit): repository-relative paths, fingerprints."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path

from gpulint.diagnostics import Diagnostic, Severity
from gpulint.reporters import ReportContext


_SURROGATE = re.compile("[\ud800-\udfff]")


def json_document(data: object) -> str:
    """Indented JSON with non-ASCII text kept readable; a lone surrogate (an undecodable byte of a file name) is
    written as a `\\udcXX` escape, since raw it is not UTF-8."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def is_pseudo_path(filename: str) -> bool:
    return filename == "-" or filename.startswith("<")


def relative_to(filename: str, root: Path) -> str | None:
    """`filename` as a POSIX path relative to `root`, or None when it lies outside (or is stdin)."""
    if is_pseudo_path(filename):
        return None
    absolute = os.path.abspath(filename)
    base = os.path.abspath(root)
    if absolute == base or not absolute.startswith(base.rstrip(os.sep) + os.sep):
        return None
    return Path(os.path.relpath(absolute, base)).as_posix()


def repo_path(filename: str, root: Path) -> str:
    """The path CI tools want: relative to the project root when below it, else as given (POSIX)."""
    rel = relative_to(filename, root)
    return rel if rel is not None else Path(filename).as_posix()


def rule_id(d: Diagnostic) -> str:
    return d.code or d.name


def source_line(d: Diagnostic, context: ReportContext) -> str:
    lines = context.source_lines(d.filename) if not is_pseudo_path(d.filename) else None
    if lines is not None and 1 <= d.location.row <= len(lines):
        return lines[d.location.row - 1].strip()
    return ""


def fingerprints(diagnostics: list[Diagnostic], context: ReportContext, root: Path) -> list[str]:
    """A stable id per finding: path + rule + the stripped source line (not the line number, so findings
    keep their id when code above them moves), with a counter for identical findings in one file."""
    seen: Counter = Counter()
    result = []
    for d in diagnostics:
        key = f"{repo_path(d.filename, root)}\0{rule_id(d)}\0{source_line(d, context)}\0{d.message}"
        seen[key] += 1
        digest = hashlib.sha256(f"{key}\0{seen[key]}".encode("utf-8", "surrogateescape")).hexdigest()[:16]  # a name's raw bytes
        result.append(digest)
    return result


def severity_of(d: Diagnostic) -> Severity:
    return d.severity if isinstance(d.severity, Severity) else Severity(d.severity)
