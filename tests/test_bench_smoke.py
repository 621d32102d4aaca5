"""The lint-speed benchmark runs end to end on a tiny corpus (no timings are asserted)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import FIXTURES, REPO


@pytest.mark.slow
def test_lint_speed_benchmark_runs(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in sorted(FIXTURES.glob("*.py")):
        (corpus / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "results.md"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "lint_speed.py"), str(corpus), "--repeat", "1", "--skip-peers", "--training-projects", "3", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    text = out.read_text(encoding="utf-8")
    assert "| LibCST parse floor (parse every file, nothing else) |" in text
    assert "| gpulint check, cold cache, -j 1 |" in text
    assert "**DIFFERENT**" not in text  # the findings agree between -j 1, -j N, cold, warm, no cache, no prefilter
    assert re.search(r"cold -j 1: [1-9][0-9]* findings", text)  # the fixtures have findings
    assert "| training corpus: gpulint check, cold cache, -j 1 |" in text  # the generated training-heavy corpus
    assert re.search(r"cold run: [1-9][0-9]* findings", text)
