"""The false-positive and noise classes seen on real repositories (GPU303, GPU305, GPU103), each with the
finding that stays and the one that goes."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import UNPROVEN_READ, diagnostics, findings, fixed

TRAIN = """\
import torch

device = torch.device("cuda")
model = torch.nn.Linear(4, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def train(loader, epochs):
    for epoch in range(epochs):
        optimizer.zero_grad()
        for step, (x, y) in enumerate(loader):
            out = model(x.to(device))
            loss = (out - y.to(device)).pow(2).mean()
            loss.backward()
            optimizer.step()
{step}
{epoch}
"""


def train_with(step: str = "", epoch: str = "") -> str:
    return TRAIN.format(step=textwrap.indent(textwrap.dedent(step), " " * 12), epoch=textwrap.indent(textwrap.dedent(epoch), " " * 8))


# ---- GPU303 -----------------------------------------------------------------------------------------


def test_gpu303_one_finding_per_statement_naming_every_sync():
    source = train_with('print(f"loss {loss.item():.3f} out {out.sum().item():.3f}")\n')
    [d] = diagnostics(source, select=("GPU303",))
    assert (d.location.row, d.location.column) == (16, 27)
    assert d.message == "`loss.item()` and `out.sum().item()` wait for the GPU every training step (loop at line 11)"


def test_gpu303_a_sync_once_per_epoch_is_not_reported():
    # The epoch loop also zeroes the gradients: still an epoch loop, not a training step loop.
    assert findings(train_with(epoch="print(loss.item())\n"), select=("GPU303",)) == []


def test_gpu303_a_value_that_feeds_a_branch_gets_branch_free_advice():
    source = train_with("if loss.item() > 10:\n    loss = loss.clamp(max=10)\n")
    [d] = diagnostics(source, select=("GPU303",))
    assert d.help == "The value feeds a Python branch: compute it on the GPU instead (`torch.where`, `clamp`, masks)" + UNPROVEN_READ
    source = train_with("value = loss.item()\nif value > 10:\n    print('diverging')\n")
    [d] = diagnostics(source, select=("GPU303",))
    assert "feeds a Python branch" in d.help and "every N steps" not in d.help


def test_gpu303_an_inference_loop_collecting_outputs_copies_once_after_the_loop():
    source = textwrap.dedent("""\
        import torch

        model = torch.nn.Linear(4, 2).cuda()
        outputs, indices = [], []
        with torch.inference_mode():
            for x in loader:
                out = model(x.cuda())
                outputs.append(out.float().cpu().numpy())
                top = out.topk(3).indices.cpu().numpy()
                indices.append(top)
    """)
    found = diagnostics(source, select=("GPU303",))
    assert [(d.location.row, d.severity.value) for d in found] == [(8, "info"), (9, "info")]
    for d in found:
        assert "every evaluation step (loop at line 6)" in d.message
        assert d.help == "Collect the tensors on the GPU and copy them to the host once, after the loop (`torch.cat(...).cpu()`)" + UNPROVEN_READ


# ---- GPU305 -----------------------------------------------------------------------------------------


def test_gpu305_a_loop_that_measures_memory_is_left_alone():
    source = textwrap.dedent("""\
        import torch

        model = torch.nn.Linear(4, 2).cuda()
        for batch_size in (8, 16, 32):
            torch.cuda.reset_peak_memory_stats()
            for x in make_batches(batch_size):
                model(x.cuda()).sum().backward()
                torch.cuda.empty_cache()
            print(batch_size, torch.cuda.max_memory_allocated())
    """)
    assert findings(source, select=("GPU305",)) == []
    unmeasured = source.replace("    torch.cuda.reset_peak_memory_stats()\n", "").replace(", torch.cuda.max_memory_allocated()", "")
    [d] = diagnostics(unmeasured, select=("GPU305",))
    assert d.message == "`torch.cuda.empty_cache()` every training step (loop at line 5) syncs the device and empties the cache"


def test_gpu305_names_no_epoch_loop():
    source = train_with(epoch="torch.cuda.empty_cache()\n")
    found = diagnostics(source, select=("GPU305",))
    assert found == [] or all("epoch" not in d.message for d in found)
    source = train_with("if step % 100 == 0:\n    torch.cuda.empty_cache()\n")
    [d] = diagnostics(source, select=("GPU305",))
    assert d.severity.value == "info" and "in the loop at line 11" in d.message and "epoch" not in d.message


# ---- GPU103 -----------------------------------------------------------------------------------------

GPU103 = """\
import argparse

import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--batch-size", type=int, default=8)
args = parser.parse_args()
device = torch.device("cuda")
model = torch.nn.Linear(4, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=4, pin_memory=True)
for x, y in loader:
    optimizer.zero_grad()
    (model(x.to(device, non_blocking=True)) - y.to(device, non_blocking=True)).pow(2).mean().backward()
    optimizer.step()
{more}"""


def test_gpu103_fix_is_unsafe_and_names_the_learning_rate():
    source = GPU103.format(more="")
    [d] = diagnostics(source, select=("GPU103",))
    assert d.fix.applicability.value == "unsafe"
    assert d.fix.message == "Raise the batch size to 64 at the argparse default at train.py:7 (scale the learning rate with it)"
    assert "default=64" in fixed(source, select=("GPU103",))
    assert fixed(source, unsafe=False, select=("GPU103",)) == source


@pytest.mark.parametrize(
    "more",
    [
        "steps_per_epoch = len(dataset) // args.batch_size\n",
        "scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, 0.1, total_steps=10 * args.batch_size)\n",
        "buffer = torch.zeros(getattr(args, 'batch_size'), 4)\n",
        "bs = args.batch_size\nwarmup = 100 * bs\n",
    ],
)
def test_gpu103_no_fix_when_the_setting_is_read_for_something_else(more):
    source = GPU103.format(more=more)
    [d] = diagnostics(source, select=("GPU103",))
    assert d.fix is None
    assert "learning rate" in d.help


def test_gpu103_the_same_setting_for_the_test_loader_is_still_a_batch_size():
    source = GPU103.format(more="test_loader = DataLoader(test_set, batch_size=args.batch_size)\n")
    [d] = diagnostics(source, select=("GPU103",))
    assert d.fix is not None
