"""`gpulint fix --apply --verify`'s own writes: a file that cannot be written is skipped and reported, and a
stop half-way restores every file already written (nothing stays fixed and unverified)."""

import os
import shutil
import stat

import pytest
from profile_helpers import FIXTURES, PY, fast_options

from gpulint import cli
from gpulint.profile import runner
from gpulint.profile.runner import RunResult
from tests.conftest import settings


def ok(step_s):
    steps = [{"wall_s": step_s, "data_wait_s": 0.0, "samples": 32, "batches": 1} for _ in range(10)]
    return RunResult(runner.OK, "measured", raw={"window": {"steps": steps}}, attribution={})


@pytest.fixture
def two_scripts(tmp_path):
    a, b = tmp_path / "a_train.py", tmp_path / "b_train.py"
    shutil.copy(FIXTURES / "slow_loader.py", a)
    shutil.copy(FIXTURES / "slow_loader.py", b)
    return a, b


def test_a_read_only_file_is_skipped_and_the_rest_verified(two_scripts, monkeypatch, capsys):
    a, b = two_scripts
    original = b.read_bytes()
    b.chmod(0o444)
    seen = []

    def fake_run(plan, options, **kw):
        seen.append((kw["label"][0], a.read_bytes() != original))
        r = ok(0.1 if kw["label"].startswith("A") else 0.05)
        r.label = kw["label"]
        r.probe_hits = {(path, line) for path, lines in (kw["probes"] or {}).items() for line in lines}  # fixes ran
        return r

    monkeypatch.setattr(runner, "run_measured", fake_run)
    code = cli.run_verify_fix((str(a), str(b)), [PY, str(a)], settings(unsafe_fixes=True), fast_options(repeat=1))
    err = capsys.readouterr().err
    assert code == 0
    assert f"gpulint: {b}: not written: file is read-only" in err
    assert b.read_bytes() == original
    assert a.read_bytes() != original and seen == [("A", False), ("B", True)]


def test_a_stop_during_the_first_write_restores_what_was_written(two_scripts, monkeypatch):
    from gpulint.profile import file_swap, journal

    a, b = two_scripts
    original = a.read_bytes()
    real_write = file_swap.write_atomic
    calls = []

    def write_then_interrupt(path, data, expected=None):
        calls.append(path)
        if len(calls) == 2:  # the second file of the first swap to the fixed versions: Ctrl-C arrives
            raise KeyboardInterrupt
        return real_write(path, data, expected)

    monkeypatch.setattr(file_swap, "write_atomic", write_then_interrupt)
    monkeypatch.setattr(runner, "run_measured", lambda plan, options, **kw: ok(0.1))
    with pytest.raises(KeyboardInterrupt):
        cli.run_verify_fix((str(a), str(b)), [PY, str(a)], settings(unsafe_fixes=True), fast_options(repeat=1))
    assert a.read_bytes() == original and b.read_bytes() == original
    assert not [p for p in os.listdir(a.parent) if p.endswith(".gpulint-tmp")]
    assert stat.S_IMODE(os.stat(a).st_mode) & stat.S_IWUSR
    assert not journal.leftovers()  # everything is back: no journal left to warn about
