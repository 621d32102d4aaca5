"""Files a run leaves in the working folder: a checkpoint one run writes and the next one loads (the DDP
tutorial's `snapshot.pt`) makes the runs depend on each other, and `lightning_logs/version_N` piles up. gpulint
notes them after each run and leaves them in place, or, with `--isolate-runs`, moves the files a run created into
`.gpulint-runs/` so that every run starts from the same folder."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import time

ASIDE_DIR = ".gpulint-runs"
SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", ".git", ".venv", "venv", ".gpulint_cache", ASIDE_DIR}
MAX_ENTRIES = 20000
MAX_DEPTH = 4

Snapshot = dict[str, tuple[int, int]]


def snapshot(roots: list[pathlib.Path], exclude: set[pathlib.Path] = frozenset(), folders: set[str] | None = None) -> Snapshot:
    """{path: (mtime_ns, size)} for the files under the roots (bounded: depth, count; virtual environments,
    caches and the excluded files and folders skipped); the folders walked are added to `folders` if given."""
    found: Snapshot = {}
    excluded = {str(p) for p in exclude}
    for root in roots:
        stack = [(str(root), 0)]
        while stack and len(found) < MAX_ENTRIES:
            folder, depth = stack.pop()
            if folders is not None:
                folders.add(folder)
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if (
                            depth < MAX_DEPTH
                            and entry.name not in SKIP_DIRS
                            and entry.path not in excluded
                            and not os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))
                        ):
                            stack.append((entry.path, depth + 1))
                    elif entry.is_file(follow_symlinks=False) and entry.path not in excluded:
                        st = entry.stat(follow_symlinks=False)
                        found[entry.path] = (st.st_mtime_ns, st.st_size)
                except OSError:
                    continue
    return found


def changes(before: Snapshot, after: Snapshot, relative_to: pathlib.Path) -> list[str]:
    """Files created or changed between the two snapshots, relative to the working folder where possible."""
    out = []
    for path, stamp in sorted(after.items()):
        if before.get(path) != stamp:
            try:
                shown = os.path.relpath(path, relative_to)
            except ValueError:
                shown = path
            out.append(shown if not shown.startswith("..") else path)
    return out


class FolderWatch:
    """Snapshots the working folder (and the script's, when elsewhere) around each run."""

    def __init__(self, cwd: pathlib.Path, script: pathlib.Path | None, exclude: set[pathlib.Path], isolate: bool = False):
        """`exclude`: files and folders gpulint itself writes (the swapped sources, --json, --html, --trace).
        `isolate`: move the files each run creates aside (see `set_aside`)."""
        self.cwd = cwd.resolve()
        self.roots = [self.cwd]
        if script is not None and not script.parent.resolve().is_relative_to(self.cwd):
            self.roots.append(script.parent.resolve())
        self.exclude = {pathlib.Path(p).resolve() for p in exclude}
        self.isolate = isolate
        self.aside_root = self.cwd / ASIDE_DIR / time.strftime("%Y%m%d-%H%M%S")
        self.before: Snapshot = {}
        self.folders_before: set[str] = set()

    def start(self) -> None:
        self.folders_before = set()
        self.before = snapshot(self.roots, self.exclude, self.folders_before)

    def stop(self) -> tuple[list[str], Snapshot]:
        """The files the run created or changed (shown relative to the working folder), and the folder's snapshot
        after the run (what `set_aside` needs)."""
        after = snapshot(self.roots, self.exclude)
        return changes(self.before, after, self.cwd), after

    def set_aside(self, label: str, after: Snapshot) -> tuple[pathlib.Path | None, list[str]]:
        """Move the files the last run created (in `after`, the snapshot `stop` took, not in the one `start` took)
        into `.gpulint-runs/<time>/<label>/` (same relative paths) and remove the folders it created that are left
        empty, so the next run starts from the folder the first one saw. Returns that folder (None when nothing
        was created) and the files that existed before and were changed in place (they cannot be put back:
        gpulint keeps no copy of the user's files)."""
        created = [p for p in after if p not in self.before]
        changed = changes({p: s for p, s in self.before.items() if p in after}, {p: s for p, s in after.items() if p in self.before}, self.cwd)
        if not created:
            return None, changed
        target = self.aside_root / (re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") or "run")
        for path in created:
            source = pathlib.Path(path)
            try:
                relative = source.relative_to(self.cwd)
            except ValueError:  # the script's folder outside the working folder
                relative = pathlib.Path("_script_folder") / source.relative_to(self.roots[-1])
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(source), str(target / relative))
        _write_ignore(self.cwd / ASIDE_DIR)
        new_folders = {str(pathlib.Path(p).parent) for p in created} - self.folders_before
        for folder in sorted(_with_parents(new_folders, self.folders_before), key=len, reverse=True):
            try:
                os.rmdir(folder)  # only when empty: whatever else is in it stays
            except OSError:
                pass
        return target, changed


def _with_parents(folders: set[str], existing: set[str]) -> set[str]:
    """The folders and their parents up to the first one that existed before the run."""
    out = set()
    for folder in folders:
        while folder not in existing and folder not in out and os.path.dirname(folder) != folder:
            out.add(folder)
            folder = os.path.dirname(folder)
    return out


def _write_ignore(folder: pathlib.Path) -> None:
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# files gpulint's runs created, set aside by --isolate-runs\n*\n", encoding="utf-8")
