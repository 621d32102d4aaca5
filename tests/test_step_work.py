"""A step's GPU work (`model_size.step_work`, `forward_flops`): a step whose work the code shows to be under
`LAUNCH_BOUND_FLOPS` is launch-bound whatever its data set and parameter count (measured on an H200,
bench/results/cost_facts.md section 1), so a per-step read (GPU303) or an evaluation's autograd graph (GPU405) costs
nothing there. Positives: a bag-of-words classifier (`nn.EmbeddingBag` and a small head) trained one sentence a step;
an evaluation pass of a model that only looks words up, whatever its vocabulary. Negatives: the same classifier at
batch 4096 with a 1024-wide head (1.7 GFLOP a step); a ResNet-sized conv net on 224x224 images (a convolution's work
needs the image size: unknown); a model of a vocabulary read from the data trained by Adam (its update is unknown); an
`nn.Embedding` feeding a `Linear` per token (the sentence length is not in the code); a module handed to the class.
The rules ask the threshold of one-row steps and steps that multiply nothing only (`ONE_ROW_STEPS`): the same
classifier at batch 64 keeps its read. A forward that repeats only lookups (a comprehension over an `nn.ModuleList` of
embeddings) multiplies nothing, unlike one that repeats a `Linear` or draws its lookups from modules handed in; a
function of the module the step calls once (`loss = calc_sent_loss(sent)`) counts with the step, unless it runs the
model in a loop or a comprehension of its own or calls another function of the module.
"""

from __future__ import annotations

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.model_size import LAUNCH_BOUND_FLOPS
from tests.projects_helper import found, lint, write

BAG_CLASSIFIER = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader


class BagClassifier(nn.Module):
    def __init__(self, vocab=20000, dim=64, hidden=HIDDEN, classes=4):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.hidden = nn.Linear(dim, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, tokens, offsets):
        return self.out(torch.relu(self.hidden(self.bag(tokens, offsets))))


def train(dataset):
    model = BagClassifier().cuda()
    optimizer = torch.optim.Adam(model.parameters())
    criterion = nn.CrossEntropyLoss()
    loader = DataLoader(dataset, batch_size=BATCH, shuffle=True)
    for tokens, offsets, label in loader:
        tokens, offsets, label = tokens.cuda(), offsets.cuda(), label.cuda()
        loss = criterion(model(tokens, offsets), label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.item())  # the read
"""

CONV_224 = """
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def block(c_in, c_out):
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU(), nn.MaxPool2d(2))


model = nn.Sequential(
    nn.Conv2d(3, 64, 7, stride=2, padding=3), nn.ReLU(), nn.Conv2d(64, 128, 3), nn.ReLU(), nn.Conv2d(128, 256, 3),
    nn.ReLU(), nn.Conv2d(256, 512, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000),
).cuda()
data = datasets.ImageFolder("train", transforms.Compose([transforms.RandomResizedCrop(224), transforms.ToTensor()]))
loader = DataLoader(data, batch_size=64, num_workers=8, pin_memory=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for images, labels in loader:
    images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)
    loss = nn.functional.cross_entropy(model(images), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())  # the read
"""

WORD_LOOKUP = """
import random
import torch
import torch.nn as nn

word_to_index = {}
tag_to_index = {}
for line in open("train.txt"):
    tag, words = line.split(" ||| ")
    tag_to_index.setdefault(tag, len(tag_to_index))
    for word in words.split():
        word_to_index.setdefault(word, len(word_to_index))
train_data = [([word_to_index[w] for w in l.split(" ||| ")[1].split()], 0) for l in open("train.txt")]
dev_data = list(train_data)


class BoW(nn.Module):
    def __init__(self, nwords, ntags):
        super().__init__()
        self.embedding = nn.Embedding(nwords, ntags)
        self.bias = nn.Parameter(torch.zeros(ntags))

    def forward(self, words):
        return (self.embedding(words).sum(dim=0) + self.bias).view(1, -1)


