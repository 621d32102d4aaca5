"""run_verify: alternation, keep / roll back for every failure kind, final file state, real end-to-end runs."""

import io
import json
import os
import random
import stat

import pytest
from profile_helpers import PY, fast_options

from gpulint.profile import journal, runner
from gpulint.profile.runner import RunResult
from gpulint.profile.verify import PlannedFix, run_verify

ORIGINAL = b"loader = DataLoader(ds, batch_size=32)\n"
FIXED = b"loader = DataLoader(ds, batch_size=32, num_workers=2)\n"


def make_fix(path):
    def plan_fixes():
        original = path.read_bytes()
        fixed = original.replace(b"DataLoader(ds, batch_size=32", b"DataLoader(ds, batch_size=32, num_workers=2")
        return [PlannedFix(path, original, fixed, {"GPU101": 1})] if fixed != original else []

    return plan_fixes


def ok_result(step_s, seed=0, n=20):
    rng = random.Random(seed)
    steps = [{"wall_s": step_s * (1 + rng.uniform(-0.01, 0.01)), "data_wait_s": 0.0, "samples": 32, "batches": 1} for _ in range(n)]
    return RunResult(runner.OK, "measured", raw={"window": {"steps": steps}, "losses": [0.7, 0.6]}, attribution={})


def failed_result(status):
    return RunResult(status, f"simulated {status}", traceback_tail="Traceback (most recent call last):\nValueError: boom")


class FakeRunner:
    """Stands in for runner.run_measured; records which file content each run saw. Every probed changed line
    "ran" unless `lines_ran` is False."""

    def __init__(self, path, a, b, lines_ran=True):
        self.path, self.a, self.b = path, a, b
        self.lines_ran = lines_ran
        self.seen = []
        self.probes = []

    def __call__(self, plan, options, attribution, label, on_progress, trace_copy_to, probes):
        content = self.path.read_bytes()
        variant = "A" if label.startswith("A") else "B"
        self.seen.append((variant, content, attribution))
        self.probes.append(probes)
        source = self.a if variant == "A" else self.b
        result = source(sum(1 for v, _, _ in self.seen if v == variant) - 1)
        if isinstance(result, BaseException):
            raise result
        result.label = label
        if probes and self.lines_ran:  # True: every probed line ran; a set: only those line numbers ran
            result.probe_hits = {(path, line) for path, lines in probes.items() for line in lines
                                 if self.lines_ran is True or line in self.lines_ran}
        return result


def verify(tmp_path, a, b, repeat=3, fix=None, lines_ran=True, **opts):
    script = tmp_path / "train.py"
    if not script.exists():
        script.write_bytes(ORIGINAL)
    fake = FakeRunner(script, a, b, lines_ran)
    out, err = io.StringIO(), io.StringIO()
    code = run_verify([PY, str(script)], fix or make_fix(script), fast_options(repeat=repeat, **opts), out=out, err=err, run=fake)
    return code, script, fake, out.getvalue(), err.getvalue()


def test_faster_fix_is_kept_and_runs_alternate(tmp_path):
    code, script, fake, out, err = verify(tmp_path, lambda i: ok_result(0.1, i), lambda i: ok_result(0.05, 10 + i))
    assert code == 0
    assert script.read_bytes() == FIXED
    assert [v for v, _, _ in fake.seen] == ["A", "B", "A", "B", "A", "B"]
    assert all(c == (ORIGINAL if v == "A" else FIXED) for v, c, _ in fake.seen)
    assert [a for _, _, a in fake.seen] == [True, True, False, False, False, False]  # one profiled window per side
    assert "verdict: faster" in out and "noise floor (A-vs-A spread)" in out and "Kept the fixes" in out
    assert err == ""


def test_slower_beyond_noise_is_rolled_back(tmp_path):
    code, script, _, out, _ = verify(tmp_path, lambda i: ok_result(0.05, i), lambda i: ok_result(0.08, 10 + i))
    assert code == 1
    assert script.read_bytes() == ORIGINAL
    assert "slower beyond the noise" in out and "Rolled back" in out


def test_no_measurable_change_is_kept(tmp_path):
    code, script, _, out, _ = verify(tmp_path, lambda i: ok_result(0.1, i), lambda i: ok_result(0.1, 10 + i))
    assert code == 0 and script.read_bytes() == FIXED
    assert "no measurable change" in out


