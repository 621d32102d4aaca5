"""The fix-safety gate runs end to end on a tiny corpus and catches what it is there to catch."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

from tests.conftest import FIXTURES, REPO

sys.path.insert(0, str(REPO / "bench"))
from fix_safety import undefined_names  # noqa: E402


def test_undefined_names_are_counted_by_name_not_position():
    assert undefined_names("def f():\n    s.wait()\n    s.go()\n", "t.py") == Counter({("UndefinedName", "s"): 2})
    assert undefined_names("import torch\nx = torch.ones(1)\n", "t.py") == Counter()


def test_the_gate_passes_on_the_fixtures(tmp_path):
    repo = tmp_path / "fixtures"
    repo.mkdir()
    for name in ("sync_heavy.py", "loader_streaming.py"):
        (repo / name).write_text((FIXTURES / name).read_text(encoding="utf-8"), encoding="utf-8")
    summary_path = tmp_path / "summary.json"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "fix_safety.py"), "--jobs", "1", "--json", str(summary_path), str(repo)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    summary = json.loads(summary_path.read_text())
    assert summary["files"] == 2 and summary["files_fixed"] == 2 and summary["fixes_applied"] > 0
    assert (summary["new_undefined_names"], summary["broken"], summary["unstable"]) == (0, 0, 0)
    assert "| **total** | 2 | 2 | 2 |" in result.stdout
