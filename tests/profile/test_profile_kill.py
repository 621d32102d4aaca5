"""kill -9 of gpulint itself (the OOM killer, a CI timeout, a closed SSH session): the measured script and
everything it started die with it (DataLoader workers, multiprocessing children, torchrun ranks), and an
interrupted `fix --verify` leaves a journal that every later `fix` mentions and `fix --restore` undoes."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from profile_helpers import FIXTURES, PY, REPO, pid_alive

from gpulint.profile import proctree

pytestmark = pytest.mark.slow


def start(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "gpulint", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def pids_in(path):
    try:
        return [int(x) for x in path.read_text().split()]
    except FileNotFoundError:
        return []


def kill_and_check(proc, pids):
    """kill -9 gpulint, then every process of the run must be gone within seconds."""
    assert pids and all(pid_alive(p) for p in pids)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    try:
        wait_for(lambda: not any(pid_alive(p) for p in pids), 15, "the run's processes to die with gpulint")
    finally:
        for p in pids:  # never leave a test's processes behind, whatever happened
            if pid_alive(p):
                os.kill(p, signal.SIGKILL)


@pytest.mark.parametrize(
    "args, processes",
    [
        (["--", PY, str(FIXTURES / "hogwild.py"), "fork"], 3),  # the script and two multiprocessing children
        (["--launcher", "torchrun", "--nproc-per-node", "2", "--", PY, str(FIXTURES / "ddp_tiny.py"), "1000"], 2),
    ],
    ids=["multiprocessing-children", "torchrun-ranks"],
)
def test_kill_9_of_profile_takes_the_whole_run_with_it(tmp_path, args, processes):
    pidfile = tmp_path / "pids"
    cmd = [*args, str(pidfile)]
    proc = start("profile", "--steps", "100000", "--warmup", "2", "--timeout", "300", *cmd, cwd=tmp_path)
    try:
        wait_for(lambda: len(pids_in(pidfile)) >= processes, 240, f"{processes} processes of the run")
        time.sleep(1.0)  # training, workers and all
        pids = pids_in(pidfile) + list(proctree.descendants(proc.pid))
        kill_and_check(proc, pids)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_kill_9_during_verify_leaves_a_journal_that_restore_undoes(tmp_path):
    script = tmp_path / "slow_loader.py"
    shutil.copy(FIXTURES / "slow_loader.py", script)
    original = script.read_bytes()
    # A must finish (its steps are few); the kill lands while B, with the fixes on disk, is running.
    proc = start(
        "fix", "--apply", "--unsafe-fixes", "--verify", "--steps", "30", "--warmup", "10", "--repeat", "1",
        "--", PY, "slow_loader.py", "--epochs", "1000",
        cwd=tmp_path,
    )
    try:
        wait_for(lambda: script.read_bytes() != original, 240, "the B run with the fixes on disk")
        wait_for(lambda: len(proctree.descendants(proc.pid)) >= 2, 120, "the fixed script and its DataLoader workers")
        fixed = script.read_bytes()
        kill_and_check(proc, list(proctree.descendants(proc.pid)))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert script.read_bytes() == fixed  # what a kill -9 leaves: the unverified fixes
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    later = subprocess.run([sys.executable, "-m", "gpulint", "fix", "slow_loader.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert "was interrupted" in later.stderr and "`gpulint fix --restore` puts the originals back" in later.stderr
    restore = subprocess.run([sys.executable, "-m", "gpulint", "fix", "--restore"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert restore.returncode == 0, restore.stderr
    assert f"gpulint: restored {script.resolve()}" in restore.stderr
    assert script.read_bytes() == original  # byte for byte
    again = subprocess.run([sys.executable, "-m", "gpulint", "fix", "--restore"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "no interrupted `fix --verify` to restore" in again.stderr
