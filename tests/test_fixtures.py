"""End to end on fixtures/: the findings a user gets, and the fixed scripts (which must still run).

Expected outputs live in fixtures/expected/: `<name>.findings` (concise lines, default rules) and
`<name>.py` (the script after `gpulint fix --apply --unsafe-fixes`). Regenerate them after a deliberate
change with `GPULINT_UPDATE_FIXTURES=1 pytest tests/test_fixtures.py`, then read the diff.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpulint.fixer import fix_source
from gpulint.linter import check_source
from gpulint.reporters import ReportContext, render
from tests.conftest import FIXTURES, REPO, settings

EXPECTED = FIXTURES / "expected"
SCRIPTS = sorted(p for p in FIXTURES.glob("*.py"))
UPDATE = bool(os.environ.get("GPULINT_UPDATE_FIXTURES"))


def _concise(path) -> str:
    shown = path.relative_to(REPO).as_posix()
    diagnostics = check_source(path.read_text(encoding="utf-8"), shown, settings())
    return render("concise", diagnostics, ReportContext())


def _compare(expected_path, actual: str) -> None:
    if UPDATE:
        expected_path.parent.mkdir(exist_ok=True)
        expected_path.write_text(actual, encoding="utf-8")
    assert expected_path.exists(), f"missing {expected_path}; run with GPULINT_UPDATE_FIXTURES=1"
    assert actual == expected_path.read_text(encoding="utf-8")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_findings_match_expected(script):
    _compare(EXPECTED / f"{script.stem}.findings", _concise(script))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_fixed_script_matches_expected_and_is_stable(script):
    shown = script.relative_to(REPO).as_posix()
    outcome = fix_source(script.read_text(encoding="utf-8"), shown, settings(), unsafe=True)
    assert not outcome.broken
    _compare(EXPECTED / f"{script.stem}.py", outcome.text)
    assert fix_source(outcome.text, shown, settings(), unsafe=True).text == outcome.text
    compile(outcome.text, shown, "exec")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_fixed_script_still_runs(script):
    pytest.importorskip("torch")
    fixed_script = EXPECTED / f"{script.stem}.py"
    result = subprocess.run(
        [sys.executable, str(fixed_script)], cwd=EXPECTED, capture_output=True, text=True, timeout=240
    )
    assert result.returncode == 0, result.stderr[-2000:]
