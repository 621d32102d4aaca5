"""Shared helpers: tests read like the rule docs (the code a user writes, the finding, the fix)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpulint.config import Settings, with_overrides
from gpulint.fixer import fix_source
from gpulint.linter import check_source

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


# GPU303 reports a read, and GPU306 a data-dependent size, by default only with evidence of its cost
# (`analysis/read_cost.py`, tests/test_read_cost.py, tests/test_shape_sync_cost.py); the other tests exercise what a
# wait is and where it waits, so they see every one (`unproven-cost`).
ALL_READS = (("GPU303", (("unproven-cost", True),)), ("GPU306", (("unproven-cost", True),)))
# GPU102 reports a loader by default only where the code shows a batch above 512 KiB (tests/test_copy_cost.py), GPU104
# only where it shows a short pass (tests/test_epoch_length.py); the other tests exercise which loaders reach the GPU
# and which loops restart them, written with datasets of unknown size, so they see every one.
ALL_LOADERS = (("GPU102", (("unproven-cost", True),)), ("GPU104", (("unproven-cost", True),)))
# GPU405 reports an evaluation by default only where the code shows its cost (a data loader, batches, a large model:
# tests/test_eval_cost.py); the other tests exercise which evaluations run with autograd on, written with per-sample
# loops and models of unknown size, so they see every one.
ALL_EVALS = (("GPU405", (("unproven-cost", True),)),)
# The same in a project's pyproject.toml, for tests that run the CLI on a file with one read a step.
UNPROVEN_COST_TOML = "".join(f"[tool.gpulint.rules.{code}]\nunproven-cost = true\n" for code in ("GPU102", "GPU104", "GPU105", "GPU201", "GPU303", "GPU306", "GPU405"))
# What GPU303's help adds to a read it reports only because of `unproven-cost = true` (no evidence of its cost).
UNPROVEN_READ = (
    " (its cost is unproven: the code shows one wait a step and no host work for it to serialize, "
    "a few per cent of a GPU-bound step at most, nothing in a launch-bound one)"
)


def settings(**overrides) -> Settings:
    """Default settings rooted at the repository (every GPU303 read: `ALL_READS`), with overrides such as
    select=("GPU1",); `rule_options=()` gives the shipped defaults."""
    return with_overrides(Settings(root=REPO, rule_options=ALL_READS + ALL_LOADERS + ALL_EVALS), **overrides)


def findings(source: str, path: str = "train.py", **overrides) -> list[str]:
    """`row:col CODE` for each finding in the dedented source."""
    diagnostics = check_source(textwrap.dedent(source), path, settings(**overrides))
    return [f"{d.location.row}:{d.location.column} {d.code or d.name}" for d in diagnostics]


def diagnostics(source: str, path: str = "train.py", **overrides):
    return check_source(textwrap.dedent(source), path, settings(**overrides))


def fixed(source: str, unsafe: bool = True, path: str = "train.py", **overrides) -> str:
    return fix_source(textwrap.dedent(source), path, settings(**overrides), unsafe=unsafe).text


def run_gpulint(*args: str, cwd: Path | None = None, stdin: str | bytes | None = None, env: dict | None = None, timeout: float = 300):
    """Run the real CLI in a subprocess (`python -m gpulint`); past `timeout` seconds, TimeoutExpired fails the test."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    full_env.pop("GPULINT_OUTPUT_FORMAT", None) if env is None or "GPULINT_OUTPUT_FORMAT" not in env else None
    data = stdin.encode() if isinstance(stdin, str) else stdin
    return subprocess.run(
        [sys.executable, "-m", "gpulint", *args],
        cwd=cwd or REPO,
        input=data,
        capture_output=True,
        env=full_env,
        timeout=timeout,
    )


@pytest.fixture
def gpulint():
    return run_gpulint


@pytest.fixture(autouse=True, scope="session")
def _private_state_dir(tmp_path_factory):
    """`fix --verify` journals go to a folder of this test session, never the user's ~/.local/state/gpulint."""
    os.environ["GPULINT_STATE_DIR"] = str(tmp_path_factory.mktemp("gpulint-state"))


@pytest.fixture
def unproven_cost(monkeypatch):
    """Every rule with an `unproven-cost` option (GPU102, GPU104, GPU105, GPU201, GPU303, GPU306) reporting what it finds without evidence
    of its cost (`unproven-cost = true`): for the tests of which shapes a rule recognizes (a factory and its move, a
    pinned loader's copy through helpers and other modules), written with sizes out of sight. By default such a
    finding needs evidence: GPU201 a size shown above 512 KiB (tests/test_gpu201_cost.py), GPU105 a batch shown at
    16 MiB or more (tests/test_copy_cost.py), GPU303 a read whose cost the step shows (tests/test_read_cost.py)."""
    import dataclasses

    from gpulint.checks import all_rules

    for rule in all_rules().values():
        if any(option.name == "unproven-cost" for option in rule.options):
            on = tuple(dataclasses.replace(o, default=True) if o.name == "unproven-cost" else o for o in rule.options)
            monkeypatch.setattr(rule, "options", on)


def gpu104_text(d) -> str:
    """A GPU104 finding's message with what the code shows of the pass, which the rule puts first in its help (the
    message stays one short line): `... for every pass of the loop at line 8: a pass is 89 steps ...`."""
    shown, marker, _ = (d.help or "").partition(". Pass `persistent_workers")
    if not marker:
        return d.message
    return f"{d.message}: {shown[0].lower()}{shown[1:]}"
