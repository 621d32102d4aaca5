"""The result cache: `.gpulint_cache/` next to the configuration (or `cache-dir`).

Layout, as ruff and mypy do it:

    .gpulint_cache/CACHEDIR.TAG          # backup tools skip the folder
    .gpulint_cache/.gitignore            # `*`: git never sees it
    .gpulint_cache/<version>/<key>.json  # one file per (gpulint code, settings, Python version, root)

Each entry maps a file's absolute path to the SHA-256 of its bytes, the path the diagnostics were reported
under, and the diagnostics themselves (LibCST is slow, so the findings are cached, not just "clean").
An entry is used only when all of these match; a cache file that does not parse, was written for another
key, or holds a malformed entry is ignored (never trusted) and rewritten. Writes are atomic (temp file in
the same folder + `os.replace`), so concurrent runs never see half a file; the last writer wins.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from gpulint import __version__
from gpulint.config import Settings
from gpulint.diagnostics import Diagnostic, Location

CACHE_DIR_NAME = ".gpulint_cache"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by gpulint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
GITIGNORE = "# Automatically created by gpulint.\n*\n"
FORMAT = 1
PRUNE_AFTER_DAYS = 30


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _code_fingerprint() -> str:
    """Changes whenever gpulint's own code changes, not only its version (stale results in development
    are as wrong as stale results across releases). Stats only: a few dozen `stat` calls."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".md") and "__pycache__" not in path.parts:
            try:
                stat = path.stat()
            except OSError:
                continue
            digest.update(f"{path.relative_to(package)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def cache_root(settings: Settings) -> Path:
    if settings.cache_dir:
        path = Path(os.path.expanduser(settings.cache_dir))
        return path if path.is_absolute() else Path(settings.root) / path
    return Path(settings.root) / CACHE_DIR_NAME


def cache_key_parts(*extra: object) -> str:
    """A key that changes with gpulint's code and the Python version (for caches that do not depend on settings)."""
    data = [FORMAT, __version__, _code_fingerprint(), f"{sys.version_info.major}.{sys.version_info.minor}", *extra]
    return hashlib.sha256(json.dumps(data, default=str).encode()).hexdigest()[:16]


def write_json_atomic(path: Path, data: object) -> None:
    """Write `data` as compact JSON, atomically, creating the cache folder (tagged) if needed."""
    _prepare(path.parent.parent if path.parent.name == __version__ else path.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(path, json.dumps(data, separators=(",", ":")))


def cache_key(settings: Settings) -> str:
    data = [
        FORMAT,
        __version__,
        _code_fingerprint(),
        settings.fingerprint(),
        f"{sys.version_info.major}.{sys.version_info.minor}",
        str(Path(settings.root).resolve()),
    ]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:16]


def _related_to_json(d: Diagnostic) -> list:
    return [[text, loc.row, loc.column] for text, loc in d.related]


def _diagnostic_from_json(data: dict) -> Diagnostic:
    diagnostic = Diagnostic.from_dict(data)
    related = data.get("related") or []
    if related:
        diagnostic = _with_related(diagnostic, tuple((str(t), Location(int(r), int(c))) for t, r, c in related))
    return diagnostic


def _with_related(d: Diagnostic, related: tuple) -> Diagnostic:
    from dataclasses import replace

    return replace(d, related=related)


class Cache:
    """Load once, look up per file, record new results, save once (atomically)."""

    def __init__(self, settings: Settings) -> None:
        self.directory = cache_root(settings)
        self.key = cache_key(settings)
        self.path = self.directory / __version__ / f"{self.key}.json"
        self.entries: dict[str, dict] = {}
        self.today = int(time.time() // 86400)
        self.changed = False
        self._load()

    def _load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != self.key:
            self.changed = True  # foreign or outdated: start over
            return
        entries = data.get("files")
        if isinstance(entries, dict):
            self.entries = entries

    def get(self, path: Path, shown: str, digest: str) -> list[Diagnostic] | None:
        """The cached diagnostics for this file, or None (missing, changed, or malformed: never trusted)."""
        entry = self.entries.get(os.path.abspath(path))
        if not isinstance(entry, dict) or entry.get("sha256") != digest or entry.get("shown") != shown:
            return None
        try:
            records = entry["diagnostics"]
            diagnostics = [_diagnostic_from_json(record) for record in records]
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if any(d.filename != shown for d in diagnostics):
            return None
        if entry.get("seen") != self.today:
            entry["seen"] = self.today
            self.changed = True
        return diagnostics

    def put(self, path: Path, shown: str, digest: str, diagnostics: list[Diagnostic]) -> None:
        records = []
        for d in diagnostics:
            record = d.to_dict()
            if d.related:
                record["related"] = _related_to_json(d)
            records.append(record)
        self.entries[os.path.abspath(path)] = {"sha256": digest, "shown": shown, "seen": self.today, "diagnostics": records}
        self.changed = True

    def save(self) -> None:
        """Write the cache if anything changed; a read-only or full disk only costs the cache."""
        if not self.changed:
            return
        cutoff = self.today - PRUNE_AFTER_DAYS
        entries = {k: v for k, v in self.entries.items() if isinstance(v, dict) and isinstance(v.get("seen"), int) and v["seen"] >= cutoff}
        payload = json.dumps({"format": FORMAT, "key": self.key, "version": __version__, "files": entries}, separators=(",", ":"))
        try:
            _prepare(self.directory)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(self.path, payload)
        except OSError:
            return
        self.changed = False


def _prepare(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("CACHEDIR.TAG", CACHEDIR_TAG), (".gitignore", GITIGNORE)):
        target = directory / name
        if not target.exists():
            _write_atomic(target, text)


def _write_atomic(path: Path, text: str) -> None:
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
