"""GPU204 in methods (issue 14, points 4 and 6): a method that runs every step copies to the GPU data that only
`__init__` writes, so the copy is the same every step (`analysis/helper_copies.py`, `method_copies`). The shape
after a graph-sampling class that keeps the features on the host and hands them out each full-graph epoch through a
helper method whose copy sits under a `cuda` flag; each call of the helper is judged alone (one passes a fresh
slice). Also: a module-level helper's copy under a flag the same at every call."""

from __future__ import annotations

from tests.conftest import diagnostics, findings
from tests.projects_helper import lint, lint_written

SAMPLER = """\
import numpy as np
import torch


class GraphData:
    def __init__(self, features, labels, adj):
        self.features = torch.FloatTensor(features)
        self.labels = torch.LongTensor(labels)
        self.adj = adj
        self.cache = {}

    def _to_device(self, x, cuda):
        if cuda:
            return x.cuda()
        else:
            return x

    def full(self, cuda):
        return self.adj, self._to_device(self.features, cuda)

    def dropped(self, percent, cuda):
        keep = np.random.rand(self.features.shape[0]) < percent
        return self.adj, self._to_device(self.features[keep], cuda)
"""

TRAIN = """\
import argparse
import torch
from graph_data import GraphData
from loading import load

parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_true")
args = parser.parse_args()
data = GraphData(*load())
model = torch.nn.Linear(16, 4).cuda()
optimizer = torch.optim.Adam(model.parameters())

for epoch in range(200):
    adj, features = data.{sampler}
    optimizer.zero_grad()
    loss = model(features).sum()
    loss.backward()
    optimizer.step()
"""


def _project(tmp_path, monkeypatch, sampler=SAMPLER, call="full(args.cuda)"):
    files = {"graph_data.py": sampler, "train.py": TRAIN.replace("{sampler}", call)}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU204")]


def test_a_helper_method_copying_an_attribute_only_init_writes_every_step_is_reported_at_the_copy(tmp_path, monkeypatch):
    assert _project(tmp_path, monkeypatch) == ["graph_data.py:14 GPU204"]
    [d] = [d for d in lint(tmp_path, monkeypatch) if d.code == "GPU204"]
    assert d.message == (
        "`x.cuda()` copies the same `self.features` (passed by the call at line 19) to the GPU on every call of "
        "`GraphData._to_device`, which runs every step (train.py:14)"
    )
    assert d.severity.value == "warning"
    assert [(what, where.row) for what, where in d.related] == [("the call", 19)]


def test_a_call_that_passes_a_fresh_slice_is_not_the_same_copy(tmp_path, monkeypatch):
    # `dropped` runs every step, but hands `_to_device` a new slice each time: nothing to hoist
    assert _project(tmp_path, monkeypatch, call="dropped(0.5, args.cuda)") == []


def test_an_attribute_another_method_writes_or_changes_in_place_may_differ_between_steps(tmp_path, monkeypatch):
    rewritten = SAMPLER + "\n    def renormalize(self):\n        self.features = self.features / 2\n"
    assert _project(tmp_path, monkeypatch, sampler=rewritten) == []
    in_place = SAMPLER + "\n    def renormalize(self):\n        self.features.div_(2)\n"
    assert _project(tmp_path, monkeypatch, sampler=in_place) == []
    item = SAMPLER + "\n    def mask(self, rows):\n        self.features[rows] = 0\n"
    assert _project(tmp_path, monkeypatch, sampler=item) == []


def test_an_attribute_init_puts_on_the_gpu_is_copied_for_free(tmp_path, monkeypatch):
    on_gpu = SAMPLER.replace("self.features = torch.FloatTensor(features)", "self.features = torch.FloatTensor(features).cuda()")
    assert _project(tmp_path, monkeypatch, sampler=on_gpu) == []


