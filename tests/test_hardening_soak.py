"""bench/soak.py itself: it must keep working, or the reliability figures rot."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO


def _soak(tmp_path, *args: str):
    out = tmp_path / "soak.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "soak.py"), *args, "--jobs", "1", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    return result, json.loads(out.read_text())


def test_the_soak_checks_and_fixes_the_fixtures_cleanly(tmp_path):
    (tmp_path / "bad.py").write_bytes(b"\x00\x01")  # not Python: counted, not a failure
    result, summary = _soak(tmp_path, "fixtures/train_classifier.py", "fixtures/train_regression.py", str(tmp_path / "bad.py"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert summary["files"] == 3 and summary["checked"] == 2
    assert summary["statuses"]["unreadable"] == 1
    assert (summary["crashes"], summary["broken_fixes"], summary["non_idempotent_fixes"], summary["broken_probe_edits"]) == (0, 0, 0, 0)
    # Both fixtures have fixable findings; how many grows with the rule set (the fixture tests pin them),
    # and later passes fix findings that earlier fixes expose (GPU105 once GPU102 pins a loader).
    assert summary["findings"] > 0 and summary["fixes_applied"] > 0 and summary["files_with_fixes"] == 2
    assert "crashes: 0  timeouts: 0" in result.stdout


def test_the_soak_reports_files_it_could_not_finish(tmp_path):
    result, summary = _soak(tmp_path, "fixtures/train_classifier.py", "--timeout", "0.001")
    assert result.returncode == 1
    assert [(f["path"], f["status"]) for f in summary["failures"]] == [("fixtures/train_classifier.py", "timeout")]
    assert "FAIL timeout: fixtures/train_classifier.py: over 0.001 s (during " in result.stdout
