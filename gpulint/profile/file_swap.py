"""Switch a set of files between their original and fixed contents, atomically, keeping permissions.

Every write goes through `gpulint.fixer.write_atomic` with the version we expect on disk: a file the user edited
while the runs were in flight (neither our original nor our fixed bytes) is never overwritten; it is reported
as a conflict and left alone from then on.
"""

from __future__ import annotations

import pathlib

from gpulint.fixer import WriteError, write_atomic


class FileSwap:
    """Holds both versions of every changed file; `use("original")` / `use("fixed")` writes whichever differs."""

    def __init__(self, originals: dict[pathlib.Path, bytes], fixed: dict[pathlib.Path, bytes]):
        self.originals = {pathlib.Path(p): b for p, b in originals.items()}
        fixed = {pathlib.Path(p): b for p, b in fixed.items()}
        self.fixed = {p: fixed[p] for p in self.originals}
        self.conflicts: list[pathlib.Path] = []  # files changed on disk by someone else: never written again

    def use(self, which: str) -> list[pathlib.Path]:
        """Put `which` version in place; returns the files newly found changed on disk (left as they are).

        Raises gpulint.fixer.WriteError when a file cannot be written (permissions, disk full)."""
        versions = self.originals if which == "original" else self.fixed
        found: list[pathlib.Path] = []
        for path, data in versions.items():
            if path in self.conflicts:
                continue
            try:
                current = path.read_bytes()
            except FileNotFoundError:
                current = None
            if current == data:
                continue
            if current not in (self.originals[path], self.fixed[path]):
                self.conflicts.append(path)  # deleted or edited by the user: theirs now
                found.append(path)
                continue
            try:
                write_atomic(path, data, current)  # re-checks the bytes on disk right before the rename
            except WriteError:
                if _read(path) in (self.originals[path], self.fixed[path]):
                    raise  # a real write failure
                self.conflicts.append(path)  # edited between our read and the write
                found.append(path)
        return found


def _read(path: pathlib.Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None
