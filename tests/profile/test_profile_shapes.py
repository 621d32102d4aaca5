"""The script shapes that used to give wrong numbers with exit 0, each run for real (small fixture scripts):
several optimizers per iteration, training in child processes, evaluation inside the window, loops without an
optimizer or a DataLoader (stopped early, or marked by hand), and Adam's CPU step counters."""

import pytest
from profile_helpers import FIXTURES, PY, fast_options

from gpulint.profile import runner
from gpulint.profile.command import plan_command
from gpulint.profile.report import profile_text
from gpulint.profile.runner import run_once

pytestmark = pytest.mark.slow


def run(script, *args, attribution=False, **opts):
    plan = plan_command([PY, str(FIXTURES / script), *args])
    return run_once(plan, fast_options(**{"steps": 6, "warmup": 2, **opts}), attribution=attribution)


def test_two_optimizers_per_batch_make_one_step_and_adam_counters_are_not_loop_reads():
    r = run("two_optimizers.py", attribution=True)
    assert r.ok, r.message + r.stderr_tail
    assert r.raw["steps_counted_by"] == "optimizer"
    assert [o["name"] for o in r.raw["optimizers"]] == ["Adam", "Adam"]
    # One step per iteration: every measured step holds exactly one batch of 16 (with a step per optimizer,
    # every other "step" had no batch and the step time was half an iteration).
    assert [(s["batches"], s["samples"]) for s in r.steps] == [(1, 16)] * 6
    assert r.attribution["scalar_reads_per_step"] == pytest.approx(1.0)  # the loop's loss_g.item()
    assert r.attribution["optimizer_scalar_reads_per_step"] == pytest.approx(8.0)  # 2 Adams x 4 parameters
    text = profile_text("python two_optimizers.py", [r], fast_options())
    assert "counted by training iterations (2 optimizers step in each: Adam, Adam" in text
    assert "1.0 in the loop, 8.0 inside optimizer.step (CPU step counters: not syncs)" in text


def test_evaluation_inside_the_window_is_left_out():
    r = run("eval_in_window.py")
    assert r.ok, r.message + r.stderr_tail
    assert [(s["batches"], s["samples"]) for s in r.steps] == [(1, 16)] * 6  # no validation batch counted
    excluded = r.raw["window"]["excluded_steps"]
    assert excluded and all(e["batches_without_grad"] == 40 for e in excluded)
    assert r.raw["window_restarts"] == 0  # the validation iterator is not a new epoch
    n = len(excluded)
    assert f"left out {n} step(s) holding an evaluation ({40 * n} batches fetched without gradients" in profile_text(
        "x", [r], fast_options()
    )


@pytest.mark.parametrize("how", ["process", "spawn", "fork"])
def test_training_in_child_processes_is_measured_in_a_child(how):
    """mp.Process (spawn and fork start methods) and torch.multiprocessing.spawn: the parent only evaluates
    after training; the numbers must be a training child's, never the parent's evaluation loop."""
    r = run("hogwild.py", how, first_step_timeout=240)
    assert r.ok, r.message + r.stderr_tail
    assert r.raw["process"] == "child" and r.raw["steps_counted_by"] == "optimizer"
    assert r.raw["training_processes"] == 2
    assert r.raw["pid"] != r.pgid
    assert [(s["batches"], s["samples"]) for s in r.steps] == [(1, 16)] * 6
    assert "measured in a child process of 2 training processes" in profile_text("x", [r], fast_options())


def test_manual_sgd_without_optimizer_or_loader_stops_early_and_says_how_to_mark_steps():
    r = run("manual_sgd.py")
    assert r.status == runner.NO_STEPS
    assert r.raw["backward_calls_before_first_step"] == 50  # max(50, 2 x (warm-up cap + steps))
    assert "stopped early: the script called backward() 50 times" in r.message
    assert "call gpulint.profile.step() at the end of each step" in r.message
    assert r.duration_s < 60  # not the whole 100 000 steps, not the timeout


def test_steps_marked_by_hand_are_measured():
    r = run("manual_sgd.py", "--mark")
    assert r.ok, r.message + r.stderr_tail
    assert r.raw["steps_counted_by"] == "marker"
    assert len(r.steps) == 6 and all(s["batches"] == 0 for s in r.steps)


def test_no_step_within_the_bound_stops_early_saying_what_was_seen(tmp_path):
    script = tmp_path / "busy.py"
    script.write_text(
        "import time\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(range(10))\n"
        "it = iter(loader)\n"
        "time.sleep(120)\n"
    )
    r = run_once(plan_command([PY, str(script)]), fast_options(first_step_timeout=3, timeout=100))
    assert r.status == runner.NO_STEPS
    assert "no training step within 3 s of the start (1 DataLoader iterator(s), 0 batch(es)" in r.message
    assert "raise --first-step-timeout" in r.message
    assert r.duration_s < 60
