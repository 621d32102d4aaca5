"""Issue 13's N5 noise on the ninth corpus (`bench/results/recall_i.md`): GPU303 reads in loops that are bound
elsewhere. Minimal shapes of our own after OGB's link-prediction and node-property scripts:

- an evaluation over an in-process index loader of large batches (`for perm in DataLoader(range(n), 64 * 1024):
  preds += [predictor(h[e[perm, 0]] * h[e[perm, 1]]).cpu()]`, `analysis/index_loaders.py`): the loader is the loop's
  cost (GPU101 reports it), the copy waits for a forward shorter than the next batch's Python;
- full-batch training, one step an epoch (`for epoch in range(500): loss = train(model, x, y, idx, optimizer)`,
  `analysis/full_batch.py`) with an evaluation read on the host every epoch: no batch to load while the step runs,
  the iteration waits at the evaluation anyway, the read costs the evaluation's launches.

What stays: the loss read of a training loop over the same index loader, evaluations over small index batches,
over loaders with workers or over datasets, a batch size not known, and steps given data made in the loop
(`get_batch()`, a GAN's noise), batches drawn from a loader in an epoch-style `range` loop, full-batch steps with
no evaluation every epoch."""

from __future__ import annotations

from tests.conftest import UNPROVEN_READ, diagnostics, findings

LINK_PREDICTION = """\
import argparse
import torch
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--batch_size", type=int, default=64 * 1024)
args = parser.parse_args()
device = torch.device("cuda")


def train(model, predictor, x, edges, optimizer, batch_size):
    total = 0
    for perm in DataLoader(range(edges.size(0)), batch_size, shuffle=True):
        optimizer.zero_grad()
        h = model(x)
        loss = -torch.log(predictor(h[edges[perm, 0]] * h[edges[perm, 1]]) + 1e-15).mean()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total


@torch.no_grad()
def test(model, predictor, x, edges, batch_size):
    h = model(x)
    preds = []
    for perm in DataLoader(range(edges.size(0)), EVAL_BATCH):
        preds += [predictor(h[edges[perm, 0]] * h[edges[perm, 1]]).squeeze().cpu()]
    return torch.cat(preds)


model = torch.nn.Linear(128, 128).to(device)
predictor = torch.nn.Linear(128, 1).to(device)
x = torch.randn(10000, 128, device=device)
edges = torch.randint(0, 10000, (1000000, 2), device=device)
optimizer = torch.optim.Adam(list(model.parameters()) + list(predictor.parameters()))
for epoch in range(100):
    loss = train(model, predictor, x, edges, optimizer, args.batch_size)
    if epoch % 5 == 0:
        result = test(model, predictor, x, edges, args.batch_size)
"""

TRAIN_READ = "19:18 GPU303"  # the training loop's `total += loss.item()`: hundreds of steps an epoch, right
EVAL_READ = "28:19 GPU303"


def link_prediction(eval_batch: str, workers: str = "") -> str:
    source = LINK_PREDICTION.replace("EVAL_BATCH", eval_batch)
    return source.replace("range(edges.size(0)), batch_size)", f"range(edges.size(0)), batch_size{workers})")


def test_evaluation_over_an_index_loader_of_large_batches_is_silent():
    # 64k indices sampled, listed and collated in Python per batch: the loop is the loader's (GPU101 says so)
    assert findings(link_prediction("batch_size"), select=("GPU303",)) == [TRAIN_READ]
    assert findings(link_prediction("batch_size"), select=("GPU101",)) == ["13:17 GPU101", "27:17 GPU101"]


def test_a_literal_large_index_batch_is_silent():
    assert findings(link_prediction("400000"), select=("GPU303",)) == [TRAIN_READ]


def test_small_index_batches_keep_the_read():
    # 256 indices a batch: microseconds of Python, the forward is the cost and the copy stalls it
    assert findings(link_prediction("256"), select=("GPU303",)) == [TRAIN_READ, EVAL_READ]