@pytest.mark.parametrize(
    "status, why",
    [
        (runner.SCRIPT_ERROR, "the fixed script crashed"),
        (runner.NONZERO_EXIT, "exited with a non-zero status"),
        (runner.TIMEOUT, "timed out"),
        (runner.INCOMPLETE, "never reached the measured steps"),
        (runner.CRASHED, "died without a result"),
    ],
)
@pytest.mark.parametrize("failing_run", [0, 2])
def test_every_b_failure_rolls_back(tmp_path, status, why, failing_run):
    code, script, fake, out, _ = verify(
        tmp_path, lambda i: ok_result(0.1, i), lambda i: failed_result(status) if i == failing_run else ok_result(0.05, i)
    )
    assert code == 1
    assert script.read_bytes() == ORIGINAL
    assert why in out and f"simulated {status}" in out
    if status == runner.SCRIPT_ERROR:
        assert "ValueError: boom" in out  # the traceback tail is shown
    assert [v for v, _, _ in fake.seen][-1] == "B"  # stopped at the failing B run


def crashed_after_window(step_s, seed=0):
    """Measured, but the script then raised in the attribution pass (the bootstrap still reports status ok)."""
    r = ok_result(step_s, seed)
    r.raw.update(exception="ValueError: boom in evaluation", exit_code=1, script_status="error")
    r.traceback_tail = "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nValueError: boom in evaluation"
    return r


def test_b_crash_after_the_window_rolls_back(tmp_path):
    code, script, fake, out, _ = verify(
        tmp_path, lambda i: ok_result(0.1, i), lambda i: crashed_after_window(0.05, i)
    )
    assert code == 1
    assert script.read_bytes() == ORIGINAL
    assert "Rolled back" in out
    assert "the fixed script failed: the script raised ValueError: boom in evaluation after the measured steps" in out
    assert "ValueError: boom in evaluation" in out.split("Rolled back")[1]  # the traceback tail is shown
    assert "B 1/3 (fixed): the script raised ValueError" in out  # and the run's note
    assert [v for v, _, _ in fake.seen] == ["A", "B"]


def test_b_crash_after_the_window_mentions_the_same_failure_of_a(tmp_path):
    code, script, _, out, _ = verify(
        tmp_path, lambda i: crashed_after_window(0.1, i), lambda i: crashed_after_window(0.05, i)
    )
    assert code == 1 and script.read_bytes() == ORIGINAL
    assert "(the original also failed there: the script raised ValueError" in out


def test_later_a_failure_voids_the_comparison(tmp_path):
    code, script, _, out, _ = verify(
        tmp_path, lambda i: failed_result(runner.TIMEOUT) if i == 1 else ok_result(0.1, i), lambda i: ok_result(0.05, i)
    )
    assert code == 1 and script.read_bytes() == ORIGINAL
    assert "original script failed on run 2" in out


def test_original_that_cannot_run_changes_nothing(tmp_path):
    code, script, fake, out, err = verify(tmp_path, lambda i: failed_result(runner.SCRIPT_ERROR), None)
    assert code == 2
    assert [v for v, _, _ in fake.seen] == ["A"]  # the fixes were never written
    assert script.read_bytes() == ORIGINAL
    assert not journal.leftovers()
    assert err.startswith("gpulint failed\n  Cause: could not measure the original")
    assert "Traceback (most recent call last)" not in err.split("Cause:")[0]


def test_nothing_to_fix_runs_nothing(tmp_path):
    code, script, fake, out, _ = verify(tmp_path, lambda i: ok_result(0.1), None, fix=lambda: [])
    assert code == 0
    assert "Nothing to fix" in out
    assert fake.seen == []  # the original is profiled only when there is something to verify


def test_fixer_exception_is_reported_not_raised(tmp_path):
    def fix():
        raise RuntimeError("fixer bug")

    code, _, _, _, err = verify(tmp_path, lambda i: ok_result(0.1), None, fix=fix)
    assert code == 2 and "computing the fixes failed: RuntimeError: fixer bug" in err


