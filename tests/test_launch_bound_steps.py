"""Launch-bound steps (issue 13, thirteenth corpus N4 (e), fatchord/WaveRNN): a training step that runs a recurrent
model one time step at a time from Python (a loop over hundreds of time steps, the hidden state carried from call to
call) issues thousands of tiny kernels; the GPU trails the host by microseconds. A loss read finds nothing queued
(GPU303 silent), and autocast, TF32 or a fused optimizer speed up kernels whose time is not what the step waits for
(GPU901, GPU902, GPU904 silent). The same holds for a model class whose forward loops over time steps of recurrent
cells (Tacotron's frame-by-frame decoder), in this module or in another one.

Negatives: a transformer step whose model loops over its 12 layers keeps every finding; a sampling loop in an
evaluation function (or one under `if step % 500 == 0:`) does not make the training step launch-bound; a model of
`nn.GRU` over the whole sequence (one cuDNN kernel per layer) keeps its findings.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

CELL_STEPS = """
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Vocoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(2, 896)
        self.out = nn.Linear(896, 256)

    def forward(self, x, hidden):
        hidden = self.cell(x, hidden)
        return self.out(hidden), hidden


def train(signal, num_steps, seq_len=960):
    model = Vocoder().cuda()
    optimizer = torch.optim.Adam(model.parameters())
    running = 0.0
    for step in range(num_steps):
        hidden = torch.zeros(1, 896, device="cuda")
        loss = 0
        start = np.random.randint(0, signal.shape[1] - seq_len - 1)
        for i in range(seq_len):
            x = torch.as_tensor(signal[:, start + i:start + i + 2], dtype=torch.float32, device="cuda")
            y = torch.as_tensor(signal[:, start + i + 2], dtype=torch.long, device="cuda")
            out, hidden = model(x, hidden)
            loss = loss + F.cross_entropy(out, y)
        running += loss.item() / seq_len
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return running


if __name__ == "__main__":
    train(np.load("audio.npy"), 1000)
"""

TRANSFORMER = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, 12, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(x, x, x)[0]
        return x + self.mlp(x)


class GPT(nn.Module):
    def __init__(self, vocab=50257, width=768):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList([Block(width) for _ in range(12)])
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def train(loader):
    model = GPT().cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    for step, (ids, targets) in enumerate(loader):
        ids, targets = ids.cuda(), targets.cuda()
        x = model.embed(ids)
        for block in model.blocks:
            x = block(x)
        loss = nn.functional.cross_entropy(model.head(x).flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())


if __name__ == "__main__":
    train(torch.utils.data.DataLoader(torch.load("tokens.pt"), batch_size=16))
"""

DECODER = """
import torch
import torch.nn as nn


class Decoder(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.attn_rnn = nn.GRUCell(dims, dims)
        self.res_rnn = nn.LSTMCell(dims, dims)
        self.proj = nn.Linear(dims, 80)

    def forward(self, x, hidden, cell):
        hidden = self.attn_rnn(x, hidden)
        out, cell = self.res_rnn(hidden, (hidden, cell))
        return self.proj(out), hidden, cell


class Tacotron(nn.Module):
    def __init__(self, dims=256):
        super().__init__()
        self.dims = dims
        self.prenet = nn.Linear(80, dims)
        self.decoder = Decoder(dims)

    def forward(self, mels):
        hidden = mels.new_zeros(mels.size(0), self.dims)
        cell = mels.new_zeros(mels.size(0), self.dims)
        frames = []
        for t in range(mels.size(1)):
            frame, hidden, cell = self.decoder(self.prenet(mels[:, t]), hidden, cell)
            frames.append(frame)
        return torch.stack(frames, 1)
"""

TRAIN_TACOTRON = """
import torch
from models.tacotron import Tacotron


def main(loader):
    model = Tacotron().to(torch.device("cuda"))
    optimizer = torch.optim.Adam(model.parameters())
    for step, mels in enumerate(loader):
        mels = mels.cuda()
        loss = (model(mels) - mels).abs().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(torch.utils.data.DataLoader(torch.load("mels.pt"), batch_size=32))
"""


def _lint(tmp_path, monkeypatch, files: dict[str, str]) -> list[str]:
    return sorted(found(lint(write(tmp_path, files), monkeypatch, select=("ALL",), preview=True)))