def test_an_index_loader_with_workers_keeps_the_read():
    # (mag240m's SIGN evaluation over 6 workers: judged right) the batches come ready; the copy is the wait
    source = link_prediction("batch_size").replace(
        "range(edges.size(0)), batch_size):", "range(edges.size(0)), batch_size, num_workers=6):"
    )
    assert findings(source, select=("GPU303",)) == [TRAIN_READ, EVAL_READ]


def test_a_batch_size_not_known_keeps_the_read():
    source = link_prediction("batch_size").replace("default=64 * 1024", "required=True")
    assert findings(source, select=("GPU303",)) == [TRAIN_READ, EVAL_READ]


def test_an_evaluation_over_a_dataset_keeps_the_read():
    source = link_prediction("batch_size").replace(
        "DataLoader(range(edges.size(0)), batch_size):", "DataLoader(torch.utils.data.TensorDataset(edges), batch_size):"
    )
    assert EVAL_READ in findings(source, select=("GPU303",))


def test_collected_copies_get_the_copy_once_advice():
    # `preds += [out.cpu()]` collects like `append`: issue 13's advice for evaluations that collect every output
    (found,) = [d for d in diagnostics(link_prediction("256"), select=("GPU303",)) if d.location.row == 28]
    assert found.message == "`.cpu()` waits for the GPU every evaluation step (loop at line 27)"
    assert found.help == "Collect the tensors on the GPU and copy them to the host once, after the loop (`torch.cat(...).cpu()`)" + UNPROVEN_READ


FULL_BATCH = """\
import torch
import torch.nn.functional as F

device = torch.device("cuda")
x = torch.load("features.pt").to(device)
y = torch.load("labels.pt").to(device)
train_idx = torch.load("train_idx.pt").to(device)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 40)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def train(model, x, y, train_idx, optimizer):
    model.train()
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x[train_idx]), y[train_idx])
    loss.backward()
    optimizer.step()
    return loss.item()


@torch.no_grad()
def test(model, x, y):
    model.eval()
    return (model(x).argmax(-1) == y).float().mean().item()


for epoch in range(1, 501):
    loss = train(model, x, y, train_idx, optimizer)
    acc = test(model, x, y)
    print(f"Epoch {epoch:03d}, loss {loss:.4f}, accuracy {acc:.4f}")
"""


def test_full_batch_training_one_step_an_epoch_is_silent():
    # the loss read waits for the step; meanwhile the host would only launch the evaluation's kernels
    assert findings(FULL_BATCH, select=("GPU303",)) == []


def test_full_batch_step_written_in_the_loop_is_silent():
    source = """\
    import torch
    import torch.nn.functional as F

    device = torch.device("cuda")
    x = torch.load("features.pt").to(device)
    y = torch.load("labels.pt").to(device)
    model = torch.nn.Linear(128, 40).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


    @torch.no_grad()
    def accuracy(model, x, y):
        return (model(x).argmax(-1) == y).float().mean().item()


    for epoch in range(200):
        optimizer.zero_grad()
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        print(epoch, loss.item(), accuracy(model, x, y))
    """
    assert findings(source, select=("GPU303",)) == []


def test_full_batch_steps_without_an_evaluation_keep_the_read():
    # no evaluation read to wait at anyway: the read holds up the next step's launches (a fixed-batch benchmark of a
    # large model spends milliseconds launching)
    source = FULL_BATCH.replace("    acc = test(model, x, y)\n", "").replace(", accuracy {acc:.4f}", "")
    assert findings(source, select=("GPU303",)) == ["18:12 GPU303"]  # in `train`, the helper the loop runs per step


def test_an_evaluation_every_few_epochs_keeps_the_read():
    source = FULL_BATCH.replace("    acc = test(model, x, y)\n", "    if epoch % 10 == 0:\n        acc = test(model, x, y)\n")
    assert "18:12 GPU303" in findings(source, select=("GPU303",))


