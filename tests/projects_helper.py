"""Small projects for the project-model tests: files written into a tmp folder (or a fixture project copied
from tests/projects/), linted whole the way `gpulint check .` does, findings read as `file:line CODE`."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from gpulint.config import Settings, with_overrides
from gpulint.linter import lint_files
from tests.conftest import ALL_EVALS, ALL_LOADERS, ALL_READS, REPO

PROJECTS = REPO / "tests" / "projects"


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def copy_project(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(PROJECTS / name, target)
    return target


def lint(root: Path, monkeypatch, files: list[str] | None = None, use_cache: bool = False, **overrides):
    """The diagnostics of the whole project at `root` (or of `files` in it, with the project's index)."""
    monkeypatch.chdir(root)
    settings = with_overrides(Settings(root=root, rule_options=ALL_READS + ALL_LOADERS + ALL_EVALS), **overrides)
    paths = [root / f for f in files] if files else sorted(root.rglob("*.py"))
    return [d for result in lint_files(paths, settings, jobs=1, use_cache=use_cache) for d in result.diagnostics]


def found(diagnostics) -> list[str]:
    return [f"{d.filename}:{d.location.row} {d.code or d.name}" for d in diagnostics]


def lint_written(root: Path, files: dict[str, str], monkeypatch) -> list[str]:
    """Write `files` into `root`, lint the project whole: its findings as sorted `file:line CODE`."""
    return sorted(found(lint(write(root, files), monkeypatch)))
