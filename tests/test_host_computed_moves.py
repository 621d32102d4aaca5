"""Fill factories that reach the GPU after host work (issue 14, eighth corpus, class C): arithmetic with a host
number, views and elementwise functions before the move, `type_as(x)`, `x.get_device()`, and a helper whose
caller moves what it returns (`analysis/host_computed.py`, `analysis/later_moves.py`).

Shapes after ermongroup/ddim (`(torch.ones(n) * i).to(x.device)` per sampling step, the timestep embedding's
`torch.exp(torch.arange(...) * -k)` moved a line later), ming024/FastSpeech2 (`torch.arange(0, n).unsqueeze(0)
.expand(b, -1).to(device)` in a mask helper another module's `forward` calls), YOLOX (`torch.zeros(1, n).fill_(s)
.type_as(x)`), the NLP book's decoder (`self._init_context_vectors(b)` returns zeros, `forward` moves them) and
STAT 453's VAE (`torch.randn(...).to(z.get_device())`). Negatives beside each: the same shapes in one-time set-up,
a data-carrying factory (`torch.tensor(lengths)`), a dtype `.to(...)`, a result moved to the CPU, a helper whose
caller keeps the result on the CPU. None of these shapes gets a fix: a view's copy is contiguous where the
factory on the device is not, `type_as` also casts to x's dtype and picks the current CUDA device.
"""

from __future__ import annotations

import pytest

from tests.projects_helper import found, lint, write

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

UTILS = """
import torch

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def get_mask_from_lengths(lengths, max_len):
    ids = torch.arange(0, max_len).unsqueeze(0).expand(lengths.shape[0], -1).to(device)
    return ids >= lengths.unsqueeze(1).expand(-1, max_len)


def data_mask(lengths, max_len):
    ids = torch.tensor(list(range(max_len))).unsqueeze(0).to(device)
    return ids >= lengths.unsqueeze(1)
"""

MODELS = """
import math

import torch
import torch.nn as nn

from utils import data_mask, get_mask_from_lengths


def timestep_embedding(timesteps, dim):
    emb = math.log(10000) / (dim - 1)
    emb = torch.exp(torch.arange(dim, dtype=torch.float32) * -emb)
    emb = emb.to(device=timesteps.device)
    return timesteps.float()[:, None] * emb[None, :]


class Decoder(nn.Module):
    def __init__(self, hidden, bos):
        super().__init__()
        self.hidden = hidden
        self.bos = bos
        self.rnn = nn.GRUCell(hidden, hidden)
        self.freqs = torch.exp(torch.arange(hidden) * -0.5).to("cuda")  # once, in set-up

    def _init_indices(self, batch_size):
        return torch.ones(batch_size, dtype=torch.int64) * self.bos

    def _init_context(self, batch_size):
        return torch.zeros(batch_size, self.hidden)

    def _host_scale(self, batch_size):
        return torch.ones(batch_size)

    def reparameterize(self, z_mu):
        eps = torch.randn(z_mu.size(0), z_mu.size(1)).to(z_mu.get_device())
        return z_mu + eps

    def forward(self, x, lengths):
        mask = get_mask_from_lengths(lengths, x.size(1))
        other = data_mask(lengths, x.size(1))
        emb = timestep_embedding(lengths, self.hidden)
        y = self._init_indices(x.size(0))
        y = y.to(x.device)
        context = self._init_context(x.size(0)).to(x.device)
        scale = self._host_scale(x.size(0)).numpy()
        strides = torch.zeros(1, x.size(1)).fill_(8.0).type_as(x)
        half = torch.zeros(x.size(0)).to(torch.float16)
        back = (torch.ones(x.size(0)) * 2).cpu()
        z = self.reparameterize(x)
        return self.rnn(x[:, 0], context) + z, mask, other, emb, y, scale, strides, half, back
"""

TRAIN = """
import torch

from models import Decoder


def sample(x, seq, model):
    with torch.no_grad():
        n = x.size(0)
        for i in seq:
            t = (torch.ones(n) * i).to(x.device)
            x = model(x, t)
    return x


def main(loader):
    model = Decoder(16, 1).cuda()
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    offsets = (torch.arange(16) * 2).to("cuda")  # once, before training
    for x, lengths in loader:
        x, lengths = x.cuda(), lengths.cuda()
        out = model(x + offsets, lengths)
        loss = out[0].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    for x, _ in loader:
        sample(x.cuda(), range(10), model)
"""


def _lint(tmp_path, monkeypatch):
    return lint(write(tmp_path, {"utils.py": UTILS, "models.py": MODELS, "train.py": TRAIN}), monkeypatch, select=("GPU201",))