def test_a_step_given_a_batch_made_in_the_loop_keeps_the_read():
    source = FULL_BATCH.replace(
        "    loss = train(model, x, y, train_idx, optimizer)\n",
        "    batch = train_idx[torch.randint(0, train_idx.numel(), (1024,))]\n"
        "    loss = train(model, x, y, batch, optimizer)\n",
    )
    assert findings(source, select=("GPU303",)) == ["18:12 GPU303", "24:12 GPU303"]  # in `train` and `test`


def test_a_gan_step_on_fresh_noise_keeps_the_read():
    source = """\
    import torch

    device = torch.device("cuda")
    generator = torch.nn.Linear(100, 784).to(device)
    critic = torch.nn.Linear(784, 1).to(device)
    optimizer = torch.optim.Adam(generator.parameters())
    for step in range(100000):
        z = torch.randn(64, 100, device=device)
        loss = -critic(generator(z)).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())
    """
    assert findings(source, select=("GPU303",)) == ["13:17 GPU303"]


def test_steps_over_batches_drawn_from_a_loader_keep_the_read():
    source = """\
    import torch
    from torch.utils.data import DataLoader

    device = torch.device("cuda")
    model = torch.nn.Linear(128, 40).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = DataLoader(torch.load("train.pt"), batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
    batches = iter(loader)
    for step in range(100000):
        x, y = next(batches)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(step, loss.item())
    """
    assert findings(source, select=("GPU303",)) == ["16:17 GPU303"]



def test_a_step_helper_that_draws_its_own_batch_keeps_the_read():
    # nanoGPT-style: the helper is given only the model and optimizer and draws a batch from a memory map every call
    source = """\
    import numpy as np
    import torch
    import torch.nn.functional as F

    device = torch.device("cuda")
    data = np.memmap("train.bin", dtype=np.uint16, mode="r")
    model = torch.nn.Sequential(torch.nn.Embedding(50304, 768), torch.nn.Linear(768, 50304)).to(device)
    optimizer = torch.optim.AdamW(model.parameters())


    def get_batch():
        ix = np.random.randint(0, len(data) - 1025, 12)
        x = torch.stack([torch.from_numpy(data[i : i + 1024].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(data[i + 1 : i + 1025].astype(np.int64)) for i in ix])
        return x.to(device), y.to(device)


    def train(model, optimizer):
        x, y = get_batch()
        loss = F.cross_entropy(model(x).view(-1, 50304), y.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()


    for it in range(600000):
        loss = train(model, optimizer)
        print(it, loss)
    """
    assert findings(source, select=("GPU303",)) == ["24:12 GPU303"]  # `return loss.item()` in `train`


GRAPH_FULL_BATCH = """\
import torch
import torch.nn.functional as F

device = torch.device("cuda")
data = torch.load("graph.pt").to(device)
model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 40)).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def train(model, data, optimizer):
    model.train()
    optimizer.zero_grad()
    loss = F.cross_entropy(model(data.x)[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
    return loss.item()


@torch.no_grad()
def test(model, data):
    model.eval()
    return (model(data.x).argmax(-1) == data.y).float().mean().item()


for epoch in range(1, 501):
    loss = train(model, data, optimizer)
    acc = test(model, data)
    print(f"Epoch {epoch:03d}, loss {loss:.4f}, accuracy {acc:.4f}")
"""


def test_full_batch_training_on_a_graph_object_is_silent():
    assert findings(GRAPH_FULL_BATCH, select=("GPU303",)) == []


def test_an_attribute_written_in_the_loop_counts_as_new_data():
    # conservatively: `data.x = ...` changes what `data` holds, so the step is given data made in the loop
    source = GRAPH_FULL_BATCH.replace(
        "    loss = train(model, data, optimizer)\n",
        "    data.x = F.dropout(data.x, p=0.1)\n    loss = train(model, data, optimizer)\n",
    )
    assert findings(source, select=("GPU303",)) == ["16:12 GPU303", "22:12 GPU303"]  # in `train` and `test`


