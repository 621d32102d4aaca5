"""Source folders a run script puts on `PYTHONPATH` together: a bare import of a sibling folder's module.

Research code split into `src/solver/`, `src/transformer/`, `src/utils/` is often run through a shell script
that puts every one of those folders on the path (`export PYTHONPATH=$SRC/data/:$SRC/transformer/:$SRC/solver/`),
so `src/solver/solver.py` writes `from loss import cal_performance` for `src/transformer/loss.py`. Python's own
rules (the script's folder, then each folder up to the root, `src/`, `lib/`) do not find it, and the calls stay
unknown: a loss function that reads the token count with `.item()` every step is out of sight of the loop that
calls it.

`sibling_module` answers for such an import when nothing else did: the one module of that dotted name in a
folder beside the importer's (a child of the importer's parent folder). Two candidates (a `utils.py` in two
sibling folders) are not guessed between; the importer's own folder and a package of that name were tried first.
"""

from __future__ import annotations

import os
from typing import Callable, Optional, TypeVar

T = TypeVar("T")


def sibling_module(
    folder: str, parts: list[str], root: str, folders: dict[str, list[str]], lookup: Callable[[str], Optional[T]]
) -> Optional[T]:
    """The record `lookup` finds for `parts` in exactly one folder beside `folder` (a child of its parent, inside
    `root`), or None. `folders`: parent folder -> its child folders that hold project files."""
    parent = os.path.dirname(folder)
    if not parts or parent == folder or not (parent == root or parent.startswith(root + os.sep)):
        return None
    candidates = (lookup(os.path.join(sibling, *parts)) for sibling in folders.get(parent, ()) if sibling != folder)
    found = [record for record in candidates if record is not None]
    return found[0] if len(found) == 1 else None


def child_folders(files: list[str]) -> dict[str, list[str]]:
    """Parent folder -> the folders directly in it that hold project files (at any depth below)."""
    children: dict[str, set[str]] = {}
    for path in files:
        folder = os.path.dirname(path)
        while True:
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            children.setdefault(parent, set()).add(folder)
            folder = parent
    return {parent: sorted(found) for parent, found in children.items()}


def files_near(folder: str, wanted: Callable[[str], bool], limit: int, *, inside_repository: bool) -> list[str]:
    """The files whose names `wanted` accepts in `folder` and the two above it, sorted by name within each
    folder, at most `limit`. With `inside_repository`, not above the repository's root (a folder holding
    `.git`) or the folder gpulint runs in: files there belong to other projects."""
    found: list[str] = []
    top = os.getcwd()
    for _ in range(3):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        found.extend(os.path.join(folder, n) for n in names if wanted(n) and os.path.isfile(os.path.join(folder, n)))
        parent = os.path.dirname(folder)
        if parent == folder or (inside_repository and (folder == top or ".git" in names)):
            break
        folder = parent
    return found[:limit]
