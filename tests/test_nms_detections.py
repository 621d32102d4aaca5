"""GPU306 at the call of a function that runs torchvision's NMS (`summary.NMS_OPS`): its output size depends on
the data by design, and NMS itself finishes on the host, so its confidence filter (`x[conf > t]`) and `nonzero()`
are the algorithm's waits (yolov7's `non_max_suppression` in `test.py` and `detect.py`). The same function
without NMS, and the per-class matching in the same evaluation loop, stay reported."""

from __future__ import annotations

import pytest

from tests.projects_helper import lint_written

GENERAL = """\
import torch
import torchvision


def non_max_suppression(prediction, conf_thres=0.25, iou_thres=0.45, labels=()):
    xc = prediction[..., 4] > conf_thres
    output = [torch.zeros((0, 6), device=prediction.device)] * prediction.shape[0]
    for xi, x in enumerate(prediction):
        x = x[xc[xi]]
        if labels:
            v = torch.zeros((len(labels[xi]), x.shape[1]), device=x.device)
            x = torch.cat((x, v), 0)
        if not x.shape[0]:
            continue
        x[:, 5:] *= x[:, 4:5]
        i, j = (x[:, 5:] > conf_thres).nonzero(as_tuple=False).T
        x = torch.cat((x[i, :4], x[i, j + 5, None], j[:, None].float()), 1)
        keep = torchvision.ops.nms(x[:, :4], x[:, 4], iou_thres)
        output[xi] = x[keep]
    return output
"""

TEST = """\
import torch
from torch import nn

from utils.general import non_max_suppression

device = torch.device("cuda")
model = nn.Conv2d(3, 85, 1).to(device)


def test(dataloader):
    stats = []
    with torch.no_grad():
        for img, targets in dataloader:
            img, targets = img.to(device), targets.to(device)
            out = model(img).flatten(2).transpose(1, 2)
            out = {call}
            for si, pred in enumerate(out):
                tcls_tensor = targets[:, 1]
                for cls in torch.unique(tcls_tensor):
                    print(cls)
    return stats
"""


def _project(tmp_path, monkeypatch, call: str, general: str = GENERAL) -> list[str]:
    files = {"utils/__init__.py": "", "utils/general.py": general, "test.py": TEST.format(call=call)}
    return lint_written(tmp_path, files, monkeypatch)


def gpu306(found: list[str]) -> list[str]:
    return [f for f in found if f.endswith("GPU306")]


BATCHED = GENERAL.replace("import torchvision\n", "from torchvision.ops import batched_nms\n").replace(
    "torchvision.ops.nms(x[:, :4], x[:, 4], iou_thres)", "batched_nms(x[:, :4], x[:, 4], x[:, 5], iou_thres)"
)


@pytest.mark.parametrize("general", [GENERAL, BATCHED])
def test_the_call_of_a_function_that_runs_nms_is_not_reported(tmp_path, monkeypatch, general):
    # The per-class loop over `torch.unique` (vectorisable matching) keeps its finding.
    assert gpu306(_project(tmp_path, monkeypatch, "non_max_suppression(out, 0.001, 0.65)", general)) == ["test.py:19 GPU306"]


def test_the_same_function_without_nms_is_still_reported_at_its_call(tmp_path, monkeypatch):
    general = GENERAL.replace("torchvision.ops.nms(x[:, :4], x[:, 4], iou_thres)", "x[:, 4].argsort(descending=True)[:300]")
    found = _project(tmp_path, monkeypatch, "non_max_suppression(out, 0.001, 0.65)", general)
    assert gpu306(found) == ["test.py:16 GPU306", "test.py:19 GPU306"]