def test_keyboard_interrupt_restores_files(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        verify(tmp_path, lambda i: ok_result(0.1, i), lambda i: KeyboardInterrupt())
    assert (tmp_path / "train.py").read_bytes() == ORIGINAL


@pytest.mark.parametrize("make, code", [(KeyboardInterrupt, 130), ("Terminated", 143)])
def test_interrupt_is_recorded_with_the_exit_code_the_cli_uses(tmp_path, make, code):
    from gpulint.cli import Terminated

    exc = Terminated if make == "Terminated" else make
    out_json = tmp_path / "v.json"
    with pytest.raises(KeyboardInterrupt):
        verify(tmp_path, lambda i: ok_result(0.1, i), lambda i: exc(), json_path=out_json)
    doc = json.loads(out_json.read_text())
    assert doc["outcome"] == "interrupted" and doc["exit_code"] == code
    assert (tmp_path / "train.py").read_bytes() == ORIGINAL


def test_keyboard_interrupt_during_a_later_a_run_restores_files(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        verify(tmp_path, lambda i: KeyboardInterrupt() if i == 1 else ok_result(0.1, i), lambda i: ok_result(0.05, i))
    assert (tmp_path / "train.py").read_bytes() == ORIGINAL


def test_permissions_and_several_files_survive_the_swaps(tmp_path):
    other = tmp_path / "data.py"
    other.write_bytes(b"A = 1\n")
    other.chmod(0o750)
    script = tmp_path / "train.py"
    script.write_bytes(ORIGINAL)

    def fix():
        return [PlannedFix(script, ORIGINAL, FIXED), PlannedFix(other, b"A = 1\n", b"A = 2\n")]

    code, _, _, _, _ = verify(tmp_path, lambda i: ok_result(0.05, i), lambda i: ok_result(0.08, i), fix=fix)
    assert code == 1
    assert script.read_bytes() == ORIGINAL and other.read_bytes() == b"A = 1\n"
    assert stat.S_IMODE(os.stat(other).st_mode) == 0o750
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".gpulint-tmp")]


def test_json_report(tmp_path):
    out_json = tmp_path / "verify.json"
    code, _, _, _, _ = verify(tmp_path, lambda i: ok_result(0.1, i), lambda i: ok_result(0.05, i), json_path=out_json)
    doc = json.loads(out_json.read_text())
    assert code == 0 and doc["outcome"] == "kept" and doc["exit_code"] == 0
    assert doc["comparison"]["verdict"] == "faster"
    assert [r["label"][0] for r in doc["runs"]] == ["A", "B", "A", "B", "A", "B"]
    assert doc["files"]


def test_bad_command_is_a_usage_error(tmp_path):
    err = io.StringIO()
    code = run_verify([PY, str(tmp_path / "missing.py")], lambda: [], fast_options(), out=io.StringIO(), err=err)
    assert code == 2
    assert err.getvalue() == f"gpulint failed\n  Cause: script not found: {tmp_path / 'missing.py'}\n"


# ---- real runs ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_end_to_end_slow_loader_gets_faster(fixtures_copy, tmp_path):
    script = fixtures_copy("slow_loader.py")
    out, err = io.StringIO(), io.StringIO()
    out_json = tmp_path / "v.json"
    code = run_verify(
        [PY, str(script)], make_fix(script), fast_options(steps=6, warmup=3, repeat=2, json_path=out_json), out=out, err=err
    )
    text = out.getvalue()
    assert code == 0, text + err.getvalue()
    assert b"num_workers=2" in script.read_bytes()
    assert "verdict: faster" in text
    assert "noise floor (A-vs-A spread):" in text and "not measured" not in text.split("noise floor")[1].split("\n")[0]
    doc = json.loads(out_json.read_text())
    assert doc["comparison"]["effect"] > 1.3  # ~2x with 2 workers on sleep-bound loading
    assert doc["comparison"]["noise_floor"] is not None
    wait = next(m for m in doc["comparison"]["mechanisms"] if m["name"] == "data wait per step")
    assert wait["improved"]


@pytest.mark.slow
def test_end_to_end_broken_by_workers_is_restored(fixtures_copy):
    script = fixtures_copy("broken_by_workers.py")
    original = script.read_bytes()
    out, err = io.StringIO(), io.StringIO()
    code = run_verify([PY, str(script)], make_fix(script), fast_options(steps=4, warmup=2, repeat=2), out=out, err=err)
    text = out.getvalue()
    assert code == 1, text
    assert script.read_bytes() == original
    assert "the fixed script crashed" in text and "PicklingError" in text
    assert "broken_by_workers.py" in text  # the traceback tail points at the user's line


