"""bench/gpu_verify.py runs on CPU (GPU fields unavailable); the progress line only on a terminal."""

import io
import subprocess
import sys

import pytest
from profile_helpers import REPO

from gpulint.profile.options import ProfileOptions
from gpulint.profile.progress import Progress


@pytest.mark.slow
def test_gpu_verify_bench_smoke_on_cpu(tmp_path):
    out = tmp_path / "gpu_verify.md"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "gpu_verify.py"), "--scripts", "slow_loader.py",
         "--steps", "3", "--warmup", "1", "--repeat", "1", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "| slow_loader.py |" in text
    assert "samples/s" in text
    assert "GPU: unavailable: no NVIDIA driver" in text or "GPU: NVIDIA" in text
    assert "stand-in" in text or "gpulint fix --apply" in text


def test_progress_is_silent_unless_enabled():
    stream = io.StringIO()
    p = Progress(False, stream)
    p.run(1, 2, "A")
    p.show("step 3/30")
    p.clear()
    assert stream.getvalue() == ""
    p = Progress(True, stream)
    p.run(2, 6, "B 1/3 (fixed)")
    p.show("step 3/30")
    p.clear()
    assert "\rgpulint: run 2 of 6 (B 1/3 (fixed)): step 3/30" in stream.getvalue()


def test_progress_default_follows_terminal_and_ci(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.delenv("CI", raising=False)
    assert ProfileOptions().show_progress() is True
    monkeypatch.setenv("CI", "true")
    assert ProfileOptions().show_progress() is False
    assert ProfileOptions(progress=True).show_progress() is True
