"""Pass one: the project a file belongs to, its modules summarised (cached by content hash), the index.

The project is every Python file under the configuration root (`[tool.gpulint]`'s folder, or the working
directory), skipping hidden folders and the excluded ones (`exclude`, `extend-exclude`), plus the files
being checked; files outside the root bring the package they are in. It is what a checked file may learn
from: a file in the project that is not checked is summarised, never reported on.

The cache folder keeps, next to the result cache:
- `project-<key>.json`: path -> (mtime, size, SHA-256), so that an unchanged file is not even read, and
  the project's digest (every file's path and hash) with each module's context digest: when nothing in
  the project changed, a warm check looks its files up in the result cache without building the index;
- `summaries-<key>.json`: SHA-256 -> summary (a file is summarised once, whatever its path), read only
  when the index is built.
Both are signed and checked as the result cache is (`gpulint.cache`: this user's HMAC, a `cache-dir` that
stays in the project, no symlinked folders), and every record is checked by type before use: a malformed one
is a miss, never an error or a fact.
"""

from __future__ import annotations

import hashlib
import os
import sys
from contextlib import suppress
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, TypeVar

from gpulint.config import Settings, glob_match
from gpulint.notebook import Notebook, is_notebook_path
from gpulint.source import SourceError, decode_source, name_matcher, read_source_bytes

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleContext, ProjectIndex
    from gpulint.analysis.summary import ModuleSummary

T = TypeVar("T")

# The analysis (and LibCST with it) is imported only when the index is built: a warm run whose project did
# not change reads its context digests from `project-<key>.json` and never needs it.

# A root with more Python files than this (a home folder, a whole monorepo checkout) is not indexed
# beyond the files being checked: the index would cost more than it tells.
MAX_PROJECT_FILES = 20_000
# The layout of `project-<key>.json`. What its digests mean changes with gpulint's code, which is in the key
# (`cache_key_parts`), so the summaries' FORMAT need not be (reading it would import the analysis).
STATE_FORMAT = 1
_SUFFIXES = (".py", ".pyi")


def project_files(files: list[Path], settings: Settings) -> list[Path]:
    """The files whose summaries the checked `files` may need: the project under the root, and theirs."""
    root = settings.root.resolve()
    found: dict[Path, None] = {}
    checked = [Path(os.path.abspath(f)) for f in files]
    if any(root in f.parents for f in checked):
        found.update(dict.fromkeys(_python_files(root, settings) or ()))
    for file in checked:
        if root not in file.parents:
            package = file.parent
            while (package / "__init__.py").is_file() and package.parent != package:
                package = package.parent
            if package != file.parent or (file.parent / "__init__.py").is_file():
                found.update(dict.fromkeys(_python_files(package, settings) or ()))
        found[file] = None
    # every checked file is a module (`include`d `.pyw` files, notebooks' code cells); the walk adds `.py` only
    checked_set = set(checked)
    return [p for p in found if p.suffix in _SUFFIXES or p in checked_set]


def _python_files(top: Path, settings: Settings) -> Optional[list[Path]]:
    """Python files under `top`, without hidden and excluded folders; None past MAX_PROJECT_FILES. A plain
    `scandir` walk: the project's files are read for what they define, not reported, so .gitignore does not
    apply (an ignored module that others import still says what it does)."""
    patterns = (*settings.exclude, *settings.extend_exclude)
    paths = [p for p in patterns if "/" in p.rstrip("/")]
    excluded_name = name_matcher(patterns)  # the folder-less patterns, tested once per name
    found: list[Path] = []
    stack = [str(top)]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            if name.startswith(".") or (excluded_name is not None and excluded_name(name)):
                continue
            if paths and any(glob_match(os.path.relpath(entry.path, top).replace(os.sep, "/"), p) for p in paths):
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                stack.append(entry.path)
            elif name.endswith(_SUFFIXES):
                found.append(Path(entry.path))
                if len(found) > MAX_PROJECT_FILES:
                    return None
    return found


