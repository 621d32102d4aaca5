"""Per-step host reads the fourteenth corpus showed gpulint missing for want of a fact (issue 14 §4/§6). Each fact
is a piece of the project model, tested here on minimal repros with a negative beside each positive:

- a call of a helper under `if False:` never runs, so the helper's one live call decides how often it runs
  (`helper_steps`);
- `if divisible_by(i, every):` with `def divisible_by(num, den): return (num % den) == 0` thins a loop as
  `i % every == 0` does, in the module (`Residency.rate_limit_guard`) and in the summaries (cross-module helpers);
- a module built around a GPU module (`AutoregressiveWrapper(model)`, then `model.cuda()`) runs on the GPU;
- `torch.stack([a, b])` of GPU tensors is a GPU tensor;
- `type = torch.cuda.LongTensor` under `if torch.cuda.is_available():` makes `x.type(type)` a move to CUDA;
- a loop that calls a function of its module running the model once per call is an evaluation loop;
- `algorithm = algorithm_class(...)` (a class looked up at run time) moved in place by `algorithm.to(device)` is a
  GPU module for the functions it is handed to.
"""

from __future__ import annotations

from tests.projects_helper import lint_written

HEAD = """\
import torch
import torch.nn.functional as F
import torchvision
from torch import nn
"""

# --- a helper's call under `if False:` ------------------------------------------------------------------------

FULL_GRAPH = HEAD + """\
model = torchvision.models.resnet50().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)


def sample_batch():
    return torch.randn(64, 3, 224, 224).cuda(), torch.randint(0, 1000, (64,)).cuda()


def train(x, y):
    model.train()
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


for epoch in range(1000):
    x, y = sample_batch()
    if False:
        out = train(x, y)
    else:
        out = train(x, y)
    print(out)
"""


def test_a_helper_called_once_outside_dead_code_is_per_step_code(tmp_path, monkeypatch):
    assert "train.py:19 GPU303" in lint_written(tmp_path, {"train.py": FULL_GRAPH}, monkeypatch)


def test_a_helper_called_in_two_live_branches_is_not_read_as_one_step(tmp_path, monkeypatch):
    live = FULL_GRAPH.replace("    if False:\n", "    if epoch % 2:\n")
    assert "train.py:19 GPU303" not in lint_written(tmp_path, {"train.py": live}, monkeypatch)


# --- `if divisible_by(i, every):` -----------------------------------------------------------------------------

GENERATE = HEAD + """\
from transformers import AutoModelForCausalLM

GENERATE_EVERY = 500


def divisible_by(num, den):
    return (num % den) == 0


def train(loader, optimizer):
    model = AutoModelForCausalLM.from_pretrained("gpt2").cuda()
    for i, batch in enumerate(loader):
        ids = batch["input_ids"].cuda()
        loss = model(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"training loss: {loss.item()}")
        if divisible_by(i, GENERATE_EVERY):
            sample = model.generate(ids[:1], max_new_tokens=256)
"""


def test_a_generation_under_a_divisibility_helper_runs_on_some_steps_only(tmp_path, monkeypatch):
    # the loss read is not one more wait after a per-step generation: the generation runs every 500 steps
    assert "train.py:22 GPU303" in lint_written(tmp_path, {"train.py": GENERATE}, monkeypatch)


def test_a_divisibility_helper_given_one_thins_nothing(tmp_path, monkeypatch):
    every_step = GENERATE.replace("GENERATE_EVERY = 500", "GENERATE_EVERY = 1")
    assert "train.py:22 GPU303" not in lint_written(tmp_path, {"train.py": every_step}, monkeypatch)


def test_a_helper_that_returns_no_remainder_is_no_rate_limit(tmp_path, monkeypatch):
    other = GENERATE.replace("return (num % den) == 0", "return num >= 0 and den > 0")
    assert "train.py:22 GPU303" not in lint_written(tmp_path, {"train.py": other}, monkeypatch)


METRICS = """\
def log_loss(loss, step):
    print(step, loss.item())
"""

GUARDED_HELPER = HEAD + """\
from metrics import log_loss


def divisible_by(num, den):
    return (num % den) == 0


def train(loader, optimizer):
    model = torchvision.models.resnet50().cuda()
    for step, (x, y) in enumerate(loader):
        x, y = x.cuda(), y.cuda()
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if divisible_by(step, 100):
            log_loss(loss, step)
"""


