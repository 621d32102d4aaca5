"""Where the project index lives while files are checked (issue 14's memory bound): built in a forked child on
Linux, with the same findings and cache as when it is built in-process, and in-process whenever the child fails."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from gpulint import projects
from gpulint.cache import CACHE_DIR_NAME
from gpulint.config import Settings
from gpulint.projects import Project
from tests.projects_helper import copy_project, found, lint

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the index is built in a child only where fork is safe")


def cold_and_warm(root: Path, monkeypatch) -> tuple[list[str], list[str], dict[str, bytes]]:
    cold = sorted(found(lint(root, monkeypatch, use_cache=True)))
    written = {p.name.split("-")[0]: p.read_bytes().partition(b"\n")[2] for p in (root / CACHE_DIR_NAME).rglob("*-*.json")}
    warm = sorted(found(lint(root, monkeypatch, use_cache=True)))
    return cold, warm, written


def test_index_in_a_child_gives_the_same_findings_and_cache_as_in_process(tmp_path, monkeypatch):
    forked = cold_and_warm(copy_project("research", tmp_path / "a"), monkeypatch)
    monkeypatch.setattr(projects, "_may_fork", lambda: False)
    in_process = cold_and_warm(copy_project("research", tmp_path / "b"), monkeypatch)
    assert forked[0] and forked[0] == forked[1] == in_process[0] == in_process[1]
    assert forked[2].keys() == in_process[2].keys() == {"project", "summaries"}
    assert forked[2]["summaries"] == in_process[2]["summaries"]


def test_the_parent_never_builds_the_index_and_a_warm_run_needs_none(tmp_path, monkeypatch):
    root = copy_project("research", tmp_path)
    files = sorted(root.rglob("*.py"))
    project = Project(files, Settings(root=root))
    contexts = project.pickled_contexts(files)
    assert len(contexts) == len(files) and "index" not in project.__dict__
    again = Project(files, Settings(root=root))  # the child saved every context's digest
    assert [again.known_context_digest(f) for f in files] == [digest for digest, _ in contexts]


def test_a_failed_child_leaves_the_work_to_this_process(tmp_path, monkeypatch):
    root = copy_project("research", tmp_path)
    expected = sorted(found(lint(root, monkeypatch)))
    monkeypatch.setattr(projects, "_in_child", lambda work: None)
    assert sorted(found(lint(root, monkeypatch))) == expected


def test_in_child_returns_the_result_or_none():
    assert projects._in_child(lambda: {"pid": os.getpid()})["pid"] != os.getpid()
    assert projects._in_child(lambda: 1 / 0) is None


def test_contexts_are_pickled_one_at_a_time_and_not_kept(tmp_path, monkeypatch):
    """Each context is composed, pickled and freed: the index does not hold every module's context at once
    (torch's 2,285 held ~160 MB, the child's peak), and a context composed without being kept is the same."""
    root = copy_project("research", tmp_path)
    files = sorted(root.rglob("*.py"))
    monkeypatch.setattr(projects, "_may_fork", lambda: False)
    project = Project(files, Settings(root=root), use_cache=False)
    contexts = project.pickled_contexts(files)
    assert len(contexts) == len(files) and project.index._contexts == {}
    kept = Project(files, Settings(root=root), use_cache=False)
    assert [kept.context(f).digest for f in files] == [digest for digest, _ in contexts]
    assert len(kept.index._contexts) == len(files)