model = BoW(len(word_to_index), len(tag_to_index)).cuda()
optimizer = torch.optim.Adam(model.parameters())
criterion = nn.CrossEntropyLoss()
for epoch in range(10):
    model.train()
    random.shuffle(train_data)
    for words, tag in train_data:
        output = model(torch.tensor(words).cuda())
        loss = criterion(output, torch.tensor([tag]).cuda())
        print(loss.item())  # train read
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    correct = 0
    for words, tag in dev_data:
        output = model(torch.tensor(words).cuda())  # the dev forward
        correct += int(torch.argmax(output).item() == tag)  # dev read
"""


def _lint(tmp_path, monkeypatch, source: str) -> list[str]:
    return sorted(found(lint(write(tmp_path, {"train.py": source}), monkeypatch, select=("ALL",), preview=True)))


def _line(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


def _at(findings: list[str], line: int) -> set[str]:
    return {f.split()[1] for f in findings if f.startswith(f"train.py:{line} ")}


def _work(source: str) -> int | None:
    """The step work of the last `for` loop at the module level or in `train`."""
    model = SemanticModel(cst.parse_module(source), "m.py")
    loop = [node for node in model.loops if isinstance(node, cst.For)][-1]
    return model.model_size.step_work(loop)


def _bag(batch: int, hidden: int) -> str:
    return BAG_CLASSIFIER.replace("BATCH", str(batch)).replace("HIDDEN", str(hidden))


def test_bag_of_words_classifier_one_sentence_a_step_is_launch_bound(tmp_path, monkeypatch):
    source = _bag(1, 64)
    assert _work(source) == 3 * 2 * (64 * 64 + 64 * 4)
    assert "GPU303" not in _at(_lint(tmp_path, monkeypatch, source), _line(source, "# the read"))


def test_bag_of_words_classifier_at_batch_4096_with_a_wide_head_is_not(tmp_path, monkeypatch):
    source = _bag(4096, 1024)
    assert _work(source) == 3 * 2 * (64 * 1024 + 1024 * 4) * 4096 > LAUNCH_BOUND_FLOPS
    assert "GPU303" in _at(_lint(tmp_path, monkeypatch, source), _line(source, "# the read"))


def test_conv_net_on_224_images_has_unknown_work(tmp_path, monkeypatch):
    assert _work(CONV_224) is None
    assert "GPU303" in _at(_lint(tmp_path, monkeypatch, CONV_224), _line(CONV_224, "# the read"))


def test_a_lookup_model_evaluates_launch_bound_but_trains_an_unknown_vocabulary(tmp_path, monkeypatch):
    findings = _lint(tmp_path, monkeypatch, WORD_LOOKUP)
    assert "GPU303" not in _at(findings, _line(WORD_LOOKUP, "# dev read"))
    assert "GPU405" not in _at(findings, _line(WORD_LOOKUP, "# the dev forward"))
    assert "GPU303" in _at(findings, _line(WORD_LOOKUP, "# train read"))  # Adam updates the whole table each step


def test_an_embedding_feeding_a_linear_per_token_has_unknown_work():
    source = WORD_LOOKUP.replace(
        "self.embedding = nn.Embedding(nwords, ntags)", "self.embedding = nn.Embedding(nwords, 64)\n        self.out = nn.Linear(64, 5)"
    ).replace("(self.embedding(words).sum(dim=0) + self.bias)", "self.out(self.embedding(words)).sum(dim=0)")
    assert _work(source) is None


def _flops(source: str) -> int | None:
    module = cst.parse_module(source)
    model = SemanticModel(module, "m.py")
    return model.model_size.forward_flops(module.body[-1].body[0].value)


def test_forward_flops_of_plain_layers_and_unknowns():
    head = "import torch\nimport torch.nn as nn\n"
    assert _flops(head + "m = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))") == 2 * (784 * 128 + 128 * 10)
    assert _flops(head + "m = nn.Sequential(nn.EmbeddingBag(1_000_000, 32), nn.Linear(32, 2))") == 2 * 32 * 2
    assert _flops(head + "m = nn.Embedding(1_000_000, 300)") == 0
    assert _flops(head + "m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten())") is None  # the image size
    assert _flops(head + "m = nn.LSTM(32, 64)") is None  # the time steps
    twice = head + (
        "class Twice(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 8)\n"
        "    def forward(self, x):\n        return self.fc(self.fc(x))\n\nm = Twice()"
    )
    assert _flops(twice) is None  # a layer run twice
    matmul = head + (
        "class Proj(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.randn(8, 8))\n"
        "    def forward(self, x):\n        return x @ self.w\n\nm = Proj()"
    )
    assert _flops(matmul) is None  # a product of its own
    foreign = head + "import ops\n" + (
        "class Proj(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(8, 8)\n"
        "    def forward(self, x):\n        return ops.mix(self.fc(x))\n\nm = Proj()"
    )
    assert _flops(foreign) is None  # a function of another module
    assert _flops(foreign.replace("ops.mix(self.fc(x))", "torch.relu(self.fc(x)) / math.sqrt(8)").replace("import ops", "import math")) == 2 * 8 * 8


def test_small_work_at_a_larger_batch_is_not_asked_yet(tmp_path, monkeypatch):
    source = _bag(64, 64)  # 5 MFLOP a step: launch-bound by the measurements, but the rules ask one-row steps only
    assert _work(source) == 3 * 2 * (64 * 64 + 64 * 4) * 64
    assert "GPU303" in _at(_lint(tmp_path, monkeypatch, source), _line(source, "# the read"))


def test_a_module_handed_to_the_class_has_unknown_work():
    head = "import torch\nimport torch.nn as nn\n"
    handed = head + (
        "class Head(nn.Module):\n    def __init__(self, body):\n        super().__init__()\n        self.body = body\n"
        "        self.fc = nn.Linear(768, 4)\n    def forward(self, x):\n        return self.fc(self.body(x))\n\nm = Head(load())"
    )
    assert _flops(handed) is None


LOG_LINEAR = """
import torch
import torch.nn as nn

