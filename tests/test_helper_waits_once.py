"""One wait, one finding (issue 13, noise class N7 of the twelfth corpus): a call of a helper whose own wait is
reported in the helper (a loop of its own, a method a loss module's `forward` calls on `self`) is not reported
again at the call; the call is a related place of the helper's finding.

Shapes after KAIR's `main_infer_vrt.py` (`test_video` calls `test_clip` twice, `test_clip` copies each patch to
the host in its patch loop) and pytorch-YOLOv4's `Yolo_loss` (`criterion(...)` runs `forward`, which calls
`self.build_target(...)`, whose `.cpu()` is reported there). Negatives beside them: a helper whose wait is not
reported inside (no loop of its own, called from the loop and at set-up) stays reported at its call, and two
different helpers stay two findings.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

TILED = """
import torch
from torch.utils.data import DataLoader
from data import VideoSet


def main():
    device = torch.device("cuda")
    model = torch.nn.Conv2d(3, 3, 3, padding=1).to(device)
    loader = DataLoader(VideoSet(), batch_size=1)
    for batch in loader:
        lq = batch.to(device)
        with torch.no_grad():
            output = test_video(lq, model, True)
        output = output[:, :1]


def test_video(lq, model, tiled):
    if tiled:
        outs = []
        for d in range(0, lq.size(1), 4):
            outs.append(test_clip(lq[:, d:d + 4], model))
        return torch.cat(outs, 1)
    return test_clip(lq, model)


def test_clip(lq, model, tiled=True):
    if not tiled:
        return model(lq).detach().cpu()
    E = torch.zeros(lq.shape)
    for h in range(0, lq.size(-2), 64):
        for w in range(0, lq.size(-1), 64):
            patch = lq[..., h:h + 64, w:w + 64]
            E[..., h:h + 64, w:w + 64] = model(patch).detach().cpu()
    return E


if __name__ == "__main__":
    main()
"""

LOSS = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from data import Boxes

device = torch.device("cuda")


class YoloLoss(nn.Module):
    def build_target(self, labels):
        cells = labels[..., :2].to(torch.int16).cpu().numpy()
        target = torch.zeros(labels.shape, device=labels.device)
        target[0, 0] = float(cells.sum())
        return target

    def forward(self, pred, labels):
        target = self.build_target(labels)
        return ((pred - target) ** 2).mean()


def train(model, optimizer):
    criterion = YoloLoss()
    for images, labels in DataLoader(Boxes(), batch_size=16):
        images = images.to(device)
        labels = labels.to(device)
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def _gpu30x(diagnostics):
    return {d.location.row: d for d in diagnostics if d.code.startswith("GPU30")}


def test_a_helper_whose_patch_loop_reads_is_reported_there_once_with_its_calls_related(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"infer_vrt.py": TILED}), monkeypatch)
    by_line = _gpu30x(diagnostics)
    assert sorted(by_line) == [34]  # not again at the calls of `test_clip` on lines 22 and 24
    finding = by_line[34]
    assert finding.code == "GPU303"
    assert finding.message == (
        "`model(patch).detach().cpu()` waits for the GPU every evaluation step (loop at line 32), run by the calls at lines 22 and 24"
    )
    assert [(text, place.row) for text, place in finding.related] == [
        ("the evaluation loop", 32), ("a call that runs it every step", 22), ("a call that runs it every step", 24),
    ]


def test_a_loss_module_method_read_is_reported_in_the_method_not_again_at_the_criterion_call(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"train.py": LOSS}), monkeypatch)
    by_line = _gpu30x(diagnostics)
    assert sorted(by_line) == [12]  # not again at `criterion(...)` on line 27
    assert by_line[12].message == (
        "`labels[..., :2].to(torch.int16).cpu()` waits for the GPU every training step (`build_target` at line 11, run by the call at train.py:27)"
    )
    assert ("a call that runs it every step", 27) in [(text, place.row) for text, place in by_line[12].related]


def test_a_synchronize_in_a_method_of_a_loss_module_is_one_finding(tmp_path, monkeypatch):
    source = LOSS.replace(
        "        cells = labels[..., :2].to(torch.int16).cpu().numpy()\n",
        "        torch.cuda.synchronize()\n        cells = labels[..., :2].to(torch.int16)\n",
    ).replace("float(cells.sum())", "cells.sum()")
    diagnostics = lint(write(tmp_path, {"train.py": source}), monkeypatch)
    assert sorted(f for f in found(diagnostics) if "GPU30" in f) == ["train.py:12 GPU304"]
    finding = _gpu30x(diagnostics)[12]
    related = [(text, place.row) for text, place in finding.related]
    assert ("a call that runs it every step", 19) in related and ("a call that runs it every step", 28) in related


def test_a_helper_whose_read_is_not_reported_inside_stays_reported_at_its_call(tmp_path, monkeypatch):
    # no loop of its own, called in the loop and once at set-up: its read is reported at the call, only there
    source = TILED.replace(
        "            output = test_video(lq, model, True)\n",
        "            output = test_video(lq, model, True)\n            score = measure(output, model)\n",
    ).replace(
        "\n\nif __name__", "\n\ndef measure(output, model):\n    return model(output).mean().cpu()\n\n\nmeasure(None, None)\n\n\nif __name__",
    )
    diagnostics = lint(write(tmp_path, {"infer_vrt.py": source}), monkeypatch)
    by_line = _gpu30x(diagnostics)
    assert sorted(by_line) == [15, 35]  # two different helpers: two waits, two findings
    assert by_line[15].message.startswith("`measure(output, model)` (`.cpu()` at infer_vrt.py:")
    assert by_line[35].message.endswith("run by the calls at lines 23 and 25")


def test_a_shape_sync_in_a_helper_loop_is_reported_there_once(tmp_path, monkeypatch):
    source = TILED.replace(
        "            E[..., h:h + 64, w:w + 64] = model(patch).detach().cpu()\n",
        "            out = model(patch)\n            E[..., h:h + 64, w:w + 64] = out[out > 0].sum()\n",
    ).replace("        return model(lq).detach().cpu()\n", "        return model(lq)\n")
    diagnostics = lint(write(tmp_path, {"infer_vrt.py": source}), monkeypatch)
    by_line = _gpu30x(diagnostics)
    assert sorted(by_line) == [35]
    assert by_line[35].code == "GPU306"
    assert by_line[35].message.endswith("run by the calls at lines 22 and 24")


def test_a_training_call_is_not_folded_into_a_read_its_helper_reports_as_an_evaluation_step(tmp_path, monkeypatch):
    # a preview of tiles under `no_grad`, twice per training step: the training calls keep their warnings
    source = TILED.replace(
        "        with torch.no_grad():\n            output = test_video(lq, model, True)\n        output = output[:, :1]\n",
        "        preview = test_clip(lq, model)\n        preview = test_clip(lq.flip(-1), model)\n"
        "        loss = model(lq).mean()\n        loss.backward()\n        optimizer.step()\n        optimizer.zero_grad()\n",
    ).replace("    loader = DataLoader(", "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n    loader = DataLoader(")
    diagnostics = lint(write(tmp_path, {"infer_vrt.py": source}), monkeypatch)
    calls = [d for d in diagnostics if d.code == "GPU303" and d.message.startswith("`test_clip(")]
    assert [(d.location.row, d.severity.value) for d in calls] == [(14, "warning"), (15, "warning")]
    assert all("every training step" in d.message for d in calls)