def test_a_cross_module_helper_under_a_divisibility_helper_is_not_per_step(tmp_path, monkeypatch):
    found = lint_written(tmp_path, {"train.py": GUARDED_HELPER, "metrics.py": METRICS}, monkeypatch)
    assert not any("GPU303" in f for f in found)


def test_a_cross_module_helper_called_every_step_waits_every_step(tmp_path, monkeypatch):
    unguarded = GUARDED_HELPER.replace("        if divisible_by(step, 100):\n            log_loss", "        log_loss")
    found = lint_written(tmp_path, {"train.py": unguarded, "metrics.py": METRICS}, monkeypatch)
    assert any("GPU303" in f for f in found)


# --- a module built around a GPU module -----------------------------------------------------------------------

WRAPPER = HEAD + """\


class LossWrapper(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x).logsumexp(-1).mean()


def cycle(loader):
    while True:
        for data in loader:
            yield data


def main(loader):
    model = torchvision.models.resnet50()
    wrapper = LossWrapper(model)
    model.cuda()
    optimizer = torch.optim.Adam(model.parameters())
    batches = cycle(loader)
    for i in range(100000):
        loss = wrapper(next(batches))
        loss.backward()
        print(f"training loss: {loss.item()}")
        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_wrapper_of_a_module_moved_in_place_computes_on_the_gpu(tmp_path, monkeypatch):
    assert "train.py:31 GPU303" in lint_written(tmp_path, {"train.py": WRAPPER}, monkeypatch)


def test_a_wrapper_of_a_module_left_on_the_cpu_does_not(tmp_path, monkeypatch):
    on_cpu = WRAPPER.replace("    model.cuda()\n", "")
    assert not any("GPU303" in f for f in lint_written(tmp_path, {"train.py": on_cpu}, monkeypatch))


# --- `torch.stack([a, b])` ------------------------------------------------------------------------------------

STACKED = HEAD + """\


def train(loader, augment, optimizer):
    model = torchvision.models.resnet50().cuda()
    total = 0.0
    for noisy, clean in loader:
        noisy, clean = noisy.cuda(), clean.cuda()
        sources = torch.stack([noisy - clean, clean])
        sources = augment(sources)
        noise, clean = sources
        noisy = noise + clean
        loss = F.l1_loss(clean, noisy * 0.5)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total
"""


def test_a_stack_of_gpu_tensors_is_on_the_gpu(tmp_path, monkeypatch):
    assert "train.py:20 GPU303" in lint_written(tmp_path, {"train.py": STACKED}, monkeypatch)


def test_a_stack_with_a_host_tensor_is_not_known_to_be(tmp_path, monkeypatch):
    mixed = STACKED.replace("torch.stack([noisy - clean, clean])", "torch.stack([noisy - clean, torch.zeros(3)])")
    mixed = mixed.replace("        noisy, clean = noisy.cuda(), clean.cuda()\n", "        noisy = noisy.cuda()\n")
    assert "train.py:20 GPU303" not in lint_written(tmp_path, {"train.py": mixed}, monkeypatch)


# --- a legacy tensor type chosen on GPU runs ------------------------------------------------------------------

TAGGED = HEAD + """\
device = "cuda" if torch.cuda.is_available() else "cpu"
model = nn.Sequential(nn.EmbeddingBag(50000, 1024), nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 50)).to(device)
optimizer = torch.optim.Adam(model.parameters())
type = torch.LongTensor
if torch.cuda.is_available():
    type = torch.cuda.LongTensor


def train(data):
    correct = 0
    for words, tag in data:
        words = torch.tensor([words]).type(type)
        tag = torch.tensor([tag]).type(type)
        output = model(words)
        predicted = output.argmax().item()
        loss = F.cross_entropy(output, tag)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if predicted == tag:
            correct += 1
    return correct
"""


def test_a_type_chosen_on_gpu_runs_moves_to_cuda(tmp_path, monkeypatch):
    assert "train.py:24 GPU303" in lint_written(tmp_path, {"train.py": TAGGED}, monkeypatch)


def test_a_host_type_moves_nothing(tmp_path, monkeypatch):
    host = TAGGED.replace("    type = torch.cuda.LongTensor\n", "    print('cuda')\n").replace(".to(device)", "")
    assert "train.py:24 GPU303" not in lint_written(tmp_path, {"train.py": host}, monkeypatch)


# --- an evaluation loop through a function that runs the model once ------------------------------------------

SENTENCES = HEAD + """\
device = "cuda"
model = nn.Sequential(nn.Embedding(50000, 1024), nn.Linear(1024, 50000)).to(device)
optimizer = torch.optim.Adam(model.parameters())


