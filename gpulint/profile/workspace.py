"""Files a run leaves in the working folder: a checkpoint one run writes and the next one loads (the DDP
tutorial's `snapshot.pt`) makes the runs depend on each other, and `lightning_logs/version_N` piles up. gpulint
notes them after each run and leaves them in place."""

from __future__ import annotations

import os
import pathlib

SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", ".git", ".venv", "venv", ".gpulint_cache"}
MAX_ENTRIES = 20000
MAX_DEPTH = 4

Snapshot = dict[str, tuple[int, int]]


def snapshot(roots: list[pathlib.Path], exclude: set[pathlib.Path] = frozenset()) -> Snapshot:
    """{path: (mtime_ns, size)} for the files under the roots (bounded: depth, count; virtual environments,
    caches and the excluded files and folders skipped)."""
    found: Snapshot = {}
    excluded = {str(p) for p in exclude}
    for root in roots:
        stack = [(str(root), 0)]
        while stack and len(found) < MAX_ENTRIES:
            folder, depth = stack.pop()
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

    def __init__(self, cwd: pathlib.Path, script: pathlib.Path | None, exclude: set[pathlib.Path]):
        """`exclude`: files and folders gpulint itself writes (the swapped sources, --json, --html, --trace)."""
        self.cwd = cwd.resolve()
        self.roots = [self.cwd]
        if script is not None and not script.parent.resolve().is_relative_to(self.cwd):
            self.roots.append(script.parent.resolve())
        self.exclude = {pathlib.Path(p).resolve() for p in exclude}
        self.before: Snapshot = {}

    def start(self) -> None:
        self.before = snapshot(self.roots, self.exclude)

    def stop(self) -> list[str]:
        return changes(self.before, snapshot(self.roots, self.exclude), self.cwd)
