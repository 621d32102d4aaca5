"""The step waits anyway (`analysis/step_syncs.py`): a blocking copy of the next batch made every step is a sync
point, so a per-step read followed by only bookkeeping costs nothing (GPU303), and a pinned batch copied right
after such a read has no queue to overlap (GPU105). Neither is reported when both are in the step; the shapes
nearby stay reported: loading in the training process between the read and the copy, step work after the read,
a copy with `non_blocking=True`, a read every N steps, a helper that waits several times.
"""

from __future__ import annotations

import pytest

from tests.conftest import findings

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

GPU303 = {"select": ("GPU303",)}
GPU105 = {"select": ("GPU105",)}
BOTH = {"select": ("GPU303", "GPU105")}

HEAD = """\
import torch
import torchvision
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = torchvision.models.resnet50().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = torch.nn.CrossEntropyLoss()
"""


def _step(loader: str, tail: str, copy: str = "x, y = x.to(device), y.to(device)") -> str:
    return HEAD + f"""\
{loader}
losses = []
for step, (x, y) in enumerate(loader):
    {copy}
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
{tail}
"""


WORKERS = "loader = DataLoader(ds, batch_size=256, num_workers=8)"
PINNED = "loader = DataLoader(ds, batch_size=256, num_workers=8, pin_memory=True)"


def test_read_then_only_bookkeeping_before_the_next_blocking_copy_is_silent():
    source = _step(WORKERS, "    losses.append(loss.item())\n    print(f'step {step}')")
    assert findings(source, **GPU303) == []


def test_two_reads_of_a_metric_then_the_copy_are_silent():
    source = _step(WORKERS, "    total += loss.item()\n    correct += (model(x).argmax(1) == y).sum().item()")
    # a forward between the two reads is step work: the first read stays, the second is followed by bookkeeping only
    assert findings(source, **GPU303) == ["17:14 GPU303"]
    source = _step(WORKERS, "    out = loss.detach()\n    total += out.item()\n    seen += len(y)\n    count += out.sum().item()")
    assert findings(source, **GPU303) == []


def test_in_memory_list_of_samples_counts_as_a_free_fetch():
    source = HEAD + """\
data = list(zip(xs, ys))
for x, y in data:
    x = torch.tensor(x).cuda()
    loss = criterion(model(x), torch.tensor([y]).cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    total_loss += loss.item()
"""
    assert findings(source, **GPU303) == []


def test_loading_in_the_training_process_keeps_the_read():
    # num_workers=0: the next batch is made between the read and the copy, and the read serializes it
    source = _step("loader = DataLoader(ds, batch_size=256)", "    losses.append(loss.item())")
    assert findings(source, **GPU303) == ["17:19 GPU303"]
    # a loader of unknown settings (handed in) or a generator: what the fetch costs is unknown
    source = _step("loader = make_batches(ds)", "    losses.append(loss.item())")
    assert findings(source, **GPU303) == ["17:19 GPU303"]


def test_host_work_or_step_work_after_the_read_keeps_it():
    # a project function between the read and the copy: its host work is unknown
    source = _step(WORKERS, "    losses.append(loss.item())\n    update_plots(losses)")
    assert findings(source, **GPU303) == ["17:19 GPU303"]
    # a per-item loop after the read
    source = _step(WORKERS, "    value = loss.item()\n    for name in names:\n        table[name] = value")
    assert findings(source, **GPU303) == ["17:13 GPU303"]
    # the read sits between the forward and the backward pass: the way to the copy holds the step's work
    source = HEAD + WORKERS + """
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = criterion(model(x), y)
    total += loss.item()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
    assert findings(source, **GPU303) == ["13:14 GPU303"]


def test_a_copy_that_does_not_wait_is_no_sync_point():
    source = _step(WORKERS, "    losses.append(loss.item())", copy="x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)")
    assert findings(source, **GPU303) == ["17:19 GPU303"]
    # a copy only on some steps does not wait every step
    source = _step(WORKERS, "    losses.append(loss.item())", copy="if step % 2 == 0:\n        x, y = x.to(device), y.to(device)")
    assert findings(source, **GPU303) == ["18:19 GPU303"]


def test_many_reads_before_the_copy_stay_reported():
    tail = "    a += loss.item()\n    b += x.sum().item()\n    c += y.sum().item()\n    d += x.mean().item()"
    assert findings(_step(WORKERS, tail), **GPU303) != []


def test_pinned_copy_after_a_per_step_read_is_silent_and_so_is_the_read():
    source = _step(PINNED, "    losses.append(loss.item())")
    assert findings(source, **BOTH) == []


def test_pinned_copy_without_a_read_stays_reported():
    source = _step(PINNED, "    losses.append(loss)")
    assert findings(source, **GPU105) == ["12:12 GPU105", "12:26 GPU105"]
    # a read every N steps drains the queue only then
    source = _step(PINNED, "    if step % 100 == 0:\n        print(loss.item())")
    assert findings(source, **GPU105) == ["12:12 GPU105", "12:26 GPU105"]


def test_pinned_copy_with_step_work_after_the_read_stays_reported():
    source = HEAD + PINNED + """
