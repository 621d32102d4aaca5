"""Models that reach the GPU by a route other than a move beside the training loop (issue 14, seventh corpus):
a device set to the CPU and then to CUDA under `if torch.cuda.is_available():`, a project helper that builds the
model on CUDA and re-wraps it under a flag (`model = apply_gradient_allreduce(model)`), the parts of a GPU model's
output that the loop back-propagates, and a model class taken from a registry dict with the training step in a
project function of another module.

Shapes after zergtant/pytorch-handbook (Fashion-MNIST notebook), NVIDIA/tacotron2 (`load_model`),
yhenon/pytorch-retinanet (`classification_loss, regression_loss = retinanet(...)`) and HobbitLong/RepDistiller
(`model_dict[opt.model](...)`, `train(...)` of `helper/loops.py`); a negative beside each (a device the user
must switch on, a helper that returns a CPU model, a CPU model's outputs, an evaluation-only helper).
"""

from __future__ import annotations

from tests.conftest import diagnostics, findings
from tests.projects_helper import found, lint, write


def lint_written(root, files, monkeypatch) -> list[str]:
    """Every rule, preview ones too (GPU90x), over the project `files` written into `root`."""
    return sorted(found(lint(write(root, files), monkeypatch, select=("ALL",), preview=True)))

# ---- a device set in an `if` on GPU runs ---------------------------------------------------------------

DEVICE_IN_IF = """\
import torch
import torch.nn as nn

DEVICE = torch.device("cpu")
if torch.cuda.is_available():
    DEVICE = torch.device("cuda")
cnn = nn.Sequential(nn.Conv2d(1, 16, 5), nn.ReLU(), nn.Flatten(), nn.Linear(9216, 10))
cnn = cnn.to(DEVICE)
criterion = nn.CrossEntropyLoss().to(DEVICE)
optimizer = torch.optim.Adam(cnn.parameters(), lr=0.01)
losses = []
for epoch in range(50):
    for images, labels in train_loader:
        images = images.float().to(DEVICE)
        labels = labels.to(DEVICE)
        optimizer.zero_grad()
        loss = criterion(cnn(images), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.cpu().data.item())
"""


def test_a_device_switched_to_cuda_when_a_gpu_is_there_is_the_gpu():
    found = diagnostics(DEVICE_IN_IF, select=("GPU303", "GPU904"))
    assert [(d.code, d.location.row) for d in found] == [("GPU904", 10), ("GPU303", 20)]
    assert found[1].message.startswith("`loss.cpu()` waits for the GPU every training step (loop at line 13)")


def test_a_function_reading_the_modules_device_gets_the_gpu_too():
    # a function reads the module's writes in source order: the last one is still what reaches on GPU runs
    source = DEVICE_IN_IF.split("losses = []")[0] + """\
def fit(train_loader):
    for images, labels in train_loader:
        images = images.float().to(DEVICE)
        optimizer.zero_grad()
        loss = criterion(cnn(images), labels.to(DEVICE))
        loss.backward()
        optimizer.step()
        print(loss.item())
"""
    assert findings(source, select=("GPU303",)) == ["18:15 GPU303"]


def test_a_device_the_user_must_switch_on_stays_unknown():
    # `if args.cuda:` is the user's choice, not "whenever a GPU is there"
    assert findings(DEVICE_IN_IF.replace("if torch.cuda.is_available():", "if args.cuda:"), select=("GPU303", "GPU904")) == []


def test_a_device_that_is_the_cpu_as_shipped_stays_the_cpu():
    source = DEVICE_IN_IF.replace('if torch.cuda.is_available():\n    DEVICE = torch.device("cuda")\n', "")
    assert findings(source, select=("GPU303", "GPU904")) == []


# ---- a helper that builds the model on CUDA and re-wraps it ----------------------------------------------

NET = """
import torch.nn as nn


class Tacotron(nn.Module):
    def __init__(self, hparams):
        super().__init__()
        self.conv = nn.Conv1d(80, 512, 5)
        self.proj = nn.Linear(512, 80)

    def forward(self, x):
        return self.proj(self.conv(x).transpose(1, 2))
"""

DISTRIBUTED = """
def apply_gradient_allreduce(module):
    for p in module.parameters():
        p.register_hook(lambda grad: grad)
    return module
"""

TRAIN = """
import torch

from distributed import apply_gradient_allreduce
from model import Tacotron


def load_model(hparams):
    model = Tacotron(hparams).cuda()
    if hparams.distributed_run:
        model = apply_gradient_allreduce(model)
    return model


def train(hparams, train_loader):
    model = load_model(hparams)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(hparams.epochs):
        for batch in train_loader:
            model.zero_grad()
            loss = model(batch).mean()
            reduced_loss = loss.item()
            loss.backward()
            optimizer.step()
"""


