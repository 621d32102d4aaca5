"""Hidden host-device synchronizations: the GPU303 kinds that format, log or index with a GPU tensor, the
elements of a GPU tensor iterated in Python, and GPU306 (ops whose output size depends on GPU data)."""

from __future__ import annotations

import pytest

from tests.conftest import diagnostics, findings

STEP = """\
import torch
from torch.utils.tensorboard import SummaryWriter

device = torch.device("cuda")
writer = SummaryWriter()
classes = ["cat", "dog"]
model = torch.nn.Linear(10, 2).cuda()


def train(loader, optimizer, log_every=100):
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
"""


def step(body: str) -> str:
    return STEP + "".join(f"        {line}\n" for line in body.splitlines())


def only(source: str, code: str) -> list[str]:
    return findings(source, select=(code,))


# ---- GPU303: formatting, logging and list indexing ----------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "position", "named"),
    [
        ('print("loss %.4f" % loss)', "17:15", '`"loss %.4f" % loss`'),
        ('print("%d: %f" % (step, loss))', "17:15", '`"%d: %f" % (step, loss)`'),
        ('print("loss {:.4f}".format(loss))', "17:15", '`"loss {:.4f}".format(loss)`'),
        ('text = format(loss, ".4f")', "17:16", '`format(loss, ".4f")`'),
        ('writer.add_scalar("train/loss", loss, step)', "17:9", "`writer.add_scalar("),
        ('writer.add_scalars("train", {"loss": loss}, step)', "17:9", "`writer.add_scalars("),
        ("name = classes[out.argmax()]", "17:16", "`classes[out.argmax()]`"),
        ("for row in out:\n    total = row.item()", "18:21", "`row.item()`"),
    ],
)
def test_gpu303_hidden_kinds(body, position, named):
    source = step(body)
    assert only(source, "GPU303") == [f"{position} GPU303"]
    [d] = diagnostics(source, select=("GPU303",))
    assert named in d.message and "every training step (loop at line 11)" in d.message and d.severity.value == "warning"


@pytest.mark.parametrize(
    "body",
    [
        'if step % log_every == 0:\n    writer.add_scalar("train/loss", loss, step)\n    print("loss %.4f" % loss)',
        'writer.add_scalar("lr", optimizer.param_groups[0]["lr"], step)',
        'print("step %d of %s" % (step, "train"))',
        'print("step {}".format(step))',
        "name = classes[step % 2]",
        "lookup = {}\nvalue = lookup[out.argmax()]",  # a dict hashes the tensor object: no copy
        "for row in torch.arange(3):\n    total = row.item()",
        "for layer in model.children():\n    total = layer",
    ],
)
def test_gpu303_hidden_kinds_negatives(body):
    assert only(step(body), "GPU303") == []


def test_gpu303_percent_formatting_inside_print_is_one_sync():
    # The `%` makes a string: `print` of that string does not read the GPU again.
    assert only(step('print("loss %f" % loss)'), "GPU303") == ["17:15 GPU303"]


def test_gpu303_type_to_a_cpu_tensor_type_is_a_copy_to_the_host():
    assert only(step("value = out.type(torch.FloatTensor)"), "GPU303") == ["17:17 GPU303"]


