"""The fixer: apply non-overlapping edits, re-check, repeat; never return code that does not parse."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from gpulint.config import Settings
from gpulint.diagnostics import Applicability, Diagnostic, Edit, Location
from gpulint.linter import check_source

MAX_PASSES = 16
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


@dataclass
class FixOutcome:
    text: str
    fixed: Counter = field(default_factory=Counter)  # code -> number of findings fixed
    remaining: list[Diagnostic] = field(default_factory=list)
    broken: list[Diagnostic] = field(default_factory=list)  # fixes dropped because the result did not parse

    @property
    def fixed_count(self) -> int:
        return sum(self.fixed.values())


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for match in _LINE.finditer(text):
        starts.append(match.end())
    return starts


def _offset(starts: list[int], location: Location) -> int:
    row = min(max(location.row, 1), len(starts))
    return starts[row - 1] + location.column - 1


def apply_edits(text: str, edits: list[Edit]) -> str:
    starts = _line_starts(text)
    pieces = []
    cursor = 0
    for edit in sorted(edits, key=lambda e: (e.location, e.end_location)):
        begin, end = _offset(starts, edit.location), _offset(starts, edit.end_location)
        pieces.append(text[cursor:begin])
        pieces.append(edit.content)
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def _overlaps(a: Edit, b: Edit) -> bool:
    # Two insertions at one point, or ranges that share characters, cannot both apply in one pass.
    if a.location == a.end_location and b.location == b.end_location:
        return a.location == b.location
    return a.location < b.end_location and b.location < a.end_location


def is_applicable(diagnostic: Diagnostic, unsafe: bool) -> bool:
    fix = diagnostic.fix
    if fix is None:
        return False
    return fix.applicability == Applicability.SAFE or (unsafe and fix.applicability == Applicability.UNSAFE)


def _parsed(text: str) -> cst.Module | None:
    """The fixed text's tree (reused to check it again), or None when it does not parse."""
    try:
        module = cst.parse_module(text)
        compile(text, "<gpulint-fix>", "exec", dont_inherit=True)
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError):
        return None
    return module


def _parses(text: str) -> bool:
    return _parsed(text) is not None


def fix_source(text: str, path: str, settings: Settings, unsafe: bool | None = None) -> FixOutcome:
    unsafe = settings.unsafe_fixes if unsafe is None else unsafe
    outcome = FixOutcome(text)
    rejected: set[tuple] = set()  # (code, message, edits) of fixes whose result did not parse
    diagnostics = check_source(text, path, settings)
    for _ in range(MAX_PASSES):
        accepted: list[Diagnostic] = []
        edits: list[Edit] = []
        for diagnostic in diagnostics:
            if not is_applicable(diagnostic, unsafe):
                continue
            key = (diagnostic.code, diagnostic.fix.edits)
            if key in rejected:
                continue
            if set(diagnostic.fix.edits) <= set(edits):
                accepted.append(diagnostic)  # the same edits fix this finding too
                continue
            if any(_overlaps(new, old) for new in diagnostic.fix.edits for old in edits):
                continue
            accepted.append(diagnostic)
            edits.extend(e for e in diagnostic.fix.edits if e not in edits)
        if not accepted:
            break
        candidate = apply_edits(outcome.text, edits)
        module = _parsed(candidate)
        if module is None:
            # Find the culprit: apply the first fix alone; drop it if that alone breaks the file.
            first = accepted[0]
            alone = apply_edits(outcome.text, list(first.fix.edits))
            module = _parsed(alone)
            if module is not None:
                candidate, accepted = alone, [d for d in accepted if set(d.fix.edits) <= set(first.fix.edits)]
            else:
                rejected.add((first.code, first.fix.edits))
                outcome.broken.append(first)
                continue
        outcome.text = candidate
        outcome.fixed.update(d.code for d in accepted)
        diagnostics = check_source(outcome.text, path, settings, module=module)  # no second parse
    outcome.remaining = diagnostics
    return outcome


class WriteError(Exception):
    """A fixed file that was not written; the original is untouched."""


def write_atomic(path: Path, data: bytes, expected: bytes | None = None) -> None:
    """Replace the file's content in one step (temp file + rename), keeping its mode and symlinks."""
    target = Path(os.path.realpath(path))  # write through a symlink, never replace the link itself
    try:
        info = target.stat()
    except OSError as error:
        raise WriteError(error.strerror or str(error)) from None
    if not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise WriteError("file is read-only")
    if expected is not None:
        try:
            current = target.read_bytes()
        except OSError as error:
            raise WriteError(error.strerror or str(error)) from None
        if current != expected:
            raise WriteError("file changed on disk since it was read")
    descriptor, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".gpulint-tmp", dir=target.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, stat.S_IMODE(info.st_mode))
        os.replace(temp_name, target)
    except BaseException as error:
        try:
            os.unlink(temp_name)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise WriteError(error.strerror or str(error)) from None
        raise