for x, y in loader:
    x, y = x.to(device), y.to(device)
    loss = criterion(model(x), y)
    total += loss.item()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""
    # the copy waits for the backward pass and the optimizer step queued after the read
    assert findings(source, **GPU105) == ["11:12 GPU105", "11:26 GPU105"]


def test_copies_in_a_comprehension_count_a_copy_after_the_read_in_the_same_iteration_does_not():
    # `[t.to(device) for t in batch]` copies each tensor of the batch every step: a sync point
    source = HEAD + WORKERS + """
for step, batch in enumerate(loader):
    x, y = [t.to(device) for t in batch]
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    logger.info(f"step {step} loss {loss.item():.3f}")
"""
    assert findings(source, **GPU303) == []
    # a copy after the read in the same iteration (here the batch's own, after a read of the previous step's loss)
    # does not count, conservatively: a copy made mid-step may be the avoidable wait itself
    source = HEAD + WORKERS + """
last = torch.zeros((), device=device)
for step, (x, y) in enumerate(loader):
    history.append(last.item())
    x = x.cuda()
    y = y.cuda()
    last = criterion(model(x), y)
    optimizer.zero_grad()
    last.backward()
    optimizer.step()
"""
    assert findings(source, **GPU303) == ["12:20 GPU303"]


PYG_HEAD = """\
import torch
from torch_geometric.datasets import ModelNet, QM9, TUDataset
from torch_geometric.loader import DataLoader, NeighborLoader

device = torch.device("cuda")
model = Net().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
"""


def _graph_step(dataset: str, loader: str) -> str:
    return PYG_HEAD + f"""\
dataset = {dataset}
loader = {loader}
for data in loader:
    data = data.to(device)
    optimizer.zero_grad()
    loss = model(data.x, data.edge_index, data.batch)
    loss.backward()
    optimizer.step()
    total_loss += loss.item() * data.num_graphs
"""


def test_pyg_loader_collating_small_graphs_in_memory_is_a_free_fetch():
    # `Batch.from_data_list` of 128 graphs a TUDataset holds in memory, then the blocking `Data.to` copy
    source = _graph_step("TUDataset('data', name='MUTAG').shuffle()", "DataLoader(dataset[:150], batch_size=128, shuffle=True)")
    assert findings(source, **GPU303) == []
    # the argparse default sizes the batch; an evaluation helper's loader is what every caller passes
    source = PYG_HEAD + """\
import argparse
parser = argparse.ArgumentParser()
parser.add_argument('--batch_size', type=int, default=64)
args = parser.parse_args()
dataset = TUDataset('data', name='PROTEINS')
test_loader = DataLoader(dataset[:100], args.batch_size)

@torch.no_grad()
def test(loader):
    correct = 0
    for data in loader:
        data = data.to(device)
        pred = model(data.x, data.edge_index, data.batch).argmax(dim=-1)
        correct += int((pred == data.y).sum())
    return correct

for epoch in range(10):
    test(test_loader)
"""
    assert findings(source, **GPU303) == []


def test_pyg_loader_doing_host_work_per_fetch_keeps_the_read():
    # a per-sample `transform` (QM9's `Complete()` builds each molecule's full graph on every fetch)
    source = _graph_step("QM9('data', transform=Complete()).shuffle()", "DataLoader(dataset[:100], batch_size=128)")
    assert findings(source, **GPU303) == ["16:19 GPU303"]
    # a transform handed positionally (ModelNet's `SamplePoints(1024)` samples each mesh at every fetch)
    source = _graph_step("ModelNet('data', '10', True, T.SamplePoints(1024))", "DataLoader(dataset, batch_size=32)")
    assert findings(source, **GPU303) == ["16:19 GPU303"]
    # many graphs a batch
    source = _graph_step("TUDataset('data', name='MUTAG')", "DataLoader(dataset, batch_size=4096)")
    assert findings(source, **GPU303) == ["16:19 GPU303"]
    # a data set that is not one of PyG's in-memory ones: its `__getitem__` is unknown
    source = _graph_step("MyGraphs('data')", "DataLoader(dataset, batch_size=32)")
    assert findings(source, **GPU303) == ["16:19 GPU303"]
    # a sampler over one large graph samples each batch in the training process
    source = _graph_step("TUDataset('data', name='MUTAG')", "NeighborLoader(dataset[0], num_neighbors=[10], batch_size=32)")
    assert findings(source, **GPU303) == ["16:19 GPU303"]