@pytest.mark.slow
def test_end_to_end_b_exits_nonzero(fixtures_copy):
    script = fixtures_copy("tiny_train.py")
    original = script.read_bytes()

    def fix():
        return [PlannedFix(script, original, original.replace(b'default="none"', b'default="exit"'))]

    out = io.StringIO()
    code = run_verify([PY, str(script)], fix, fast_options(steps=4, warmup=2, repeat=1), out=out, err=io.StringIO())
    assert code == 1 and script.read_bytes() == original
    assert "exited with a non-zero status" in out.getvalue() and "status 3" in out.getvalue()


def test_other_gpu_processes_mark_the_comparison_unreliable(tmp_path):
    def shared_gpu(i):
        r = ok_result(0.1, i)
        if i == 1:
            r.nvml = {"other_processes": [4242], "unreliable": True}
        return r

    out_json = tmp_path / "v.json"
    code, _, _, out, _ = verify(tmp_path, shared_gpu, lambda i: ok_result(0.05, 10 + i), json_path=out_json)
    assert code == 0
    assert "note: other processes used the GPU during A 2/3 (original): the comparison is unreliable" in out
    assert "[unreliable: other processes used the GPU]" in out.split("verdict:")[1].split("\n")[0]
    doc = json.loads(out_json.read_text())
    assert doc["comparison"]["unreliable"] is True
    assert any("the comparison is unreliable" in n for n in doc["comparison"]["notes"])


def test_an_idle_gpu_is_not_flagged(tmp_path):
    out_json = tmp_path / "v.json"
    code, _, _, out, _ = verify(tmp_path, lambda i: ok_result(0.1, i), lambda i: ok_result(0.05, i), json_path=out_json)
    assert "unreliable" not in out
    assert json.loads(out_json.read_text())["comparison"]["unreliable"] is False


def test_restores_hold_sigint_and_sigterm(monkeypatch):
    import signal

    from gpulint.profile import verify as verify_mod

    with verify_mod._no_interrupts():
        held = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert {signal.SIGINT, signal.SIGTERM} <= set(held)
    assert signal.SIGTERM not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # released afterwards


def test_sigterm_during_a_restore_waits_for_it(tmp_path):
    """The CLI raises Terminated from its SIGTERM handler; sent mid-restore it must arrive after the files."""
    import signal

    from gpulint.cli import Terminated
    from gpulint.profile import verify as verify_mod

    script = tmp_path / "train.py"
    script.write_bytes(FIXED)

    def on_term(signum, frame):
        raise Terminated

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        with pytest.raises(Terminated):
            with verify_mod._no_interrupts():
                os.kill(os.getpid(), signal.SIGTERM)
                script.write_bytes(ORIGINAL)  # the "restore"
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert script.read_bytes() == ORIGINAL


# ---- files the user edits while the runs are in flight -----------------------------------------------------


def test_a_file_edited_during_the_runs_is_left_as_edited(tmp_path):
    script = tmp_path / "train.py"
    script.write_bytes(ORIGINAL)
    edited = b"# my own edit while gpulint was busy\n"

    def a(i):
        if i == 1:
            script.write_bytes(edited)  # during the second A run (original on disk) the user saves their edit
        return ok_result(0.1, i)

    code, _, fake, out, err = verify(tmp_path, a, lambda i: ok_result(0.05, i))
    assert code == 2
    assert script.read_bytes() == edited
    assert "the verification was stopped: " in err and "changed on disk while gpulint was verifying it" in err
    assert [v for v, _, _ in fake.seen] == ["A", "B", "A"]  # no B run on the user's file


def test_an_edit_during_the_last_run_is_not_overwritten_by_the_restore(tmp_path):
    other = tmp_path / "data.py"
    other.write_bytes(b"A = 1\n")
    script = tmp_path / "train.py"
    script.write_bytes(ORIGINAL)

    def fix():
        return [PlannedFix(script, ORIGINAL, FIXED), PlannedFix(other, b"A = 1\n", b"A = 2\n")]

    def b(i):
        if i == 1:
            script.write_bytes(b"# edited\n")
        return ok_result(0.2, i)  # slower: the restore would write the original over the edit

    out_json = tmp_path / "v.json"
    code, _, _, _, err = verify(tmp_path, lambda i: ok_result(0.1, i), b, repeat=2, fix=fix, json_path=out_json)
    assert code == 2
    assert script.read_bytes() == b"# edited\n"
    assert other.read_bytes() == b"A = 1\n"  # the other file is still restored
    assert "data.py is restored to the original" in err
    doc = json.loads(out_json.read_text())
    assert doc["outcome"] == "error" and doc["conflicts"] == [str(script)]