def test_a_method_run_once_before_the_loop_is_set_up(tmp_path, monkeypatch):
    once = TRAIN.replace("{sampler}", "adj").replace("data = GraphData(*load())", "data = GraphData(*load())\nadj, features = data.full(args.cuda)")
    found = lint_written(tmp_path, {"graph_data.py": SAMPLER, "train.py": once}, monkeypatch)
    assert [f for f in found if f.endswith("GPU204")] == []


def test_a_flag_computed_at_the_call_is_not_the_same_at_every_call(tmp_path, monkeypatch):
    # the copy runs on every tenth call only: the flag is not a device choice for the run
    computed = SAMPLER.replace("self._to_device(self.features, cuda)", "self._to_device(self.features, cuda and len(self.cache) % 10 == 0)")
    assert _project(tmp_path, monkeypatch, sampler=computed) == []


def test_a_guard_that_is_not_a_flag_keeps_the_copy_off_some_calls(tmp_path, monkeypatch):
    guarded = SAMPLER.replace("        if cuda:\n            return x.cuda()", "        if x.shape[0] > 10000:\n            return x.cuda()")
    assert _project(tmp_path, monkeypatch, sampler=guarded) == []


TRAINER = """\
import torch
from data import load

model = torch.nn.Linear(16, 4).cuda()


class Trainer:
    def __init__(self, model, features, labels):
        self.model = model
        self.features = torch.as_tensor(features)
        self.labels = torch.as_tensor(labels)
        self.optimizer = torch.optim.Adam(model.parameters())

    def step(self):
        self.optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(self.features.cuda()), self.labels.cuda())
        loss.backward()
        self.optimizer.step()

    def fit(self, epochs):
        for epoch in range(epochs):
            self.step()


Trainer(model, *load()).fit(100)
"""


def test_a_method_a_step_loop_of_its_class_calls_copies_init_only_attributes_every_step():
    assert findings(TRAINER, select=("GPU204",)) == ["16:61 GPU204", "16:84 GPU204"]
    first, _ = diagnostics(TRAINER, select=("GPU204",))
    assert first.message == (
        "`self.features.cuda()` copies the same `self.features` to the GPU on every call of `Trainer.step`, "
        "which runs every step (train.py:22)"
    )


def test_attributes_reassigned_by_the_loop_s_own_method_are_new_data():
    reloaded = TRAINER.replace("            self.step()", "            self.features, self.labels = load()\n            self.step()")
    assert findings(reloaded, select=("GPU204",)) == []
    every_tenth = TRAINER.replace("            self.step()", "            if epoch % 10 == 0:\n                self.step()")
    assert findings(every_tenth, select=("GPU204",)) == []


HELPER_FLAG = """\
import argparse
import torch
import torch.nn.functional as F
from data import load_citation

parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_true")
args = parser.parse_args()
features, labels, idx_train = load_citation()
model = torch.nn.Linear(8, 4).cuda()
optimizer = torch.optim.Adam(model.parameters())


def train():
    optimizer.zero_grad()
    target = labels[idx_train]
    if args.cuda:
        target = labels[idx_train].cuda()
    loss = F.nll_loss(model(features.cuda())[idx_train], target)
    loss.backward()
    optimizer.step()


for epoch in range(200):
    train()
"""


def test_a_module_level_helper_s_copy_under_a_run_wide_flag_is_the_same_copy_every_call():
    assert findings(HELPER_FLAG, select=("GPU204",)) == ["18:18 GPU204", "19:29 GPU204"]


def test_a_module_level_helper_s_copy_under_a_per_step_condition_is_not():
    every_tenth = HELPER_FLAG.replace("    if args.cuda:\n", "    if epoch % 10 == 0:\n")
    assert findings(every_tenth, select=("GPU204",)) == ["19:29 GPU204"]
    stepped_state = HELPER_FLAG.replace("    if args.cuda:\n", "    if optimizer.state:\n")
    assert findings(stepped_state, select=("GPU204",)) == ["19:29 GPU204"]  # (the optimizer's step changes it)


