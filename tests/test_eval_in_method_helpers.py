"""GPU405 where the evaluation runs in methods of a trainer class (`analysis/evaluation.py`), fifteenth corpus's
clear labels: a validation loop that calls a method of the same class which runs `self.model` (Informer's
`vali`: `pred, true = self._process_one_batch(...)`), and the training epoch method reused for the validation
pass after `self.model.eval()` with a flag that skips its training step (Speech-Transformer's
`self._run_one_epoch(epoch, cross_valid=True)` with `if not cross_valid: loss.backward(); optimizer.step()`).
Both only where the evaluation repeats (once an epoch); negatives: the same shapes under `torch.no_grad()`, a helper
that trains, a call whose flag leaves the training step on, and a test pass run once."""

from __future__ import annotations

from tests.conftest import diagnostics, findings

GPU405 = {"select": ("GPU405",)}

VALI = """\
import torch
from models import Informer


class Exp:
    def __init__(self, args):
        self.model = Informer(args).cuda()
        self.optim = torch.optim.Adam(self.model.parameters())

    def _process_one_batch(self, x, y):
        out = self.model(x.cuda())
        return out, y.cuda()

    def vali(self, loader):
        self.model.eval()
        total = []
        for x, y in loader:
            pred, true = self._process_one_batch(x, y)
            total.append(((pred - true) ** 2).mean().item())
        self.model.train()
        return sum(total) / len(total)

    def train(self, train_loader, vali_loader, epochs):
        for epoch in range(epochs):
            self.model.train()
            for x, y in train_loader:
                pred, true = self._process_one_batch(x, y)
                loss = ((pred - true) ** 2).mean()
                self.optim.zero_grad()
                loss.backward()
                self.optim.step()
            print(self.vali(vali_loader))
"""


def test_a_method_helper_that_runs_the_model_is_followed():
    assert findings(VALI, **GPU405) == ["18:26 GPU405"]
    [d] = diagnostics(VALI, **GPU405)
    assert "(in `_process_one_batch`, called here)" in d.message


def test_a_method_helper_under_no_grad_is_not_reported():
    guarded = VALI.replace("    def vali(self, loader):", "    @torch.no_grad()\n    def vali(self, loader):")
    assert findings(guarded, **GPU405) == []
    inside = VALI.replace("        out = self.model(x.cuda())", "        with torch.no_grad():\n            out = self.model(x.cuda())")
    assert findings(inside, **GPU405) == []


def test_a_method_helper_that_trains_is_not_an_evaluation():
    trains = VALI.replace("        return out, y.cuda()", "        ((out - y.cuda()) ** 2).mean().backward()\n        return out, y.cuda()")
    assert findings(trains, **GPU405) == []


def test_a_test_pass_run_once_is_not_reported_through_a_method_helper():
    once = VALI.replace("            print(self.vali(vali_loader))", "        print(self.vali(vali_loader))")
    assert findings(once, **GPU405) == []


EPOCH = """\
import torch


class Solver:
    def __init__(self, model, tr_loader, cv_loader, optimizer, epochs):
        self.model = model
        self.tr_loader, self.cv_loader = tr_loader, cv_loader
        self.optimizer = optimizer
        self.epochs = epochs

    def train(self):
        for epoch in range(self.epochs):
            self.model.train()
            tr_loss = self._run_one_epoch(epoch)
            self.model.eval()
            val_loss = self._run_one_epoch(epoch, {flag})
            print(tr_loss, val_loss)

    def _run_one_epoch(self, epoch, cross_valid=False):
        total = 0.0
        loader = self.tr_loader if not cross_valid else self.cv_loader
        for x, y in loader:
            pred = self.model(x.cuda())
            loss = torch.nn.functional.cross_entropy(pred, y.cuda())
            if not cross_valid:
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            total += loss.item()
        return total
"""


def test_the_training_epoch_reused_for_validation_is_reported():
    source = EPOCH.format(flag="cross_valid=True")
    assert findings(source, **GPU405) == ["23:20 GPU405"]
    [d] = diagnostics(source, **GPU405)
    assert d.message == (
        "`self.model` runs in a loop of `_run_one_epoch` with autograd on when it is called after `self.model.eval()` (line 16)"
    )
    assert findings(EPOCH.format(flag="True"), **GPU405) == ["23:20 GPU405"]  # by position


def test_the_training_epoch_with_its_training_step_on_is_not_reported():
    assert findings(EPOCH.format(flag="cross_valid=False"), **GPU405) == []
    assert findings(EPOCH.format(flag="cross_valid=args.cv"), **GPU405) == []  # not known: the step may train
    unguarded = EPOCH.format(flag="cross_valid=True").replace("            if not cross_valid:\n", "            if True:\n")
    assert findings(unguarded, **GPU405) == []


def test_the_reused_epoch_under_no_grad_is_not_reported():
    source = EPOCH.format(flag="cross_valid=True").replace(
        "            val_loss = self._run_one_epoch(epoch, cross_valid=True)",
        "            with torch.no_grad():\n                val_loss = self._run_one_epoch(epoch, cross_valid=True)",
    )
    assert findings(source, **GPU405) == []


def test_an_evaluation_helper_called_after_eval_every_epoch_is_reported():
    source = """\
import torch

model = Net().cuda()


def evaluate(loader):
    correct = 0
    for x, y in loader:
        correct += (model(x.cuda()).argmax(1) == y.cuda()).sum().item()
    return correct


for epoch in range(10):
    model.train()
    for x, y in train_loader:
        loss = criterion(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    print(evaluate(val_loader))
"""
    assert findings(source, **GPU405) == ["9:21 GPU405"]
    # called once after training: a one-off test pass, not asked here
    once = source.replace("    model.eval()\n    print(evaluate(val_loader))\n", "model.eval()\nprint(evaluate(val_loader))\n")
    assert findings(once, **GPU405) == []