class Project:
    """The project of some checked files: their hashes, context digests from the cache, and the index, which
    is built (every module summarised) only when a context is needed that the cache does not have."""

    def __init__(self, files: list[Path], settings: Settings, use_cache: bool = True, texts: Optional[dict[Path, bytes]] = None) -> None:
        from gpulint import __version__
        from gpulint.cache import cache_key_parts, cache_location

        self.settings = settings
        self.texts = texts or {}
        location = cache_location(settings) if use_cache else None
        self.directory, self.secret = location if location is not None else (None, b"")
        self.folder = self.directory / __version__ if self.directory is not None else None
        self.state_path = self.folder / f"project-{cache_key_parts('state', STATE_FORMAT)}.json" if self.folder is not None else None
        self.changed = False  # the state (hashes, context digests) to write back
        self.new_summaries = False
        state = self._read(self.state_path, STATE_FORMAT)
        known = state.get("files")
        self.known: dict[str, list] = {k: v for k, v in known.items() if _is_file_state(v)} if isinstance(known, dict) else {}
        self.files = project_files(files, settings)
        self.hashes: dict[Path, str] = {path: self._hash(path) for path in self.files}
        listing = "\n".join(f"{p}\0{h}" for p, h in sorted(self.hashes.items()))
        self.digest = hashlib.sha256(listing.encode("utf-8", "surrogateescape")).hexdigest()  # undecodable names too
        contexts = state.get("contexts")
        modules = contexts.get("modules") if isinstance(contexts, dict) and contexts.get("project") == self.digest else None
        # setting files (YAML) the contexts read, as they were: an edited one makes every context be recomputed
        stored = contexts.get("settings") if isinstance(modules, dict) else None
        self.setting_files: dict[str, list] = stored if isinstance(stored, dict) and _unchanged(stored) else {}
        if self.setting_files is not stored:
            modules = None
        self.contexts: dict[str, str] = {k: v for k, v in modules.items() if isinstance(v, str)} if isinstance(modules, dict) else {}

    def _hash(self, path: Path) -> str:
        """SHA-256 of the file's bytes: the given text, the recorded hash of an unchanged file, or read now."""
        from gpulint.cache import content_hash

        data = self.texts.get(path)
        try:
            stat = path.stat()
        except OSError:
            return ""
        known = self.known.get(str(path))
        if data is None and isinstance(known, list) and len(known) == 3 and known[:2] == [stat.st_mtime_ns, stat.st_size]:
            return known[2]
        if data is None:
            try:
                data = read_source_bytes(path)
            except SourceError:
                return ""
        digest = content_hash(data)
        if known != [stat.st_mtime_ns, stat.st_size, digest]:
            self.known[str(path)] = [stat.st_mtime_ns, stat.st_size, digest]
            self.changed = True
        return digest

    def context_digest(self, path: Path) -> str:
        """The digest of a file's context (from the cache when the project has not changed)."""
        known = self.contexts.get(str(path))
        return known if isinstance(known, str) else self.context(path).digest

    def known_context_digest(self, path: Path) -> Optional[str]:
        """The digest of a file's context as the cache recorded it, when the project has not changed since."""
        return self.contexts.get(str(path))

    def pickled_contexts(self, paths: list[Path]) -> list[tuple[str, bytes]]:
        """(digest, pickled context) of each of `paths`; then the project's state is saved (nothing more is
        learnt from it). Where it can (Linux, no other threads), the index is built in a forked child process:
        freed, its millions of small objects would leave the memory they held to this process, which goes on
        to parse files (CPython returns a small-object arena only when it is wholly empty: on torch's source
        236 MB stayed resident once the index was freed, the floor under LibCST's largest tree)."""
        if not paths:
            self.save()
            return []
        if _may_fork():
            found = _in_child(lambda: self._pickled_contexts(paths))
            if found is not None:
                self.changed = self.new_summaries = False  # the child saved the state
                return found
        return self._pickled_contexts(paths)

    def _pickled_contexts(self, paths: list[Path]) -> list[tuple[str, bytes]]:
        import pickle

        found = []
        for path in paths:
            context = self.context(path, keep=False)  # each asked once: pickled, then freed
            found.append((context.digest, pickle.dumps(context, pickle.HIGHEST_PROTOCOL)))
        self.save()
        return found

    def context(self, path: Path, keep: bool = True) -> ModuleContext:
        context = self.index.context(path, keep)
        if self.contexts.get(str(path)) != context.digest:
            self.contexts[str(path)] = context.digest
            self.changed = True
        for setting in context.settings:
            if setting not in self.setting_files:
                self.setting_files[setting] = _stat(setting)
                self.changed = True
        return context

    @cached_property
    def summaries_path(self) -> Optional[Path]:
        from gpulint.analysis.summary import FORMAT
        from gpulint.cache import cache_key_parts

        return self.folder / f"summaries-{cache_key_parts(FORMAT)}.json" if self.folder is not None else None

    @cached_property
    def index(self) -> ProjectIndex:
        from gpulint.analysis.project import ProjectIndex
        from gpulint.analysis.summary import FORMAT

        stored = self._read(self.summaries_path, FORMAT).get("summaries")
        summaries: dict = stored if isinstance(stored, dict) else {}
        found: dict[Path, ModuleSummary] = {}
        for path, digest in self.hashes.items():
            summary = _summary_from_json(summaries.get(digest))
            if summary is None:
                summary = self._summarize(path)
                self.new_summaries = True
            found[path] = summary
        del stored, summaries  # the JSON form is large: written back from the summaries themselves
        if self.new_summaries:
            # written now, while only the summaries are alive: once the contexts are composed, the index's
            # caches and this JSON together made a cold run's peak (torch: 406 MB against 333 MB without it)
            self._save_summaries(found)
        return ProjectIndex(self.settings.root.resolve(), found)

    def _save_summaries(self, found: dict[Path, ModuleSummary]) -> None:
        """Write the summaries of this project's files (another project's, sharing the cache folder, are dropped)."""
        from gpulint.analysis.summary import FORMAT
        from gpulint.cache import write_signed

        if self.summaries_path is None:
            return
        summaries = {digest: found[path].to_json() for path, digest in self.hashes.items() if digest and path in found}
        try:
            write_signed(self.directory, self.summaries_path, {"format": FORMAT, "summaries": summaries}, self.secret)
        except OSError:
            return  # a read-only disk only costs the cache
        self.new_summaries = False

    def _summarize(self, path: Path) -> ModuleSummary:
        from gpulint.analysis.summary import ModuleSummary, summarize
        from gpulint.budget import run_within

        data = self.texts.get(path)
        try:
            text = decode_source(data if data is not None else read_source_bytes(path)).text
            source = Notebook.parse(text).text if is_notebook_path(str(path)) else text
        except SourceError:  # NotebookError included
            return ModuleSummary(ok=False)
        # the per-file budget holds here too: a file whose summary runs out is unknown to the others (its own
        # check then meets the same budget and is reported as not checked)
        return run_within(self.settings.analysis_timeout, lambda: summarize(source), lambda: ModuleSummary(ok=False))

    def save(self) -> None:
        """Write what was learnt (hashes, context digests, summaries); a read-only disk only costs the cache."""
        from gpulint.cache import write_signed

        try:
            if self.changed and self.state_path is not None:
                files = {k: v for k, v in self.known.items() if os.path.exists(k)}
                contexts = {"project": self.digest, "modules": self.contexts, "settings": self.setting_files}
                write_signed(self.directory, self.state_path, {"format": STATE_FORMAT, "files": files, "contexts": contexts}, self.secret)
                self.changed = False
        except OSError:
            return


    def _read(self, path: Optional[Path], form: int) -> dict:
        """A cache file's content, or {} (missing, unreadable, not signed by this user, or not of format `form`:
        never trusted); a damaged or forged file is rewritten with this run's results."""
        from gpulint.cache import read_signed

        if path is None:
            return {}
        try:
            data = read_signed(self.directory, path, self.secret)
        except OSError:
            return {}
        except ValueError:
            self.changed = self.new_summaries = True
            return {}
        return data if isinstance(data, dict) and data.get("format") == form else {}