def test_attributes_the_constructor_is_handed_on_the_gpu_are_copied_for_free():
    on_gpu = TRAINER.replace("from data import load\n", "from data import load\n\nfeatures, labels = load()\n").replace(
        "Trainer(model, *load()).fit(100)", "Trainer(model, features.cuda(), labels.cuda()).fit(100)"
    )
    assert findings(on_gpu, select=("GPU204",)) == []


INSTANCE = """\
import torch
import torch.nn.functional as F
from data import load_citation, loader

features, labels = load_citation()


class FullBatch:
    def __init__(self, model, use_cuda):
        self.model = model
        self.use_cuda = use_cuda
        self.optimizer = torch.optim.Adam(model.parameters())

    def step(self, x, y):
        if self.use_cuda:
            x, y = x.cuda(), y.cuda()
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()


def main():
    trainer = FullBatch(torch.nn.Linear(8, 4).cuda(), True)
    for epoch in range(200):
        trainer.step(features, labels)
"""


def test_a_method_a_step_loop_calls_on_an_instance_with_unchanged_arguments_copies_them_every_step():
    assert findings(INSTANCE, select=("GPU204",)) == ["16:20 GPU204", "16:30 GPU204"]
    first, _ = diagnostics(INSTANCE, select=("GPU204",))
    assert first.message == (
        "`x.cuda()` copies the same `features` (passed by the call at line 26) to the GPU on every call of "
        "`FullBatch.step`, which runs every step (train.py:26)"
    )


def test_a_method_a_step_loop_hands_its_batches_copies_new_data():
    batches = INSTANCE.replace("    for epoch in range(200):\n        trainer.step(features, labels)", "    for x, y in loader:\n        trainer.step(x, y)")
    assert findings(batches, select=("GPU204",)) == []
    another = INSTANCE.replace("    trainer = FullBatch(", "    trainer = make_trainer(")
    assert findings(another, select=("GPU204",)) == []  # (an instance of some other class: not followed)


def test_a_subclass_method_that_rewrites_the_attribute_makes_it_change():
    subclass = TRAINER.replace(
        "\n\nTrainer(model, *load()).fit(100)",
        "\n\nclass Resampling(Trainer):\n    def resample(self):\n        self.features = self.features[torch.randperm(len(self.features))]\n\n\nTrainer(model, *load()).fit(100)",
    )
    assert findings(subclass, select=("GPU204",)) == ["16:84 GPU204"]


def test_an_attribute_another_module_assigns_on_the_object_may_change(tmp_path, monkeypatch):
    files = {
        "graph_data.py": SAMPLER,
        "train.py": TRAIN.replace("{sampler}", "full(args.cuda)"),
        "augment.py": "def perturb(data, noise):\n    data.features = data.features + noise\n",
    }
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if f.endswith("GPU204")] == []


HELD = """\
import torch
import torch.nn as nn


class Trainer:
    def __init__(self, net):
        self.net = net
        self.weight = nn.Parameter(torch.ones(3))
        self.encoder = torch.nn.Linear(3, 3)
        self.classes = torch.arange(10)
        self.mask = torch.tensor([[0, 1], [1, 0]]).float()
        self.table = torch.zeros(4096, 1024)

    def step(self, x):
        net = self.net.cuda()
        weight = self.weight.cuda()
        encoder = self.encoder.cuda()
        classes, mask = self.classes.cuda(), self.mask.cuda()
        loss = net(x).sum() + weight.sum() + encoder(x).sum() + classes.sum() + mask.sum()
        loss = loss + (self.table.cuda()[:4] * 2).sum()
        loss.backward()

    def fit(self, loader):
        for x in loader:
            self.step(x)
"""


def test_modules_parameters_and_tensors_of_a_literal_small_size_are_not_reported_large_ones_are():
    # a module or parameter is GPU203's (and moves with its module); a literal 80-byte table copied every step
    # measured at the noise (cost_facts section 1); a 16 MB one does not
    assert findings(HELD, select=("GPU204",)) == ["20:24 GPU204"]
