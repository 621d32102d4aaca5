"""A sum that starts as a Python number and adds GPU tensors in a loop is a GPU tensor (swav's multi-crop loss).

    loss = 0
    for crop in crops:
        loss += crit(out[crop], q)           # `loss` is a GPU tensor after the loop
    loss.backward(); meter.update(loss.item())   # GPU303: a read every training step

A count of host numbers (`total += x.size(0)`) stays a host number, and a name only ever given numbers too.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

SWAV = """
import torch
import torch.nn.functional as F


def train(loader, model, optimizer, losses, crops):
    model.cuda()
    for it, inputs in enumerate(loader):
        output = model(inputs.cuda(non_blocking=True))
        loss = 0
        total = 0
        for i in crops:
            subloss = 0
            for v in crops:
                subloss -= torch.mean(F.log_softmax(output[v], dim=1))
            loss += subloss / len(crops)
            total += inputs.size(0)
        loss /= len(crops)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.update(loss.item(), inputs.size(0))
        print(total, float(total))
"""


def test_a_loss_summed_from_zero_in_a_loop_is_read_every_step(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"swav.py": SWAV}), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == ["swav.py:22 GPU303"]  # `total`, a count of host numbers, is no tensor
    assert diagnostics[0].message.startswith("`loss.item()` waits for the GPU every training step (loop at line 8)")