def sentence_loss(sent):
    history = []
    for word in sent:
        history.append(word)
    logits = model(torch.LongTensor(history).to(device))
    return F.cross_entropy(logits, torch.LongTensor(sent).to(device))


for epoch in range(10):
    for sent in train_data:
        loss = sentence_loss(sent)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dev_loss = 0.0
    for sent in dev_data:
        loss = sentence_loss(sent)
        dev_loss += loss.item()
    print(dev_loss)
"""


def test_a_loop_over_a_function_that_runs_the_model_is_an_evaluation_loop(tmp_path, monkeypatch):
    assert "train.py:27 GPU303" in lint_written(tmp_path, {"train.py": SENTENCES}, monkeypatch)


def test_a_function_that_runs_the_model_in_its_own_loop_is_a_whole_pass(tmp_path, monkeypatch):
    whole_pass = SENTENCES.replace(
        "    logits = model(torch.LongTensor(history).to(device))\n",
        "    for h in history:\n        logits = model(torch.LongTensor([h]).to(device))\n",
    )
    assert not any(f.startswith("train.py:2") and "GPU303" in f for f in lint_written(tmp_path, {"train.py": whole_pass}, monkeypatch))


# --- an instance of a class looked up at run time, moved in place ---------------------------------------------

ALGORITHMS = """\
import torch
import torchvision
from torch import nn


class ERM(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.network = torchvision.models.resnet50(num_classes=num_classes)

    def predict(self, x):
        return self.network(x)


def get_algorithm_class(name):
    return globals()[name]
"""

METRIC = """\
import torch


def accuracy(network, loader, device):
    correct = 0
    network.eval()
    with torch.no_grad():
        for x, y in loader:
            x = x.to(device)
            y = y.to(device)
            p = network.predict(x)
            correct += (p.argmax(1) == y).sum().item()
    return correct
"""

MAIN = """\
import argparse

import torch

import algorithms
import misc

parser = argparse.ArgumentParser()
parser.add_argument("--algorithm", default="ERM")
args = parser.parse_args()
device = "cuda" if torch.cuda.is_available() else "cpu"
algorithm_class = algorithms.get_algorithm_class(args.algorithm)
algorithm = algorithm_class(10)
algorithm.to(device)
for step in range(5000):
    if step % 300 == 0:
        print(misc.accuracy(algorithm, loaders[0], device))
"""


def test_an_instance_of_a_class_held_in_a_name_moved_in_place_is_a_gpu_module(tmp_path, monkeypatch):
    found = lint_written(tmp_path, {"algorithms.py": ALGORITHMS, "misc.py": METRIC, "train.py": MAIN}, monkeypatch)
    assert "misc.py:12 GPU303" in found


def test_an_instance_left_where_it_was_built_is_not(tmp_path, monkeypatch):
    unmoved = MAIN.replace("algorithm.to(device)\n", "")
    found = lint_written(tmp_path, {"algorithms.py": ALGORITHMS, "misc.py": METRIC, "train.py": unmoved}, monkeypatch)
    assert "misc.py:12 GPU303" not in found


# --- a read after an `if` / `else` whose every branch ends with a read ----------------------------------------

BRANCHED = HEAD + """\
network = torchvision.models.resnet50().cuda()


def accuracy(loader, device):
    correct, total = 0, 0
    with torch.no_grad():
        for x, y, w in loader:
            x, y, w = x.to(device), y.to(device), w.to(device)
            p = network(x)
            if p.size(1) == 1:
                correct += (p.gt(0).eq(y).float() * w).sum().item()
            else:
                correct += (p.argmax(1).eq(y).float() * w).sum().item()
            total += w.sum().item()
    return correct / total


for epoch in range(1000):
    print(accuracy(loader, "cuda"))
"""


def test_a_read_after_reads_that_end_every_branch_is_one_wait_with_them(tmp_path, monkeypatch):
    found = [f for f in lint_written(tmp_path, {"train.py": BRANCHED}, monkeypatch) if "GPU303" in f]
    assert found == ["train.py:15 GPU303", "train.py:17 GPU303"]


def test_a_read_after_an_if_without_else_keeps_its_finding(tmp_path, monkeypatch):
    no_else = BRANCHED.replace(
        "            else:\n                correct += (p.argmax(1).eq(y).float() * w).sum().item()\n", ""
    )
    found = [f for f in lint_written(tmp_path, {"train.py": no_else}, monkeypatch) if "GPU303" in f]
    assert found == ["train.py:15 GPU303", "train.py:16 GPU303"]
