"""The result cache: `.gpulint_cache/` next to the configuration (or `cache-dir`).

Layout, as ruff and mypy do it:

    .gpulint_cache/CACHEDIR.TAG          # backup tools skip the folder
    .gpulint_cache/.gitignore            # `*`: git never sees it
    .gpulint_cache/<version>/<key>.json  # one file per (gpulint code, settings, Python version, root)
    .gpulint_cache/<version>/project-<key>.json, summaries-<key>.json  # the project index's (gpulint.projects)

Each entry maps a file's absolute path to the SHA-256 of its bytes, the path the diagnostics were reported
under, and the diagnostics themselves (LibCST is slow, so the findings are cached, not just "clean").
An entry is used only when all of these match; a cache file that does not parse, was written for another
key, or holds a malformed entry is ignored (never trusted) and rewritten. Writes are atomic (temp file in
the same folder + `os.replace`), so concurrent runs never see half a file; the last writer wins.

A repository cannot steer the cache (docs/reliability.md): a `cache-dir` from a config file must be a folder
of the project's own (not outside it, not through a symlink, not an existing folder that is not a gpulint
cache), else the default is used, with a warning; a folder anywhere comes only from `--cache-dir` or
`GPULINT_CACHE_DIR`. Each cache file carries an HMAC-SHA256 of its content under a key of this user's, kept
outside every project (`$XDG_CACHE_HOME/gpulint/cache-key`, mode 0600): a cache that a repository ships or
another user writes fails the check and is ignored, so it cannot hide findings.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

from gpulint import __version__
from gpulint.config import Settings
from gpulint.diagnostics import Applicability, Diagnostic, Location, Severity

CACHE_DIR_NAME = ".gpulint_cache"
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by gpulint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
GITIGNORE = "# Automatically created by gpulint.\n*\n"
FORMAT = 2  # 2: a MAC line before the JSON
KEY_FILE = "cache-key"
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


def cache_root(settings: Settings) -> tuple[Path | None, str | None]:
    """The cache folder (None: no cache this run) and a warning for the user when the configured one is refused."""
    if settings.user_cache_dir:  # --cache-dir or GPULINT_CACHE_DIR: the user's own choice, anywhere
        return Path(os.path.expanduser(settings.user_cache_dir)).absolute(), None
    root = Path(settings.root).absolute()
    default = root / CACHE_DIR_NAME
    warning = None
    if settings.cache_dir:
        problem = _not_a_project_folder(root, settings.cache_dir)
        if problem is None:
            return root / settings.cache_dir, None
        where = f" in {settings.config_path}" if settings.config_path else ""
        warning = (
            f"cache-dir = {settings.cache_dir!r}{where} {problem}; using {default} instead "
            "(a folder outside the project can be given with --cache-dir or GPULINT_CACHE_DIR)"
        )
    if _through_symlink(root, default):
        return None, (warning + "; it " if warning else f"{default} ") + "is a symlink, so no cache is used"
    return default, warning


def _not_a_project_folder(root: Path, configured: str) -> str | None:
    """Why a `cache-dir` from a config file may not be used, or None: it must be a folder of the project's own."""
    if configured.startswith("~") or os.path.isabs(configured):
        return "is not a path inside the project"
    target = Path(os.path.normpath(root / configured))
    if target == root:
        return "is the project folder itself"
    if root not in target.parents:
        return "points outside the project"
    if _through_symlink(root, target):
        return "goes through a symlink"
    try:
        foreign = target.is_dir() and any(target.iterdir()) and not _is_gpulint_cache(target)
    except OSError:
        return "cannot be read"
    if foreign:
        return "is a folder that is not a gpulint cache (its CACHEDIR.TAG would hide it from backups)"
    return None


def _through_symlink(root: Path, target: Path) -> bool:
    """A folder on the way from `root` down to `target` (inclusive) is a symlink."""
    for folder in (target, *target.parents):
        if folder == root or root not in folder.parents:
            return False
        if folder.is_symlink():
            return True
    return False


def _is_gpulint_cache(folder: Path) -> bool:
    try:
        return (folder / "CACHEDIR.TAG").read_text(encoding="utf-8") == CACHEDIR_TAG
    except (OSError, UnicodeDecodeError):
        return False


def _key_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpulint"


def secret_key() -> bytes | None:
    """This user's key for the cache's MAC, created on first use; None when it cannot be kept safely (then
    the cache is not used: a result cache is worth less than its integrity)."""
    try:
        folder = _key_folder()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / KEY_FILE
        if not path.exists():
            handle, temp = tempfile.mkstemp(dir=folder, prefix=f".{KEY_FILE}.")  # mode 0600
            try:
                with os.fdopen(handle, "w", encoding="ascii") as out:
                    out.write(secrets.token_hex(32))
                os.link(temp, path)  # atomic, and never over a key another run made meanwhile
            except FileExistsError:
                pass
            finally:
                os.unlink(temp)
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(descriptor, encoding="ascii") as handle:
            info = os.fstat(handle.fileno())
            text = handle.read(65)
    except (OSError, RuntimeError, ValueError):  # no home, read-only, a symlink, not ASCII
        return None
    if info.st_mode & 0o077 or (hasattr(os, "geteuid") and info.st_uid != os.geteuid()):
        return None  # readable by others, or someone else's: a forger could know it
    if len(text) != 64 or any(c not in "0123456789abcdef" for c in text):
        return None
    return bytes.fromhex(text)