def test_factories_moved_after_host_work_are_reported_at_the_factory(tmp_path, monkeypatch):
    diagnostics = _lint(tmp_path, monkeypatch)
    assert sorted(found(diagnostics)) == [
        "models.py:12 GPU201",  # torch.exp(torch.arange(...) * -emb), moved a line later
        "models.py:26 GPU201",  # _init_indices: ones * bos, moved by forward
        "models.py:29 GPU201",  # _init_context: zeros, moved by forward in the same expression
        "models.py:35 GPU201",  # randn(...).to(z_mu.get_device())
        "models.py:46 GPU201",  # zeros(...).fill_(8.0).type_as(x)
        "train.py:11 GPU201",  # (torch.ones(n) * i).to(x.device) per sampling step
        "utils.py:8 GPU201",  # arange(...).unsqueeze(0).expand(...).to(device), called by forward of models.py
    ]  # silent: set-up in __init__ and before the loop, torch.tensor(data), a helper kept on the CPU, a dtype, .cpu()
    by_key = {(d.filename, d.location.row): d for d in diagnostics}
    assert by_key[("train.py", 11)].message == (
        "`torch.ones(...)` fills on the CPU, then `.to()` copies it to the GPU every evaluation step (loop at line 10)"
    )
    assert by_key[("models.py", 26)].message == (
        "`torch.ones(...)` fills on the CPU, then `.to()` at line 43 (of what `self._init_indices()` returns at line 42)"
        " copies it to the GPU every training step (`forward` at line 38, run by the call at train.py:23)"
    )
    assert by_key[("models.py", 46)].message == (
        "`torch.zeros(...)` fills on the CPU, then `.type_as()` copies it to the GPU every training step"
        " (`forward` at line 38, run by the call at train.py:23)"
    )
    assert by_key[("models.py", 12)].message == (
        "`torch.arange(...)` fills on the CPU, then `.to()` at line 13 copies it to the GPU on every call of the model"
        " (`timestep_embedding` at line 10, called by the `forward` at models.py:41)"
    )
    assert by_key[("utils.py", 8)].message == (
        "`torch.arange(...)` fills on the CPU, then `.to()` copies it to the GPU on every call of the model"
        " (`get_mask_from_lengths` at line 7, called by the `forward` at models.py:39)"
    )
    # no fix: the views' copy is contiguous, `type_as` casts and picks the current device, the move is elsewhere
    assert [key for key in sorted(by_key) if by_key[key].fix is not None] == [("models.py", 35)]


def test_only_the_direct_random_move_is_fixed_and_only_unsafely(tmp_path, monkeypatch):
    from gpulint import api
    from gpulint.config import Settings, with_overrides

    root = write(tmp_path, {"utils.py": UTILS, "models.py": MODELS, "train.py": TRAIN})
    monkeypatch.chdir(root)
    settings = with_overrides(Settings(root=root), select=("GPU201",))
    for name in ("models.py", "train.py", "utils.py"):  # no safe fix for any of them
        assert api.fix([root / name], settings, unsafe=False, jobs=1, cache=False).fixed_count == 0
    report = api.fix([root / "models.py"], settings, unsafe=True, jobs=1, cache=False)
    fixed = report.files[0].fixed.splitlines()
    original = (root / "models.py").read_text().splitlines()
    # `z_mu.get_device()` names z_mu's GPU: the factory is built there (unsafe: the CUDA generator draws other numbers)
    assert fixed[34] == "        eps = torch.randn(z_mu.size(0), z_mu.size(1), device=z_mu.get_device())"
    assert [i for i, (a, b) in enumerate(zip(original, fixed)) if a != b] == [34]  # the new shapes stay as written


def test_the_same_shapes_in_set_up_only_stay_silent(tmp_path, monkeypatch):
    setup = """
    import torch


    def table(n):
        return torch.zeros(n, 4)


    def build(x, n):
        freqs = torch.exp(torch.arange(n) * -0.5).to(x.device)
        strides = torch.zeros(1, n).fill_(8.0).type_as(x)
        t = table(n).to(x.device)
        return freqs, strides, t


    def main(loader):
        x = torch.randn(4, 4).cuda()
        consts = build(x, 16)
        model = torch.nn.Linear(4, 4).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for xb in loader:
            loss = model(xb.cuda()).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return consts
    """
    assert found(lint(write(tmp_path, {"setup_only.py": setup}), monkeypatch, select=("GPU201",))) == []


def test_to_a_gpu_tensor_is_a_move_and_to_a_host_tensor_is_not(tmp_path, monkeypatch):
    loop = """
    import torch


    def main(loader, model, opt):
        model.cuda()
        for x, lens in loader:
            x = x.cuda()
            pad = torch.zeros(x.size(1)).to(x)
            mask = torch.ones(x.size(1)).to(lens)
            loss = model(x + pad).sum() + mask.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    """
    diagnostics = lint(write(tmp_path, {"loop.py": loop}), monkeypatch, select=("GPU201",))
    assert found(diagnostics) == ["loop.py:9 GPU201"]  # `.to(lens)`: lens stays on the CPU, nothing copied to the GPU
    assert diagnostics[0].message == "`torch.zeros(...)` fills on the CPU, then `.to()` copies it to the GPU every training step (loop at line 7)"
    assert diagnostics[0].fix is None  # `.to(x)` also takes x's dtype
