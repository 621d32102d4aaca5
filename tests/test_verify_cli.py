"""`gpulint fix --apply --unsafe-fixes --verify -- python script.py` end to end, on the CPU."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.conftest import FIXTURES

pytest.importorskip("torch")
VERIFY = ("fix", "--apply", "--unsafe-fixes", "--verify", "--steps", "10", "--warmup", "3", "--repeat", "2")


@pytest.mark.slow
def test_slow_loader_fix_is_measured_faster_and_kept(gpulint, tmp_path):
    script = tmp_path / "slow_loader.py"
    shutil.copy(FIXTURES / "profile" / "slow_loader.py", script)
    result = gpulint(*VERIFY, "--", sys.executable, "slow_loader.py", cwd=tmp_path)
    out = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, out
    assert "verdict: faster" in out and "noise floor (A-vs-A spread)" in out
    assert "Kept the fixes in slow_loader.py (faster)." in out
    assert "num_workers=" in script.read_text()


@pytest.mark.slow
def test_fix_that_breaks_the_script_is_rolled_back(gpulint, tmp_path):
    script = tmp_path / "broken_by_workers.py"
    shutil.copy(FIXTURES / "profile" / "broken_by_workers.py", script)
    original = script.read_bytes()
    result = gpulint(*VERIFY, "--", sys.executable, "broken_by_workers.py", cwd=tmp_path)
    out = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 1, out
    assert "Rolled back: restored broken_by_workers.py to the original, because the fixed script crashed" in out
    assert "PicklingError" in out
    assert script.read_bytes() == original


def test_verify_needs_apply_and_a_command(gpulint, tmp_path):
    assert gpulint("fix", "--verify", "--", "python", "x.py", cwd=tmp_path).returncode == 2
    result = gpulint("fix", "--apply", "--verify", cwd=tmp_path)
    assert result.returncode == 2 and "--verify needs the command" in result.stderr.decode()
