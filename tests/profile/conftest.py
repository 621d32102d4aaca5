import os
import pathlib
import sys

import pytest

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


@pytest.fixture
def fixtures_copy(tmp_path):
    """Copy a fixture script into tmp_path (tests that rewrite files must never touch the repo's copy)."""

    def copy(name: str) -> pathlib.Path:
        dest = tmp_path / name
        dest.write_bytes((FIXTURES / name).read_bytes())
        return dest

    return copy


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
