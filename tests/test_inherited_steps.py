"""Host reads in code a step loop runs through a class hierarchy or a rebound name (issue 14, classes A and F,
eleventh corpus): a subclass in another module that overrides the `train_step` its base class's loop calls every
step, with the model its callers give the inherited constructor moved to the GPU (decision-transformer's gym
`SequenceTrainer(Trainer)`); an evaluation loop that rebinds the output to its host copy
(`output_batch = output_batch.data.cpu().numpy()`, CS230's `evaluate`), which carries nothing to the next batch.

Negatives beside each: a CPU model, a subclass that brings its own loop, a base method run once per epoch, a read
under `if step % log_every == 0`, and a decoding loop that feeds the host value back into the model.
"""

from __future__ import annotations

from tests.projects_helper import lint_written

TRAINER = """
import torch


class Trainer:
    def __init__(self, model, optimizer, get_batch, log_every=100):
        self.model = model
        self.optimizer = optimizer
        self.get_batch = get_batch
        self.log_every = log_every
        self.step = 0

    def train_iteration(self, num_steps):
        losses = []
        self.model.train()
        for _ in range(num_steps):
            losses.append(self.train_step())
            self.step += 1
        self.end_of_epoch()
        return losses

    def train_step(self):
        x, y = self.get_batch()
        loss = ((self.model(x) - y) ** 2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def end_of_epoch(self):
        pass
"""

SEQ_TRAINER = """
import torch

from trainer import Trainer


class SequenceTrainer(Trainer):
    def train_step(self):
        x, y = self.get_batch()
        preds = self.model.forward(x)
        loss = ((preds - y) ** 2).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach().cpu().item()

    def end_of_epoch(self):
        weights = self.model.head.weight.norm().item()
        print(weights)
"""

EXPERIMENT = """
import argparse

import torch

from seq_trainer import SequenceTrainer


def get_batch():
    return torch.randn(64, 16, device="cuda"), torch.randn(64, 1, device="cuda")


def main(variant):
    device = variant.get("device", "cuda")
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    model = model.to(device=device)
    optimizer = torch.optim.AdamW(model.parameters())
    trainer = SequenceTrainer(model=model, optimizer=optimizer, get_batch=get_batch)
    for _ in range(10):
        trainer.train_iteration(num_steps=10000)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", type=str, default="cuda")
    main(vars(parser.parse_args()))
"""


def test_override_of_a_base_step_in_another_module_reports_its_read(tmp_path, monkeypatch):
    files = {"trainer.py": TRAINER, "seq_trainer.py": SEQ_TRAINER, "experiment.py": EXPERIMENT}
    found = lint_written(tmp_path, files, monkeypatch)
    assert "seq_trainer.py:15 GPU303" in found
    assert not any(f.startswith("seq_trainer.py:18") for f in found)  # `end_of_epoch` runs once per epoch


def test_override_is_silent_when_callers_give_a_cpu_model(tmp_path, monkeypatch):
    experiment = EXPERIMENT.replace("model = model.to(device=device)", "model = model.to(\"cpu\")")
    files = {"trainer.py": TRAINER, "seq_trainer.py": SEQ_TRAINER, "experiment.py": experiment}
    assert not any("GPU303" in f for f in lint_written(tmp_path, files, monkeypatch))


def test_override_is_not_stepped_when_the_subclass_brings_its_own_loop(tmp_path, monkeypatch):
    own_loop = SEQ_TRAINER.replace("    def end_of_epoch(self):", """    def train_iteration(self, num_steps):
        for step in range(num_steps):
            if step % 1000 == 0:
                self.train_step()

    def end_of_epoch(self):""")
    files = {"trainer.py": TRAINER, "seq_trainer.py": own_loop, "experiment.py": EXPERIMENT}
    assert not any(f.startswith("seq_trainer.py:15") for f in lint_written(tmp_path, files, monkeypatch))


