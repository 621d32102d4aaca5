"""GPU405 and a few samples an epoch (`few_samples.few_samples_per_epoch`): an evaluation loop of at most ten
iterations written in the code (`for _ in range(5): print(generate_sent())`) in an epoch loop that also trains over
data records a few graphs an epoch, a small share of the run whatever the model (the fourteenth corpus's
"one-off-generation"). Negatives: the same sampling beside a training loop of three steps, a per-epoch evaluation
over a validation set, and sampling in an epoch loop that trains nothing.
"""

from __future__ import annotations

from tests.projects_helper import found, lint, write

LANGUAGE_MODEL = """
import torch
import torch.nn as nn

model = nn.Sequential(nn.Embedding(10000, 128), nn.Linear(128, 10000)).cuda()
optimizer = torch.optim.Adam(model.parameters())
train_data = [torch.randint(0, 10000, (25,)) for _ in range(TRAIN_SIZE)]


def generate_sent():
    sent = [0]
    while len(sent) < 100:
        logits = model(torch.tensor(sent[-1:], device="cuda"))  # the sampling forward
        sent.append(int(torch.multinomial(logits.softmax(-1)[0], 1)))
    return sent


for epoch in range(10):
    model.train()
    for sent in TRAIN_ITERATED:
        loss = nn.functional.cross_entropy(model(sent[:-1].cuda()), sent[1:].cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    for _ in SAMPLES:
        print(generate_sent())  # the samples
"""


def _source(train: str = "train_data", samples: str = "range(5)", size: str = "40000") -> str:
    return LANGUAGE_MODEL.replace("TRAIN_ITERATED", train).replace("SAMPLES", samples).replace("TRAIN_SIZE", size)


def _gpu405(tmp_path, monkeypatch, source: str) -> list[int]:
    findings = found(lint(write(tmp_path, {"train.py": source}), monkeypatch, select=("GPU405",)))
    return sorted(int(f.split()[0].split(":")[1]) for f in findings)


def _line(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


def test_five_samples_an_epoch_beside_training_over_the_data_are_not_reported(tmp_path, monkeypatch):
    assert _gpu405(tmp_path, monkeypatch, _source()) == []


def test_a_few_hand_written_prompts_an_epoch_are_not_reported(tmp_path, monkeypatch):
    assert _gpu405(tmp_path, monkeypatch, _source(samples='["the", "a", "one"]')) == []


def test_sampling_beside_a_training_loop_of_three_steps_is_reported(tmp_path, monkeypatch):
    source = _source(train="train_data[:3]")
    assert _gpu405(tmp_path, monkeypatch, source) == [_line(source, "# the samples")]


def test_more_samples_than_a_few_are_reported(tmp_path, monkeypatch):
    source = _source(samples="range(50)")
    assert _gpu405(tmp_path, monkeypatch, source) == [_line(source, "# the samples")]


def test_a_per_epoch_evaluation_over_a_validation_set_is_reported(tmp_path, monkeypatch):
    source = _source(samples="train_data[:1000]").replace("print(generate_sent())  # the samples", "print(model(_.cuda()))  # the evaluation")
    assert _gpu405(tmp_path, monkeypatch, source) == [_line(source, "# the evaluation")]


def test_sampling_in_an_epoch_loop_that_trains_nothing_is_reported(tmp_path, monkeypatch):
    source = _source().replace("        loss.backward()\n        optimizer.step()\n", "        print(loss.item())\n")
    assert _gpu405(tmp_path, monkeypatch, source) == [_line(source, "# the samples")]