N = 2
word_to_index = {}
for line in open("train.txt"):
    for word in line.split():
        word_to_index.setdefault(word, len(word_to_index))
dev_data = [[word_to_index[w] for w in line.split()] for line in open("dev.txt")]


class LogLinear(nn.Module):
    def __init__(self, number_of_words, ngram_length):
        super().__init__()
        self.embeddings = nn.ModuleList([nn.Embedding(number_of_words, number_of_words) for _ in range(ngram_length)])
        self.bias = nn.Parameter(torch.zeros(number_of_words))
        for i in range(ngram_length):
            nn.init.xavier_uniform_(self.embeddings[i].weight)

    def forward(self, x):
        embs = torch.cat([lookup(x) for x, lookup in zip(x.T, self.embeddings)]).view(N, x.shape[0], -1)
        return torch.sum(embs, dim=0) + self.bias


model = LogLinear(len(word_to_index), N).cuda()
model.eval()
total = 0.0
for sent in dev_data:
    histories = torch.tensor([sent[i : i + N] for i in range(len(sent) - N)]).cuda()
    logits = model(histories)  # the dev forward
    total += float(logits.logsumexp(-1).sum())
"""


def test_a_forward_that_repeats_lookups_in_a_comprehension_multiplies_nothing(tmp_path, monkeypatch):
    assert _flops(LOG_LINEAR[: LOG_LINEAR.index("model = ")] + "m = LogLinear(len(word_to_index), N)") == 0
    assert "GPU405" not in _at(_lint(tmp_path, monkeypatch, LOG_LINEAR), _line(LOG_LINEAR, "# the dev forward"))


def test_a_forward_that_repeats_a_linear_in_a_comprehension_has_unknown_work(tmp_path, monkeypatch):
    source = LOG_LINEAR.replace("nn.Embedding(number_of_words, number_of_words) for", "nn.Linear(N, 8) for")
    assert _flops(source[: source.index("model = ")] + "m = LogLinear(len(word_to_index), N)") is None
    assert "GPU405" in _at(_lint(tmp_path, monkeypatch, source), _line(source, "# the dev forward"))


def test_lookups_drawn_from_modules_handed_to_the_class_have_unknown_work(tmp_path, monkeypatch):
    source = LOG_LINEAR.replace(
        "nn.ModuleList([nn.Embedding(number_of_words, number_of_words) for _ in range(ngram_length)])", "tables"
    ).replace("def __init__(self, number_of_words, ngram_length):", "def __init__(self, number_of_words, ngram_length, tables):")
    source = source.replace("LogLinear(len(word_to_index), N)", "LogLinear(len(word_to_index), N, load())")
    assert _flops(source[: source.index("model = ")] + "m = LogLinear(len(word_to_index), N, load())") is None
    assert "GPU405" in _at(_lint(tmp_path, monkeypatch, source), _line(source, "# the dev forward"))


SENTENCE_LOSS = """
import torch
import torch.nn as nn

