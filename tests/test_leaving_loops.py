"""Code that runs once although a step loop is around it (sixteenth corpus, both judges: wrong), two facts of the
semantic model, on minimal shapes of our own:

- a loop whose body ends in an unconditional `break` (or `return`) runs its body once: a shape check over the
  first batch, the display of one batch (`loop_bounds.trip_count` is 1), also for a helper it calls;
- a call under a branch that ends in `return` (or a `break` out of the step loop) runs once per call of the
  function (per pass of the loop): a final evaluation under the last-step test (`leaving_guards.leaving_guard`).

Next to them, what stays: a loop with a `continue` that may skip its `break`, a `break` under a test (a loop that
goes on otherwise), a `break` that leaves only an inner loop, the read before the last-step guard, a read in the
branch's test itself.
"""

from __future__ import annotations

import libcst as cst
import pytest

from gpulint.analysis.leaving_guards import BREAK, RETURN, leaving_guard
from gpulint.analysis.loop_bounds import trip_count
from gpulint.analysis.model import SemanticModel
from tests.conftest import diagnostics, findings

pytestmark = pytest.mark.usefixtures("unproven_cost")

SYNCS = {"select": ("GPU303", "GPU306")}

HEAD = """\
import torch
import torchvision
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = torchvision.models.resnet50().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = torch.nn.CrossEntropyLoss()
loader = DataLoader(torchvision.datasets.CIFAR10("data", download=True), batch_size=64, shuffle=True)
"""


def trips(source: str) -> list:
    model = SemanticModel(cst.parse_module(source), "train.py", source)
    return [trip_count(model, loop) for loop in model.loops]


def test_a_loop_whose_body_ends_in_break_runs_once():
    assert trips("for x, y in loader:\n    print(model(x).shape)\n    break\n") == [1]
    assert trips("def f():\n    for x in loader:\n        show(x)\n        return x\n") == [1]
    assert trips("while True:\n    x = next(it)\n    break\n") == [1]


def test_a_loop_that_may_go_on_has_no_count():
    assert trips("for x, y in loader:\n    if x is None:\n        continue\n    show(x)\n    break\n") == [None]
    assert trips("for x, y in loader:\n    show(x)\n    if x.sum() > 0:\n        break\n") == [None]
    assert trips("for x, y in loader:\n    for z in x:\n        break\n") == [None, 1]


def test_a_shape_check_over_the_first_batch_is_silent():
    source = HEAD + """\
for x, y in loader:
    out = model(x.to(device))
    print(out.max().item())
    break
"""
    assert findings(source, **SYNCS) == []


def test_a_helper_called_from_a_one_batch_display_is_silent():
    source = HEAD + """\
def infer(x):
    out = model(x.to(device))
    for i in torch.unique(out.argmax(1)):
        print(int(i))
    return out

for x, y in loader:
    infer(x)
    break
"""
    assert findings(source, **SYNCS) == []


def test_a_step_loop_whose_break_is_conditional_stays():
    source = HEAD + """\
for x, y in loader:
    loss = criterion(model(x.to(device)), y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())
    if loss.item() < 0.01:
        break
"""
    assert findings(source, **SYNCS) == ["15:11 GPU303"]


def test_the_final_evaluation_under_the_last_step_guard_is_silent():
    source = HEAD + """\
def evaluate():
    correct = 0
    for x, y in loader:
        correct += (model(x.to(device)).argmax(1) == y.to(device)).sum().item()
    return correct

def train(max_steps):
    steps = 0
    for epoch in range(100):
        for x, y in loader:
            loss = criterion(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
            if steps >= max_steps:
                print(evaluate())
                return

train(1000)
"""
    # the evaluation's own pass reads every batch (its own finding, at its line); the call under the guard, once
    # a run, is not reported as a wait of every training step
    assert findings(source, **SYNCS) == ["13:20 GPU303"]
    assert "every training step" not in " ".join(d.message for d in diagnostics(source, **SYNCS))


def test_reads_every_step_next_to_the_last_step_guard_stay():
    source = HEAD + """\
def train(max_steps):
    steps = 0
    for x, y in loader:
        loss = criterion(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        steps += 1
        if steps >= max_steps:
            print(loss.item())
            return
        if loss.item() > 10:
            print(loss.item())
            return

train(1000)
"""
    assert findings(source, **SYNCS) == ["21:12 GPU303"]  # the guard's test reads every step; its body, once


def guard(source: str, marker: str):
    model = SemanticModel(cst.parse_module(source), "train.py", source)
    node = next(c for c in model.calls if model.code(c) == marker)
    return leaving_guard(model, node, model.repeating_loops(node)[0])


def test_leaving_guards():
    body = "for x in loader:\n    if done(x):\n        final(x)\n        {end}\n"
    assert guard(body.format(end="return"), "final(x)") == RETURN
    assert guard(body.format(end="break"), "final(x)") == BREAK
    assert guard(body.format(end="pass"), "final(x)") is None
    assert guard(body.format(end="if x:\n            continue\n        return"), "final(x)") is None
    assert guard("for x in loader:\n    if done(x):\n        return\n", "done(x)") is None  # the test runs every step
    inner = "for e in range(9):\n    for x in loader:\n        if done(x):\n            final(x)\n            break\n"
    assert guard(inner, "final(x)") == BREAK  # the inner loop's pass: the epoch loop decides
    nested = "for x in loader:\n    if done(x):\n        for z in x:\n            final(z)\n        break\n"
    model_source = nested
    model = SemanticModel(cst.parse_module(model_source), "train.py", model_source)
    node = next(c for c in model.calls if model.code(c) == "final(z)")
    assert leaving_guard(model, node, model.repeating_loops(node)[1]) == BREAK
    across = "for x in loader:\n    for z in x:\n        if done(z):\n            final(z)\n            break\n"
    model = SemanticModel(cst.parse_module(across), "train.py", across)
    node = next(c for c in model.calls if model.code(c) == "final(z)")
    assert leaving_guard(model, node, model.repeating_loops(node)[1]) is None  # leaves the inner loop only
