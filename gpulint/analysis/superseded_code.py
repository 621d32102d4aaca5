"""Superseded copies kept in a repository: code a project keeps for the record but no longer runs. BiSeNet keeps
its original implementation in `old/` next to the refactored `lib/` and `tools/` (its README: "you will not need
it"); per-step advice there is advice on code nobody trains with.

A module is superseded when a folder between the project root and the module is named `old`, `deprecated`,
`obsolete` or `tmp` (scratch copies: a book's `Chapter12/tmp/` keeps earlier drafts of the chapter's scripts, written
for a torch they no longer run on; both judges of the twenty-second corpus: noise), the whole project is in the index, and no module outside that folder imports anything inside it:
a `deprecated/` package the training script still imports is running code (so is `old_utils.py`, a file, and
`legacy_models/`, whose name says nothing about being replaced).

A documentation copy is superseded too: a module under a documentation folder (`docs/`, `doc/`) whose code is that
of a module outside such folders (the same statements, comments, blank lines and docstrings aside). Sphinx-gallery
writes each example script of a project into its `docs/source/tutorials/` as a `.py` and an `.ipynb` (its docstring
and comment blocks as text cells): a finding there is the original's finding again, and the change belongs in the
original (both judges of the sixteenth corpus called such copies noise). A documentation page whose code differs
from every module (a tutorial written in `docs/` only) keeps its findings.

Not `legacy/`, `retired*/`, `archive/` or `third_party/`: the judged corpora hold runnable code there whose
findings were right (bentrevett's `legacy/` tutorial notebooks, mlcommons' `retired_benchmarks/`). Vendored
copies of a library (ChatGLM-6B's `ptuning/trainer.py`, transformers' Trainer with its copyright header) are not
told apart either: a foreign copyright or "adapted from" header marks many projects' own training scripts too
(minGPT trainers, DETR derivatives); such folders are for `extend-exclude`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gpulint.analysis.uncalled import modules_imported_by, whole_project_indexed

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

# Folder names that say the code in them was replaced (exact, case-insensitive).
SUPERSEDED_FOLDERS = frozenset({"old", "deprecated", "obsolete", "tmp"})
# Folders of a documentation build (exact, case-insensitive), where sphinx-gallery writes copies of example scripts.
DOCUMENTATION_FOLDERS = frozenset({"docs", "doc", "documentation"})


def superseded(index: ProjectIndex, record: ModuleRecord) -> bool:
    """`record` lies in a superseded folder nothing outside it imports, or is a documentation copy of another
    module of the project (see the module docstring)."""
    folder = _superseded_folder(index, record)
    if folder is not None and folder in index.computed("superseded folders", lambda: _unused_folders(index)):
        return True
    return documentation_copy(index, record)


def documentation_copy(index: ProjectIndex, record: ModuleRecord) -> bool:
    """`record` lies in a documentation folder (`DOCUMENTATION_FOLDERS`) and its code is that of a module outside
    any such folder (`summary.code_digest`: comments, blank lines and docstrings aside)."""
    code = record.summary.code
    if not code or not _in_documentation(index, record):
        return False
    originals = index.computed("code outside documentation", lambda: _codes_outside_documentation(index))
    return code in originals


def _in_documentation(index: ProjectIndex, record: ModuleRecord) -> bool:
    relative = os.path.relpath(str(record.path), str(index.root))
    if relative.startswith(os.pardir):
        return False
    return any(part.lower() in DOCUMENTATION_FOLDERS for part in relative.split(os.sep)[:-1])


def _codes_outside_documentation(index: ProjectIndex) -> frozenset[str]:
    return frozenset(r.summary.code for r in index.records.values() if r.summary.code and not _in_documentation(index, r))


def _superseded_folder(index: ProjectIndex, record: ModuleRecord) -> str | None:
    """The outermost folder below the root, on the module's path, with a superseded name."""
    relative = os.path.relpath(str(record.path), str(index.root))
    if relative.startswith(os.pardir):
        return None
    parts = relative.split(os.sep)[:-1]
    for depth, name in enumerate(parts):
        if name.lower() in SUPERSEDED_FOLDERS:
            return os.path.join(str(index.root), *parts[: depth + 1])
    return None


def _unused_folders(index: ProjectIndex) -> frozenset[str]:
    """The superseded folders that no module outside them imports from."""
    folders = {id(r): _superseded_folder(index, r) for r in index.records.values()}
    candidates = {f for f in folders.values() if f is not None}
    if not candidates or not whole_project_indexed(index):
        return frozenset()
    used: set[str] = set()
    for importer in index.records.values():
        own = folders[id(importer)]
        for target in modules_imported_by(index, importer):
            folder = folders.get(id(target))
            if folder is not None and folder != own:
                used.add(folder)  # `from old.model import Net` in train.py: old/ runs
    return frozenset(candidates - used)
