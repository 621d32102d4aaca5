"""GPU306 in code a per-step `forward` reaches (issue 14, sections 5-6; the fifteenth and eighteenth corpora's
clear labels): a model whose `forward` a training loop runs every step calls a submodule of another module
(`self.decoder(...)`), whose `forward` calls a method on `self` or a helper function of any module; an op whose
output size depends on GPU data in a loop or a comprehension there runs once per iteration, every step.

Shapes after Speech-Transformer (`Decoder.preprocess` strips padding with `[y[y != IGNORE_ID] for y in
padded_input]`, the decoder handed to `Transformer(encoder, decoder)`) and PointNet++ (farthest-point sampling's
`distance[mask] = dist[mask]` in a loop of `npoint` iterations, in a helper that a set-abstraction layer's `forward`
calls through another helper). The finding is at the op, naming the loop, the function, the call that reaches it
and the step's call; the call of the submodule in the model's `forward` is not reported again. Negatives: one mask
a call (no repetition: silent by default), the model run only at set-up (no step runs it), and the submodule
called under a `step % N` guard.
"""

from __future__ import annotations

from tests.projects_helper import lint, write

DECODER = """
import torch
import torch.nn as nn

IGNORE_ID = -1


def sample(xyz, npoint):
    distance = torch.ones(xyz.shape[0], xyz.shape[1], device=xyz.device) * 1e10
    farthest = torch.zeros(xyz.shape[0], dtype=torch.long, device=xyz.device)
    for i in range(npoint):
        dist = ((xyz - xyz[:, :1]) ** 2).sum(-1)
        mask = dist < distance
        distance[mask] = dist[mask]
        farthest = distance.max(-1)[1]
    return farthest


def group(xyz, npoint):
    return sample(xyz, npoint)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def preprocess(self, padded_input):
        ys = [y[y != IGNORE_ID] for y in padded_input]
        return torch.nn.utils.rnn.pad_sequence(ys, batch_first=True)

    def forward(self, padded_input, memory):
        ys = self.preprocess(padded_input)
        return self.proj(memory) + ys.float().mean()


class OneMask(nn.Module):
    def forward(self, padded_input, memory):
        kept = padded_input[padded_input != IGNORE_ID]
        return memory + kept.float().mean()


class Sampler(nn.Module):
    def forward(self, xyz):
        return group(xyz, 512)
"""

MODEL = """
import torch.nn as nn


class Transformer(nn.Module):
    def __init__(self, encoder, decoder, sampler):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.sampler = sampler

    def forward(self, x, targets, xyz):
        memory = self.encoder(x)
        idx = self.sampler(xyz)
        return self.decoder(targets, memory), idx
"""

TRAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from decoder import {decoder}, Sampler
from model import Transformer


def main(dataset):
    device = torch.device("cuda")
    model = Transformer(nn.Linear(8, 8), {decoder}(), Sampler()).to(device)
    opt = torch.optim.Adam(model.parameters(), fused=True)
    loader = DataLoader(dataset, batch_size=32, num_workers=4, pin_memory=True, persistent_workers=True)
    for epoch in range(10):
        for x, targets, xyz in loader:
            x = x.to(device, non_blocking=True)
            targets = targets.to(device, non_blocking=True)
            xyz = xyz.to(device, non_blocking=True)
            out, idx = model(x, targets, xyz)
            loss = out.mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
"""

SET_UP_ONLY = """
import torch
import torch.nn as nn

from decoder import Decoder, Sampler
from model import Transformer


def main(x, targets, xyz):
    model = Transformer(nn.Linear(8, 8), Decoder(), Sampler()).cuda()
    return model(x.cuda(), targets.cuda(), xyz.cuda())
"""


def _found(tmp_path, monkeypatch, files, **overrides):
    diagnostics = lint(write(tmp_path, files), monkeypatch, select=("GPU306",), **overrides)
    return sorted((d.filename, d.location.row, d.message) for d in diagnostics)


def test_a_repeated_mask_in_code_the_step_forward_reaches_is_reported_at_the_op(tmp_path, monkeypatch):
    files = {"decoder.py": DECODER, "model.py": MODEL, "train.py": TRAIN.format(decoder="Decoder")}
    found = _found(tmp_path, monkeypatch, files, rule_options=())
    assert [(f, row) for f, row, _ in found] == [("decoder.py", 14), ("decoder.py", 29)]
    sample, preprocess = (message for _, _, message in found)
    assert sample == (
        "`dist[mask]` makes the host wait for the GPU every training step, once per iteration of the loop at line 11 "
        "(`for i in range(npoint)`) of `sample`, which the call at decoder.py:20 runs in a `forward` that the step's "
        "call at train.py:20 runs"
    )
    assert preprocess == (
        "`y[y != IGNORE_ID]` makes the host wait for the GPU every training step, once per iteration of the "
        "comprehension at line 29 (`for y in padded_input`) of `preprocess`, which the call at decoder.py:33 runs "
        "in a `forward` that the step's call at train.py:20 runs"
    )


def test_one_mask_a_call_of_a_reached_forward_stays_silent_by_default(tmp_path, monkeypatch):
    files = {"decoder.py": DECODER, "model.py": MODEL, "train.py": TRAIN.format(decoder="OneMask")}
    found = _found(tmp_path, monkeypatch, files, rule_options=())
    assert [(f, row) for f, row, _ in found] == [("decoder.py", 14)]  # the sampling loop's mask only


def test_a_model_run_only_at_set_up_reaches_nothing_per_step(tmp_path, monkeypatch):
    files = {"decoder.py": DECODER, "model.py": MODEL, "main.py": SET_UP_ONLY}
    assert _found(tmp_path, monkeypatch, files, rule_options=()) == []


def test_a_submodule_called_under_a_logging_guard_is_not_reached(tmp_path, monkeypatch):
    guarded = MODEL.replace(
        "        return self.decoder(targets, memory), idx",
        "        if self.training and self.steps % 100 == 0:\n            self.decoder(targets, memory)\n        return memory, idx",
    ).replace("        memory = self.encoder(x)", "        self.steps = getattr(self, 'steps', 0) + 1\n        memory = self.encoder(x)")
    files = {"decoder.py": DECODER, "model.py": guarded, "train.py": TRAIN.format(decoder="Decoder")}
    found = _found(tmp_path, monkeypatch, files, rule_options=())
    assert [(f, row) for f, row, _ in found] == [("decoder.py", 14)]
