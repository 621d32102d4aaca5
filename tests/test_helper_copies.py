"""GPU204 through helpers: the same host copy made on every call of a function the step loop calls every iteration
(`analysis/helper_copies.py`)."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import diagnostics, findings, fixed

SETUP = """\
import torch
import torch.nn.functional as F
from data import load_citation

adj, features, labels, idx_train, idx_val = load_citation("cora")
device = torch.device("cuda")
features = features.to(device)
model = torch.nn.Linear(8, 4).to(device)
optimizer = torch.optim.Adam(model.parameters())
"""

# GCNII's full-batch script: the labels stay on the host and are sliced and copied in every epoch's step.
GLOBALS = SETUP + textwrap.dedent("""\


    def train():
        optimizer.zero_grad()
        out = model(features)
        loss = F.nll_loss(out[idx_train], labels[idx_train].to(device))
        loss.backward()
        optimizer.step()
        return loss


    for epoch in range(1000):
        train()
""")


def test_a_global_label_slice_copied_in_the_step_helper_is_reported_at_the_copy():
    assert findings(GLOBALS, select=("GPU204",)) == ["15:39 GPU204"]
    [d] = diagnostics(GLOBALS, select=("GPU204",))
    assert d.message == (
        "`labels[idx_train].to(device)` copies the same `labels[idx_train]` to the GPU on every call of `train`, "
        "run every iteration by the call at line 22"
    )
    assert d.severity.value == "warning"
    assert "copy it to the GPU once, before the loop" in d.help
    assert [(what, where.row) for what, where in d.related] == [("the call", 22), ("the loop", 21)]
    assert fixed(GLOBALS, unsafe=True, select=("GPU204",)) == GLOBALS  # no fix: the copy lives in another function


ARGUMENTS = SETUP + textwrap.dedent("""\


    def train_step(model, optimizer, features, labels, idx):
        optimizer.zero_grad()
        loss = F.nll_loss(model(features)[idx], labels[idx].to(device))
        loss.backward()
        optimizer.step()


    def validate_step(model, features, labels, idx):
        with torch.no_grad():
            return F.nll_loss(model(features)[idx], labels[idx].to(device)).item()


    def main():
        for epoch in range(1000):
            train_step(model, optimizer, features, labels, idx_train)
            validate_step(model, features, labels, idx=idx_val)
