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


def test_the_gate_fixes_with_the_project_index(tmp_path):
    """A loader built in one module and iterated with a CUDA copy in another: its GPU context comes from the
    project, so the gate exercises the cross-module fixes `gpulint fix` applies (and --no-project does not)."""
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "data.py").write_text(
        "from torch.utils.data import DataLoader\n\n\ndef make_loader(ds):\n    return DataLoader(ds, batch_size=64, shuffle=True)\n"
    )
    (repo / "train.py").write_text(
        "import torch\nfrom data import make_loader\n\n\ndef train(model, ds, opt):\n"
        "    for x, y in make_loader(ds):\n        x, y = x.cuda(), y.cuda()\n"
        "        loss = torch.nn.functional.cross_entropy(model(x), y)\n        opt.zero_grad()\n        loss.backward()\n        opt.step()\n"
    )
    fixed_files = {}
    for flag in ([], ["--no-project"]):
        summary_path = tmp_path / "summary.json"
        result = subprocess.run(
            [sys.executable, str(REPO / "bench" / "fix_safety.py"), "--jobs", "1", *flag, "--json", str(summary_path), str(repo)],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr[-2000:]
        summary = json.loads(summary_path.read_text())
        fixed_files[tuple(flag)] = summary["repositories"]["proj"]["fixes"]
        assert (summary["new_undefined_names"], summary["broken"], summary["unstable"]) == (0, 0, 0)
    assert "GPU101" in fixed_files[()] and "GPU101" not in fixed_files[("--no-project",)]
