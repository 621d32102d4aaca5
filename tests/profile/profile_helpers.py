"""Helpers shared by the profiling tests (imported by name: keep this module name unique in tests/)."""

import os
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # this checkout's gpulint, not another one installed in the venv

from gpulint.profile.options import ProfileOptions  # noqa: E402

FIXTURES = REPO / "fixtures" / "profile"
DATA = pathlib.Path(__file__).resolve().parent / "data"
PY = sys.executable


def fast_options(**kwargs) -> ProfileOptions:
    """Small step counts: every subprocess run costs a torch import (~2 s) plus the steps."""
    base = dict(steps=6, warmup=2, timeout=60.0, attribution_steps=4, progress=False)
    base.update(kwargs)
    return ProfileOptions(**base)


def pid_alive(pid: int) -> bool:
    """True if the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" not in line.split()[1]
    except FileNotFoundError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