def _may_fork() -> bool:
    import threading

    # fork copies only the calling thread: with others running (an editor's server), a lock one holds stays held
    return sys.platform == "linux" and hasattr(os, "fork") and threading.active_count() == 1


def _in_child(work: Callable[[], T]) -> Optional[T]:
    """`work()`'s result from a forked copy of this process, or None when the copy failed (then the caller
    does the work itself, and meets the same error, if any, where it can be reported)."""
    import pickle
    import signal

    sys.stdout.flush()  # or the child's copy of a buffered line would be written twice
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status = 1
        try:
            os.close(read_end)
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(work(), out, pickle.HIGHEST_PROTOCOL)
            status = 0
        except BaseException:  # noqa: BLE001 - reported by the parent's own attempt
            pass
        finally:
            sys.stderr.flush()
            os._exit(status)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as source:
            data = source.read()
        _, status = os.waitpid(pid, 0)
    except BaseException:  # Ctrl-C, SIGTERM: the child goes too
        with suppress(OSError):  # already reaped
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        raise
    return pickle.loads(data) if status == 0 and data else None


def _stat(path: str) -> list:
    try:
        stat = os.stat(path)
    except OSError:
        return []
    return [stat.st_mtime_ns, stat.st_size]


def _unchanged(files: dict) -> bool:
    return all(isinstance(v, list) and _stat(k) == v for k, v in files.items())


