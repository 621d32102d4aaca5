"""Descendants that leave the run's process group (torchrun starts its ranks with start_new_session=True): a real
process tree, parent -> child in a session of its own, stands in for torchrun -> rank."""

import os
import signal
import subprocess
import sys
import time

import pytest
from profile_helpers import PY, fast_options, pid_alive

from gpulint.profile import nvml, proctree
from gpulint.profile.command import plan_command
from gpulint.profile.runner import TIMEOUT, run_once

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

LAUNCHER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
print(child.pid, flush=True)
time.sleep(60)
"""


@pytest.fixture
def tree():
    parent = subprocess.Popen([PY, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True, start_new_session=True)
    rank = int(parent.stdout.readline())
    yield parent, rank
    for pid in (rank, parent.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    parent.wait()


def test_a_child_in_its_own_session_is_still_a_descendant(tree):
    parent, rank = tree
    assert proctree.is_descendant(rank, parent.pid)
    assert not proctree.is_descendant(parent.pid, rank)
    assert not proctree.is_descendant(rank, None)
    assert os.getpgid(rank) != parent.pid  # outside the launcher's group: killpg(parent) would miss it
    found = proctree.descendants(parent.pid)
    assert rank in found and found[rank][0] == rank  # it leads a group of its own


def test_kill_all_reaches_descendants_outside_the_group(tree):
    parent, rank = tree
    found = proctree.descendants(parent.pid)
    os.killpg(parent.pid, signal.SIGKILL)  # what kill_group does: the rank survives it
    parent.wait()
    assert pid_alive(rank)
    proctree.kill_all(found, skip_pgids={parent.pid})
    deadline = time.monotonic() + 5
    while pid_alive(rank) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pid_alive(rank)


def test_nvml_counts_a_rank_in_its_own_session_as_ours(tree, monkeypatch):
    from test_profile_nvml import fake_pynvml

    parent, rank = tree
    fake = fake_pynvml(own_pid=rank)
    monkeypatch.setattr(nvml, "_nvml", lambda: fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sampler = nvml.NvmlSampler(poll_s=0.02)
    sampler.start()
    sampler.own_pgid = parent.pid  # what run_measured sets: the launcher's pid
    t0 = time.time()
    time.sleep(0.2)
    summary = sampler.stop((t0, time.time()))
    assert summary["other_processes"] == [] and summary["unreliable"] is False


@pytest.mark.slow
def test_runner_teardown_kills_descendants_in_other_sessions(tmp_path):
    pid_file = tmp_path / "rank.pid"
    script = tmp_path / "launcher.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
        f"open({str(pid_file)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    r = run_once(plan_command([PY, str(script)]), fast_options(timeout=5), attribution=False)
    assert r.status == TIMEOUT
    rank = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while pid_alive(rank) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not pid_alive(rank), "a descendant that left the process group outlived the run"