""")


def test_arguments_the_loop_never_rebinds_make_the_same_copy_at_every_call():
    assert findings(ARGUMENTS, select=("GPU204",)) == ["14:45 GPU204", "21:49 GPU204"]
    first, second = diagnostics(ARGUMENTS, select=("GPU204",))
    assert "every call of `train_step`, run every iteration by the call at line 26" in first.message
    assert "every call of `validate_step`, run every iteration by the call at line 27" in second.message


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # the step's own batch: a new value every call
        ("        train_step(model, optimizer, features, labels, idx_train)",
         "        for x, y in loader:\n            train_step(model, optimizer, x, y, idx_train)"),
        # an argument the loop rebinds
        ("        train_step(model, optimizer, features, labels, idx_train)",
         "        idx_train = sample(idx_train)\n        train_step(model, optimizer, features, labels, idx_train)"),
        # an argument the loop changes in place
        ("        train_step(model, optimizer, features, labels, idx_train)",
         "        labels[0] = epoch\n        train_step(model, optimizer, features, labels, idx_train)"),
        # an argument computed at the call
        ("        train_step(model, optimizer, features, labels, idx_train)",
         "        train_step(model, optimizer, features, labels, idx_train[: epoch + 1])"),
        # called every tenth epoch only
        ("        train_step(model, optimizer, features, labels, idx_train)",
         "        if epoch % 10 == 0:\n            train_step(model, optimizer, features, labels, idx_train)"),
    ],
)
def test_a_copy_of_what_changes_between_calls_is_not_reported(before, after):
    source = ARGUMENTS.replace(before, after).replace(
        "        validate_step(model, features, labels, idx=idx_val)\n", "")
    assert findings(source, select=("GPU204",)) == []


@pytest.mark.parametrize(
    ("before", "after"),
    [
        # already on the GPU: the copy is free
        ("labels[idx_train].to(device)", "features[idx_train].to(device)"),
        # computed in the helper: a new value (a draw, a loader read)
        ("labels[idx_train].to(device)", "labels[torch.randperm(8)].to(device)"),
        # a value the helper makes itself
        ("    out = model(features)\n", "    out = model(features)\n    labels = out.argmax(1).cpu()\n"),
        # under a branch: not every call
        ("    loss = F.nll_loss(out[idx_train], labels[idx_train].to(device))\n",
         "    if epoch_is_even:\n        loss = F.nll_loss(out[idx_train], labels[idx_train].to(device))\n"),
        # the loop rebinds the global
        ("    train()\n", "    labels = relabel(labels)\n    train()\n"),
        # a function rebinds the global
        ("for epoch in range(1000):", "def relabel():\n    global labels\n    labels = labels + 1\n\n\nfor epoch in range(1000):"),
        # the helper is called once, before training, not by the loop
        ("for epoch in range(1000):\n    train()\n", "train()\nfor epoch in range(1000):\n    pass\n"),
    ],
)
def test_helper_copies_that_are_not_the_same_every_step_stay_silent(before, after):
    assert before in GLOBALS
    assert findings(GLOBALS.replace(before, after), select=("GPU204",)) == []


def test_a_validation_helper_over_many_batches_is_not_one_copy_per_step():
    source = SETUP + textwrap.dedent("""\


        def evaluate(graphs):
            for g in range(2):
                batch = graphs[g].to(device)
                model(batch)


        for epoch in range(1000):
            optimizer.zero_grad()
            model(features).sum().backward()
            optimizer.step()
            evaluate(val_graphs)
    """)
    assert findings(source, select=("GPU204",)) == []


@pytest.mark.parametrize(
    "other",
    [
        "def pseudo_label(mask):\n    labels[mask] = 0\n",  # item-assigned by another helper
        "def smooth():\n    labels.mul_(0.9)\n",  # changed in place by another function
    ],
)
def test_a_global_another_function_changes_in_place_is_not_the_same_every_call(other):
    source = GLOBALS.replace("for epoch in range(1000):", other + "\n\nfor epoch in range(1000):")
    assert findings(source, select=("GPU204",)) == []


def test_a_module_moved_alone_in_the_helper_is_not_a_copy():
    source = GLOBALS.replace("    optimizer.zero_grad()\n", "    net.cuda()\n    optimizer.zero_grad()\n").replace(
        "labels[idx_train].to(device)", "labels[idx_train]")
    source = source.replace("optimizer = ", "net = make_net()\noptimizer = ")
    assert findings(source, select=("GPU204",)) == []


def test_an_attribute_of_an_object_whose_methods_run_in_the_step_is_not_the_same_every_call():
    source = GLOBALS.replace("labels[idx_train].to(device)", "env.labels.to(device)").replace(
        "    train()\n", "    env.step()\n    train()\n").replace("optimizer = ", "env = make_env()\noptimizer = ")
    assert findings(source, select=("GPU204",)) == []
    assert findings(source.replace("    env.step()\n", ""), select=("GPU204",)) == ["16:39 GPU204"]


def test_a_comprehension_over_the_step_batch_is_not_one_copy_even_when_the_module_binds_its_names():
    source = GLOBALS.replace(
        "    out = model(features)\n", "    batch = {k: v.to(device) for k, v in inputs.items()}\n    out = model(features)\n"
    ).replace("labels[idx_train].to(device)", "labels[idx_train]")
    source = source.replace("optimizer = ", "for k, v in settings.items():\n    print(k, v)\noptimizer = ")
    assert findings(source, select=("GPU204",)) == []
