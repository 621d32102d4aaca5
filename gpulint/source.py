"""The source layer: which files to check, and their text. Nothing here knows about PyTorch."""

from __future__ import annotations

import codecs
import fnmatch
import functools
import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path

from gpulint.config import Settings, glob_match

MAX_FILE_BYTES = 10 * 1024 * 1024  # LibCST needs ~100x a file's size in memory; larger files are generated code


class SourceError(Exception):
    """A file that cannot be checked; the message is one line for the user."""


@dataclass(frozen=True)
class SourceText:
    text: str
    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return codecs.BOM_UTF8 + data if self.bom else data


def decode_source(data: bytes) -> SourceText:
    """Decode as Python does: BOM, then a PEP 263 coding cookie, then UTF-8."""
    if b"\x00" in data:
        raise SourceError("binary file (contains NUL bytes), not Python source")
    bom = data.startswith(codecs.BOM_UTF8)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        message = str(error.msg if hasattr(error, "msg") else error)
        if bom and message.startswith("encoding problem"):
            raise SourceError("bad encoding declaration: a UTF-8 byte-order mark, but a coding cookie that is not UTF-8") from None
        if message.startswith("invalid or missing encoding declaration"):
            # No usable cookie and the first lines are not UTF-8: say where the bad byte is.
            body = data[len(codecs.BOM_UTF8) :] if bom else data
            try:
                body.decode("utf-8")
            except UnicodeDecodeError as decode_error:
                raise SourceError(f"cannot decode as utf-8: invalid byte at offset {decode_error.start + (3 if bom else 0)}") from None
        raise SourceError(f"bad encoding declaration: {message}") from None
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    body = data[len(codecs.BOM_UTF8) :] if bom else data
    try:
        text = body.decode(encoding)
    except UnicodeDecodeError as error:
        raise SourceError(f"cannot decode as {encoding}: invalid byte at offset {error.start}") from None
    except LookupError:
        raise SourceError(f"unknown encoding {encoding!r} in the coding declaration") from None
    return SourceText(text, encoding, bom)


# An indent of spaces, then a tab: CPython measures it (tab stops of 8), LibCST's tokenizer may reject it.
_TAB_AFTER_SPACES = re.compile(r"^ +\t", re.M)


def tab_after_spaces(text: str) -> int | None:
    """The first row whose indent has a tab after spaces, or None."""
    found = _TAB_AFTER_SPACES.search(text)
    return None if found is None else text.count("\n", 0, found.start()) + 1


def libcst_limitation(reason: str, text: str) -> str:
    """Why LibCST cannot read code CPython compiles, for a warning: the indent LibCST rejects, named, when there
    is one (`reason` is LibCST's own message, the fallback)."""
    row = tab_after_spaces(text)
    if row is not None:
        reason = f"line {row} is indented with spaces, then a tab; indent it with spaces only to check it"
    return f"Python compiles it, but gpulint's parser (LibCST) cannot read it: {reason}"


def read_source_bytes(path: Path) -> bytes:
    """A file's bytes, refusing what must not be read: directories, pipes and devices, oversized files."""
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(info.st_mode):
            raise SourceError("not a regular file (a pipe or a device); skipped")  # reading it could block forever
        size = info.st_size
        if size > MAX_FILE_BYTES:
            raise SourceError(f"file is {size / 1e6:.1f} MB, above the {MAX_FILE_BYTES // (1024 * 1024)} MB limit; skipped")
        return path.read_bytes()
    except IsADirectoryError:
        raise SourceError("is a directory") from None
    except OSError as error:
        raise SourceError(error.strerror or str(error)) from None


def read_source(path: Path) -> SourceText:
    return decode_source(read_source_bytes(path))


# ---- discovery --------------------------------------------------------------------------------


class _GitignoreRule:
    def __init__(self, pattern: str, base: str) -> None:
        self.negated = pattern.startswith("!")
        if self.negated:
            pattern = pattern[1:]
        self.directory_only = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        anchored = "/" in pattern
        pattern = pattern.lstrip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex += "(?:.*/)?"
                i += 3
            elif pattern.startswith("/**", i) and i + 3 == len(pattern):
                regex += "/.*"
                i += 3
            elif pattern[i] == "*":
                regex += "[^/]*"
                i += 1
            elif pattern[i] == "?":
                regex += "[^/]"
                i += 1
            elif pattern[i] == "[":
                end = pattern.find("]", i)
                if end == -1:
                    regex += re.escape("[")
                    i += 1
                else:
                    regex += pattern[i : end + 1]
                    i = end + 1
            else:
                regex += re.escape(pattern[i])
                i += 1
        prefix = re.escape(base + "/") if base else ""
        self.regex = re.compile(prefix + ("" if anchored else "(?:.*/)?") + regex + "$")

    def matches(self, rel_path: str, is_dir: bool) -> bool:
        return (is_dir or not self.directory_only) and self.regex.match(rel_path) is not None


