"""The runner on real fixture scripts: step counting, warm-up, stopping, every failure kind, no orphans."""

import os
import time

import pytest
from profile_helpers import FIXTURES, PY, fast_options, pid_alive

from gpulint.profile import runner
from gpulint.profile.command import plan_command
from gpulint.profile.runner import run_once
from gpulint.profile.timing import timing_stats

pytestmark = pytest.mark.slow


def run(script, *args, attribution=False, **opts):
    plan = plan_command([PY, str(FIXTURES / script), *args])
    return run_once(plan, fast_options(**opts), attribution=attribution)


def test_optimizer_steps_warmup_window_and_attribution(tmp_path):
    plan = plan_command([PY, str(FIXTURES / "tiny_train.py")])
    seen = []
    r = run_once(plan, fast_options(steps=8, warmup=3), attribution=True, on_progress=seen.append,
                 trace_copy_to=tmp_path / "t.json")
    assert r.ok, r.message + r.stderr_tail
    raw = r.raw
    assert raw["steps_counted_by"] == "optimizer"
    assert raw["warmup_steps"] >= 3
    assert len(r.steps) == 8  # exactly N measured steps
    # It stopped after warm-up + N + the profiled steps, long before the 128 steps of the epoch.
    assert raw["optimizer_steps"] <= raw["warmup_steps"] + 8 + 4 + 1
    assert all(s["samples"] == 16 and s["batches"] == 1 for s in r.steps)  # batch size from the batch
    stats = timing_stats(r.steps)
    assert stats.samples_per_s > 0 and stats.data_wait_pct is not None
    assert raw["losses"] and len(raw["losses"]) <= 3  # only warm-up losses are read
    assert raw["cuda"] == {"available": False, "used": False}
    assert r.attribution["profiled_steps"] == 2  # 4 profiled steps minus the first and last
    assert r.attribution["kernel_busy_pct"] is None and "CPU-only" in r.attribution["unavailable"]["gpu"]
    assert (tmp_path / "t.json").stat().st_size > 0 and r.trace_path == str(tmp_path / "t.json")
    assert "finished" not in r.stdout_tail  # os._exit after the window: the script's end never ran
    with pytest.raises(ProcessLookupError):
        os.killpg(r.pgid, 0)  # nothing of the run's process group is left


def test_dataloader_fallback_without_optimizer():
    r = run("loader_only.py", steps=5, warmup=2)
    assert r.ok, r.message
    assert r.raw["steps_counted_by"] == "dataloader"
    assert r.raw["optimizer_steps"] == 0
    assert len(r.steps) == 5 and all(s["samples"] == 64 for s in r.steps)


def test_optimizer_without_dataloader_has_no_batch_size():
    r = run("no_loader.py", steps=5, warmup=2)
    assert r.ok, r.message
    stats = timing_stats(r.steps)
    assert stats.samples_per_s is None and stats.steps_per_s > 0
    assert stats.data_wait_pct is None


def test_script_too_short_never_reaches_measured_steps():
    r = run("tiny_train.py", "--samples", "64", steps=6, warmup=2)  # 4 steps in total
    assert r.status == runner.INCOMPLETE
    assert "never reached the measured steps" in r.message
    assert "after 4 steps" in r.message


def test_a_window_restarted_at_an_epoch_boundary_says_so_when_the_script_ends_first():
    # Seen on an H200 (fixtures/loader_pipeline.py, 2 epochs of 10 steps): "needs at least 15" beside 20 steps
    # done; the window had restarted at the epoch boundary and needed more.
    r = run("tiny_train.py", "--samples", "112", "--epochs", "2", steps=6, warmup=2)  # 7 steps of 16 an epoch, 14 in all
    assert r.status == runner.INCOMPLETE
    assert r.raw["window_restarts"] == 1
    assert "after 14 steps and never completed the measured steps: a new epoch began inside the first window" in r.message
    assert "needs at least" not in r.message


def test_raises_before_first_step():
    r = run("raises_before_step.py")
    assert r.status == runner.SCRIPT_ERROR
    assert "FileNotFoundError: config file not found" in r.message and "before the first step" in r.message
    assert "raises_before_step.py" in r.traceback_tail
    assert "_child.py" not in r.traceback_tail  # the bootstrap's frames are not the user's business


