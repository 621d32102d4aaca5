"""Pass one: the project a file belongs to, every module of it summarised (cached by content hash), the index.

The project is every Python file under the configuration root (`[tool.gpulint]`'s folder, or the working
directory), walked with the same excludes as `gpulint check`, plus the files being checked. Files outside
the root form a project with their package (the folders above them that have an `__init__.py`).

Summaries are kept in the cache folder (`summaries-<key>.json`): path -> (mtime, size, SHA-256) so that an
unchanged file is not even read, and SHA-256 -> summary, so that a moved or restored file is not
summarised again. Summaries hold no tree; reading them back costs a few milliseconds per hundred files.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Optional

from gpulint.analysis.project import ModuleContext, ProjectIndex
from gpulint.analysis.summary import FORMAT as SUMMARY_FORMAT
from gpulint.analysis.summary import ModuleSummary, summarize
from gpulint.config import Settings
from gpulint.source import SourceError, decode_source, discover, read_source_bytes

# A root with more Python files than this (a home folder, a whole monorepo checkout) is not indexed
# beyond the files being checked: the index would cost more than it tells.
MAX_PROJECT_FILES = 20_000


def project_files(files: list[Path], settings: Settings) -> list[Path]:
    """The files whose summaries the checked `files` may need: the project under the root, and theirs."""
    root = settings.root.resolve()
    found: dict[Path, None] = {}
    if any(root in Path(os.path.abspath(f)).parents for f in files):
        walked, _ = discover([str(root)], settings)
        if len(walked) <= MAX_PROJECT_FILES:
            found.update((Path(os.path.abspath(p)), None) for p in walked)
    for file in files:
        absolute = Path(os.path.abspath(file))
        found[absolute] = None
        if root not in absolute.parents:
            package = absolute.parent
            while (package / "__init__.py").is_file() and package.parent != package:
                package = package.parent
            if package != absolute.parent or (absolute.parent / "__init__.py").is_file():
                walked, _ = discover([str(package)], settings)
                found.update((Path(os.path.abspath(p)), None) for p in walked[:MAX_PROJECT_FILES])
    return [p for p in found if p.suffix in (".py", ".pyi")]


class SummaryStore:
    """Summaries by content hash, and the hash of each file by (mtime, size): load once, save once."""

    def __init__(self, directory: Optional[Path]) -> None:
        from gpulint.cache import cache_key_parts, write_json_atomic

        self._write = write_json_atomic
        self.path = directory / f"summaries-{cache_key_parts(SUMMARY_FORMAT)}.json" if directory is not None else None
        self.files: dict[str, list] = {}
        self.summaries: dict[str, dict] = {}
        self.changed = False
        if self.path is not None:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                if isinstance(data, dict) and isinstance(data.get("files"), dict) and isinstance(data.get("summaries"), dict):
                    self.files, self.summaries = data["files"], data["summaries"]
            except (OSError, ValueError):
                pass

    def summary(self, path: Path, data: Optional[bytes] = None) -> tuple[str, ModuleSummary]:
        """(SHA-256 of the file's bytes, its summary); `data` when the caller has read the file already."""
        from gpulint.cache import content_hash

        key = str(path)
        digest = None
        stat = None
        if data is None:
            try:
                stat = path.stat()
            except OSError:
                return "", ModuleSummary(ok=False)
            known = self.files.get(key)
            if isinstance(known, list) and len(known) == 3 and known[:2] == [stat.st_mtime_ns, stat.st_size]:
                digest = known[2]
            else:
                try:
                    data = read_source_bytes(path)
                except SourceError:
                    return "", ModuleSummary(ok=False)
        if digest is None:
            digest = content_hash(data)
            if stat is None:
                try:
                    stat = path.stat()
                except OSError:
                    stat = None
            if stat is not None and self.files.get(key) != [stat.st_mtime_ns, stat.st_size, digest]:
                self.files[key] = [stat.st_mtime_ns, stat.st_size, digest]
                self.changed = True
        stored = self.summaries.get(digest)
        if isinstance(stored, dict):
            try:
                return digest, ModuleSummary.from_json(stored)
            except (KeyError, TypeError, ValueError):
                pass
        if data is None:
            try:
                data = read_source_bytes(path)
            except SourceError:
                return digest, ModuleSummary(ok=False)
        try:
            text = decode_source(data).text
        except SourceError:
            return digest, ModuleSummary(ok=False)
        summary = summarize(text)
        self.summaries[digest] = summary.to_json()
        self.changed = True
        return digest, summary

    def save(self) -> None:
        if self.path is None or not self.changed:
            return
        used = {entry[2] for entry in self.files.values() if isinstance(entry, list) and len(entry) == 3}
        files = {k: v for k, v in self.files.items() if Path(k).exists()}
        summaries = {k: v for k, v in self.summaries.items() if k in used}
        try:
            self._write(self.path, {"format": SUMMARY_FORMAT, "files": files, "summaries": summaries})
        except OSError:
            return
        self.changed = False


def load_project(files: list[Path], settings: Settings, use_cache: bool = True, texts: Optional[dict[Path, bytes]] = None) -> ProjectIndex:
    """Pass one for the project of `files`: every module summarised (from the cache where unchanged), indexed.
    `texts`: bytes already read for some files (they win over the disk)."""
    from gpulint.cache import cache_root

    start = time.perf_counter()
    store = SummaryStore(cache_root(settings) / _version_folder() if use_cache else None)
    summaries: dict[Path, ModuleSummary] = {}
    for path in project_files(files, settings):
        data = (texts or {}).get(path)
        _, summaries[path] = store.summary(path, data)
    store.save()
    index = ProjectIndex(settings.root.resolve(), summaries)
    index.seconds = time.perf_counter() - start
    return index


def _version_folder() -> str:
    from gpulint import __version__

    return __version__


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