# ---- GPU306 dynamic-shape-sync-in-loop -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "position", "kind"),
    [
        ("pos = torch.nonzero(y > 0)", "17:15", "`nonzero()` has an output size that depends on the data"),
        ("pos = (y > 0).nonzero(as_tuple=True)", "17:15", "`nonzero()`"),
        ("pos = torch.argwhere(y)", "17:15", "`argwhere()`"),
        ("kept = out[y != -100]", "17:16", "boolean-mask indexing"),
        ("mask = (y > 0) & (y < 5)\nkept = out[mask]", "18:16", "boolean-mask indexing"),
        ("kept = out[torch.isfinite(out)]", "17:16", "boolean-mask indexing"),
        ("kept = torch.masked_select(out, out > 0)", "17:16", "`masked_select()`"),
        ("labels = torch.unique(y)", "17:18", "`unique()`"),
        ("labels = y.unique()", "17:18", "`unique()`"),
        ("rep = torch.repeat_interleave(out, y, dim=0)", "17:15", "`repeat_interleave()` without `output_size`"),
        ("rep = out.repeat_interleave(y, dim=0)", "17:15", "`repeat_interleave()` without `output_size`"),
        ("rows, cols = torch.where(out > 0)", "17:22", "one-argument `torch.where()`"),
        ("weights = torch.tensor([1.0, 2.0], device=device)", "17:19", "`torch.tensor()` copies host data"),
        ("zero = torch.tensor(0.0, device=device)", "17:16", "`torch.tensor()` copies host data"),
        ("worst = max(loss, torch.zeros((), device=device))", "17:17", "Python `max()` compares GPU tensors"),
    ],
)
def test_gpu306_kinds(body, position, kind):
    source = step(body)
    assert only(source, "GPU306") == [f"{position} GPU306"]
    [d] = diagnostics(source, select=("GPU306",))
    assert kind in d.help and "every training step (loop at line 11)" in d.message
    assert d.severity.value == "warning" and d.fix is None


@pytest.mark.parametrize(
    "body",
    [
        "picked = torch.where(y > 0, out[:, 0], 0.0)",  # three arguments: a fixed shape
        "pos = torch.nonzero(y.cpu() > 0)",  # CPU data
        "cpu_labels = y.cpu()\nkept = cpu_labels[cpu_labels > 0]",
        "rep = torch.repeat_interleave(out, y, dim=0, output_size=128)",
        "rep = out.repeat_interleave(2, dim=0)",  # integer repeats: the size is known
        "out[y < 0] = 0.0",  # a masked store, not a selection
        "if step % log_every == 0:\n    pos = torch.nonzero(y > 0)",
        "weights = torch.tensor([loss, loss], device=device)",  # GPU values, not host data
        "weights = torch.full((2,), 1.0, device=device)",
        "worst = max(step, 1)",
        "pos = numpy_mask.nonzero()",  # not known to be a tensor
    ],
)
def test_gpu306_negatives(body):
    assert only(step(body), "GPU306") == []


def test_gpu306_one_finding_per_statement_and_info_in_evaluation():
    source = STEP + (
        "\n\n@torch.no_grad()\ndef evaluate(loader):\n    for x, y in loader:\n        y = y.to(device)\n"
        "        kept = model(x.to(device))[y > 0][torch.nonzero(y)]\n"
    )
    [d] = diagnostics(source, select=("GPU306",))
    assert (d.location.row, d.severity.value) == (23, "info") and "every evaluation step (loop at line 21)" in d.message


def test_gpu306_once_before_the_loop_is_setup():
    source = STEP.replace(
        "    for step, (x, y) in enumerate(loader):",
        "    classes_present = torch.unique(torch.tensor([1, 2, 2], device=device))\n    for step, (x, y) in enumerate(loader):",
    )
    assert only(source, "GPU306") == []


def test_gpu306_a_long_expression_is_named_by_its_callee_or_base():
    # quoting all of a long statement would be unreadable; "This makes the host wait" named nothing
    body = (
        "weights = torch.tensor([0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125], device=device)\n"
        "picked = out.view(-1, out.size(-1)).log_softmax(dim=-1).clamp(min=-100.0)[y > 0]\n"
        "kept = out.view(-1, out.size(-1)).log_softmax(dim=-1)[y > 0].clamp(min=-100.0)\n"
    )
    messages = [d.message.split(" makes the host wait")[0] for d in diagnostics(step(body), select=("GPU306",))]
    assert messages == ["`torch.tensor(...)`", "`...[y > 0]`", "`out.view(-1, out.size(-1)).log_softmax(dim=-1)[y > 0]`"]
