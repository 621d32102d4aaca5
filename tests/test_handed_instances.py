"""Objects a constructor is handed (issue 14 point 6, per-step code reached through calls, across modules):
`self.model = model` in `Solver.__init__`, then `self.model(x, lengths)` in the step, is the project class every
call of `Solver(...)` hands it (`analysis/handed_instances.py`), followed through the callers' own parameters and
`super().__init__(vocab)`; what that class's method reads of the step's GPU tensors is the step's read (GPU303),
and a read in a loop of the helper (per utterance, per token) is its cost evidence by default.

Shapes after Speech-Transformer (`Transformer(encoder, decoder)` handed to `Solver`, the encoder's padding mask
filled utterance by utterance with a slice bound read from the CUDA lengths) and kospeech (a vocabulary handed to
the trainer and to a CER metric, whose `label_to_string` reads each token with `.item()`). Negatives: a
constructor handed different classes by different calls, a helper that copies the row to the host once.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

UTILS = """
def make_mask(x, lengths=None):
    mask = x.new_ones(x.size()[:-1])
    if lengths is not None:
        for i in range(x.size(0)):
            mask[i, lengths[i]:] = 0
    return mask.unsqueeze(-1)
"""

MODELS = """
import torch.nn as nn

from utils import make_mask


class Encoder(nn.Module):
    def __init__(self, d_in, d_model):
        super().__init__()
        self.proj = nn.Linear(d_in, d_model)

    def forward(self, x, lengths):
        mask = make_mask(x, lengths=lengths)
        return self.proj(x) * mask


class PlainEncoder(nn.Module):
    def __init__(self, d_in, d_model):
        super().__init__()
        self.proj = nn.Linear(d_in, d_model)

    def forward(self, x, lengths):
        return self.proj(x)


class Net(nn.Module):
    def __init__(self, encoder, d_model, n_out):
        super().__init__()
        self.encoder = encoder
        self.out = nn.Linear(d_model, n_out)

    def forward(self, x, lengths):
        h = self.encoder(x, lengths)
        return self.out(h)
"""

SOLVER = """
import torch.nn.functional as F


class Solver:
    def __init__(self, model, loader, optimizer):
        self.model = model
        self.loader = loader
        self.optimizer = optimizer

    def train(self, epochs):
        for epoch in range(epochs):
            for x, lengths, y in self.loader:
                x, lengths, y = x.cuda(), lengths.cuda(), y.cuda()
                out = self.model(x, lengths)
                loss = F.cross_entropy(out.flatten(0, 1), y.flatten())
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
"""

TRAIN = """
import argparse

import torch

from models import Encoder, Net
from solver import Solver
from data import make_loader

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=50)
args = parser.parse_args()

encoder = Encoder(80, 512)
model = Net(encoder, 512, 4000)
model.cuda()
optimizer = torch.optim.Adam(model.parameters())
solver = Solver(model, make_loader(), optimizer)
solver.train(args.epochs)
"""

DATA = """
import torch
from torch.utils.data import DataLoader, TensorDataset


def make_loader():
    data = TensorDataset(torch.randn(20000, 300, 80), torch.randint(1, 300, (20000,)), torch.randint(0, 4000, (20000, 300)))
    return DataLoader(data, batch_size=32, shuffle=True, num_workers=4, pin_memory=True)
