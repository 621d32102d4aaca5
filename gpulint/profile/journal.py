"""The `fix --verify` journal: the originals of the files being verified, on disk for as long as the fixed,
not yet verified versions may be.

`fix --verify` writes one journal (original bytes and the digest of the fixed bytes of every file it changes)
before it touches any file, and removes it after the final write. A journal whose process is gone means a
verification was killed (OOM killer, CI timeout, a closed SSH session, `kill -9`) and may have left unverified
fixes behind: every later `gpulint fix` says so, and `gpulint fix --restore` puts the originals back.

Journals live in the user's state folder, not in the project: `$GPULINT_STATE_DIR`, else
`$XDG_STATE_HOME/gpulint`, else `~/.local/state/gpulint` (a cache folder would be the wrong place: caches may be
deleted or skipped by backups at any time).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import pathlib
from dataclasses import dataclass

from gpulint.fixer import WriteError, write_atomic

STATE_ENV = "GPULINT_STATE_DIR"
PREFIX = "verify-journal-"


def state_dir() -> pathlib.Path:
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return pathlib.Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return pathlib.Path(base) / "gpulint"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _process_start(pid: int) -> str | None:
    """The process's start time (Linux), so a reused pid is not taken for the journal's owner."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def _alive(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = _process_start(pid)
    return started is None or now is None or now == started


@dataclass
class JournalFile:
    path: pathlib.Path
    original: bytes
    fixed_sha256: str

    def state(self) -> str:
        """"fixed" (still the unverified fix), "original", "changed" (edited since) or "missing"."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return "missing"
        except OSError:
            return "changed"
        if data == self.original:
            return "original"
        return "fixed" if digest(data) == self.fixed_sha256 else "changed"


@dataclass
class Journal:
    path: pathlib.Path  # the journal file itself
    pid: int
    started: str | None
    created: str
    command: list[str]
    files: list[JournalFile]

    @classmethod
    def create(cls, files: dict[pathlib.Path, tuple[bytes, bytes]], command: list[str]) -> Journal:
        """Write the journal (atomically) before any file changes; raises WriteError when it cannot be written."""
        folder = state_dir()
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as error:
            raise WriteError(f"cannot create {folder}: {error.strerror or error}") from None
        pid = os.getpid()
        created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        journal = cls(
            folder / f"{PREFIX}{pid}-{datetime.datetime.now().strftime('%Y%m%d%H%M%S%f')}.json",
            pid,
            _process_start(pid),
            created,
            list(command),
            [JournalFile(pathlib.Path(p).resolve(), orig, digest(fixed)) for p, (orig, fixed) in files.items()],
        )
        document = {
            "version": 1,
            "pid": pid,
            "process_start": journal.started,
            "created": created,
            "cwd": os.getcwd(),
            "command": journal.command,
            "files": [
                {"path": str(f.path), "original": base64.b64encode(f.original).decode(), "fixed_sha256": f.fixed_sha256}
                for f in journal.files
            ],
        }
        write_atomic(journal.path, json.dumps(document, indent=1).encode())
        return journal

    @classmethod
    def load(cls, path: pathlib.Path) -> Journal | None:
        try:
            doc = json.loads(path.read_text())
            files = [
                JournalFile(pathlib.Path(f["path"]), base64.b64decode(f["original"]), f["fixed_sha256"]) for f in doc["files"]
            ]
            return cls(path, int(doc["pid"]), doc.get("process_start"), doc.get("created", "?"), list(doc.get("command", [])), files)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def remove(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    @property
    def running(self) -> bool:
        return _alive(self.pid, self.started)

    def describe(self) -> str:
        return f"`gpulint fix --verify -- {' '.join(self.command)}` (pid {self.pid}, started {self.created})"


def leftovers() -> list[Journal]:
    """Journals of verifications that are no longer running, oldest first."""
    folder = state_dir()
    try:
        names = sorted(folder.glob(f"{PREFIX}*.json"))
    except OSError:
        return []
    found = []
    for path in names:
        journal = Journal.load(path)
        if journal is not None and not journal.running:
            found.append(journal)
    return found


def notice(stream) -> list[Journal]:
    """Tell the user about interrupted verifications that left files behind; returns those journals."""
    journals = leftovers()
    for journal in journals:
        fixed = [str(f.path) for f in journal.files if f.state() == "fixed"]
        if fixed:
            stream.write(
                f"gpulint: warning: {journal.describe()} was interrupted: {', '.join(fixed)} still "
                f"hold{'s' if len(fixed) == 1 else ''} its unverified fixes; `gpulint fix --restore` puts the originals back\n"
            )
        else:
            stream.write(
                f"gpulint: warning: {journal.describe()} was interrupted; its files no longer hold the unverified "
                f"fixes; `gpulint fix --restore` clears the notice (journal: {journal.path})\n"
            )
    return journals


def files_in_leftovers(paths) -> list[pathlib.Path]:
    """Which of these files an interrupted verification may still have left fixed."""
    wanted = {pathlib.Path(p).resolve() for p in paths}
    return sorted({f.path for j in leftovers() for f in j.files if f.path in wanted and f.state() == "fixed"})


def restore(stream) -> int:
    """`gpulint fix --restore`: put back the original of every file an interrupted verification left fixed.

    Returns 0 when everything is restored (or nothing was left), 1 when a file was edited since (it is left as it
    is, and its journal is kept so the original is not lost)."""
    journals = leftovers()
    if not journals:
        stream.write("gpulint: no interrupted `fix --verify` to restore\n")
        return 0
    status = 0
    for journal in journals:
        kept = False
        for f in journal.files:
            state = f.state()
            if state == "fixed":
                try:
                    write_atomic(f.path, f.original, f.path.read_bytes())
                    stream.write(f"gpulint: restored {f.path}\n")
                except (OSError, WriteError) as error:
                    stream.write(f"gpulint: {f.path}: not restored: {error}\n")
                    kept = True
            elif state == "original":
                stream.write(f"gpulint: {f.path}: already the original\n")
            elif state == "missing":
                stream.write(f"gpulint: {f.path}: deleted since; nothing to restore\n")
            else:
                stream.write(f"gpulint: {f.path}: edited since the interrupted verification; left as it is\n")
                kept = True
        if kept:
            stream.write(f"gpulint: the originals are kept in {journal.path} (delete it to dismiss this notice)\n")
            status = 1
        else:
            journal.remove()
    return status
