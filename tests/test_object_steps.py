"""Per-step code reached through calls on objects (issue 14 point 6, tenth corpus misses class C).

    t = diffusion.sample_timesteps(n).to(device)     # `diffusion = Diffusion(...)`: a method of a project class
        return torch.randint(1, self.noise_steps, (n,))          # ... whose CPU tensor the loop moves every step
    emb = timestep_embedding(t, dim)                 # called by a model's `forward`, in another module
        freqs = torch.exp(-math.log(p) * torch.arange(half) / half).to(device=t.device)  # `math.log`: a host float
    class GINConv(MessagePassing):                   # a PyG layer is an `nn.Module`: its `forward` runs per call
        def forward(self, x, edge_index, edge_attr): self_loop_attr = torch.zeros(x.size(0), 2) ...

Reported at the factory (GPU201), as often as the loop or the model runs it. Silent: a method called once before
the loop, under `if step % N == 0:`, on an object whose class is not the project's (or not one class), and a layer
deriving from a library class not known to be an `nn.Module`.
"""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, write

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

DIFFUSION = """
import torch
from torch import nn

device = "cuda"


class Diffusion:
    def __init__(self, noise_steps=1000, device="cuda"):
        self.noise_steps = noise_steps
        self.device = device
        self.beta = torch.linspace(1e-4, 0.02, noise_steps).to(device)

    def sample_timesteps(self, n):
        return torch.randint(low=1, high=self.noise_steps, size=(n,))


def train(loader, epochs):
    model = nn.Linear(10, 10).to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    diffusion = Diffusion(device=device)
    for epoch in range(epochs):
        for i, (images, _) in enumerate(loader):
            images = images.to(device)
            t = diffusion.sample_timesteps(images.shape[0]).to(device)
            loss = (model(images) - t[:, None]).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""

STEP_CALL = "            t = diffusion.sample_timesteps(images.shape[0]).to(device)\n"


def test_a_method_of_a_project_class_returns_a_cpu_tensor_the_loop_moves_every_step(tmp_path, monkeypatch):
    (diagnostic,) = [d for d in lint(write(tmp_path, {"ddpm.py": DIFFUSION}), monkeypatch) if d.code == "GPU201"]
    assert (diagnostic.filename, diagnostic.location.row) == ("ddpm.py", 15)
    assert diagnostic.message == (
        "`torch.randint(...)` fills on the CPU, then `.to()` (of what `diffusion.sample_timesteps()` returns at line 25)"
        " copies it to the GPU every training step (loop at line 23)"
    )
    assert diagnostic.fix is None  # the move is the caller's: nothing to rewrite at the factory


def test_an_instance_held_on_self_by_a_trainer_class(tmp_path, monkeypatch):
    trainer = DIFFUSION.split("def train(")[0] + (
        "class Trainer:\n"
        "    def __init__(self, model):\n"
        "        self.model = model.to(device)\n"
        "        self.optimizer = torch.optim.AdamW(self.model.parameters())\n"
        "        self.diffusion = Diffusion(device=device)\n"
        "\n"
        "    def fit(self, loader):\n"
        "        for images, _ in loader:\n"
        "            images = images.to(device)\n"
        "            t = self.diffusion.sample_timesteps(images.shape[0]).to(device)\n"
        "            loss = (self.model(images) - t[:, None]).pow(2).mean()\n"
        "            self.optimizer.zero_grad()\n"
        "            loss.backward()\n"
        "            self.optimizer.step()\n"
    )
    assert [f for f in found(lint(write(tmp_path, {"ddpm.py": trainer}), monkeypatch)) if "GPU201" in f] == ["ddpm.py:15 GPU201"]


def test_a_method_called_once_before_the_loop_stays_silent(tmp_path, monkeypatch):
    once = DIFFUSION.replace(STEP_CALL, "").replace(
        "    for epoch in range(epochs):\n", "    t = diffusion.sample_timesteps(8).to(device)\n    for epoch in range(epochs):\n"
    )
    assert [f for f in found(lint(write(tmp_path, {"ddpm.py": once}), monkeypatch)) if "GPU201" in f] == []


def test_a_method_called_every_hundred_steps_stays_silent(tmp_path, monkeypatch):
    guarded = DIFFUSION.replace(
        STEP_CALL,
        "            t = torch.ones(images.shape[0], device=device)\n"
        "            if i % 100 == 0:\n"
        "                t = diffusion.sample_timesteps(images.shape[0]).to(device)\n",
    )
    assert [f for f in found(lint(write(tmp_path, {"ddpm.py": guarded}), monkeypatch)) if "GPU201" in f] == []


def test_an_object_of_a_class_not_known_to_be_the_one_stays_silent(tmp_path, monkeypatch):
    # `diffusion` is a parameter (any object), or bound to one of two classes: which method runs is not known
    handed = DIFFUSION.replace("def train(loader, epochs):", "def train(loader, epochs, diffusion):").replace(
        "    diffusion = Diffusion(device=device)\n", ""
    )
    two = DIFFUSION.replace(
        "    diffusion = Diffusion(device=device)\n",
        "    diffusion = Diffusion(device=device) if epochs else Other()\n",
    ) + "\n\nclass Other:\n    def sample_timesteps(self, n):\n        return torch.ones(n, device=device)\n"
    assert [f for f in found(lint(write(tmp_path / "a", {"ddpm.py": handed}), monkeypatch)) if "GPU201" in f] == []
    assert [f for f in found(lint(write(tmp_path / "b", {"ddpm.py": two}), monkeypatch)) if "GPU201" in f] == []


UTIL = """
import math