"""


def _project(tmp_path, **changed):
    files = {"utils.py": UTILS, "models.py": MODELS, "solver.py": SOLVER, "train.py": TRAIN, "data.py": DATA}
    files.update(changed)
    return write(tmp_path, files)


def test_a_handed_model_runs_the_helper_that_reads_the_lengths_per_utterance_every_step(tmp_path, monkeypatch):
    diagnostics = lint(_project(tmp_path), monkeypatch, select=("GPU303",), rule_options=())
    assert found(diagnostics) == ["models.py:33 GPU303"]  # in `Net.forward`, run every step by the solver's call
    (finding,) = diagnostics
    assert finding.message == (
        "`self.encoder(x, lengths)` (slicing with a GPU tensor as a bound at utils.py:6) waits for the GPU every training "
        "step (`forward` at line 32, run by the call at solver.py:15)"
    )
    assert finding.help.startswith(
        "It waits in a loop of the helper (at utils.py:6), once per element of the GPU tensor the step hands it; "
    )


def test_a_constructor_handed_different_classes_resolves_to_none(tmp_path, monkeypatch):
    chosen = TRAIN.replace(
        'parser.add_argument("--epochs", type=int, default=50)\n',
        'parser.add_argument("--epochs", type=int, default=50)\nparser.add_argument("--plain", action="store_true")\n',
    ).replace("encoder = Encoder(80, 512)\n", "encoder = PlainEncoder(80, 512) if args.plain else Encoder(80, 512)\n")
    chosen = chosen.replace("from models import Encoder, Net", "from models import Encoder, Net, PlainEncoder")
    assert found(lint(_project(tmp_path, **{"train.py": chosen}), monkeypatch, select=("GPU303",))) == []


def test_one_read_of_the_lengths_a_call_has_no_cost_evidence_by_default(tmp_path, monkeypatch):
    once = UTILS.replace(
        "        for i in range(x.size(0)):\n            mask[i, lengths[i]:] = 0\n", "        mask[:, lengths.max():] = 0\n"
    )
    root = _project(tmp_path, **{"utils.py": once})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []
    assert found(lint(root, monkeypatch, select=("GPU303",))) == ["models.py:33 GPU303"]  # with `unproven-cost`


VOCAB = """
class Vocabulary:
    def label_to_string(self, labels):
        raise NotImplementedError


class CharVocabulary(Vocabulary):
    def __init__(self, chars, eos_id):
        self.chars = chars
        self.eos_id = eos_id

    def label_to_string(self, labels):
        sentence = ""
        for label in labels:
            if label.item() == self.eos_id:
                break
            sentence += self.chars[label.item()]
        return sentence
"""

METRICS = """
import Levenshtein as Lev


class ErrorRate:
    def __init__(self, vocab):
        self.vocab = vocab
        self.total = 0.0

    def __call__(self, targets, y_hats):
        for target, y_hat in zip(targets, y_hats):
            s1 = self.vocab.label_to_string(target)
            s2 = self.vocab.label_to_string(y_hat)
            self.total += Lev.distance(s1, s2)
        return self.total


class CharacterErrorRate(ErrorRate):
    def __init__(self, vocab):
        super().__init__(vocab)
"""

TRAINER = """
import torch.nn.functional as F

from metrics import CharacterErrorRate


class Trainer:
    def __init__(self, model, optimizer, vocab):
        self.model = model
        self.optimizer = optimizer
        self.metric = CharacterErrorRate(vocab)
        self.vocab = vocab

    def train(self, loader):
        for inputs, targets in loader:
            inputs, targets = inputs.cuda(), targets.cuda()
            out = self.model(inputs)
            cer = self.metric(targets, out.argmax(-1))
            loss = F.cross_entropy(out.flatten(0, 1), targets.flatten())
            loss.backward()
            self.optimizer.step()

    def validate(self, loader):
        texts = []
        for inputs, targets in loader:
            inputs, targets = inputs.cuda(), targets.cuda()
            out = self.model(inputs)
            texts.append((self.vocab.label_to_string(targets[0]), out.argmax(-1)))
        return texts
"""

MAIN = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

from trainer import Trainer
from vocab import CharVocabulary

vocab = CharVocabulary(list("abcdefghijklmnopqrstuvwxyz "), 0)
model = nn.Sequential(nn.Embedding(80, 512), nn.LSTM(512, 512, batch_first=True)).cuda()
optimizer = torch.optim.Adam(model.parameters())
loader = DataLoader(TensorDataset(torch.randint(0, 80, (20000, 200)), torch.randint(0, 28, (20000, 200))), batch_size=32, num_workers=4)
trainer = Trainer(model, optimizer, vocab)
for epoch in range(20):
    trainer.train(loader)
    trainer.validate(loader)
"""


def _speech(tmp_path, **changed):
    files = {"vocab.py": VOCAB, "metrics.py": METRICS, "trainer.py": TRAINER, "main.py": MAIN}
    files.update(changed)
    return write(tmp_path, files)


