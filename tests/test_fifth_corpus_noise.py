"""The fifth held-out corpus's "a loop of a few iterations, not a step" noise class (`hot_loops._few_literal_items`):
yolov7's final test of `(last, best) if best.exists() else (last)` and its `speed` task over `--weights`
(`nargs="+"`), each iteration a whole evaluation. Minimal shapes of our own, next to the ones that stay."""

from __future__ import annotations

import libcst as cst

from gpulint.analysis.loop_bounds import runs_briefly
from gpulint.analysis.model import SemanticModel


def handful(source: str) -> list[bool]:
    """`runs_briefly` for each `for` loop of `source`, in order."""
    model = SemanticModel(cst.parse_module(source), "train.py", source)
    return [runs_briefly(model, loop) for loop in model.loops if isinstance(loop, cst.For)]



def test_a_final_test_of_last_and_best_runs_a_handful():
    assert handful("for m in (last, best) if best.exists() else (last):\n    test(m)\n") == [True]
    assert handful("for m in [last, best] if best.exists() else [last]:\n    test(m)\n") == [True]


def test_checkpoints_found_at_run_time_or_an_unknown_fallback_are_not_a_handful():
    assert handful("for m in sorted(folder.glob('*.pt')):\n    test(m)\n") == [False]
    assert handful("for m in (last, best) if best.exists() else checkpoints:\n    test(m)\n") == [False]
    assert handful("for m in (last, best) if best.exists() else (last, *others):\n    test(m)\n") == [False]


SPEED = """\
import argparse

parser = argparse.ArgumentParser()
parser.add_argument("--weights", nargs="+", type=str, default="model.pt")
parser.add_argument("--data", type=str, default="coco.yaml")
opt = parser.parse_args()

for w in opt.weights:
    test(opt.data, w)
"""


def test_a_list_typed_at_launch_runs_a_handful():
    assert handful(SPEED) == [True]
    assert handful(SPEED.replace('nargs="+"', 'nargs="*"')) == [True]


def test_other_options_are_not_a_handful():
    assert handful(SPEED.replace('nargs="+", ', "")) == [False]
    # A list with no default written (a shell glob may give it thousands of files).
    assert handful(SPEED.replace(', default="model.pt"', "")) == [False]
    assert handful(SPEED.replace("for w in opt.weights:", "for w in open(opt.data):")) == [False]
    # Not the parsed command line: an object that happens to have the same attribute.
    assert handful(SPEED.replace("for w in opt.weights:", "for w in cfg.weights:")) == [False]