def test_an_item_written_in_the_loop_counts_as_new_data():
    source = GRAPH_FULL_BATCH.replace(
        "    loss = train(model, data, optimizer)\n",
        '    data["x"] = F.dropout(data["x"], p=0.1)\n    loss = train(model, data, optimizer)\n',
    )
    assert findings(source, select=("GPU303",)) == ["16:12 GPU303", "22:12 GPU303"]


def test_an_attribute_the_step_helper_writes_counts_as_new_data():
    source = GRAPH_FULL_BATCH.replace("    model.train()\n", "    model.train()\n    data.x = F.dropout(data.x, p=0.1)\n")
    assert findings(source, select=("GPU303",)) == ["17:12 GPU303", "23:12 GPU303"]


# Twelfth corpus, class B (GCNII): the full-batch step gathers its labels on the host and copies them to the GPU
# every epoch (`labels[idx_train].to(device)`, the labels never moved): its data is not the GPU tensors the fact is
# about, and the reads of the step and of the validation stay reported.
HOST_LABELS_FULL_BATCH = """\
import torch
import torch.nn.functional as F

device = torch.device("cuda")
features = torch.load("features.pt").to(device)
labels = torch.load("labels.pt")
idx_train = torch.arange(140)
idx_val = torch.arange(200, 500)
model = torch.nn.Linear(1433, 7).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)


def train():
    model.train()
    optimizer.zero_grad()
    output = model(features)
    loss_train = F.cross_entropy(output[idx_train], labels[idx_train].to(device))
    loss_train.backward()
    optimizer.step()
    return loss_train.item()


def validate():
    model.eval()
    with torch.no_grad():
        output = model(features)
        loss_val = F.cross_entropy(output[idx_val], labels[idx_val].to(device))
        return loss_val.item()


best = 1e9
bad = 0
for epoch in range(1500):
    loss_tra = train()
    loss_val = validate()
    print(epoch, loss_tra, loss_val)
    if loss_val < best:
        best, bad = loss_val, 0
    else:
        bad += 1
    if bad == 100:
        break
"""


def test_a_full_batch_step_copying_host_labels_every_epoch_keeps_its_reads():
    # the training read and the validation read (it decides early stopping: a branch, reported as the rule doc says)
    found = diagnostics(HOST_LABELS_FULL_BATCH, select=("GPU303",))
    assert [f"{d.location.row}:{d.location.column}" for d in found] == ["20:12", "28:16"]
    assert found[0].message.startswith(
        "`loss_train.item()` waits for the GPU every training step (`train` at line 13, run by the call at line 34)"
    )


def test_a_full_batch_step_on_labels_moved_once_is_silent():
    # the fix the finding asks for: the labels moved before the loop, the step's data all on the GPU
    source = HOST_LABELS_FULL_BATCH.replace('labels = torch.load("labels.pt")', 'labels = torch.load("labels.pt").to(device)')
    assert findings(source, select=("GPU303",)) == []


def test_a_step_moving_a_tensor_already_on_the_gpu_is_silent():
    # `.to(device)` of a GPU tensor copies nothing: still the same GPU tensors every step
    source = FULL_BATCH.replace("model(x[train_idx])", "model(x[train_idx].to(device))")
    assert findings(source, select=("GPU303",)) == []


def test_a_logged_read_under_an_interval_guard_stays_silent():
    source = HOST_LABELS_FULL_BATCH.replace("    return loss_train.item()\n", "    return loss_train\n").replace(
        "    print(epoch, loss_tra, loss_val)\n", "    if epoch % 50 == 0:\n        print(epoch, loss_tra.item())\n"
    )
    assert findings(source, select=("GPU303",)) == ["28:16 GPU303"]  # the validation read only