def test_a_handed_vocabulary_read_token_by_token_is_reported_where_the_steps_run_it(tmp_path, monkeypatch):
    diagnostics = lint(_speech(tmp_path), monkeypatch, select=("GPU303",), rule_options=())
    assert found(diagnostics) == ["metrics.py:12 GPU303", "trainer.py:28 GPU303"]
    by_line = {d.location.row: d for d in diagnostics}
    # the metric's vocabulary: handed to `CharacterErrorRate(vocab)`, on to `ErrorRate` by `super().__init__(vocab)`;
    # the metric's `__call__` is per-step code, so it reports the read itself (not again at the call in the loop)
    assert by_line[12].message == (
        "`self.vocab.label_to_string(target)` (`.item()` at vocab.py:15, 2 reads a call) waits for the GPU every "
        "training step (`__call__` at line 10, run by the call at trainer.py:18)"
    )
    assert by_line[28].message == (
        "`self.vocab.label_to_string(targets[0])` (`.item()` at vocab.py:15, 2 reads a call) waits for the GPU every "
        "evaluation step (loop at line 25)"
    )
    assert by_line[28].help.startswith(
        "It waits in a loop of the helper (at vocab.py:15), once per element of the GPU tensor the step hands it; "
    )


def test_a_vocabulary_that_copies_the_row_to_the_host_once_has_no_cost_evidence_by_default(tmp_path, monkeypatch):
    once = VOCAB.replace("        for label in labels:\n", "        for label in labels.tolist():\n").replace(
        "label.item()", "label"
    )
    root = _speech(tmp_path, **{"vocab.py": once})
    # one copy a call: the validation call has no cost evidence; the metric still reads once per row of its loop
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == ["metrics.py:12 GPU303"]
    assert found(lint(root, monkeypatch, select=("GPU303",))) == ["metrics.py:12 GPU303", "trainer.py:28 GPU303"]


ACCURACY = """
def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    _, pred = output.topk(maxk, 1, True, True)
    correct = pred.t().eq(target.view(1, -1).expand(maxk, -1))
    res = {}
    for k in topk:
        res[k] = correct[:k].reshape(-1).float().sum(0).item() / target.size(0)
    return res
"""

TOPK_TRAIN = """
import torch
import torch.nn as nn
import torchvision
from torch.utils.data import DataLoader, TensorDataset

from metrics import accuracy

model = torchvision.models.resnet50().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(5000, 3, 224, 224), torch.randint(0, 1000, (5000,))), batch_size=256, num_workers=8)
for epoch in range(90):
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        top = accuracy(logits, y, topk=(1, 5))
"""


def test_a_loop_over_the_options_a_caller_passes_is_not_a_read_per_element(tmp_path, monkeypatch):
    root = write(tmp_path, {"metrics.py": ACCURACY, "train.py": TOPK_TRAIN})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []  # two reads a step: no evidence
    assert found(lint(root, monkeypatch, select=("GPU303",))) == ["train.py:20 GPU303"]


def test_an_attribute_derived_from_what_the_constructor_is_handed_is_not_that_object(tmp_path, monkeypatch):
    # `self.encoder = model.encoder`: a part of the handed model, not the model; its call is not `Net.forward`
    derived = SOLVER.replace("        self.model = model\n", "        self.model = model\n        self.encoder = model.encoder\n")
    derived = derived.replace("out = self.model(x, lengths)", "out = self.encoder(x, lengths)")
    assert found(lint(_project(tmp_path, **{"solver.py": derived}), monkeypatch, select=("GPU303",), rule_options=())) == []


def test_a_submodule_of_a_handed_model_runs_its_class_forward(tmp_path, monkeypatch):
    # `self.model.encoder(x, lengths)`: `Net` keeps the `Encoder` it was handed in `self.encoder`
    sub = SOLVER.replace("out = self.model(x, lengths)", "out = self.model.out(self.model.encoder(x, lengths))")
    diagnostics = lint(_project(tmp_path, **{"solver.py": sub}), monkeypatch, select=("GPU303",), rule_options=())
    assert found(diagnostics) == ["solver.py:15 GPU303"]
    assert diagnostics[0].message.startswith("`self.model.encoder(x, lengths)` (slicing with a GPU tensor as a bound at utils.py:6)")


NOTEBOOK_STEP = """
import os

import torch
from torchvision import datasets, transforms

device = torch.device("cuda")
tf = transforms.Compose([transforms.Resize(224), transforms.CenterCrop(224), transforms.ToTensor()])
image_datasets = {x: datasets.ImageFolder(os.path.join("data", x), tf) for x in ["train", "val"]}
train_loader = torch.utils.data.DataLoader(image_datasets["train"], batch_size=len(image_datasets["train"]), shuffle=True)
model = torch.nn.Linear(3 * 224 * 224, 1).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for i in range(500):
    x, y = next(iter(train_loader))
    x, y = x.flatten(1).to(device), y.unsqueeze(1).float().to(device)
    yhat = torch.sigmoid(model(x))
    loss = torch.nn.functional.binary_cross_entropy(yhat, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    acc = predict(yhat.T, y.T)
"""

