"""Which changed lines a fix's B runs must execute, and the tracer that records them in the real bootstrap."""

import textwrap

import pytest
from profile_helpers import FIXTURES, PY, fast_options

from gpulint.profile.changed_lines import probe_groups
from gpulint.profile.command import plan_command
from gpulint.profile.runner import run_once


def groups(before, after):
    return probe_groups(textwrap.dedent(before).encode(), textwrap.dedent(after).encode())


def test_a_changed_call_is_probed_on_every_line_of_its_statement():
    before = """\
        import torch
        loader = DataLoader(
            ds, batch_size=32)
        for x in loader:
            x = x.to(dev)
        """
    after = """\
        import torch
        loader = DataLoader(
            ds, batch_size=32, num_workers=2)
        for x in loader:
            x = x.to(dev, non_blocking=True)
        """
    assert groups(before, after) == [(2, 3), (5,)]


def test_a_changed_line_inside_a_branch_is_probed_there_not_at_the_branch():
    before = "if cuda:\n    x = x.pin_memory().to(dev)\nelse:\n    x = x\n"
    after = "if cuda:\n    x = x.to(dev)\nelse:\n    x = x\n"
    assert groups(before, after) == [(2,)]


def test_a_changed_header_of_a_compound_statement_probes_only_its_header():
    before = "for x in DataLoader(ds):\n    step(x)\n"
    after = "for x in DataLoader(ds, num_workers=2):\n    step(x)\n"
    assert groups(before, after) == [(1,)]


def test_a_deleted_line_is_probed_by_the_statements_around_it():
    before = "a = 1\ntorch.cuda.synchronize()\nb = 2\n"
    after = "a = 1\nb = 2\n"
    assert groups(before, after) == [(1,), (2,)]


def test_an_unparsable_file_has_no_probes():
    assert probe_groups(b"x = 1\n", b"x = (\n") == []


@pytest.mark.slow
def test_the_bootstrap_records_which_probed_lines_ran():
    """Line 12 (inside `if device.type == "cuda":`) never runs on a CPU; lines 10 and 24 do."""
    script = FIXTURES / "cuda_branch.py"
    lines = script.read_text().splitlines()
    assert lines[11].strip().startswith("x = x.pin_memory()") and lines[9].strip().startswith("for x, y in loader")
    path = str(script.resolve())
    r = run_once(plan_command([PY, str(script)]), fast_options(steps=4, warmup=2), attribution=False, probes={path: [10, 12, 24]})
    assert r.ok, r.message + r.stderr_tail
    assert r.probe_hits == {(path, 10), (path, 24)}
