"""Test code: unit tests are not training code, so per-step performance advice does not apply to them.

Two sources decide it. The file's path, matched against the `test-paths` setting (by default the conventions
pytest and unittest discover by: `test_*.py`, `*_test.py`, `conftest.py`, and everything under a `tests/` or
`test/` folder). And the module's structure, whatever its path: a module that imports pytest is test
infrastructure (training code never does), and a `unittest.TestCase` subclass is a test wherever it lives.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.config import DEFAULT_TEST_PATHS  # noqa: F401 - the setting's default (relative to the root, `per-file-ignores` globs)

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_TEST_FRAMEWORKS = ("pytest", "_pytest")
# `unittest.TestCase`, `IsolatedAsyncioTestCase`, torch's and transformers' `TestCase` / `TestCasePlus`.
_TEST_CASE = re.compile(r"\w*TestCase\w*")
# Module level (column 0) `args = parser.parse_args()`: importing the module reads the command line, which
# under a test runner is the runner's own; only a script run from the shell does that.
_PARSES_ARGV_AT_IMPORT = re.compile(r"^[^\s#@].*\bparse(?:_known)?_args\(\s*\)", re.MULTILINE)
_TEST_IMPORT = re.compile(r"^\s*(?:import|from)\s+(?:pytest|_pytest|unittest)\b", re.MULTILINE)


def script_named_like_a_test(text: str) -> bool:
    """A file the default conventions take for a test (`copymem_test.py`) that is a command-line script: it
    parses its command line when imported and imports no test framework, so it is run, never collected."""
    return _PARSES_ARGV_AT_IMPORT.search(text) is not None and _TEST_IMPORT.search(text) is None


class TestCode:
    """Where in one module the code is a test (see the module docstring)."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model

    @cached_property
    def whole_module(self) -> bool:
        """The module imports pytest."""
        return any(full.split(".")[0] in _TEST_FRAMEWORKS for full in self.model.imports.bindings.values())

    @cached_property
    def test_classes(self) -> list[cst.ClassDef]:
        """`unittest.TestCase` subclasses (also through this module's own base classes)."""
        answers: dict[str, bool] = {}  # once per class: shared bases are not walked again for each descendant
        return [info.node for name, info in self.model.classes.items() if self._is_test_case(name, answers)]

    def rows(self) -> list[tuple[int, int]]:
        """The line spans (first, last) that are test code; the whole module is one span."""
        if self.whole_module:
            return [(1, len(self.model.lines))]
        spans = []
        for node in self.test_classes:
            span = self.model.range(node)
            spans.append((span.start.line, span.end.line))
        return spans

    def _is_test_case(self, name: str, answers: dict[str, bool]) -> bool:
        if name in answers:
            return answers[name]
        answers[name] = False  # while it is being answered: a cycle of bases adds nothing
        info = self.model.classes.get(name)
        found = False
        for base in info.bases if info is not None else ():
            if base in self.model.classes:
                found = self._is_test_case(base, answers)
            else:  # an imported `TestCase` (`unittest.TestCase`, `from .common import TestCase`)
                found = _TEST_CASE.fullmatch(base.rsplit(".", 1)[-1]) is not None
            if found:
                break
        answers[name] = found
        return found