PREDICT = """
import torch


def predict(yhat, y):
    pred = torch.zeros(1, y.size()[1])
    for i in range(yhat.size()[1]):
        if yhat[0, i] <= 0.5:
            pred[0, i] = 0
        else:
            pred[0, i] = 1
    return 100 - torch.mean(torch.abs(pred - y)) * 100
"""


def test_reads_per_element_beside_images_decoded_in_the_training_process_are_a_small_share(tmp_path, monkeypatch):
    # the whole image folder decoded and resized on every pass, in the training process: milliseconds a sample
    step = "from metrics import predict\n" + NOTEBOOK_STEP
    root = write(tmp_path, {"metrics.py": PREDICT, "train.py": step})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []
    assert found(lint(root, monkeypatch, select=("GPU303",))) == ["train.py:22 GPU303"]
    workers = step.replace("shuffle=True)", "shuffle=True, num_workers=8)")
    root = write(tmp_path / "workers", {"metrics.py": PREDICT, "train.py": workers})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == ["train.py:22 GPU303"]


RESULTS = """
def add_results(js, nbest_hyps):
    for n, hyp in enumerate(nbest_hyps, 1):
        js["score_%d" % n] = float(hyp["score"])
    return js
"""

RECOGNIZE = """
import json

import torch
import torch.nn as nn

from results import add_results


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(80, 4000)

    def forward(self, x):
        return self.net(x)

    def recognize(self, x, beam):
        return [{"yseq": [0], "score": self.net(x).max()} for _ in range(beam)]


model = Model().cuda()
model.eval()
new_js = {}
with torch.no_grad():
    for name in range(1000):
        x = torch.randn(300, 80).cuda()
        nbest = model.recognize(x, 5)
        new_js[name] = add_results({}, nbest)
json.dump(new_js, open("out.json", "w"))
"""


def test_the_hypotheses_a_model_method_returns_are_no_gpu_tensor_read_per_element(tmp_path, monkeypatch):
    # a search's result (`model.recognize(x)`) is whatever the project's decoding built: written out, read once each
    root = write(tmp_path, {"results.py": RESULTS, "recognize.py": RECOGNIZE})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []


SEG_METRIC = """
import torch


def pix_accuracy(output, target):
    predict = torch.argmax(output, 1)
    labeled = torch.sum(target > 0).item()
    correct = torch.sum((predict == target) * (target > 0)).item()
    return correct, labeled


class SegmentationMetric:
    def __init__(self):
        self.correct, self.labeled = 0, 0

    def update(self, preds, labels):
        if isinstance(preds, torch.Tensor):
            correct, labeled = pix_accuracy(preds, labels)
        elif isinstance(preds, (list, tuple)):
            for pred, label in zip(preds, labels):
                correct, labeled = pix_accuracy(pred, label)
        self.correct += correct
        self.labeled += labeled
"""

SEG_EVAL = """
import torch
import torchvision
from torch.utils.data import DataLoader, TensorDataset

from metric import SegmentationMetric

model = torchvision.models.segmentation.fcn_resnet50(num_classes=21).cuda().eval()
metric = SegmentationMetric()
loader = DataLoader(TensorDataset(torch.randn(1000, 3, 480, 480), torch.randint(0, 21, (1000, 480, 480))), batch_size=8, num_workers=4)
with torch.no_grad():
    for image, target in loader:
        image, target = image.cuda(), target.cuda()
        out = model(image)["out"]
        metric.update(out, target)
"""


def test_a_loop_over_a_list_the_helper_tests_for_is_not_a_read_per_element(tmp_path, monkeypatch):
    # `elif isinstance(preds, (list, tuple)): for pred, label in zip(preds, labels)`: a few outputs, not the batch's elements
    root = write(tmp_path, {"metric.py": SEG_METRIC, "eval.py": SEG_EVAL})
    assert found(lint(root, monkeypatch, select=("GPU303",), rule_options=())) == []
    assert found(lint(root, monkeypatch, select=("GPU303",))) == ["eval.py:15 GPU303"]  # one wait a batch
