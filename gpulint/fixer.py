"""The fixer: apply non-overlapping edits, re-check, repeat; never return code that does not parse."""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from gpulint.config import Settings
from gpulint.diagnostics import Diagnostic, Edit, Location, is_applicable
from gpulint.budget import run_within
from gpulint.linter import check_source, timed_out
from gpulint.lines import line_starts

MAX_PASSES = 16


@dataclass
class FixOutcome:
    text: str
    fixed: Counter = field(default_factory=Counter)  # code -> number of findings fixed
    remaining: list[Diagnostic] = field(default_factory=list)
    broken: list[Diagnostic] = field(default_factory=list)  # fixes dropped because the result did not parse

    @property
    def fixed_count(self) -> int:
        return sum(self.fixed.values())


def _offset(starts: list[int], location: Location) -> int:
    row = min(max(location.row, 1), len(starts))
    return starts[row - 1] + location.column - 1


def apply_edits(text: str, edits: list[Edit]) -> str:
    starts = line_starts(text)
    pieces = []
    cursor = 0
    for edit in sorted(edits, key=lambda e: (e.location, e.end_location)):
        begin, end = _offset(starts, edit.location), _offset(starts, edit.end_location)
        pieces.append(text[cursor:begin])
        pieces.append(edit.content)
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


def edits_overlap(a: Edit, b: Edit) -> bool:
    # Two insertions at one point, or ranges that share characters, cannot both apply in one pass.
    if a.location == a.end_location and b.location == b.end_location:
        return a.location == b.location
    return a.location < b.end_location and b.location < a.end_location