class _Gitignore:
    """The .gitignore files from the walk root down, applied per directory like git."""

    def __init__(self) -> None:
        self.rules: list[_GitignoreRule] = []

    def extended(self, directory: Path, base: str) -> _Gitignore:
        path = directory / ".gitignore"
        if not path.is_file():
            return self
        child = _Gitignore()
        child.rules = list(self.rules)
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return self
        for line in lines:
            line = line.rstrip()
            if line and not line.startswith("#"):
                child.rules.append(_GitignoreRule(line.replace("\\ ", " "), base))
        return child

    def ignored(self, rel_path: str, is_dir: bool) -> bool:
        ignored = False
        for rule in self.rules:
            if rule.matches(rel_path, is_dir):
                ignored = not rule.negated
        return ignored


def _from_root(path: Path, settings: Settings, root: Path | None = None) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(root or settings.root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


@functools.lru_cache(maxsize=16)
def name_matcher(patterns: tuple[str, ...]):
    """One regex for the patterns without a folder (`fnmatch` each, as `glob_match` does), so that a walk
    tests a name once instead of once per pattern; None when there are none."""
    names = [p.rstrip("/") for p in patterns if "/" not in p.rstrip("/")]
    return re.compile("|".join(f"(?:{fnmatch.translate(n)})" for n in names)).match if names else None


def _excluded(path: Path, settings: Settings, root: Path | None = None) -> bool:
    patterns = (*settings.exclude, *settings.extend_exclude)
    rel = _from_root(path, settings, root)
    matches = name_matcher(patterns)
    # `glob_match(rel, p) or glob_match(path.name, p)`, for the folder-less patterns at once
    if matches is not None and (matches(rel.rsplit("/", 1)[-1]) or matches(rel) or matches(path.name)):
        return True
    return any(glob_match(rel, p) or glob_match(path.name, p) for p in patterns if "/" in p.rstrip("/"))


def _included(path: Path, settings: Settings) -> bool:
    """A walked file is checked when it matches `include` or `extend-include` (default: .py, .pyi, .ipynb)."""
    patterns = (*settings.include, *settings.extend_include)
    rel = _from_root(path, settings) if any("/" in p for p in patterns) else path.name  # the walk's hot path
    return any(glob_match(rel, p) for p in patterns)


def force_excluded(path: Path, settings: Settings) -> bool:
    """A path named on the command line is excluded when it or a folder above it would be skipped by a walk
    (pre-commit names `legacy/t.py`; `extend-exclude = ["legacy"]` must still exclude it)."""
    root = settings.root.resolve()
    inside_root = [d for d in Path(os.path.abspath(path)).parents if root in d.parents]
    return _excluded(path, settings) or any(_excluded(folder, settings) for folder in inside_root)


def _git_root(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def discover(paths: list[str], settings: Settings) -> tuple[list[Path], list[tuple[str, str]]]:
    """Python files and notebooks under `paths` (`include`), each once, in order: the paths as given, each folder
    walked in name order; and `(path, reason)` for paths that do not exist."""
    files: list[Path] = []
    missing: list[tuple[str, str]] = []
    seen: set[Path] = set()
    roots = tuple(os.path.realpath(p) for p in paths)  # a walked symlink must stay below one of these

    def add(file: Path) -> None:
        key = Path(os.path.abspath(file))
        if key not in seen:
            seen.add(key)
            files.append(file)

    for given in paths:
        path = Path(given)
        if not path.exists() and not path.is_symlink():
            missing.append((given, "No such file or directory"))
            continue
        if path.is_file() or not path.is_dir():
            # Named explicitly: checked whatever its suffix, unless --force-exclude says otherwise.
            if not (settings.force_exclude and force_excluded(path, settings)):
                add(path)
            continue
        if settings.force_exclude and force_excluded(path, settings):
            continue
        _walk(path, settings, add, roots)
    return files, missing


def _inside(real: str, roots: tuple[str, ...]) -> bool:
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _walk(top: Path, settings: Settings, add, roots: tuple[str, ...]) -> None:
    gitignore = _Gitignore()
    git_root = _git_root(top.resolve()) if settings.respect_gitignore else None
    base_dir = git_root or top.resolve()
    if settings.respect_gitignore and git_root is not None:
        # Parent directories' .gitignore files up to the repository root apply too.
        for directory in reversed([d for d in (top.resolve(), *top.resolve().parents) if d != top.resolve()]):
            if directory == git_root or git_root in directory.parents:
                gitignore = gitignore.extended(directory, _rel(directory, base_dir))
    stack = [(top, gitignore)]
    root = settings.root.resolve()  # once, not per entry
    while stack:
        directory, ignore = stack.pop()
        if settings.respect_gitignore:
            ignore = ignore.extended(directory, _rel(directory, base_dir))
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if _excluded(path, settings, root):
                continue
            if settings.respect_gitignore and ignore.ignored(_rel(path, base_dir), is_dir):
                continue
            if is_dir:
                subdirs.append((path, ignore))
            elif not _included(path, settings):
                continue
            elif entry.is_symlink():
                # A link out of the paths given is not the project's: never read (or fixed) when found by walking.
                if _inside(os.path.realpath(path), roots):
                    add(path)  # a broken or looping link is added, so that reading it reports why
            elif _is_file(entry):
                add(path)
        stack.extend(reversed(subdirs))


def _is_file(entry: os.DirEntry) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _rel(path: Path, base: Path) -> str:
    try:
        rel = Path(os.path.abspath(path)).relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()
    return "" if rel == "." else rel
