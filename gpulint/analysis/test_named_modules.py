"""A module named like a test that the project's own code imports as a library (`dataset/dataset_test.py`, the
loaders of a fine-tuning script: `from dataset.dataset_test import MolTestDatasetWrapper` in finetune.py).

The default `test-paths` take `*_test.py` and `test_*.py` for tests, where only the rules that apply to tests
run. A file of that name that holds no test (it imports no test framework, defines no `test_*` function and no
`Test*` class) and that a module of the project outside the test paths imports is code that runs, not a test
pytest would collect: its loaders and steps are what the importing script runs, so every rule reads it.
A file inside a `test/` or `tests/` folder stays a test file (a helper of the test suite that some library code
also imports is still test code); so does any file when `test-paths` is set in the configuration.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from gpulint.config import DEFAULT_TEST_PATHS, glob_match

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

_TEST_CODE = re.compile(
    r"^\s*(?:(?:import|from)\s+(?:pytest|_pytest|unittest|nose)\b|(?:async\s+)?def\s+test|class\s+Test)", re.MULTILINE
)
_TEST_FOLDERS = ("test", "tests")


def named_like_a_test_only(shown: str) -> bool:
    """The default test paths take `shown` for a test by its file name alone (`dataset_test.py`, not
    `tests/utils.py` nor `tests/dataset_test.py`)."""
    path = PurePosixPath(shown.replace("\\", "/"))
    if any(part in _TEST_FOLDERS for part in path.parts[:-1]) or path.name == "conftest.py":
        return False
    return any(glob_match(path.name, pattern) for pattern in DEFAULT_TEST_PATHS)


def holds_no_test(text: str) -> bool:
    """No test framework import, no `test*` function, no `Test*` class."""
    return _TEST_CODE.search(text) is None


def _relative(index: ProjectIndex, record: ModuleRecord) -> str:
    try:
        return record.path.relative_to(index.root).as_posix()
    except ValueError:
        return PurePosixPath(record.path.as_posix()).name  # outside the root: only its name is known to be its own


def imported_by_code(index: ProjectIndex, record: ModuleRecord) -> list[str]:
    """The modules of the project outside the default test paths that import `record` (a module named like a
    test only), sorted; empty for any other module."""
    from gpulint.analysis.uncalled import modules_imported_by

    if not named_like_a_test_only(_relative(index, record)):
        return []
    found = set()
    for importer in index.records.values():
        if importer is record or any(glob_match(_relative(index, importer), p) for p in DEFAULT_TEST_PATHS):
            continue
        if any(source is record for source in modules_imported_by(index, importer)):
            found.add(importer.shown)
    return sorted(found)


def library_named_like_a_test(text: str, importers: list[str]) -> bool:
    """A module named like a test only, imported by `importers` (`imported_by_code`), is a library module of the
    project, not a test."""
    return bool(importers) and holds_no_test(text)