def _line(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


def _codes(findings: list[str], name: str) -> set[str]:
    return {f.split()[1] for f in findings if f.startswith(f"{name}:")}


def test_a_step_that_loops_over_time_steps_of_a_recurrent_model_is_launch_bound(tmp_path, monkeypatch):
    found_here = _lint(tmp_path, monkeypatch, {"train.py": CELL_STEPS})
    assert not _codes(found_here, "train.py") & {"GPU303", "GPU901", "GPU902", "GPU904"}


def test_the_same_step_without_the_time_step_loop_keeps_its_findings(tmp_path, monkeypatch):
    # one call on the whole window: no carried state, no loop of tiny kernels
    whole = CELL_STEPS.replace(
        "        for i in range(seq_len):\n"
        "            x = torch.as_tensor(signal[:, start + i:start + i + 2], dtype=torch.float32, device=\"cuda\")\n"
        "            y = torch.as_tensor(signal[:, start + i + 2], dtype=torch.long, device=\"cuda\")\n"
        "            out, hidden = model(x, hidden)\n"
        "            loss = loss + F.cross_entropy(out, y)\n",
        "        x = torch.as_tensor(signal[:, start:start + 2], dtype=torch.float32, device=\"cuda\")\n"
        "        y = torch.as_tensor(signal[:, start + 2], dtype=torch.long, device=\"cuda\")\n"
        "        out, state = model(x, hidden)\n"
        "        loss = loss + F.cross_entropy(out, y)\n",
    )
    found_here = _lint(tmp_path, monkeypatch, {"train.py": whole})
    assert f"train.py:{_line(whole, 'loss.item()')} GPU303" in found_here
    assert {"GPU901", "GPU902", "GPU904"} <= _codes(found_here, "train.py")


def test_a_transformer_step_that_loops_over_its_layers_keeps_its_findings(tmp_path, monkeypatch):
    found_here = _lint(tmp_path, monkeypatch, {"train.py": TRANSFORMER})
    assert f"train.py:{_line(TRANSFORMER, 'loss.item()')} GPU303" in found_here
    assert {"GPU901", "GPU902", "GPU904"} <= _codes(found_here, "train.py")


def test_a_sampling_loop_in_evaluation_only_does_not_make_the_step_launch_bound(tmp_path, monkeypatch):
    sampling = TRANSFORMER.replace(
        "def train(loader):",
        "@torch.no_grad()\n"
        "def sample(model, ids, steps=100):\n"
        "    for _ in range(steps):\n"
        "        logits = model(ids)\n"
        "        ids = torch.cat([ids, logits[:, -1:].argmax(-1)], 1)\n"
        "    return ids\n\n\n"
        "def train(loader):",
    ).replace(
        "        print(step, loss.item())\n",
        "        print(step, loss.item())\n"
        "        if step % 500 == 0:\n"
        "            state = None\n"
        "            for _ in range(100):\n"
        "                out, state = model(ids, state)\n",
    )
    found_here = _lint(tmp_path, monkeypatch, {"train.py": sampling})
    assert f"train.py:{_line(sampling, 'loss.item()')} GPU303" in found_here
    assert {"GPU901", "GPU902", "GPU904"} <= _codes(found_here, "train.py")


def test_a_model_class_of_another_module_that_steps_recurrent_cells_is_launch_bound(tmp_path, monkeypatch):
    found_here = _lint(tmp_path, monkeypatch, {"models/__init__.py": "", "models/tacotron.py": DECODER, "train.py": TRAIN_TACOTRON})
    assert not _codes(found_here, "train.py") & {"GPU901", "GPU902", "GPU904"}


def test_a_model_of_whole_sequence_grus_keeps_its_findings(tmp_path, monkeypatch):
    # `nn.GRU` over the sequence: one cuDNN kernel per layer, not a Python loop of cells
    sequence = DECODER.replace("nn.GRUCell(dims, dims)", "nn.GRU(dims, dims, batch_first=True)").replace(
        "nn.LSTMCell(dims, dims)", "nn.LSTM(dims, dims, batch_first=True)"
    )
    found_here = _lint(tmp_path, monkeypatch, {"models/__init__.py": "", "models/tacotron.py": sequence, "train.py": TRAIN_TACOTRON})
    assert {"GPU901", "GPU902", "GPU904"} <= _codes(found_here, "train.py")


TBPTT = """
import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken=33278, width=650):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, width)
        self.rnn = nn.LSTM(width, width, 2)
        self.decoder = nn.Linear(width, ntoken)

    def forward(self, x, hidden):
        output, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(output), hidden


def train(batches, epochs):
    model = RNNModel().cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(epochs):
        hidden = None
        total = 0.0
        for data, targets in batches:
            output, hidden = model(data.cuda(), hidden)
            hidden = tuple(h.detach() for h in hidden)
            loss = nn.functional.cross_entropy(output.flatten(0, 1), targets.cuda().flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(epoch, total)


if __name__ == "__main__":
    train(torch.load("batches.pt"), 40)
"""


def test_truncated_bptt_over_batches_is_not_a_time_step_loop(tmp_path, monkeypatch):
    # the state carried across the batches of an epoch (word_language_model): each step is a whole cuDNN LSTM pass
    found_here = _lint(tmp_path, monkeypatch, {"train.py": TBPTT})
    assert f"train.py:{_line(TBPTT, 'loss.item()')} GPU303" in found_here
    assert {"GPU901", "GPU902", "GPU904"} <= _codes(found_here, "train.py")