def test_a_model_a_helper_moves_then_rewraps_under_a_flag_is_on_the_gpu(tmp_path, monkeypatch):
    files = {"model.py": NET, "distributed.py": DISTRIBUTED, "train.py": TRAIN}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.startswith("train.py")] == [
        "train.py:17 GPU904",  # Adam over the model `load_model` moved to CUDA
        "train.py:22 GPU303",  # `loss.item()` of its output, every step
    ]


def test_a_helper_that_returns_a_cpu_model_stays_off_the_gpu(tmp_path, monkeypatch):
    files = {"model.py": NET, "distributed.py": DISTRIBUTED, "train.py": TRAIN.replace("Tacotron(hparams).cuda()", "Tacotron(hparams)")}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.startswith("train.py")] == []


# ---- the parts of a GPU model's output that the loop back-propagates -------------------------------------

RETINANET = """\
import collections

import torch


def main(retinanet, loader):
    if torch.cuda.is_available():
        retinanet = torch.nn.DataParallel(retinanet).cuda()
    else:
        retinanet = torch.nn.DataParallel(retinanet)
    optimizer = torch.optim.SGD(retinanet.parameters(), lr=1e-5)
    loss_hist = collections.deque(maxlen=500)
    for epoch in range(10):
        for data in loader:
            optimizer.zero_grad()
            classification_loss, regression_loss = retinanet([data["img"].cuda().float(), data["annot"]])
            loss = classification_loss.mean() + regression_loss.mean()
            if bool(loss == 0):
                continue
            loss.backward()
            optimizer.step()
            loss_hist.append(float(loss))
            print(float(regression_loss))
"""


def test_a_back_propagated_loss_from_a_gpu_models_outputs_is_on_the_gpu():
    found = diagnostics(RETINANET, select=("GPU303",))
    assert [(d.location.row, d.message.split(" waits")[0]) for d in found] == [
        (18, "`if bool(loss == 0):` on a GPU tensor"),
        (22, "`float(loss)`"),
    ]  # `float(regression_loss)`: a part of the output never back-propagated as itself stays "likely", unreported


def test_the_outputs_of_a_cpu_model_stay_on_the_cpu():
    source = RETINANET.replace("torch.nn.DataParallel(retinanet).cuda()", "torch.nn.DataParallel(retinanet)").replace(
        '.cuda().float()', '.float()'
    )
    assert findings(source, select=("GPU303",)) == []


# ---- a registry model trained by a project function of another module -----------------------------------

MODELS = """
import torch.nn as nn


class ResNet8(nn.Module):
    def __init__(self, num_classes=100):
        super().__init__()
        self.conv = nn.Conv2d(3, 64, 3)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


model_dict = {"resnet8": ResNet8}
"""

LOOPS = """
def train(epoch, train_loader, model, criterion, optimizer):
    model.train()
    for input, target in train_loader:
        input, target = input.cuda(), target.cuda()
        loss = criterion(model(input), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def validate(val_loader, model, criterion):
    model.eval()
    for input, target in val_loader:
        criterion(model(input.cuda()), target.cuda())
"""

TEACHER = """
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.optim as optim

from loops import train, validate
from models import model_dict


def main(opt, train_loader):
    model = model_dict[opt.model](num_classes=100)
    optimizer = optim.SGD(model.parameters(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    if torch.cuda.is_available():
        model = model.cuda()
        criterion = criterion.cuda()
        cudnn.benchmark = True
    for epoch in range(1, 241):
        train(epoch, train_loader, model, criterion, optimizer)


if __name__ == "__main__":
    main(None, None)
"""


def test_a_registry_model_trained_by_a_helper_of_another_module_is_a_cuda_training_script(tmp_path, monkeypatch):
    files = {"models.py": MODELS, "loops.py": LOOPS, "train_teacher.py": TEACHER}
    assert "train_teacher.py:16 GPU902" in lint_written(tmp_path, files, monkeypatch)


def test_a_script_whose_loop_only_evaluates_is_no_training_script(tmp_path, monkeypatch):
    files = {"models.py": MODELS, "loops.py": LOOPS, "train_teacher.py": TEACHER.replace(
        "train(epoch, train_loader, model, criterion, optimizer)", "validate(train_loader, model, criterion)"
    )}
    assert not [f for f in lint_written(tmp_path, files, monkeypatch) if f.startswith("train_teacher.py") and "GPU90" in f]