word_to_index = {}
for line in open("train.txt"):
    for word in line.split():
        word_to_index.setdefault(word, len(word_to_index))
train_data = [[word_to_index[w] for w in line.split()] for line in open("train.txt")]
dev_data = [[word_to_index[w] for w in line.split()] for line in open("dev.txt")]
model = nn.EmbeddingBag(len(word_to_index), len(word_to_index), mode="sum").cuda()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters())


def calc_sent_loss(sent):
    histories, targets = [], []
    for i in range(1, len(sent)):
        histories.append(sent[max(0, i - 2) : i])
        targets.append(sent[i])
    logits = model(torch.tensor(histories).cuda())
    return criterion(logits, torch.tensor(targets).cuda())


for epoch in range(10):
    model.train()
    for sent in train_data:
        loss = calc_sent_loss(sent)
        print(loss.item())  # train read
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    dev_loss = 0.0
    for sent in dev_data:
        with torch.no_grad():
            dev_loss += calc_sent_loss(sent).item()  # dev read
"""


def test_a_helper_that_runs_a_lookup_model_once_a_step_is_read(tmp_path, monkeypatch):
    assert _work(SENTENCE_LOSS) == 0  # the dev loop: lookups only, whatever the vocabulary
    findings = _lint(tmp_path, monkeypatch, SENTENCE_LOSS)
    assert "GPU303" not in _at(findings, _line(SENTENCE_LOSS, "# dev read"))
    assert "GPU303" in _at(findings, _line(SENTENCE_LOSS, "# train read"))  # Adam updates a vocabulary-squared table


def test_a_helper_that_runs_the_model_in_its_own_loop_is_not_read(tmp_path, monkeypatch):
    source = SENTENCE_LOSS.replace(
        "    logits = model(torch.tensor(histories).cuda())\n",
        "    logits = torch.cat([model(torch.tensor([h]).cuda()) for h in histories])\n",
    )
    assert _work(source) is None
    assert "GPU303" in _at(_lint(tmp_path, monkeypatch, source), _line(source, "# dev read"))


def test_a_helper_that_calls_another_function_of_the_module_is_not_read(tmp_path, monkeypatch):
    source = SENTENCE_LOSS.replace("    logits = model(", "    histories = pad(histories)\n    logits = model(").replace(
        "def calc_sent_loss(sent):", "def pad(rows):\n    return rows\n\n\ndef calc_sent_loss(sent):"
    )
    assert _work(source) is None
    assert "GPU303" in _at(_lint(tmp_path, monkeypatch, source), _line(source, "# dev read"))


def test_a_forward_that_calls_a_function_of_another_module_has_unknown_work():
    source = LOG_LINEAR.replace("import torch.nn as nn\n", "import torch.nn as nn\nimport ops\n").replace(
        "return torch.sum(embs, dim=0) + self.bias", "return ops.project(torch.sum(embs, dim=0)) + self.bias"
    )
    assert _flops(source[: source.index("model = ")] + "m = LogLinear(len(word_to_index), N)") is None