def _mac(key: bytes, payload: bytes) -> str:
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def cache_key_parts(*extra: object) -> str:
    """A key that changes with gpulint's code and the Python version (for caches that do not depend on settings)."""
    data = [FORMAT, __version__, _code_fingerprint(), f"{sys.version_info.major}.{sys.version_info.minor}", *extra]
    return hashlib.sha256(json.dumps(data, default=str).encode()).hexdigest()[:16]


_warned: set[str] = set()


def cache_location(settings: Settings) -> tuple[Path, bytes] | None:
    """This run's cache folder and this user's key for its MACs; None: no cache (a refused folder that is a
    symlink, or no key). A refused `cache-dir` is warned about once per process."""
    directory, warning = cache_root(settings)
    if warning and warning not in _warned:
        _warned.add(warning)
        print(f"gpulint: warning: {warning}", file=sys.stderr)
    secret = secret_key() if directory is not None else None
    return (directory, secret) if directory is not None and secret is not None else None


def read_signed(directory: Path, path: Path, secret: bytes) -> object:
    """The JSON a cache file under `directory` holds. OSError: missing, unreadable, or in a folder reached
    through a symlink; ValueError: its MAC does not match (forged, damaged, another user's) or it is not JSON."""
    if _through_symlink(directory, path.parent):
        raise OSError(f"{path.parent} is a symlink")
    with open(path, "rb") as handle:
        mac, _, payload = handle.read().partition(b"\n")
    if not hmac.compare_digest(mac, _mac(secret, payload).encode()):
        raise ValueError("not written by this user's gpulint")
    return json.loads(payload)


def write_signed(directory: Path, path: Path, data: object, secret: bytes) -> None:
    """Write `data` as compact JSON after its MAC line, atomically, creating the tagged cache folder; never
    through a symlinked folder. Raises OSError (a read-only or full disk)."""
    payload = json.dumps(data, separators=(",", ":"))
    _prepare(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    if _through_symlink(directory, path.parent):
        return  # `<cache>/<version>` shipped as a symlink: never written through
    _write_atomic(path, _mac(secret, payload.encode()) + "\n" + payload)


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
    """The diagnostic a record holds; ValueError unless every field has the type `Diagnostic.to_dict` writes."""
    _check_record(data)
    diagnostic = Diagnostic.from_dict(data)
    related = data.get("related") or []
    if related:
        diagnostic = _with_related(diagnostic, tuple((t, Location(r, c)) for t, r, c in related))
    return diagnostic


def _check_record(record: object) -> None:
    _expect(isinstance(record, dict) and "code" in record)
    _expect(record["code"] is None or isinstance(record["code"], str))
    _expect(all(isinstance(record.get(key), str) for key in ("name", "message", "filename", "severity")))
    _expect(record["severity"] in {s.value for s in Severity})
    _check_position(record.get("location"))
    _check_position(record.get("end_location"))
    _expect(record.get("noqa_row") is None or _is_count(record["noqa_row"]))
    fix = record.get("fix")
    if fix is not None:
        _expect(isinstance(fix, dict) and isinstance(fix.get("message"), str) and isinstance(fix.get("edits"), list))
        _expect(isinstance(fix.get("applicability"), str) and fix["applicability"] in {a.value for a in Applicability})
        for edit in fix["edits"]:
            _expect(isinstance(edit, dict) and isinstance(edit.get("content"), str))
            _check_position(edit.get("location"))
            _check_position(edit.get("end_location"))
    related = record.get("related", [])
    _expect(isinstance(related, list))
    for item in related:
        _expect(isinstance(item, list) and len(item) == 3 and isinstance(item[0], str) and _is_count(item[1]) and _is_count(item[2]))


def _check_position(position: object) -> None:
    _expect(isinstance(position, dict) and _is_count(position.get("row")) and _is_count(position.get("column")))


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 1


def _expect(condition: bool) -> None:
    if not condition:
        raise ValueError("malformed cache record")


def _with_related(d: Diagnostic, related: tuple) -> Diagnostic:
    from dataclasses import replace

    return replace(d, related=related)


class Cache:
    """Load once, look up per file, record new results, save once (atomically)."""

    def __init__(self, settings: Settings) -> None:
        location = cache_location(settings)
        self.directory, self.secret = location if location is not None else (None, b"")
        self.key = cache_key(settings)
        self.path = self.directory / __version__ / f"{self.key}.json" if self.directory is not None else None
        self.entries: dict[str, dict] = {}
        self.today = int(time.time() // 86400)
        self.changed = False
        self._load()

    def _load(self) -> None:
        if self.path is None:
            return
        try:
            data = read_signed(self.directory, self.path, self.secret)
        except OSError:
            return
        except ValueError:
            self.changed = True  # forged, damaged or another user's: rewritten with this run's results
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
        records = entry.get("diagnostics")
        if not isinstance(records, list):
            return None
        try:
            diagnostics = [_diagnostic_from_json(record) for record in records]
        except ValueError:
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
        if not self.changed or self.path is None:
            return
        cutoff = self.today - PRUNE_AFTER_DAYS
        entries = {k: v for k, v in self.entries.items() if isinstance(v, dict) and isinstance(v.get("seen"), int) and v["seen"] >= cutoff}
        try:
            write_signed(self.directory, self.path, {"format": FORMAT, "key": self.key, "version": __version__, "files": entries}, self.secret)
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