def _is_file_state(entry: object) -> bool:
    """`[mtime_ns, size, sha256]`, as `Project._hash` records it."""
    return isinstance(entry, list) and len(entry) == 3 and type(entry[0]) is int and type(entry[1]) is int and isinstance(entry[2], str)


def _summary_from_json(data: object) -> Optional[ModuleSummary]:
    """The summary a cache record holds, or None when the record does not have the types `to_json` writes."""
    if not (isinstance(data, dict) and type(data.get("ok")) is bool):
        return None
    parts = [data.get(key) for key in ("imports", "functions", "classes", "values")]
    if not all(isinstance(part, dict) for part in parts) or not isinstance(data.get("evidence"), list):
        return None
    if not all(isinstance(v, list) for v in (*data["imports"].values(), *data.get("stars", ()))):
        return None
    if not all(isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and type(e[1]) is int for e in data["evidence"]):
        return None
    for record in data["functions"].values():
        if not (isinstance(record, list) and 2 <= len(record) <= 9 and type(record[0]) is int and _strings(record[1])):
            return None
    for record in data["classes"].values():
        if not (isinstance(record, list) and len(record) == 4 and type(record[0]) is int and _strings(record[1]) and _strings(record[2]) and isinstance(record[3], dict)):
            return None
    from gpulint.analysis.summary import ModuleSummary

    try:
        return ModuleSummary.from_json(data)
    except Exception:  # noqa: BLE001 - a record of the right outline with a wrong part inside: a miss
        return None


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def load_project(files: list[Path], settings: Settings, use_cache: bool = True) -> ProjectIndex:
    """The index of the project of `files` (summaries from the cache where unchanged)."""
    project = Project(files, settings, use_cache)
    index = project.index
    project.save()
    return index


def context_for(index: ProjectIndex, path: Path, text: str, tree=None) -> ModuleContext:
    """The context of `path` in `index` for `text`, which may differ from what was indexed (a file being
    fixed, flake8's view of it): then that module is summarised again and the facts recomposed. `tree`:
    `text` already parsed by `ast` (flake8 has it)."""
    from gpulint.analysis.summary import summarize

    absolute = Path(os.path.abspath(path))
    summary = summarize(text, tree)
    record = index.records.get(absolute)
    if record is None or summary.to_json() != record.summary.to_json():
        index = index.with_module(absolute, summary)
    return index.context(absolute)
