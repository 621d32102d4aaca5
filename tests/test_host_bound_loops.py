"""Host-bound iterations (`analysis/host_bound.py`): a loop that trains nothing and encodes, decodes or writes images
on the host every iteration makes an `empty_cache()` re-allocation (GPU305), the autograd bookkeeping of one forward
(GPU405) and one more wait for the GPU (GPU303) a sliver of each iteration. A training loop, or an evaluation that does
no such host work, stays reported."""

from __future__ import annotations

from tests.conftest import findings
from tests.projects_helper import lint_written

UTILS = """\
import cv2
import numpy as np


def tensor2img(t):
    return (t.squeeze(0).permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)


def imwrite(img, path):
    cv2.imwrite(path, img)
"""

VALIDATION = """\
import torch
from utils import imwrite, tensor2img


class SRModel:
    def __init__(self, net):
        self.net = net.cuda()

    def validation(self, loader, save_img):
        self.net.eval()
        for idx, batch in enumerate(loader):
            with torch.no_grad():
                out = self.net(batch["lq"].cuda())
            img = tensor2img(out.cpu())
            del out
            torch.cuda.empty_cache()
            if save_img:
                imwrite(img, f"{idx}.png")
        self.net.train()
"""


def test_a_validation_that_writes_each_image_empties_the_cache_at_a_sliver_of_its_cost(tmp_path, monkeypatch):
    # batch-1 validation: a project helper writes each output as a PNG (cv2.imwrite): milliseconds an image
    assert lint_written(tmp_path, {"utils.py": UTILS, "model.py": VALIDATION}, monkeypatch) == []


def test_a_validation_with_no_host_work_still_empties_the_cache_every_step(tmp_path, monkeypatch):
    quiet = VALIDATION.replace("            if save_img:\n                imwrite(img, f\"{idx}.png\")\n", "")
    # (the project tests report every read, `unproven-cost`: the output's copy is one)
    assert lint_written(tmp_path, {"utils.py": UTILS, "model.py": quiet}, monkeypatch) == ["model.py:14 GPU303", "model.py:16 GPU305"]


def test_a_training_loop_that_writes_images_still_empties_the_cache_every_step():
    source = """\
import cv2
import torch

model = Net().cuda()
for step, (x, y) in enumerate(loader):
    loss = criterion(model(x.cuda()), y.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    torch.cuda.empty_cache()
    cv2.imwrite(f"{step}.png", sample)
"""
    assert findings(source, select=("GPU305",)) == ["10:5 GPU305"]


FACES = """\
import cv2
import dlib
import torch

net = Restorer().cuda()
net.eval()
detector = dlib.get_frontal_face_detector()
for path in paths:
    image = cv2.imread(path)
    for face in detector(image, 1):
        crop = cv2.warpAffine(image, align(face), (512, 512))
        restored = net(torch.from_numpy(crop).cuda())
        {sink}
"""


def test_an_evaluation_that_detects_and_warps_faces_records_autograd_at_a_sliver_of_its_cost():
    # a restoration script: per image a decode and a dlib detection, per face a warp and a PNG write
    assert findings(FACES.format(sink='cv2.imwrite("out.png", restored.cpu().numpy())'), select=("GPU405",)) == []


def test_an_evaluation_with_no_host_work_still_records_autograd():
    source = """\
import torch

net = Restorer().cuda()
net.eval()
for x, y in test_loader:
    restored = net(x.cuda())
    results.append(restored.cpu())
"""
    assert findings(source, select=("GPU405",)) == ["6:16 GPU405"]


PER_CLASS = """\
import torch
import numpy as np

model = Segmenter().cuda()
model.eval()
with torch.no_grad():
    for i, (image, label) in enumerate(val_loader):
        pred = model(image.cuda()).argmax(1)
        for c in range(num_classes):
            hits[c] += (pred == c).sum().item()
        {sink}
"""


def test_an_evaluation_that_saves_each_prediction_image_reads_at_a_sliver_of_its_cost():
    sink = 'Image.fromarray(colorize(label.numpy())).save(f"{i}.png")'
    source = "from PIL import Image\n" + PER_CLASS.format(sink=sink)
    assert findings(source, select=("GPU303",)) == []


def test_an_evaluation_with_no_host_work_still_reads_once_per_class():
    assert findings(PER_CLASS.format(sink="pass"), select=("GPU303",)) == ["10:24 GPU303"]
    # a rate-limited write (every 100 images) is no per-iteration host work
    sink = 'if i % 100 == 0:\n            np.save(f"{i}.npy", label.numpy())'
    assert findings(PER_CLASS.format(sink=sink), select=("GPU303",)) == ["10:24 GPU303"]
