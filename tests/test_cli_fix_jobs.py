"""`fix -j N` fixes files in worker processes with the same output as one process, and an interrupt while
files are still being analysed says that nothing was written (check and fix)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import gpulint.fixer as fixer
import gpulint.linter as linter
from gpulint.cli import Terminated
from tests.test_hardening_support import start_cli
from tests.test_hardening_writes import _files as _files_with, _run_main

BEFORE = "import torch\n\nx = torch.cuda.memory_cached()\n"
AFTER = "import torch\n\nx = torch.cuda.memory_reserved()\n"
MANY = linter.SERIAL_BELOW + 6  # enough files for a process pool


def _files(folder: Path, count: int) -> list[Path]:
    return _files_with(folder, count, before=BEFORE)


def test_fix_in_workers_prints_what_one_process_prints(gpulint, tmp_path):
    _files(tmp_path, MANY)
    serial = gpulint("fix", "--show-fixes", "-j", "1", ".", cwd=tmp_path)
    parallel = gpulint("fix", "--show-fixes", "-j", "2", ".", cwd=tmp_path)
    assert (parallel.returncode, parallel.stdout, parallel.stderr) == (serial.returncode, serial.stdout, serial.stderr)
    assert serial.returncode == 1
    diffs = serial.stdout.decode().split("--- ")[1:]
    assert [d.split("\n", 1)[0] for d in diffs] == [f"m{i:03d}.py" for i in range(MANY)]  # in path order


def test_fix_apply_in_workers_writes_every_file_and_names_the_one_it_could_not(gpulint, tmp_path):
    paths = _files(tmp_path, MANY)
    paths[7].chmod(0o444)
    result = gpulint("fix", "--apply", "--show-fixes", "-j", "2", "--output-format", "concise", ".", cwd=tmp_path)
    assert result.returncode == 1
    assert [p.read_text() for p in paths] == [BEFORE if i == 7 else AFTER for i in range(MANY)]
    err = result.stderr.decode().splitlines()
    assert err[0] == "gpulint: m007.py: not written: file is read-only"
    assert err[1:3] == [f"Fixed {MANY - 1} errors:", "- m000.py:"]
    assert [line for line in err if line.startswith("- ")] == [f"- m{i:03d}.py:" for i in range(MANY) if i != 7]
    assert result.stdout.decode() == (
        "m007.py:3:5: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`\n"
        f"Found {MANY} errors ({MANY - 1} fixed, 1 remaining).\n"
    )


# ---- an interrupt during analysis ----------------------------------------------------------------------------------


@pytest.mark.parametrize("interrupt, code, name", [(KeyboardInterrupt, 130, "SIGINT"), (Terminated, 143, "SIGTERM")])
def test_an_interrupt_while_fixes_are_computed_says_nothing_was_written(tmp_path, monkeypatch, capsys, interrupt, code, name):
    paths = _files(tmp_path, 3)
    real = fixer.fix_source
    seen = []

    def interrupted_on_the_second_file(*args, **kwargs):
        seen.append(args[1])
        if len(seen) == 2:
            raise interrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(fixer, "fix_source", interrupted_on_the_second_file)
    monkeypatch.chdir(tmp_path)
    result = _run_main(["fix", "--apply", "-j", "1", "."], capsys)
    assert result == (code, "", f"gpulint: interrupted ({name}) during analysis; no file was written\n")
    assert [p.read_text() for p in paths] == [BEFORE] * 3


@pytest.mark.parametrize("args", [["check"], ["check", "--add-noqa"], ["check", "--fix"]])
def test_an_interrupt_while_checking_says_nothing_was_written(tmp_path, monkeypatch, capsys, args):
    paths = _files(tmp_path, 3)
    real = linter.check_source
    calls = []

    def interrupted(*a, **kw):
        calls.append(a[1])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(linter, "check_source", interrupted)
    monkeypatch.setattr(fixer, "check_source", interrupted)  # check --fix checks through the fixer
    monkeypatch.chdir(tmp_path)
    result = _run_main([*args, "--no-cache", "-j", "1", "."], capsys)
    assert result == (130, "", "gpulint: interrupted (SIGINT) during analysis; no file was written\n")
    assert [p.read_text() for p in paths] == [BEFORE] * 3
    assert not (tmp_path / ".gpulint_cache").exists()


SLOW_ANALYSIS = """
import os, time
import gpulint.fixer as fixer
_real = fixer.fix_source
def _slow(*args, **kwargs):
    os.write(2, b"analysing\\n")  # one write: workers print side by side
    time.sleep(0.5)
    return _real(*args, **kwargs)
fixer.fix_source = _slow
"""


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_to_the_real_cli_during_analysis(tmp_path, jobs, signum):
    paths = _files(tmp_path, MANY)
    proc = start_cli(["fix", "--apply", "-j", jobs, "."], tmp_path, prelude=SLOW_ANALYSIS)
    assert proc.stderr.readline() == b"analysing\n"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    err = err.decode()
    assert proc.returncode == 128 + signum, err
    lines = [line for line in err.splitlines() if line != "analysing"]
    assert lines == [f"gpulint: interrupted ({signal.Signals(signum).name}) during analysis; no file was written"]
    assert [p.read_text() for p in paths] == [BEFORE] * MANY


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process tree from /proc")
@pytest.mark.parametrize("command", [["fix", "--apply"], ["check", "--no-cache"]])
def test_workers_end_when_gpulint_is_killed(tmp_path, command):
    """A killed gpulint cannot stop its pool; its workers must not live on holding stdout (a CI job would hang)."""
    _files(tmp_path, MANY)
    prelude = SLOW_ANALYSIS.replace("fixer.fix_source", "linter.check_source").replace("gpulint.fixer as fixer", "gpulint.linter as linter")
    proc = start_cli([*command, "-j", "2", "."], tmp_path, prelude=prelude)
    assert proc.stderr.readline() == b"analysing\n"
    workers = _children(proc.pid)
    assert len(workers) == 2
    proc.kill()
    try:
        proc.communicate(timeout=60)  # returns only once every holder of the pipes, the workers too, is gone
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers):
            assert time.monotonic() < deadline, "a worker outlived gpulint"
            time.sleep(0.05)
    finally:
        for pid in filter(_alive, workers):  # a failed run leaves nothing behind
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("delay", [0.5, 1.5])
def test_two_quick_sigterms_during_analysis_in_workers(tmp_path, delay):
    """The first stops the analysis; the second may land while gpulint exits: no file written, nothing left running."""
    paths = _files(tmp_path, 150)
    proc = start_cli(["fix", "--apply", "-j", "2", "."], tmp_path)
    time.sleep(delay)
    proc.send_signal(signal.SIGTERM)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 128 + signal.SIGTERM, -signal.SIGTERM), err
    assert b"Traceback" not in err
    assert all(p.read_text() in (BEFORE, AFTER) for p in paths)
