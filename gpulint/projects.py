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
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from functools import cached_property
from pathlib import Path
from typing import Optional

from gpulint.analysis.project import ModuleContext, ProjectIndex
from gpulint.analysis.summary import FORMAT as SUMMARY_FORMAT
from gpulint.analysis.summary import ModuleSummary, summarize
from gpulint.config import Settings, _glob_match
from gpulint.notebook import Notebook, is_notebook_path
from gpulint.source import SourceError, decode_source, read_source_bytes

# A root with more Python files than this (a home folder, a whole monorepo checkout) is not indexed
# beyond the files being checked: the index would cost more than it tells.
MAX_PROJECT_FILES = 20_000
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
    # a checked notebook is a module too: its code cells, which may import the project's modules
    return [p for p in found if p.suffix in _SUFFIXES or p.suffix == ".ipynb" and p in checked]


def _python_files(top: Path, settings: Settings) -> Optional[list[Path]]:
    """Python files under `top`, without hidden and excluded folders; None past MAX_PROJECT_FILES. A plain
    `scandir` walk: the project's files are read for what they define, not reported, so .gitignore does not
    apply (an ignored module that others import still says what it does)."""
    patterns = (*settings.exclude, *settings.extend_exclude)
    names = [p.rstrip("/") for p in patterns if "/" not in p.rstrip("/")]
    paths = [p for p in patterns if "/" in p.rstrip("/")]
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
            if name.startswith(".") or any(fnmatch.fnmatchcase(name, p) for p in names):
                continue
            if paths and any(_glob_match(os.path.relpath(entry.path, top).replace(os.sep, "/"), p) for p in paths):
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
        from gpulint.cache import cache_key_parts, cache_root

        self.settings = settings
        self.texts = texts or {}
        folder = cache_root(settings) / __version__ if use_cache else None
        key = cache_key_parts(SUMMARY_FORMAT)
        self.state_path = folder / f"project-{key}.json" if folder is not None else None
        self.summaries_path = folder / f"summaries-{key}.json" if folder is not None else None
        state = _read_json(self.state_path)
        known = state.get("files")
        self.known: dict[str, list] = known if isinstance(known, dict) else {}
        self.changed = False  # the state (hashes, context digests) to write back
        self.new_summaries = False
        self.files = project_files(files, settings)
        self.hashes: dict[Path, str] = {path: self._hash(path) for path in self.files}
        self.digest = hashlib.sha256("\n".join(f"{p}\0{h}" for p, h in sorted(self.hashes.items())).encode()).hexdigest()
        contexts = state.get("contexts")
        self.contexts: dict[str, str] = (
            dict(contexts["modules"]) if isinstance(contexts, dict) and contexts.get("project") == self.digest and isinstance(contexts.get("modules"), dict) else {}
        )

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

    def context(self, path: Path) -> ModuleContext:
        context = self.index.context(path)
        if self.contexts.get(str(path)) != context.digest:
            self.contexts[str(path)] = context.digest
            self.changed = True
        return context

    @cached_property
    def index(self) -> ProjectIndex:
        stored = _read_json(self.summaries_path).get("summaries")
        summaries: dict = stored if isinstance(stored, dict) else {}
        found: dict[Path, ModuleSummary] = {}
        for path, digest in self.hashes.items():
            summary = None
            data = summaries.get(digest)
            if isinstance(data, dict):
                try:
                    summary = ModuleSummary.from_json(data)
                except (KeyError, TypeError, ValueError):
                    summary = None
            if summary is None:
                summary = self._summarize(path)
                self.new_summaries = True
            found[path] = summary
        del stored, summaries  # the JSON form is large: written back from the summaries themselves
        return ProjectIndex(self.settings.root.resolve(), found)

    def _summarize(self, path: Path) -> ModuleSummary:
        data = self.texts.get(path)
        try:
            text = decode_source(data if data is not None else read_source_bytes(path)).text
            return summarize(Notebook.parse(text).text if is_notebook_path(str(path)) else text)
        except SourceError:  # NotebookError included
            return ModuleSummary(ok=False)

    def save(self) -> None:
        """Write what was learnt (hashes, context digests, summaries); a read-only disk only costs the cache."""
        from gpulint.cache import write_json_atomic

        try:
            if self.new_summaries and self.summaries_path is not None:
                # the summaries of this project's files (another project's, sharing the cache folder, are dropped)
                records = self.index.records
                summaries = {digest: records[path].summary.to_json() for path, digest in self.hashes.items() if digest and path in records}
                write_json_atomic(self.summaries_path, {"format": SUMMARY_FORMAT, "summaries": summaries})
                self.new_summaries = False
            if self.changed and self.state_path is not None:
                files = {k: v for k, v in self.known.items() if os.path.exists(k)}
                contexts = {"project": self.digest, "modules": self.contexts}
                write_json_atomic(self.state_path, {"format": SUMMARY_FORMAT, "files": files, "contexts": contexts})
                self.changed = False
        except OSError:
            return


def _read_json(path: Optional[Path]) -> dict:
    """A cache file's content, or {} (missing, unreadable, or written by another format: never trusted)."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("format") == SUMMARY_FORMAT else {}


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
    absolute = Path(os.path.abspath(path))
    summary = summarize(text, tree)
    record = index.records.get(absolute)
    if record is None or summary.to_json() != record.summary.to_json():
        index = index.with_module(absolute, summary)
    return index.context(absolute)