def _compiles(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<gpulint-fix>", "exec", dont_inherit=True)  # the compiler too: `return` outside a function
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _parsed(text: str, strict: bool = True) -> cst.Module | None:
    """The fixed text's tree (reused to check it again), or None when it does not parse; when the
    original compiled (`strict`), CPython must compile the result too."""
    try:
        module = cst.parse_module(text)
    except (cst.ParserSyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if strict and not _compiles(text):
        return None
    return module


def _parses(text: str, strict: bool = True) -> bool:
    return _parsed(text, strict) is not None


def _well_formed(edits: tuple[Edit, ...], starts: list[int], length: int) -> bool:
    """A fix's own edits lie inside the text and do not overlap one another."""
    spans = []
    for edit in edits:
        if edit.location > edit.end_location or edit.location.row < 1 or edit.location.column < 1:
            return False
        if edit.end_location.row > len(starts):
            return False
        begin, end = _offset(starts, edit.location), _offset(starts, edit.end_location)
        for location, offset in ((edit.location, begin), (edit.end_location, end)):
            if offset > (starts[location.row] if location.row < len(starts) else length):
                return False  # a column past the end of its line
        spans.append((begin, end))
    spans.sort()
    return all(a_end <= b_begin for (_, a_end), (b_begin, _) in zip(spans, spans[1:]))


def fix_source(text: str, path: str, settings: Settings, unsafe: bool | None = None, project=None) -> FixOutcome:
    """Fix `text` until nothing changes; `project` (a `ProjectIndex`) gives each pass the file's context in
    its project, so that `fix` applies what `check` reports. A file whose fixing and re-checks run past
    `analysis-timeout` is left as it was."""
    return run_within(
        settings.analysis_timeout,
        lambda: _fix_loop(text, path, settings, unsafe, project),
        lambda: FixOutcome(text, remaining=[timed_out(path, settings)]),
    )


def _fix_loop(text: str, path: str, settings: Settings, unsafe: bool | None, project) -> FixOutcome:
    from gpulint.projects import context_for

    unsafe = settings.unsafe_fixes if unsafe is None else unsafe
    outcome = FixOutcome(text)
    rejected: set[tuple] = set()  # (code, message, edits) of fixes whose result did not parse
    context = context_for(project, Path(path), text) if project else None
    diagnostics = check_source(text, path, settings, project=context)
    # `fix` applies exactly the fixes `check` reported: per rule, no more than its first pass offered.
    budget = Counter(d.code for d in diagnostics if is_applicable(d, unsafe))
    # A file this interpreter cannot compile (newer syntax) is held to libcst's grammar only.
    strict = any(is_applicable(d, unsafe) for d in diagnostics) and _compiles(text)
    for _ in range(MAX_PASSES):
        accepted: list[Diagnostic] = []
        edits: list[Edit] = []
        starts = line_starts(outcome.text)
        for diagnostic in diagnostics:
            if not is_applicable(diagnostic, unsafe):
                continue
            key = (diagnostic.code, diagnostic.fix.edits)
            if key in rejected:
                continue
            if not _well_formed(diagnostic.fix.edits, starts, len(outcome.text)):
                rejected.add(key)
                outcome.broken.append(diagnostic)
                continue
            if set(diagnostic.fix.edits) <= set(edits):
                accepted.append(diagnostic)  # the same edits fix this finding too
                continue
            if any(edits_overlap(new, old) for new in diagnostic.fix.edits for old in edits):
                continue
            accepted.append(diagnostic)
            edits.extend(e for e in diagnostic.fix.edits if e not in edits)
        if not accepted:
            break
        candidate = apply_edits(outcome.text, edits)
        module = _parsed(candidate, strict)
        if module is None:
            # Find the culprit: apply the first fix alone; drop it if that alone breaks the file.
            first = accepted[0]
            alone = apply_edits(outcome.text, list(first.fix.edits))
            module = _parsed(alone, strict)
            if module is not None:
                candidate, accepted = alone, [d for d in accepted if set(d.fix.edits) <= set(first.fix.edits)]
            else:
                rejected.add((first.code, first.fix.edits))
                outcome.broken.append(first)
                continue
        before, previous = outcome.text, diagnostics
        outcome.text = candidate
        outcome.fixed.update(d.code for d in accepted)
        context = context_for(project, Path(path), outcome.text) if project else None
        diagnostics = check_source(outcome.text, path, settings, module=module, project=context)  # no second parse
        left = Counter(d.code for d in diagnostics if is_applicable(d, unsafe))
        grown = [code for code, n in left.items() if n > budget[code] - outcome.fixed[code]]
        if any(_grows_itself(code, before, previous, accepted, path, settings, unsafe, project) for code in grown):
            break  # a rule's own fixes made new findings of that rule, which `check` never reported: stop
        for code in grown:
            budget[code] = left[code] + outcome.fixed[code]  # uncovered by another rule's fix (pinning a loader)
    outcome.remaining = diagnostics
    return outcome


def applies_cleanly(text: str, edits: tuple[Edit, ...]) -> bool:
    """One fix's edits, applied alone to `text` (an editor's quick fix): they lie inside it, do not overlap, and
    leave code that compiles (that LibCST parses, when `text` itself does not compile: a newer grammar)."""
    if not _well_formed(edits, line_starts(text), len(text)):
        return False
    candidate = apply_edits(text, list(edits))
    return _compiles(candidate) if _compiles(text) else _parses(candidate, strict=False)


def _grows_itself(
    code: str, text: str, diagnostics: list[Diagnostic], accepted: list[Diagnostic], path: str, settings: Settings, unsafe: bool, project=None
) -> bool:
    """Applying only `code`'s fixes of this pass to `text` leaves more fixable `code` findings than it removed."""
    from gpulint.projects import context_for

    own = [d for d in accepted if d.code == code]
    if not own:
        return False
    edits = list(dict.fromkeys(e for d in own for e in d.fix.edits))
    fixed = apply_edits(text, edits)
    after = check_source(fixed, path, settings, project=context_for(project, Path(path), fixed) if project else None)
    before = sum(1 for d in diagnostics if d.code == code and is_applicable(d, unsafe))
    return sum(1 for d in after if d.code == code and is_applicable(d, unsafe)) > before - len(own)


class WriteError(Exception):
    """A fixed file that was not written; the original is untouched."""


def write_atomic(path: Path, data: bytes, expected: bytes | None = None) -> None:
    """Replace the file's content in one step (temp file + rename), keeping its mode, owner, group, extended
    attributes (ACLs, SELinux labels) and symlinks.

    With `expected` (the bytes the fix was computed from), a file that changed on disk since is left alone,
    and one that already holds `data` (a concurrent run, a second link to the same file) is not rewritten.
    Any failure leaves the original untouched and raises WriteError; no partial file is ever visible.
    When the temp file cannot be given the original's owner, group or attributes (a non-root user fixing a
    file of a shared group), the bytes are written into the file itself instead: its metadata stays, but that
    write is not atomic. Temp files that a killed run left next to the file (older than a minute, ours) go.
    """
    target = Path(os.path.realpath(path))  # write through a symlink, never replace the link itself
    try:
        info = target.stat()
    except FileNotFoundError:
        if expected is not None:
            raise WriteError("file was deleted since it was read") from None
        info = None  # a new file (a report): created with the mode a plain open() would give it
    except OSError as error:
        raise WriteError(error.strerror or str(error)) from None
    if info is not None and not info.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise WriteError("file is read-only")  # marked so on purpose: left alone even for root
    if info is not None and not os.access(target, os.W_OK):
        raise WriteError("no permission to write the file")  # another user's file: the rename would replace it
    if expected is not None:
        current = _read(target)
        if current == data:
            return
        if current != expected:
            raise WriteError("file changed on disk since it was read")
    _remove_stale_temps(target)
    try:
        descriptor, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=target.parent)
    except OSError as error:
        raise WriteError(error.strerror or str(error)) from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if info is None:
            os.chmod(temp_name, _new_file_mode())
        in_place = info is not None and not _same_metadata(target, info, temp_name)
        if expected is not None:  # a last look, just before the swap
            current = _read(target)
            if current == data:
                os.unlink(temp_name)  # another run wrote the same fix meanwhile
                return
            if current != expected:
                raise WriteError("file changed on disk since it was read")
        if in_place:
            os.unlink(temp_name)
            _write_in_place(target, data)
            return
        os.replace(temp_name, target)
    except BaseException as error:
        try:
            os.unlink(temp_name)
        except OSError:
            pass
        if isinstance(error, OSError):
            raise WriteError(error.strerror or str(error)) from None
        raise
    _sync_directory(target.parent)


TEMP_SUFFIX = ".gpulint-tmp"
STALE_AFTER_SECONDS = 60  # a live temp file exists for the seconds a write and fsync take


def _same_metadata(target: Path, info: os.stat_result, temp_name: str) -> bool:
    """Give the temp file the target's owner, group, mode and extended attributes; False when one of them
    cannot be kept (the rename would silently change it)."""
    temp = os.stat(temp_name)
    if (temp.st_uid, temp.st_gid) != (info.st_uid, info.st_gid):
        try:
            os.chown(temp_name, info.st_uid, info.st_gid)  # works for root, or for a group the user is in
        except (OSError, AttributeError):
            return False
    os.chmod(temp_name, stat.S_IMODE(info.st_mode))  # after chown, which may clear setuid/setgid bits
    if not hasattr(os, "listxattr"):
        return True
    try:
        names = os.listxattr(target)
    except OSError:
        return True  # a file system without extended attributes: nothing to keep
    for name in names:
        try:
            value = os.getxattr(target, name)
            if name not in os.listxattr(temp_name) or os.getxattr(temp_name, name) != value:
                os.setxattr(temp_name, name, value)
        except OSError:
            return False
    return True


def _write_in_place(target: Path, data: bytes) -> None:
    """Overwrite the file's bytes, keeping its inode and so all its metadata; space is reserved first, so a
    full disk fails before the first byte changes."""
    with open(target, "r+b") as handle:
        if hasattr(os, "posix_fallocate") and len(data) > 0:
            try:
                os.posix_fallocate(handle.fileno(), 0, len(data))
            except OSError as error:
                if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # no fallocate here: just write
                    raise
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())


def _remove_stale_temps(target: Path) -> None:
    """Temp files of `target` that a killed run left behind: ours (same owner), regular files, old enough that
    no run can still be writing them."""
    pattern = re.compile(re.escape(f".{target.name}.") + r"[a-z0-9_]{8}" + re.escape(TEMP_SUFFIX))
    now = time.time()
    for name in _temp_names(str(target.parent)):
        if not pattern.fullmatch(name):
            continue
        path = target.parent / name
        try:
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and now - info.st_mtime > STALE_AFTER_SECONDS:
                path.unlink()
        except (OSError, AttributeError):
            continue


@functools.lru_cache(maxsize=256)
def _temp_names(directory: str) -> tuple[str, ...]:
    """The temp files in a folder, listed once per run (a fix writes many files of one folder)."""
    try:
        return tuple(entry.name for entry in os.scandir(directory) if entry.name.endswith(TEMP_SUFFIX))
    except OSError:
        return ()


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise WriteError(error.strerror or str(error)) from None


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (best effort: not every platform can open a folder)."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
