"""run_verify: alternation, keep / roll back for every failure kind, final file state, real end-to-end runs."""

import io
import json
import os
import random
import stat

import pytest
from profile_helpers import PY, fast_options

from gpulint.profile import runner
from gpulint.profile.runner import RunResult
from gpulint.profile.verify import run_verify

ORIGINAL = b"loader = DataLoader(ds, batch_size=32)\n"
FIXED = b"loader = DataLoader(ds, batch_size=32, num_workers=2)\n"


def make_fix(path):
    def apply_fixes():
        original = path.read_bytes()
        fixed = original.replace(b"DataLoader(ds, batch_size=32", b"DataLoader(ds, batch_size=32, num_workers=2")
        if fixed == original:
            return {}
        path.write_bytes(fixed)
        return {path: original}

    return apply_fixes


def ok_result(step_s, seed=0, n=20):
    rng = random.Random(seed)
    steps = [{"wall_s": step_s * (1 + rng.uniform(-0.01, 0.01)), "data_wait_s": 0.0, "samples": 32, "batches": 1} for _ in range(n)]
    return RunResult(runner.OK, "measured", raw={"window": {"steps": steps}, "losses": [0.7, 0.6]}, attribution={})


def failed_result(status):
    return RunResult(status, f"simulated {status}", traceback_tail="Traceback (most recent call last):\nValueError: boom")


class FakeRunner:
    """Stands in for runner.run_measured; records which file content each run saw."""

    def __init__(self, path, a, b):
        self.path, self.a, self.b = path, a, b
        self.seen = []

    def __call__(self, plan, options, attribution, label, on_progress, trace_copy_to):
        content = self.path.read_bytes()
        variant = "A" if label.startswith("A") else "B"
        self.seen.append((variant, content, attribution))
        source = self.a if variant == "A" else self.b
        result = source(sum(1 for v, _, _ in self.seen if v == variant) - 1)
        if isinstance(result, BaseException):
            raise result
        result.label = label
        return result


def verify(tmp_path, a, b, repeat=3, fix=None, **opts):
    script = tmp_path / "train.py"
    if not script.exists():
        script.write_bytes(ORIGINAL)
    fake = FakeRunner(script, a, b)
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
    called = []

    def fix():
        called.append(1)
        return {}

    code, script, _, out, err = verify(tmp_path, lambda i: failed_result(runner.SCRIPT_ERROR), None, fix=fix)
    assert code == 2
    assert called == []  # the fixes were never applied
    assert script.read_bytes() == ORIGINAL
    assert err.startswith("gpulint failed\n  Cause: could not measure the original")
    assert "Traceback (most recent call last)" not in err.split("Cause:")[0]


def test_nothing_to_fix(tmp_path):
    code, script, fake, out, _ = verify(tmp_path, lambda i: ok_result(0.1), None, fix=lambda: {})
    assert code == 0
    assert "Nothing to fix" in out
    assert len(fake.seen) == 1


def test_fixer_exception_is_reported_not_raised(tmp_path):
    def fix():
        raise RuntimeError("fixer bug")

    code, _, _, _, err = verify(tmp_path, lambda i: ok_result(0.1), None, fix=fix)
    assert code == 2 and "applying the fixes failed: RuntimeError: fixer bug" in err


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
        originals = {script: script.read_bytes(), other: other.read_bytes()}
        script.write_bytes(FIXED)
        other.write_bytes(b"A = 2\n")
        return originals

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
    code = run_verify([PY, str(tmp_path / "missing.py")], lambda: {}, fast_options(), out=io.StringIO(), err=err)
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
        script.write_bytes(original.replace(b'default="none"', b'default="exit"'))
        return {script: original}

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
        originals = {script: script.read_bytes(), other: other.read_bytes()}
        script.write_bytes(FIXED)
        other.write_bytes(b"A = 2\n")
        return originals

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
