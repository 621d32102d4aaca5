"""Step loops that are not DataLoader loops: a loop that runs a model's own methods (`encode` / `decode` /
`project`) on GPU values runs the model every iteration, and what those methods return is on the GPU."""

from __future__ import annotations

from tests.conftest import diagnostics, findings

DECODER = """\
import torch
import torch.nn as nn


class Transformer(nn.Module):
    def encode(self, src):
        return src

    def decode(self, memory, ys, mask):
        return ys

    def project(self, h):
        return h

    def num_layers(self):
        return 6


device = torch.device("cuda")
model = Transformer().to(device)


def translate(ids, sos, seq_len):
    model.eval()
    with torch.no_grad():
        memory = model.encode(torch.tensor(ids).to(device))
        ys = torch.full((1, 1), sos, device=device)
        while ys.size(1) < seq_len:
            out = model.decode(memory, ys, None)
            prob = model.project(out[:, -1])
            print(prob.max().item())
            ys = torch.cat([ys, prob.argmax(dim=1, keepdim=True)], dim=1)
    return ys
"""


def test_a_while_loop_running_a_models_own_methods_is_an_evaluation_loop():
    found = diagnostics(DECODER)
    assert [(d.location.row, d.code) for d in found] == [(31, "GPU303")]
    assert found[0].message == "`prob.max().item()` waits for the GPU every evaluation step (loop at line 28)"


def test_a_models_method_without_gpu_inputs_returns_no_gpu_value():
    # `num_layers()` takes no tensor: its result is a Python value, reading it is no sync
    source = DECODER.replace("print(prob.max().item())", "print(float(model.num_layers()))")
    assert findings(source) == []


def test_nn_module_bookkeeping_methods_do_not_make_a_step_loop():
    source = """\
        import torch

        device = torch.device("cuda")
        model = torch.nn.Linear(512, 512).to(device)
        scores = torch.randn(4096, 512, device=device)


        def report(names):
            for name, p in model.named_parameters():
                print(name, p.norm().item())
            for key in model.state_dict(scores):
                print(key, scores.sum().item())
        """
    assert findings(source) == []


def test_a_decoding_loop_that_needs_the_token_on_the_host_stays_silent():
    # greedy decoding that stops at EOS: each iteration waits for the token anyway (host_reads)
    source = DECODER.replace(
        "            print(prob.max().item())\n",
        "            next_word = prob.argmax(dim=1)\n            if next_word.item() == 2:\n                break\n",
    )
    assert findings(source) == []


def test_a_module_method_outside_any_loop_is_not_per_step():
    source = DECODER.replace(
        "        while ys.size(1) < seq_len:\n", "        if ys.size(1) < seq_len:\n"
    )
    assert findings(source) == []


OPTIMIZER_BY_NAME = """\
import argparse

import torch
import torch.optim as optim

parser = argparse.ArgumentParser()
parser.add_argument("--optim", type=str, default="Adam")
args = parser.parse_args()
model = torch.nn.Linear(1024, 1024).cuda()
optimizer = getattr(optim, args.optim)(model.parameters(), lr=1e-3)
"""


def test_gpu904_an_optimizer_named_by_a_setting_that_defaults_to_adam():
    found = diagnostics(OPTIMIZER_BY_NAME, select=("GPU904",), preview=True)
    assert [(d.location.row, d.code, d.message) for d in found] == [
        (10, "GPU904", "`getattr(optim, args.optim)(...)` updates CUDA parameters without `fused=True`")
    ]
    assert found[0].fix is None  # `--optim RMSprop` would get `fused=True` too


def test_gpu904_silent_when_the_setting_defaults_to_another_optimizer_or_is_not_torch_optim():
    assert findings(OPTIMIZER_BY_NAME.replace('default="Adam"', 'default="SGD"'), select=("GPU904",), preview=True) == []
    other = OPTIMIZER_BY_NAME.replace("import torch.optim as optim", "import my_optimizers as optim")
    assert findings(other, select=("GPU904",), preview=True) == []


SLICED = """\
import torch
import torch.nn.functional as F

X = torch.randn(60000, 784).cuda()
Y = torch.randint(0, 10, (60000,)).cuda()
model = torch.nn.Sequential(torch.nn.Linear(784, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for i in range(0, X.size(0), 128):
        loss = F.cross_entropy(model(X[i:i + 128]), Y[i:i + 128])
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())
"""


def test_a_dataset_on_the_gpu_sliced_per_step_is_a_training_loop():
    found = diagnostics(SLICED, select=("GPU303",))
    assert [(d.location.row, d.message) for d in found] == [(14, "`loss.item()` waits for the GPU every training step (loop at line 9)")]


def test_a_sliced_training_loop_that_logs_on_an_interval_or_once_per_epoch_is_silent():
    interval = SLICED.replace("        print(loss.item())\n", "        if i % (100 * 128) == 0:\n            print(loss.item())\n")
    assert findings(interval, select=("GPU303",)) == []
    per_epoch = SLICED.replace("        print(loss.item())\n", "    print(loss.item())\n")  # after the step loop
    assert findings(per_epoch, select=("GPU303",)) == []


FULL_BATCH = """\
import torch
import torch.nn.functional as F
from models import GAT

device = torch.device("cuda")


def main(features, labels, adj, epochs):
    features, labels, adj = features.to(device), labels.to(device), adj.to(device)
    model = GAT(1433, 64, 7).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    for epoch in range(epochs):
        out = model(features, adj)
        loss = F.nll_loss(out, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(epoch, loss.item())
"""


def test_full_batch_epochs_are_training_steps():
    # one optimizer step per epoch: the epoch loop is the step loop
    assert findings(FULL_BATCH, select=("GPU303",)) == ["18:22 GPU303"]


def test_full_batch_one_time_setup_is_not_per_step():
    setup = FULL_BATCH.replace("        print(epoch, loss.item())\n", "    print(loss.item())\n")
    assert findings(setup, select=("GPU303",)) == []
