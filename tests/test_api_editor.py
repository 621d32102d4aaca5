"""What the API gives an editor: one finding's fix as edits (only when it applies cleanly), the edit that adds
`# noqa: CODE` to its line, and the related places a finding names (the argparse default, the loop)."""

from __future__ import annotations

import pytest

from gpulint import api
from gpulint.diagnostics import Applicability, Diagnostic, Edit, Fix, Location
from gpulint.fixer import apply_edits

TRAIN = """\
import argparse

import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=4)
args = parser.parse_args()
device = torch.device("cuda")


def train(model, dataset, optimizer):
    loader = DataLoader(dataset, batch_size=args.batch_size, num_workers=4, pin_memory=True)
    for x in loader:
        loss = model(x.to(device, non_blocking=True)).sum()
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
    print(torch.cuda.memory_cached())  # peak
"""


@pytest.fixture
def found(tmp_path):
    source = api.Source(TRAIN, "train.py")
    return source, {d.code: d for d in api.check(source, api.discover_settings(tmp_path)).diagnostics}


def test_related_places_name_the_argparse_default_and_the_loop(found):
    _, by_code = found
    assert set(by_code) == {"GPU103", "GPU304", "GPU402"}
    assert by_code["GPU103"].related == (("the argparse default", Location(7, 55)),)
    assert by_code["GPU304"].related == (("the training loop", Location(14, 5)),)
    assert by_code["GPU402"].related == ()


def test_fix_edits_are_the_findings_own_edits_when_they_apply(found):
    source, by_code = found
    edits = api.fix_edits(source, by_code["GPU402"])
    assert edits == by_code["GPU402"].fix.edits
    assert apply_edits(TRAIN, list(edits)) == TRAIN.replace("memory_cached", "memory_reserved")
    # An unsafe fix is given too: the editor labels it (GPU103 raises the argparse default).
    unsafe = by_code["GPU103"]
    assert unsafe.fix.applicability == Applicability.UNSAFE
    assert "default=64)" in apply_edits(TRAIN, list(api.fix_edits(source, unsafe)))
    assert api.fix_edits(source, by_code["GPU304"]) == ()  # no fix


def test_fix_edits_refuse_a_fix_that_would_break_the_file(found):
    source, by_code = found
    broken = Diagnostic(
        "GPU402", "deprecated-memory-api", "m", "train.py", Location(19, 5), Location(19, 10),
        fix=Fix("Break it", Applicability.SAFE, (Edit(Location(19, 5), Location(19, 10), "print(("),)),
    )  # fmt: skip
    assert api.fix_edits(source, broken) == ()
    outside = Diagnostic(
        "GPU402", "deprecated-memory-api", "m", "train.py", Location(99, 1), Location(99, 1),
        fix=Fix("Nowhere", Applicability.SAFE, (Edit(Location(99, 1), Location(99, 1), "x"),)),
    )  # fmt: skip
    assert api.fix_edits(source, outside) == ()
    display_only = Diagnostic(
        "GPU402", "deprecated-memory-api", "m", "train.py", Location(19, 5), Location(19, 10),
        fix=Fix("Look", Applicability.DISPLAY_ONLY, by_code["GPU402"].fix.edits),
    )  # fmt: skip
    assert api.fix_edits(source, display_only) == ()


def test_noqa_edit_replaces_the_line_and_keeps_its_comment(found):
    source, by_code = found
    edit = api.noqa_edit(source, by_code["GPU402"])
    assert edit == Edit(Location(19, 1), Location(19, 46), "    print(torch.cuda.memory_cached())  # peak  # noqa: GPU402")
    suppressed = apply_edits(TRAIN, [edit])
    assert "GPU402" not in {d.code for d in api.check(api.Source(suppressed, "train.py")).diagnostics}


def test_noqa_edit_merges_codes_and_respects_continuations():
    text = "import torch\nx = torch.cuda.memory_cached()  # noqa: GPU101\ny = torch.cuda.memory_cached() + \\\n    1\n"
    source = api.Source(text, "t.py")
    first, second = api.check(source).diagnostics
    assert api.noqa_edit(source, first) == Edit(Location(2, 1), Location(2, 47), "x = torch.cuda.memory_cached()  # noqa: GPU101, GPU402")
    assert second.noqa_row == 4  # the comment goes where the backslash continuation ends
    assert api.noqa_edit(source, second) == Edit(Location(4, 1), Location(4, 6), "    1  # noqa: GPU402")
    syntax = Diagnostic(None, "invalid-syntax", "m", "t.py", Location(1, 1), Location(1, 1))
    assert api.noqa_edit(source, syntax) is None
