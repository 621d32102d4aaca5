"""Models that reach their training code as arguments (issue 14 point 4, seventh corpus): a model handed to a
trainer's constructor and moved in place there (`self.model = model; self.model.to(self.device)`, dvgodoy's
PyTorchStepByStep), attributes placed by a tuple assignment (`self.G, self.D = G().cuda(), D().cuda()`), and
nets handed in a list (`train_and_evaluate(..., [net_g, net_d], ...)` then `net_g, net_d = nets`, jaywalnut310's
vits). Negatives beside each: no move, a move to the
CPU, a rebinding to an unmoved module, a caller handing a CPU module, callers that disagree.
"""

from __future__ import annotations

from tests.conftest import findings
from tests.projects_helper import found, lint, write

PREVIEW = {"select": ("GPU901", "GPU902", "GPU903")}

TRAINER = """\
import torch


class StepByStep(object):
    def __init__(self, model, loss_fn, optimizer):
        self.model = model
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.device = 'cuda' if torch.cuda.is_available() else 'cpu'
        {move}

    {extra}

    def lr_range_test(self, data_loader, num_iter=100):
        tracking = []
        for x_batch, y_batch in data_loader:
            x_batch = x_batch.to(self.device)
            y_batch = y_batch.to(self.device)
            yhat = self.model(x_batch)
            loss = self.loss_fn(yhat, y_batch)
            loss.backward()
            self.optimizer.step()
            self.optimizer.zero_grad()
            tracking.append(loss.detach())
        return tracking
"""


def _trainer(move: str = "self.model.to(self.device)", extra: str = "") -> str:
    return TRAINER.replace("{move}", move).replace("{extra}", extra)


def test_a_constructor_argument_moved_in_place_is_the_model_the_class_trains_on_cuda():
    # GPU902 at the move of the handed model, GPU901 at the backward of the loop that trains it
    assert findings(_trainer(), **PREVIEW) == ["10:9 GPU902", "21:13 GPU901"]


def test_a_constructor_argument_not_moved_or_moved_to_the_cpu_stays_silent():
    assert findings(_trainer(move="pass"), **PREVIEW) == []  # the caller may have moved it: not known here
    assert findings(_trainer(move="self.model.to('cpu')"), **PREVIEW) == []


def test_an_argument_another_method_replaces_with_an_unmoved_value_stays_silent():
    extra = "def set_model(self, model):\n        self.model = model  # a new model, never moved here\n"
    assert findings(_trainer(extra=extra), **PREVIEW) == []
    moved = extra + "        self.model.to(self.device)\n"
    assert findings(_trainer(extra=moved), **PREVIEW) == ["10:9 GPU902", "24:13 GPU901"]  # moved there too


def test_an_argument_rebound_before_the_move_is_not_taken_for_the_argument():
    # `model = model.half()` rebinds the name: the attribute holds a call's result, which is judged as before
    move = "model = copy_of(model)\n        self.model = model\n        self.model.to(self.device)"
    source = _trainer(move=move).replace("        self.model = model\n        self.loss_fn", "        self.loss_fn", 1)
    assert findings(source, **PREVIEW) == []


GAN = """\
import torch
from torch import nn, optim


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(62, 1, 4)

    def forward(self, z):
        return self.deconv(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 4)

    def forward(self, x):
        return self.conv(x).mean((1, 2, 3))


class GAN:
    def __init__(self, loader):
        self.data_loader = loader
        {placed}
        self.D_optimizer = optim.Adam(self.D.parameters(), lr=2e-4)

    def train(self):
        for x_, _ in self.data_loader:
            D_loss = self.D(x_.cuda()).mean()
            self.D_optimizer.zero_grad()
            D_loss.backward()
            self.D_optimizer.step()
"""


def test_attributes_placed_by_a_tuple_of_moved_modules_are_resident():
    source = GAN.replace("{placed}", "self.G, self.D = Generator().cuda(), Discriminator().cuda()")
    assert findings(source, **PREVIEW) == ["26:26 GPU902", "26:26 GPU903", "33:13 GPU901"]


def test_a_tuple_that_moves_only_the_other_attribute_stays_silent():
    source = GAN.replace("{placed}", "self.G, self.D = Generator().cuda(), Discriminator()")
    assert findings(source, **PREVIEW) == []  # only G is on the GPU; the loop trains D


NETS_TRAIN = """\
import torch
import torch.nn as nn


def run(rank, loader):
    net_g = nn.Linear(512, 512).cuda(rank)
    net_d = nn.Linear(512, 1).cuda(rank)
    optim_g = torch.optim.AdamW(net_g.parameters(), fused=True)
    for epoch in range(100):
        train_and_evaluate(epoch, [{first}, net_d], optim_g, loader)


def train_and_evaluate(epoch, nets, optim_g, loader):
    net_g, net_d = nets
    for x in loader:
        loss = net_d(net_g(x.cuda(non_blocking=True))).mean()
        optim_g.zero_grad()
        loss.backward()
        optim_g.step()
        for p in net_g.parameters():
            p.grad.clamp_(-1, 1)
            norm = p.grad.norm().item()
"""


def test_nets_handed_in_a_list_keep_their_gpu_placement_in_the_callee(tmp_path, monkeypatch):
    diagnostics = lint(write(tmp_path, {"train.py": NETS_TRAIN.replace("{first}", "net_g")}), monkeypatch, select=("GPU303",))
    assert found(diagnostics) == ["train.py:22 GPU303"]
    assert diagnostics[0].message.startswith("`p.grad.norm().item()` waits for the GPU")


def test_a_caller_handing_a_cpu_module_in_that_place_keeps_it_unknown(tmp_path, monkeypatch):
    source = NETS_TRAIN.replace("{first}", "net_g").replace(
        "    for epoch in range(100):\n",
        "    train_and_evaluate(-1, [nn.Linear(512, 512), net_d], optim_g, loader)  # a CPU warm-up pass\n    for epoch in range(100):\n",
    )
    assert found(lint(write(tmp_path, {"train.py": source}), monkeypatch, select=("GPU303",))) == []


def test_a_sequence_of_unknown_contents_keeps_every_element_unknown(tmp_path, monkeypatch):
    source = NETS_TRAIN.replace("[{first}, net_d]", "nets_of(net_g, net_d)")
    assert found(lint(write(tmp_path, {"train.py": source}), monkeypatch, select=("GPU303",))) == []
