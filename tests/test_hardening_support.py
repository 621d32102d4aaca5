"""Helpers shared by the hardening tests (no tests here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def start_cli(args: list[str], cwd: Path, prelude: str = "") -> subprocess.Popen:
    """Start the real CLI (`gpulint.cli.main`) in a subprocess and return once it is about to run.

    `prelude` is Python run first (e.g. to slow writes down so that a signal lands among them). The process
    prints a line to stderr just before `main()`, which this waits for, so that a signal sent afterwards
    reaches gpulint's handlers rather than the interpreter's start-up.
    """
    code = f"import sys\n{prelude}\nfrom gpulint.cli import main\nprint('gpulint-ready', file=sys.stderr, flush=True)\nmain(sys.argv[1:])\n"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GPULINT_OUTPUT_FORMAT", None)
    proc = subprocess.Popen([sys.executable, "-c", code, *args], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stderr.readline()
    assert line == b"gpulint-ready\n", line
    return proc
