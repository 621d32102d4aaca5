"""CPU factories in helpers that run every step, moved to the GPU (issue 14, ninth corpus miss class C).

    hidden, cell = model.init_hidden(b)        # `model = RNN(...).to(device)`: a method of the moved instance
    d_train(x)                                 # a function of this module that the training loop calls
        input_z = create_noise(b, z).to(device)    # ... whose helper returns `torch.rand(...)` bound to a name

Reported at the factory (GPU201), as often as the loop runs the helper. Silent: a helper run once before the loop
(a fixed noise batch, a stateful RNN's first state), one under `if step % N == 0:`, a value made on the first call
and kept on the object.
"""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, write

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

MODELS = """
import torch
import torch.nn as nn

device = torch.device("cuda:0")


class RNN(nn.Module):
    def __init__(self, vocab, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(vocab, 32)
        self.rnn = nn.LSTM(32, hidden_size, batch_first=True)

    def forward(self, x, hidden, cell):
        out, (hidden, cell) = self.rnn(self.embedding(x).unsqueeze(1), (hidden, cell))
        return out, hidden, cell

    def init_hidden(self, batch_size):
        hidden = torch.zeros(1, batch_size, self.hidden_size)
        cell = torch.zeros(1, batch_size, self.hidden_size)
        return hidden.to(device), cell.to(device)
"""

TRAIN_RNN = """
import torch

from models import RNN, device


def train(loader, epochs):
    model = RNN(100, 64).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(epochs):
        for seq, target in loader:
            hidden, cell = model.init_hidden(seq.size(0))
            seq, target = seq.to(device), target.to(device)
            optimizer.zero_grad()
            out, hidden, cell = model(seq[:, 0], hidden, cell)
            loss = torch.nn.functional.cross_entropy(out.squeeze(1), target[:, 0])
            loss.backward()
            optimizer.step()
"""

GAN = """
import torch
import torch.nn as nn

device = torch.device("cuda:0")
gen = nn.Linear(16, 784).to(device)
disc = nn.Linear(784, 1).to(device)
d_optimizer = torch.optim.Adam(disc.parameters())


def create_noise(batch_size, z_size, mode):
    if mode == "uniform":
        input_z = torch.rand(batch_size, z_size) * 2 - 1
    else:
        input_z = torch.randn(batch_size, z_size)
    return input_z


def d_train(x):
    disc.zero_grad()
    x = x.to(device)
    input_z = create_noise(x.size(0), 16, "uniform").to(device)
    fake_labels = torch.zeros(x.size(0), 1).to(device)
    loss = nn.functional.binary_cross_entropy_with_logits(disc(gen(input_z)), fake_labels) + disc(x).mean()
    loss.backward()
    d_optimizer.step()
    return loss.item()


fixed_z = create_noise(64, 16, "uniform").to(device)


def train(loader, epochs):
    for epoch in range(epochs):
        for x, _ in loader:
            d_train(x)
"""


def test_factories_in_helpers_run_every_step_are_reported_at_the_factory(tmp_path, monkeypatch):
    root = write(tmp_path, {"models.py": MODELS, "train_rnn.py": TRAIN_RNN, "gan.py": GAN})
    diagnostics = lint(root, monkeypatch, select=("GPU201",))
    assert sorted(found(diagnostics)) == [
        "gan.py:13 GPU201",  # torch.rand(...) * 2 - 1, returned by name, moved by d_train's caller expression
        "gan.py:15 GPU201",  # torch.randn(...), the other branch
        "gan.py:23 GPU201",  # torch.zeros(...).to(device) in d_train itself: the direct shape, fixed
        "models.py:20 GPU201",  # init_hidden of the moved instance, called in train_rnn.py's training loop
        "models.py:21 GPU201",
    ]
    by_key = {(d.filename, d.location.row): d for d in diagnostics}
    assert by_key[("models.py", 20)].message == (
        "`torch.zeros(...)` fills on the CPU, then `.to()` at line 22 copies it to the GPU every training step"
        " (`init_hidden` at line 19, run by the call at train_rnn.py:12)"
    )
    assert by_key[("gan.py", 13)].message == (
        "`torch.rand(...)` fills on the CPU, then `.to()` (of what `create_noise()` returns at line 22) copies it"
        " to the GPU every training step (`d_train` at line 19, run by the call at line 36)"
    )
    assert by_key[("gan.py", 23)].message == (
        "`torch.zeros(...)` fills on the CPU, then `.to()` copies it to the GPU every training step"
        " (`d_train` at line 19, run by the call at line 36)"
    )
    assert by_key[("gan.py", 13)].fix is None and by_key[("models.py", 20)].fix is None  # the move is elsewhere


def test_the_direct_shape_in_a_step_helper_is_fixed_safely(tmp_path, monkeypatch):
    from gpulint import api
    from gpulint.config import Settings, with_overrides

    root = write(tmp_path, {"gan.py": GAN})
    monkeypatch.chdir(root)
    settings = with_overrides(Settings(root=root), select=("GPU201",))
    report = api.fix([root / "gan.py"], settings, unsafe=False, jobs=1, cache=False)
    fixed = report.files[0].fixed.splitlines()
    original = (root / "gan.py").read_text().splitlines()
    assert fixed[22] == "    fake_labels = torch.zeros(x.size(0), 1, device=device)"
    assert [i for i, (a, b) in enumerate(zip(original, fixed)) if a != b] == [22]


def test_helpers_run_once_or_every_n_steps_stay_silent(tmp_path, monkeypatch):
    train = """
    import torch
    import torch.nn as nn

    from models import RNN, device


    def create_noise(n):
        z = torch.randn(n, 16)
        return z


    def log_samples(gen, n):
        z = torch.zeros(n, 16).to(device)
        return gen(z)


    class Cached(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = None

        def positions(self, n):
            if self.pos is None:
                self.pos = torch.linspace(-1.0, 1.0, n).cuda()
            return self.pos


    def train(loader, gen, optimizer, cached):
        model = RNN(100, 64).to(device)
        hidden, cell = model.init_hidden(32)  # a stateful RNN: its first state, once
        fixed_z = create_noise(64).to(device)  # one fixed batch of noise for the samples
        for step, (seq, target) in enumerate(loader):
            seq = seq.to(device)
            out, hidden, cell = model(seq[:, 0], hidden.detach(), cell.detach())
            loss = out.sum() + gen(fixed_z).sum() + cached.positions(4).sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 100 == 0:
                log_samples(gen, 8)
    """
    root = write(tmp_path, {"models.py": MODELS, "train.py": train})
    assert found(lint(root, monkeypatch, select=("GPU201",))) == []