def test_no_optimizer_and_no_dataloader():
    r = run("no_steps.py")
    assert r.status == runner.INCOMPLETE
    assert "without a single training step" in r.message


def test_nonzero_exit():
    r = run("tiny_train.py", "--fault", "exit", "--fault-after", "2")
    assert r.status == runner.NONZERO_EXIT
    assert "exited with status 3" in r.message


def test_crash_mid_window_keeps_traceback():
    r = run("tiny_train.py", "--fault", "raise", "--fault-after", "4")
    assert r.status == runner.SCRIPT_ERROR
    assert "RuntimeError: injected failure at step 4" in r.message
    assert "after 4 optimizer steps" in r.message


def test_hang_is_killed_at_timeout():
    t0 = time.monotonic()
    r = run("hangs.py", timeout=4)
    assert r.status == runner.TIMEOUT
    assert "timed out after 4 s" in r.message and "process group was killed" in r.message
    assert time.monotonic() - t0 < 15
    assert not pid_alive(r.pgid)


def test_dataloader_workers_are_killed_at_timeout(tmp_path):
    pids_file = tmp_path / "pids.txt"
    r = run("hangs_with_workers.py", str(pids_file), timeout=8)
    assert r.status == runner.TIMEOUT
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) == 3, "main process + 2 workers should have started"  # else raise the timeout
    assert [p for p in pids if pid_alive(p)] == []


def test_spawn_workers_unpickle_script_classes_and_leave_no_orphans(tmp_path):
    """The script stays the real __main__, so spawned workers find __main__.SquaresDataset."""
    pids_file = tmp_path / "pids.txt"
    r = run("spawn_workers.py", str(pids_file), steps=4, warmup=2)
    assert r.ok, r.message + (r.traceback_tail or "") + r.stderr_tail
    pids = [int(p) for p in pids_file.read_text().split()]
    assert len(pids) >= 3
    assert [p for p in pids if pid_alive(p)] == []  # os._exit skipped worker shutdown; the runner killed them


def test_module_form_and_sys_path(tmp_path):
    pkg = tmp_path / "proj" / "trainer"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("BATCH = 8\n")
    (pkg / "train.py").write_text(
        "import sys, torch\n"
        "from trainer.helper import BATCH\n"  # importable because python -m puts the cwd first
        "assert sys.argv[1:] == ['--flag', 'x'], sys.argv\n"
        "m = torch.nn.Linear(4, 1)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(100):\n"
        "    opt.zero_grad(); m(torch.randn(BATCH, 4)).sum().backward(); opt.step()\n"
    )
    plan = plan_command([PY, "-m", "trainer.train", "--flag", "x"], cwd=tmp_path / "proj")
    r = run_once(plan, fast_options(steps=4, warmup=2), attribution=False)
    assert r.ok, r.message + (r.traceback_tail or "")


def test_script_dir_is_sys_path0_and_our_modules_are_not_importable(tmp_path):
    (tmp_path / "metrics.py").write_text("OURS = False\n")
    (tmp_path / "train.py").write_text(
        "import sys, os, torch\n"
        "import metrics\n"
        "assert metrics.OURS is False, 'imported gpulint.profile.metrics instead of the user module'\n"
        "assert sys.path[0] == os.path.dirname(os.path.abspath(__file__)), sys.path[0]\n"
        "assert __name__ == '__main__'\n"
        "m = torch.nn.Linear(4, 1)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(50):\n"
        "    opt.zero_grad(); m(torch.randn(2, 4)).sum().backward(); opt.step()\n"
    )
    r = run_once(plan_command([PY, "train.py"], cwd=tmp_path), fast_options(steps=3, warmup=1), attribution=False)
    assert r.ok, r.message + (r.traceback_tail or "")


def test_crash_in_the_attribution_pass_is_measured_but_remembered():
    """warm-up 2 + 4 measured steps, then the script raises while the profiler runs."""
    r = run("tiny_train.py", "--fault", "raise", "--fault-after", "8", attribution=True, steps=4, warmup=2)
    assert r.ok, r.message + r.stderr_tail
    assert r.failure_after_window == "the script raised RuntimeError: injected failure at step 8 after the measured steps"
    assert r.returncode == 1 and r.raw["script_status"] == "error"
    assert "injected failure at step 8" in r.traceback_tail