def test_read_under_a_log_interval_in_the_override_stays_silent(tmp_path, monkeypatch):
    guarded = SEQ_TRAINER.replace("        return loss.detach().cpu().item()", """        if self.step % self.log_every == 0:
            print(loss.detach().cpu().item())
        return loss.detach()""")
    files = {"trainer.py": TRAINER, "seq_trainer.py": guarded, "experiment.py": EXPERIMENT}
    assert not any("GPU303" in f for f in lint_written(tmp_path, files, monkeypatch))


EVALUATE = """
import numpy as np
import torch


def evaluate(model, loss_fn, dataloader, metrics, params):
    model.eval()
    summ = []
    for data_batch, labels_batch in dataloader:
        if params.cuda:
            data_batch, labels_batch = data_batch.cuda(non_blocking=True), labels_batch.cuda(non_blocking=True)
        output_batch = model(data_batch)
        loss = loss_fn(output_batch, labels_batch)
        output_batch = output_batch.data.cpu().numpy()
        labels_batch = labels_batch.data.cpu().numpy()
        summary_batch = {metric: metrics[metric](output_batch, labels_batch) for metric in metrics}
        summary_batch["loss"] = loss.item()
        summ.append(summary_batch)
    return {metric: np.mean([x[metric] for x in summ]) for metric in summ[0]}
"""

TRAIN = """
import torch
import torch.nn.functional as F

from evaluate import evaluate


class Params:
    cuda = torch.cuda.is_available()


def accuracy(outputs, labels):
    return float((outputs.argmax(1) == labels).mean())


def main(val_loader):
    params = Params()
    model = torch.nn.Linear(32, 10).cuda() if params.cuda else torch.nn.Linear(32, 10)
    for epoch in range(10):
        evaluate(model, F.cross_entropy, val_loader, {"accuracy": accuracy}, params)
"""


def test_evaluation_output_rebound_to_its_host_copy_is_reported(tmp_path, monkeypatch):
    found = lint_written(tmp_path, {"evaluate.py": EVALUATE, "train.py": TRAIN}, monkeypatch)
    assert "evaluate.py:14 GPU303" in found


DECODE = """
import torch


def greedy(model, memory, start, steps=50):
    token = torch.tensor([[start]], device="cuda")
    tokens = []
    for _ in range(steps):
        out = model(memory, token)
        word = out[:, -1].argmax(-1).item()
        tokens.append(word)
        token = torch.tensor([[word]], device="cuda")
    return tokens


def main(memory):
    model = torch.nn.Bilinear(64, 1, 100).cuda().eval()
    with torch.no_grad():
        for batch in range(100):
            greedy(model, memory, 1)
"""


def test_decoding_read_fed_back_into_the_model_stays_silent(tmp_path, monkeypatch):
    assert not any("GPU303" in f for f in lint_written(tmp_path, {"decode.py": DECODE}, monkeypatch))


GENERATION_EVAL = """
import numpy as np
import torch
from transformers import AutoModelForSeq2SeqLM


def main(eval_dataloader, tokenizer, metric):
    model = AutoModelForSeq2SeqLM.from_pretrained("t5-small").cuda()
    for epoch in range(3):
        model.eval()
        for batch in eval_dataloader:
            batch = {k: v.cuda() for k, v in batch.items()}
            with torch.no_grad():
                generated_tokens = model.generate(batch["input_ids"], attention_mask=batch["attention_mask"])
            generated_tokens = generated_tokens.cpu().numpy()
            labels = batch["labels"].cpu().numpy()
            metric.add_batch(predictions=tokenizer.batch_decode(generated_tokens), references=tokenizer.batch_decode(labels))
"""


def test_copies_beside_generate_in_an_evaluation_loop_stay_silent(tmp_path, monkeypatch):
    found = lint_written(tmp_path, {"evaluate_gen.py": GENERATION_EVAL}, monkeypatch)
    assert not any("GPU303" in f for f in found)


def test_copies_in_the_same_loop_without_generate_are_reported(tmp_path, monkeypatch):
    forward = GENERATION_EVAL.replace("model.generate(batch[\"input_ids\"], attention_mask=batch[\"attention_mask\"])", "model(**batch).logits.argmax(-1)")
    found = lint_written(tmp_path, {"evaluate_gen.py": forward}, monkeypatch)
    assert "evaluate_gen.py:15 GPU303" in found
