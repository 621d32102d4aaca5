"""A helper that walks a GPU tensor element by element with a host read each (`element_passes.py`), run by an
epoch loop's evaluation: no step loop is around the read, but each call waits once per element (thousands of
waits a call). Shape after a LightGCN notebook (grouping the GPU edges by user, then listing each user's items);
negatives beside each: the walk over a host copy, a helper run once after training, a call under a step loop's
log interval, a loop over a few options."""

from __future__ import annotations

import json

from tests.conftest import findings
from tests.projects_helper import found, lint, write

SOURCE = """
import torch
from torch import nn, optim

edge_index = torch.randint(0, 1000, (2, 100000))
train_edge_index = edge_index[:, :80000]
val_edge_index = edge_index[:, 80000:]


class Recommender(nn.Module):
    def __init__(self, users, items, dim=64):
        super().__init__()
        self.users = nn.Embedding(users, dim)
        self.items = nn.Embedding(items, dim)
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(4))

    def forward(self, edge_index):
        emb = torch.cat([self.users.weight, self.items.weight])
        for layer in self.layers:
            emb = layer(emb)
        return emb


def user_items(edge_index):
    grouped = {}
    for i in range(edge_index.shape[1]):
        user = edge_index[0][i].item()
        item = edge_index[1][i].item()
        grouped.setdefault(user, []).append(item)
    return grouped


def metrics(model, edge_index):
    scores = model.users.weight @ model.items.weight.T
    _, top = torch.topk(scores, k=20)
    users = edge_index[0].unique()
    truth = user_items(edge_index)
    listed = [truth[user.item()] for user in users]
    hits = []
    for user in users:
        hits.append(len(truth[user.item()]))
    return listed, hits


device = torch.device("cuda")
model = Recommender(1000, 1000).to(device)
train_edge_index = train_edge_index.to(device)
val_edge_index = val_edge_index.to(device)
optimizer = optim.Adam(model.parameters(), lr=0.001)
for epoch in range(31):
    for _ in range(78):
        optimizer.zero_grad()
        emb = model(train_edge_index)
        loss = emb[train_edge_index[0, :1024]].pow(2).mean()
        loss.backward()
        optimizer.step()
    if epoch % 5 == 0:
        results = metrics(model, val_edge_index)
"""


def test_a_walk_over_a_gpu_tensor_in_an_evaluation_helper_waits_per_element():
    assert findings(SOURCE, rule_options=(), select=("GPU303",)) == ["27:16 GPU303", "38:21 GPU303", "41:31 GPU303"]


def test_the_message_names_the_walk_and_the_call():
    from tests.conftest import diagnostics

    first = diagnostics(SOURCE, rule_options=(), select=("GPU303",))[0]
    assert first.message == (
        "`edge_index[0][i].item()` waits for the GPU once per element of `edge_index` (loop at line 26), on every "
        "call of the pass at line 58, as does the read after it at line 28 (only light GPU work queued in between: one wait)"
    )
    assert first.help.startswith("It waits once per element of the GPU tensor `edge_index` (as many waits a call as it has elements")


def test_walks_over_a_host_copy_are_silent():
    host = (
        SOURCE.replace("for i in range(edge_index.shape[1]):\n        user = edge_index[0][i].item()\n        item = edge_index[1][i].item()",
                       "for user, item in edge_index.t().tolist():")
        .replace("for user in users]", "for user in users.tolist()]")
        .replace("    for user in users:\n        hits.append(len(truth[user.item()]))", "    for user in users.tolist():\n        hits.append(len(truth[user]))")
    )  # fmt: skip
    assert findings(host, rule_options=(), select=("GPU303",)) == []


def test_a_walk_run_once_after_training_is_silent():
    once = SOURCE.replace("    if epoch % 5 == 0:\n        results = metrics(model, val_edge_index)\n", "results = metrics(model, val_edge_index)\n")
    assert findings(once, rule_options=(), select=("GPU303",)) == []


def test_a_walk_under_a_step_loops_log_interval_is_silent():
    logged = SOURCE.replace("    for _ in range(78):\n", "    for step in range(78):\n").replace(
        "        optimizer.step()\n    if epoch % 5 == 0:\n        results = metrics(model, val_edge_index)\n",
        "        optimizer.step()\n        if step % 50 == 0:\n            results = metrics(model, val_edge_index)\n",
    )
    assert findings(logged, rule_options=(), select=("GPU303",)) == []


def test_a_loop_over_something_else_is_not_a_walk():
    # the innermost loop iterates a few options; the read indexes the tensor with a constant: one read an option
    options = SOURCE.replace("    for i in range(edge_index.shape[1]):\n        user = edge_index[0][i].item()\n        item = edge_index[1][i].item()",
                             "    for i in (0, 1):\n        user = edge_index[0][0].item()\n        item = edge_index[1][0].item()")  # fmt: skip
    assert "27:16 GPU303" not in findings(options, rule_options=(), select=("GPU303",))


def test_a_notebook_defines_the_helpers_in_one_cell_and_evaluates_in_another(tmp_path, monkeypatch):
    helpers, _, loop = SOURCE.partition('device = torch.device("cuda")\n')
    cells = [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": part.strip("\n").splitlines(True)}
             for part in (helpers, 'device = torch.device("cuda")\n' + loop)]  # fmt: skip
    notebook = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    root = write(tmp_path, {"main.py": ""})
    (root / "chapter.ipynb").write_text(json.dumps(notebook))
    diagnostics = lint(root, monkeypatch, files=["chapter.ipynb"], select=("GPU303",), rule_options=())
    assert [d.location.row for d in diagnostics] == [26, 37, 40]  # rows within the first cell


def test_a_comprehension_over_a_host_copy_made_before_is_silent():
    # `host = t.cpu()` first: its rows are CPU tensors, `row.tolist()` reads nothing from the GPU
    copied = SOURCE.replace("    listed = [truth[user.item()] for user in users]\n",
                            "    host = users.cpu()\n    listed = [truth[user.item()] for user in host]\n")  # fmt: skip
    assert findings(copied, rule_options=(), select=("GPU303",)) == ["27:16 GPU303", "42:31 GPU303"]


def test_a_loop_that_breaks_after_its_first_pass_is_one_off():
    # the epoch loop ends in `break`: one call, however many elements the helper walks; every epoch: reported
    every = SOURCE.replace("    if epoch % 5 == 0:\n        results = metrics(model, val_edge_index)\n",
                           "    results = metrics(model, val_edge_index)\n")  # fmt: skip
    assert findings(every, rule_options=(), select=("GPU303",)) == ["27:16 GPU303", "38:21 GPU303", "41:31 GPU303"]
    assert findings(every + "    break\n", rule_options=(), select=("GPU303",)) == []


PREDICT = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(64, 3) for _ in range(4))

    def forward(self, x):
        return [head(x) for head in self.heads], None


net = MultiTask().cuda()
loader = DataLoader(TensorDataset(torch.randn(5000, 64)), batch_size=256)
results = []
for (data,) in loader:
    output, _ = net(data.cuda())
    results.append([torch.argmax(task_output, dim=1).cpu().numpy() for task_output in output])
"""


def test_a_comprehension_over_a_models_outputs_is_no_walk_over_a_tensor():
    # `output` unpacked from a model's call may be a list of heads: its elements are not taken to be a tensor's
    assert findings(PREDICT, select=("GPU303",)) == []