def test_a_file_edited_before_an_interrupt_is_not_restored_over(tmp_path):
    script = tmp_path / "train.py"
    script.write_bytes(ORIGINAL)

    def b(i):
        script.write_bytes(b"# edited\n")
        return KeyboardInterrupt()

    with pytest.raises(KeyboardInterrupt):
        verify(tmp_path, lambda i: ok_result(0.1, i), b)
    assert script.read_bytes() == b"# edited\n"


def test_an_unexpected_error_still_restores(tmp_path):
    with pytest.raises(RuntimeError):
        verify(tmp_path, lambda i: ok_result(0.1, i), lambda i: RuntimeError("bug"))
    assert (tmp_path / "train.py").read_bytes() == ORIGINAL


# ---- what counts as verified ---------------------------------------------------------------------------------


def test_a_fix_whose_changed_lines_never_ran_is_not_verified(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out_json = tmp_path / "v.json"
    code, script, fake, out, _ = verify(
        tmp_path, lambda i: ok_result(0.1, i), lambda i: ok_result(0.1, 10 + i), lines_ran=False, json_path=out_json
    )
    assert code == 1
    assert script.read_bytes() == ORIGINAL
    assert "Not verified: restored train.py to the original, because its changed lines never ran in the B runs (train.py:1)" in out
    assert "a GPU, for a CUDA-only branch" in out and "Kept" not in out
    assert fake.probes[0] is None and fake.probes[1] == {str(script.resolve()): [1]}  # only B runs trace lines
    doc = json.loads(out_json.read_text())
    assert doc["outcome"] == "not verified" and doc["never_ran"] == ["train.py:1"]


def test_fixes_of_which_some_ran_are_judged_by_those_and_the_rest_named(tmp_path, monkeypatch):
    # Seen on an H200: the training loop's fixes ran and were 2.5x faster; the evaluation after the measured
    # steps never ran. The runs did compare two programs: keep, and name what was not measured.
    monkeypatch.chdir(tmp_path)
    script = tmp_path / "train.py"
    script.write_bytes(ORIGINAL + b"val = DataLoader(ds, batch_size=32)\n")
    fixed = FIXED + b"val = DataLoader(ds, batch_size=32, num_workers=2)\n"
    out_json = tmp_path / "v.json"
    code, _, _, out, _ = verify(
        tmp_path, lambda i: ok_result(0.1, i), lambda i: ok_result(0.04, 10 + i), lines_ran={1}, json_path=out_json,
        fix=lambda: [PlannedFix(script, script.read_bytes(), fixed)],
    )
    assert code == 0 and script.read_bytes() == fixed
    assert "Kept the fixes in train.py (faster)." in out
    assert "Not measured: train.py:2 did not run in the measured runs" in out
    doc = json.loads(out_json.read_text())
    assert doc["outcome"] == "kept" and doc["never_ran"] == ["train.py:2"]


def noisy_a(i):
    return ok_result([0.08, 0.1, 0.13][i], i)  # the original's own runs differ by ~50 %


def test_a_noise_floor_too_wide_is_too_noisy_to_verify(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, script, _, out, _ = verify(tmp_path, noisy_a, lambda i: ok_result(0.1, 10 + i))
    assert code == 1
    assert script.read_bytes() == ORIGINAL
    assert "verdict: too noisy to verify" in out
    assert "Not verified: restored train.py to the original, because the runs are too noisy to verify" in out
    assert "--repeat 5" in out and "OMP_NUM_THREADS=1" in out and "load average now" in out
    assert "no measurable change" not in out


def test_too_noisy_but_the_mechanism_moved_is_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    def with_wait(result, wait):
        for s in result.raw["window"]["steps"]:
            s["data_wait_s"] = wait
        return result

    code, script, _, out, _ = verify(tmp_path, lambda i: with_wait(noisy_a(i), 0.05), lambda i: with_wait(ok_result(0.1, 10 + i), 0.001))
    assert code == 0 and script.read_bytes() == FIXED
    assert "Kept the fixes in train.py (mechanism verified; throughput too noisy to measure)" in out


def test_the_verdict_shows_the_speedup_ceiling(tmp_path):
    def waiting(step_s, wait, seed):
        r = ok_result(step_s, seed)
        for s in r.raw["window"]["steps"]:
            s["data_wait_s"] = wait
        return r

    # A waits 60 ms of a 100 ms step for data: GPU101 can give at most 1 / (1 - 0.6) = 2.5x; B got 2x.
    code, _, _, out, _ = verify(tmp_path, lambda i: waiting(0.1, 0.06, i), lambda i: waiting(0.05, 0.01, 10 + i))
    assert code == 0
    verdict = out.split("verdict: ")[1].split("\n")[0]
    assert verdict.startswith("faster: samples/s +100.") and "(2.00x of a possible 2.50x)" in verdict


def test_compute_fixes_have_no_idle_time_ceiling_and_moved_by_names_only_applied_fixes(tmp_path):
    """H100: TF32 + fused AdamW made a nanoGPT-style step 2.17x faster; the idle-time ceiling said "of a possible
    1.02x" and every metric listed all ten rules that could move it, applied or not."""
    def fix(path):
        def plan():
            original = path.read_bytes()
            return [PlannedFix(path, original, original + b"torch.backends.cuda.matmul.allow_tf32 = True\n", {"GPU902": 1})]
        return plan

    def with_attr(result, busy, step_ms):
        result.attribution = {"kernel_busy_pct": busy, "profiled_step_ms_median": step_ms, "syncs_per_step": 1.0,
                              "h2d": {"pageable": {"count_per_step": 2.0}, "pinned": {"count_per_step": 0.0}}}
        return result

    script = tmp_path / "train.py"
    script.write_bytes(ORIGINAL)
    code, _, _, out, _ = verify(tmp_path, lambda i: with_attr(ok_result(0.0435, i), 84.5, 43.5),
                                lambda i: with_attr(ok_result(0.0193, 10 + i), 55.7, 19.3), fix=fix(script))
    assert code == 0
    verdict = out.split("verdict: ")[1].split("\n")[0]
    assert verdict.startswith("faster") and "possible" not in verdict and "estimated" not in verdict
    busy = next(line for line in out.splitlines() if line.strip().startswith("kernel busy"))
    assert busy.split()[-1] == "GPU902" and "lower: kernels" in busy and "worse" not in busy
    assert "GPU101" not in busy


def test_files_a_run_writes_in_the_working_folder_are_reported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    def a(i):
        if i == 0:
            (tmp_path / "snapshot.pt").write_bytes(b"checkpoint")  # the next run would resume from it
        return ok_result(0.1, i)

    code, _, _, out, _ = verify(tmp_path, a, lambda i: ok_result(0.1, 10 + i))
    assert code == 0
    assert "A 1/3 (original) wrote files in the working folder: snapshot.pt. Later runs may read them" in out
    assert "train.py" not in out.split("wrote files")[1].split("\n")[0]  # gpulint's own swaps are not the script's


def test_isolate_runs_moves_each_runs_new_files_aside(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.csv").write_text("1,2\n")
    resumed = []

    def a(i):
        resumed.append((tmp_path / "snapshot.pt").exists())  # a run that resumes from a checkpoint when there is one
        (tmp_path / "snapshot.pt").write_bytes(b"checkpoint %d" % i)
        (tmp_path / "lightning_logs" / f"version_{i}").mkdir(parents=True)
        (tmp_path / "lightning_logs" / f"version_{i}" / "events.out").write_text("log")
        return ok_result(0.1, i)

    code, _, _, out, _ = verify(tmp_path, a, lambda i: ok_result(0.1, 10 + i), isolate_runs=True)
    assert code == 0
    assert resumed == [False, False, False]  # every A run started from the folder the first one saw
    assert sorted(p.name for p in tmp_path.iterdir()) == [".gpulint-runs", "data.csv", "train.py"]
    (stamp,) = (tmp_path / ".gpulint-runs").glob("2*")
    assert sorted(str(p.relative_to(stamp)) for p in stamp.rglob("*") if p.is_file()) == [
        "A-1-3-original/lightning_logs/version_0/events.out",
        "A-1-3-original/snapshot.pt",
        "A-2-3-original/lightning_logs/version_1/events.out",
        "A-2-3-original/snapshot.pt",
        "A-3-3-original/lightning_logs/version_2/events.out",
        "A-3-3-original/snapshot.pt",
    ]
    assert (stamp / "A-2-3-original" / "snapshot.pt").read_bytes() == b"checkpoint 1"
    assert (tmp_path / ".gpulint-runs" / ".gitignore").read_text().endswith("*\n")
    assert "the new ones were moved to .gpulint-runs/" in out and "so the next run starts without them" in out
    assert "leaves them in place" not in out


def test_isolate_runs_says_what_it_could_not_put_back(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "best.pt").write_bytes(b"old")

    def a(i):
        (tmp_path / "best.pt").write_bytes(b"new %d" % i)  # overwrites a file the user had: no copy to restore
        return ok_result(0.1, i)

    code, _, _, out, _ = verify(tmp_path, a, lambda i: ok_result(0.1, 10 + i), isolate_runs=True)
    assert code == 0
    assert (tmp_path / "best.pt").read_bytes() == b"new 2"
    assert not (tmp_path / ".gpulint-runs").exists()
    assert "files that existed before were changed in place and could not be put back: best.pt" in out


# ---- the journal: nothing is lost to a kill -9 -----------------------------------------------------------------


def test_a_journal_holds_the_originals_during_the_runs_and_is_removed_after(tmp_path):
    seen = []

    def b(i):
        seen.append([(str(f.path), f.original, f.state()) for j in journal_files() for f in j.files])
        return ok_result(0.05, 10 + i)

    code, script, _, _, _ = verify(tmp_path, lambda i: ok_result(0.1, i), b)
    assert code == 0
    assert seen[0] == [(str(script.resolve()), ORIGINAL, "fixed")]  # on disk while B ran with the fixes
    assert journal_files() == []


def journal_files():
    return [journal.Journal.load(p) for p in journal.state_dir().glob(f"{journal.PREFIX}*.json")]


def leave_journal(tmp_path, pid=2**22 + 12345):
    """What a kill -9 during a B run leaves: the fixed file on disk and the journal of a dead process."""
    script = tmp_path / "train.py"
    script.write_bytes(FIXED)
    j = journal.Journal.create({script: (ORIGINAL, FIXED)}, ["python", "train.py"])
    doc = json.loads(j.path.read_text())
    doc["pid"] = pid  # no such process
    j.path.write_text(json.dumps(doc))
    return script, j


def test_a_leftover_journal_is_noticed_and_restore_puts_the_original_back(tmp_path):
    script, j = leave_journal(tmp_path)
    notes = io.StringIO()
    assert [x.path for x in journal.notice(notes)] == [j.path]
    assert f"{script.resolve()} still holds its unverified fixes; `gpulint fix --restore` puts the originals back" in notes.getvalue()
    # A new verification of that file refuses to start from the unverified version.
    code, _, fake, _, err = verify(tmp_path, lambda i: ok_result(0.1, i), lambda i: ok_result(0.05, i), fix=lambda: [PlannedFix(script, FIXED, FIXED + b"# more\n")])
    assert code == 2 and fake.seen == [] and "run `gpulint fix --restore` first" in err
    out = io.StringIO()
    assert journal.restore(out) == 0
    assert script.read_bytes() == ORIGINAL
    assert f"gpulint: restored {script.resolve()}" in out.getvalue()
    assert journal.leftovers() == [] and not j.path.exists()


def test_restore_leaves_a_file_edited_since_and_keeps_its_original(tmp_path):
    script, j = leave_journal(tmp_path)
    script.write_bytes(b"# edited after the crash\n")
    out = io.StringIO()
    assert journal.restore(out) == 1
    assert script.read_bytes() == b"# edited after the crash\n"
    assert "edited since the interrupted verification; left as it is" in out.getvalue()
    assert j.path.exists() and journal.Journal.load(j.path).files[0].original == ORIGINAL
    j.path.unlink()


def test_a_running_verification_is_not_a_leftover(tmp_path):
    script, j = leave_journal(tmp_path, pid=os.getpid())
    try:
        assert journal.leftovers() == []  # this process is alive: its journal is in use
    finally:
        j.remove()
