"""Issue 13's noise on fresh reads, two classes, each a fact of the semantic model, on the fixture project
`tests/projects/fewloops` (minimal shapes of our own):

- loops that run a few times as shipped are no step loops (`loop_bounds.trip_count` / `runs_briefly`): a
  learning-rate range test that stops after `--num_iter` (default 100) steps, a ten-image latent walk over
  `range(1, number_int + 1)`, eleven image sizes `list(range(256, 1536 + 128, 128))`;
- an action the host hands to an environment (`env.step(action)`) is needed on the host
  (`host_reads.needed_on_host`; across calls, a helper that returns it to a caller that steps with it).

Next to them, what stays: a 100-epoch loop over a DataLoader, `range(args.steps)` with a default of 100000, a
counter that may jump over its `==` bound, a full evaluation over a test DataLoader, 5000 samples, a loss or a
value that is only printed.
"""

from __future__ import annotations

import libcst as cst

from gpulint.analysis.loop_bounds import SHORT_LOOP, trip_count
from gpulint.analysis.model import SemanticModel
from tests.projects_helper import copy_project, found, lint


def project_findings(tmp_path, monkeypatch) -> list[str]:
    return sorted(found(lint(copy_project("fewloops", tmp_path), monkeypatch)))


def test_short_loops_and_environment_actions_are_silent_and_real_steps_stay(tmp_path, monkeypatch):
    assert project_findings(tmp_path, monkeypatch) == [
        "gan.py:26 GPU303",  # 5000 samples, one copy each: not a short loop
        "rl.py:49 GPU303",  # the loss, only printed: the RL loop's other reads stay
        "rl.py:63 GPU303",  # a value estimate, only printed, through a helper
        "rl.py:71 GPU103",
        "study.py:15 GPU303",  # the whole test loader, after the eleven sizes
        "train.py:23 GPU303",  # a 100-epoch loop over a DataLoader
        "train.py:32 GPU303",  # `range(args.steps)`, default 100000
        "train.py:42 GPU303",  # `if n == args.num_iter: break`, but `n += 7` may jump over it (and names line 43)
        "train.py:50 GPU303",  # a full evaluation over the test loader
    ]


def test_the_message_of_a_step_loop_that_stays(tmp_path, monkeypatch):
    diagnostics = lint(copy_project("fewloops", tmp_path), monkeypatch, files=["train.py"])
    assert [(d.location.row, d.message) for d in diagnostics if d.location.row == 32] == [
        (32, "`loss.item()` waits for the GPU every training step (loop at line 26)"),
    ]


def trips(source: str) -> list:
    """`trip_count` of each loop of `source`, in order."""
    model = SemanticModel(cst.parse_module(source), "train.py", source)
    return [trip_count(model, loop) for loop in model.loops]


ARGS = 'import argparse\np = argparse.ArgumentParser()\np.add_argument("--n", type=int, default={n})\nargs = p.parse_args()\n'


def test_trip_counts_the_code_states():
    assert trips("for i in range(1, k + 1):\n    pass\n".replace("k", "10")) == [10]
    assert trips("k = 10\nfor i in range(1, k + 1):\n    pass\n") == [10]
    assert trips("x = list(range(256, 1536 + 128, 128))\nfor s in x:\n    pass\n") == [11]
    assert trips("from tqdm import tqdm\nfor i, s in enumerate(tqdm([1, 2, 3])):\n    pass\n") == [3]
    assert trips("for a, b in zip(range(4), loader):\n    pass\n") == [4]
    assert trips(ARGS.format(n=50) + "for i in range(args.n):\n    pass\n") == [50]
    assert trips(ARGS.format(n=100) + "n = 0\nfor x in loader:\n    if n > args.n:\n        break\n    n += 1\n") == [103]


def test_unknown_or_long_loops_have_no_short_count():
    assert trips("for x in loader:\n    pass\n") == [None]
    assert trips("for i in range(len(data)):\n    pass\n") == [None]
    assert trips("x = [1, 2]\nx.append(3)\nfor s in x:\n    pass\n") == [None]  # grown: unknown
    assert trips("n = 0\nfor x in loader:\n    if n == 5:\n        break\n    n += 1\n    n += 2\n") == [None]
    assert trips(ARGS.format(n=100000) + "for i in range(args.n):\n    pass\n")[0] > SHORT_LOOP


def test_a_pass_over_a_loader_sampled_on_its_first_batches_stays_per_batch_beyond_a_handful():
    # an evaluation over its first 52 batches (`if idx > 50: break`) is still judged per batch
    assert trips("for idx, x in enumerate(loader):\n    if idx > 50:\n        break\n") == [None]
    assert trips("for idx, x in enumerate(loader):\n    if idx > 5:\n        break\n") == [7]


def test_a_break_test_on_the_index_as_the_header_set_it_counts_though_an_inner_loop_reuses_the_name():
    # `for ix, (images, targets) in enumerate(loader): if ix == 3: break` then an inner `for ix, out in enumerate(outs)`:
    # the test reads the header's index (three batches decoded for display), whatever the inner loop rebinds after it
    inner = "    for ix, out in enumerate(outs):\n        print(out)\n"
    assert trips("for ix, x in enumerate(loader):\n    if ix == 3: break\n    outs = x\n" + inner)[0] == 4
    # rebound before the test: the test no longer reads the iteration count
    assert trips("for ix, x in enumerate(loader):\n    ix = len(x)\n    if ix == 3: break\n")[0] is None
    assert trips("for ix, x in enumerate(loader):\n    for ix, out in enumerate(x):\n        pass\n    if ix == 3: break\n")[0] is None