import torch


def timestep_embedding(timesteps, dim, max_period=10000):
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(start=0, end=half, dtype=torch.float32) / half
    ).to(device=timesteps.device)
    args = timesteps[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
"""

UNET = """
import torch
from torch import nn

from util import timestep_embedding


class UNet(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.channels = channels
        self.time_embed = nn.Linear(channels, channels)

    def forward(self, x, timesteps):
        emb = self.time_embed(timestep_embedding(timesteps, self.channels))
        return x + emb
"""

TRAIN_UNET = """
import torch

from unet import UNet

model = UNet(64).cuda()
optimizer = torch.optim.Adam(model.parameters())
for x, t in loader:
    loss = model(x.cuda(non_blocking=True), t.cuda(non_blocking=True)).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_math_float_times_a_cpu_arange_in_a_helper_a_forward_calls(tmp_path, monkeypatch):
    files = {"util.py": UTIL, "unet.py": UNET, "train.py": TRAIN_UNET}
    (diagnostic,) = [d for d in lint(write(tmp_path, files), monkeypatch) if d.code == "GPU201"]
    assert (diagnostic.filename, diagnostic.location.row) == ("util.py", 10)
    assert diagnostic.message == (
        "`torch.arange(...)` fills on the CPU, then `.to()` copies it to the GPU on every call of the model"
        " (`timestep_embedding` at line 7, called by the `forward` at unet.py:15)"
    )


def test_a_math_float_times_an_arange_made_on_the_device_stays_silent(tmp_path, monkeypatch):
    util = UTIL.replace("dtype=torch.float32) / half\n    ).to(device=timesteps.device)", "dtype=torch.float32, device=timesteps.device) / half\n    )")
    files = {"util.py": util, "unet.py": UNET, "train.py": TRAIN_UNET}
    assert [f for f in found(lint(write(tmp_path, files), monkeypatch)) if "GPU201" in f] == []


GNN = """
import torch
from torch_geometric.nn import MessagePassing


class GINConv(MessagePassing):
    def __init__(self, emb_dim):
        super().__init__(aggr="add")
        self.mlp = torch.nn.Linear(emb_dim, emb_dim)
        self.edge_embedding = torch.nn.Embedding(6, emb_dim)

    def forward(self, x, edge_index, edge_attr):
        self_loop_attr = torch.zeros(x.size(0), 2)
        self_loop_attr[:, 0] = 4
        self_loop_attr = self_loop_attr.to(edge_attr.device).to(edge_attr.dtype)
        edge_attr = torch.cat((edge_attr, self_loop_attr), dim=0)
        return self.propagate(edge_index, x=x, edge_attr=self.edge_embedding(edge_attr[:, 0]))

    def message(self, x_j, edge_attr):
        return x_j + edge_attr


class GNN(torch.nn.Module):
    def __init__(self, num_layer, emb_dim):
        super().__init__()
        self.gnns = torch.nn.ModuleList([GINConv(emb_dim) for _ in range(num_layer)])

    def forward(self, x, edge_index, edge_attr):
        for layer in range(len(self.gnns)):
            x = self.gnns[layer](x, edge_index, edge_attr)
        return x
"""

TRAIN_GNN = """
import torch

from model import GNN

device = torch.device("cuda")
model = GNN(5, 300).to(device)
optimizer = torch.optim.Adam(model.parameters())
for batch in loader:
    batch = batch.to(device, non_blocking=True)
    loss = model(batch.x, batch.edge_index, batch.edge_attr).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_pyg_message_passing_layer_makes_self_loop_attributes_on_the_cpu_every_forward(tmp_path, monkeypatch):
    (diagnostic,) = [d for d in lint(write(tmp_path, {"model.py": GNN, "train.py": TRAIN_GNN}), monkeypatch) if d.code == "GPU201"]
    assert (diagnostic.filename, diagnostic.location.row) == ("model.py", 13)
    assert diagnostic.message == (
        "`torch.zeros(...)` fills on the CPU, then `.to()` at line 15 copies it to the GPU on every call of the model"
        " (`forward` at line 12)"
    )


def test_a_layer_of_a_library_class_not_known_as_a_module_stays_silent(tmp_path, monkeypatch):
    other = GNN.replace("from torch_geometric.nn import MessagePassing", "from somelib import Layer").replace(
        "class GINConv(MessagePassing):", "class GINConv(Layer):"
    )
    assert [f for f in found(lint(write(tmp_path, {"model.py": other, "train.py": TRAIN_GNN}), monkeypatch)) if "GPU201" in f] == []


SCHEDULE = """
import torch


class Diffusion:
    def __init__(self, noise_steps=1000):
        self.noise_steps = noise_steps

    def sample_timesteps(self, n):
        return torch.randint(low=1, high=self.noise_steps, size=(n,))
"""

TRAIN_SCHEDULE = """
import torch
from torch import nn

from schedule import Diffusion

device = "cuda"


def train(loader, epochs):
    model = nn.Linear(10, 10).to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    diffusion = Diffusion()
    for epoch in range(epochs):
        for i, (images, _) in enumerate(loader):
            images = images.to(device)
            t = diffusion.sample_timesteps(images.shape[0]).to(device)
            loss = (model(images) - t[:, None]).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
"""


def test_a_method_whose_result_a_step_loop_of_another_module_moves(tmp_path, monkeypatch):
    files = {"schedule.py": SCHEDULE, "train.py": TRAIN_SCHEDULE}
    (diagnostic,) = [d for d in lint(write(tmp_path, files), monkeypatch) if d.code == "GPU201"]
    assert (diagnostic.filename, diagnostic.location.row) == ("schedule.py", 10)
    assert diagnostic.message == (
        "`torch.randint(...)` fills on the CPU, then the move of what `sample_timesteps()` returns at train.py:17 copies it"
        " to the GPU every training step (`sample_timesteps` at line 9, run by the call at train.py:17)"
    )


def test_a_method_another_module_calls_once_or_every_hundred_steps_stays_silent(tmp_path, monkeypatch):
    call = "            t = diffusion.sample_timesteps(images.shape[0]).to(device)\n"
    once = TRAIN_SCHEDULE.replace(call, "").replace(
        "    for epoch in range(epochs):\n", "    t = diffusion.sample_timesteps(8).to(device)\n    for epoch in range(epochs):\n"
    )
    guarded = TRAIN_SCHEDULE.replace(
        call,
        "            t = torch.ones(images.shape[0], device=device)\n"
        "            if i % 100 == 0:\n"
        "                t = diffusion.sample_timesteps(images.shape[0]).to(device)\n",
    )
    for name, train in (("once", once), ("guarded", guarded)):
        files = {"schedule.py": SCHEDULE, "train.py": train}
        assert [f for f in found(lint(write(tmp_path / name, files), monkeypatch)) if "GPU201" in f] == [], name


IGNITE_UPDATE = """
import argparse

import torch
from ignite.engine import Engine

from lm import TransformerWithLMHead


def train():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", type=str, default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    model = TransformerWithLMHead(args)
    model.to(args.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def mask_tokens(inputs):
        labels = inputs.clone()
        return inputs, labels

    def update(engine, batch):
        model.train()
        inputs = batch.transpose(0, 1).contiguous().to(args.device)
        inputs, labels = mask_tokens(inputs) if args.mlm else (inputs, inputs)
        logits, loss = model(inputs, labels=labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item()

    trainer = Engine(update)
    trainer.run(loader, max_epochs=3)
"""

LM = """
import torch
from torch import nn


class TransformerWithLMHead(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.head = nn.Linear(16, 100)

    def forward(self, x, labels=None):
        logits = self.head(x)
        return logits, nn.functional.cross_entropy(logits.view(-1, 100), labels.view(-1))
"""


def test_an_ignite_update_closure_reads_the_loss_of_the_model_moved_around_it(tmp_path, monkeypatch):
    (diagnostic,) = [d for d in lint(write(tmp_path, {"train.py": IGNITE_UPDATE, "lm.py": LM}), monkeypatch) if d.code == "GPU303"]
    assert (diagnostic.filename, diagnostic.location.row) == ("train.py", 30)
    assert diagnostic.message == "`loss.item()` waits for the GPU every training step (`update` at line 22, run by ignite for each batch)"


def test_an_ignite_update_closure_stays_silent_when_the_model_stays_on_the_cpu_or_is_its_own(tmp_path, monkeypatch):
    on_cpu = IGNITE_UPDATE.replace("    model.to(args.device)\n", '    model.to("cpu")\n')
    own = IGNITE_UPDATE.replace("        model.train()\n", "        model = TransformerWithLMHead(args)\n")
    for name, train in (("cpu", on_cpu), ("own", own)):
        files = {"train.py": train, "lm.py": LM}
        assert [f for f in found(lint(write(tmp_path / name, files), monkeypatch)) if "GPU303" in f] == [], name
