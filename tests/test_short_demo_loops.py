"""Issue 13's N6 noise on the eleventh corpus (oneoff12): loops the code shows run a few times, whatever runs them.

- a loader over a few samples (`DataLoader(val_set[:10], batch_size=1)`, `Subset(data, range(8))`, no sampler) in a
  loop that trains nothing, `islice(loader, 5)`: a per-epoch visualization of a handful of point clouds;
- `for i in range(n): ... if i >= 5: break`: the `range` target counts iterations like an `enumerate` index;
- `if logged < N: log_batch(...); logged += 1`: a counter raised only inside its own guard lets the guarded body
  (and the helper it calls) run N times per pass: the first N test batches filling a W&B table;
- `config.num_samples = 20` once at module level (a notebook's settings cell) is the value the code ships;
- a loop bound by a name every write reaching it sets to a literal (`n_steps = 5` in one cell, `= 40` in the next);
- GPU105 in a final test pass run once after training (GPU101/GPU102 were already silent there);
- a Lightning `test_dataloader` hook that only one `trainer.test(...)` after the fit reads (GPU101/GPU102).

Stay reported (expert shapes): the per-epoch validation pass over the whole loader, a training loop over a small
subset (a step each batch, many epochs), a sampler that draws more samples than the subset holds, `cycle()`,
counters reset or raised elsewhere, settings stored twice or in a function, `trainer.test` in a loop over
checkpoints, GPU105 in a per-epoch test pass. Minimal shapes of our own after the corpus's (W&B's Tables quickstart,
PyG point-cloud colabs, StyleTTS2's end-of-epoch samples, Lightning colabs)."""

from __future__ import annotations

import pytest

from tests.conftest import findings

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

HEAD = """\
import itertools
import torch
import torchvision
import wandb
from torch.utils.data import DataLoader, RandomSampler, Subset

device = torch.device("cuda")
train_set = torchvision.datasets.CIFAR10(".", train=True, transform=torchvision.transforms.ToTensor())
val_set = torchvision.datasets.CIFAR10(".", train=False, transform=torchvision.transforms.ToTensor())
model = torchvision.models.resnet50().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train_dl = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
val_dl = DataLoader(val_set, batch_size=64, num_workers=4, pin_memory=True)


def train_epoch():
    for x, y in train_dl:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


@torch.no_grad()
def validate():
    correct = 0
    for x, y in val_dl:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        correct += (model(x).argmax(-1) == y).sum().item()
    return correct


"""
VALIDATION_READ = "32:20 GPU303"  # the per-epoch pass over the whole validation loader keeps its read


def visualize_with(loader: str) -> str:
    return f"""\
@torch.no_grad()
def visualize(epoch, table):
    for x, y in {loader}:
        x = x.to(device)
        table.add_data(epoch, x.cpu().numpy(), model(x).argmax(-1).cpu().numpy())


table = wandb.Table(columns=["epoch", "image", "prediction"])
for epoch in range(30):
    train_epoch()
    validate()
    visualize(epoch, table)
"""


def test_a_visualization_over_a_loader_of_ten_samples_is_silent():
    source = HEAD + "viz_dl = DataLoader(val_set[:10], batch_size=1)\n\n\n" + visualize_with("viz_dl")
    assert findings(source, select=("GPU303",)) == [VALIDATION_READ]


def test_a_loader_over_a_subset_of_a_few_indices_is_silent():
    source = HEAD + visualize_with("DataLoader(Subset(val_set, range(8)), batch_size=2)")
    assert findings(source, select=("GPU303",)) == [VALIDATION_READ]


def test_islice_of_the_validation_loader_is_silent():
    source = HEAD + visualize_with("itertools.islice(val_dl, 5)")
    assert findings(source, select=("GPU303",)) == [VALIDATION_READ]


def test_a_visualization_over_the_whole_validation_loader_stays():
    source = HEAD + visualize_with("val_dl")
    assert findings(source, select=("GPU303",)) == [VALIDATION_READ, "40:31 GPU303"]


def test_a_loader_of_more_than_a_handful_of_samples_stays():
    source = HEAD + visualize_with("DataLoader(val_set[:64], batch_size=1)")
    assert findings(source, select=("GPU303",)) == [VALIDATION_READ, "40:31 GPU303"]


def test_a_sampler_that_draws_more_samples_stays():
    loader = "DataLoader(val_set[:10], sampler=RandomSampler(val_set[:10], replacement=True, num_samples=5000))"
    assert findings(HEAD + visualize_with(loader), select=("GPU303",)) == [VALIDATION_READ, "40:31 GPU303"]


def test_cycle_over_a_small_loader_stays():
    source = HEAD + visualize_with("itertools.cycle(DataLoader(val_set[:10], batch_size=1))")
    assert findings(source, select=("GPU303",)) == [VALIDATION_READ, "40:31 GPU303"]


def test_training_on_a_small_subset_keeps_its_per_step_reads():
    source = HEAD + """\
tiny_dl = DataLoader(train_set[:8], batch_size=1)
for epoch in range(1000):
    for x, y in tiny_dl:
        x = x.to(device)
        y = y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())
"""
    assert findings(source, select=("GPU303",)) == [VALIDATION_READ, "45:15 GPU303"]


TABLE = HEAD + """\
NUM_BATCHES_TO_LOG = 10


def log_predictions(x, out, table):
    images = x.cpu().numpy()
    scores = out.softmax(-1).cpu().numpy()
    for image, score in zip(images, scores):
        table.add_data(wandb.Image(image), *score)


for epoch in range(10):
    train_epoch()
    table = wandb.Table(columns=["image"] + [str(c) for c in range(10)])
    logged = 0
    correct = 0
    with torch.no_grad():
        for x, y in val_dl:
            x = x.to(device, non_blocking=True)
            out = model(x)
{guard}
            correct += (out.argmax(-1) == y.to(device)).sum().item()
    wandb.log({{"acc": correct, "predictions": table}})
"""
LOGGED = """\
            if logged < NUM_BATCHES_TO_LOG:
                log_predictions(x, out, table)
                logged += 1"""
TABLE_READ = "58:24 GPU303"  # the accuracy read of every test batch stays


def test_a_helper_called_for_the_first_batches_only_is_silent():
    source = TABLE.format(guard=LOGGED)
    assert findings(source, select=("GPU303",)) == [VALIDATION_READ, TABLE_READ]


def test_reads_under_a_guard_that_counts_itself_are_silent():
    guard = """\
            if logged < 10:
                table.add_data(wandb.Image(x.cpu().numpy()))
                logged += 1"""
    assert findings(TABLE.format(guard=guard), select=("GPU303",)) == [VALIDATION_READ, TABLE_READ]


def test_a_guard_counter_reset_in_the_loop_stays():
    guard = LOGGED + "\n            if epoch > 5:\n                logged = 0"
    assert findings(TABLE.format(guard=guard), select=("GPU303",)) == [VALIDATION_READ, "40:14 GPU303", "41:14 GPU303", "60:24 GPU303"]


def test_a_guard_that_may_skip_its_counter_stays():
    guard = """\
            if logged < NUM_BATCHES_TO_LOG:
                log_predictions(x, out, table)
                if y[0] == 0:
                    continue
                logged += 1"""
    assert findings(TABLE.format(guard=guard), select=("GPU303",)) == [VALIDATION_READ, "40:14 GPU303", "41:14 GPU303", "60:24 GPU303"]


SAMPLES = HEAD + """\
for epoch in range(100):
    train_epoch()
    validate()
    with torch.no_grad():
        batch = next(iter(val_dl))[0].to(device)
        for i in range({bound}):
            out = model(batch[i : i + 1])
            wandb.log({{"sample": wandb.Image(out.cpu().numpy())}})
{stop}
"""


def test_samples_of_a_range_loop_that_breaks_after_six_are_silent():
    source = SAMPLES.format(bound="len(batch)", stop="            if i >= 5:\n                break")
    assert findings(source, select=("GPU303",)) == [VALIDATION_READ]


def test_a_range_loop_whose_index_is_rebound_stays():
    stop = "            i = i * 2\n            if i >= 5:\n                break"
    assert findings(SAMPLES.format(bound="len(batch)", stop=stop), select=("GPU303",)) == [VALIDATION_READ, "43:46 GPU303"]


def test_a_settings_attribute_set_once_at_module_level_bounds_a_loop():
    source = "config = wandb.config\nconfig.num_samples = 20\n" + SAMPLES.format(bound="config.num_samples", stop="")
    assert findings(source, select=("GPU303",)) == ["34:20 GPU303"]  # the validation read, two lines down


def test_a_settings_attribute_set_twice_stays():
    head = "config = wandb.config\nconfig.num_samples = 20\nconfig.num_samples = 2000\n"
    source = head + SAMPLES.format(bound="config.num_samples", stop="")
    assert findings(source, select=("GPU303",)) == ["35:20 GPU303", "46:46 GPU303"]


def test_a_settings_attribute_set_in_a_function_stays():
    head = "config = wandb.config\n\n\ndef configure():\n    config.num_samples = 20\n\n\nconfigure()\n"
    source = head + SAMPLES.format(bound="config.num_samples", stop="")
    assert findings(source, select=("GPU303",)) == ["40:20 GPU303", "51:46 GPU303"]


FINAL_TEST = """\
import torch
import torchvision
from torch.utils.data import DataLoader

device = torch.device("cuda")


def make_loader(data):
    return DataLoader(data, batch_size=128, shuffle=True, pin_memory=True, num_workers=2)


def train(model, loader, opt, epochs):
    for epoch in range(epochs):
        for x, y in loader:
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


def test(model, loader):
    with torch.no_grad():
        correct = 0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            correct += (model(x).argmax(-1) == y).sum()
    return correct


def pipeline():
    model = torchvision.models.resnet50().to(device)
    opt = torch.optim.Adam(model.parameters())
    train_loader = make_loader(torchvision.datasets.CIFAR10(".", train=True))
    test_loader = make_loader(torchvision.datasets.CIFAR10(".", train=False))
{body}


pipeline()
"""


def test_blocking_copies_of_a_final_test_pass_are_silent():
    body = "    train(model, train_loader, opt, 5)\n    print(test(model, test_loader))"
    assert findings(FINAL_TEST.format(body=body), select=("GPU105",)) == []


def test_blocking_copies_of_a_test_pass_every_epoch_stay():
    body = "    for epoch in range(5):\n        train(model, train_loader, opt, 1)\n        print(test(model, test_loader))"
    assert findings(FINAL_TEST.format(body=body), select=("GPU105",)) == ["27:20 GPU105", "27:34 GPU105"]


LIGHTNING = """\
import lightning as L
import torch
import torchvision
from torch.utils.data import DataLoader


class CIFAR(L.LightningDataModule):
    def setup(self, stage=None):
        self.train_set = torchvision.datasets.CIFAR10(".", train=True)
        self.val_set = torchvision.datasets.CIFAR10(".", train=False, transform=torchvision.transforms.ToTensor())
        self.test_set = torchvision.datasets.CIFAR10(".", train=False, transform=torchvision.transforms.ToTensor())

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=64)

    def test_dataloader(self):
        return DataLoader(self.test_set, batch_size=64)


class Net(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torchvision.models.resnet50()

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("acc", (self.net(x).argmax(-1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())


dm = CIFAR()
model = Net()
trainer = L.Trainer(accelerator="gpu", max_epochs=20)
{run}
"""
# (GPU101 carries the `pin_memory` advice for these: loader_bound.py; 10,000 CIFAR images through `ToTensor`, at
# least ~250 ms a pass, load for longer than the fix's workers take to start: loading_cost.py)
VAL_LOADER = ["17:16 GPU101"]


def test_a_test_hook_run_once_after_the_fit_is_silent():
    source = LIGHTNING.format(run="trainer.fit(model, dm)\ntrainer.test(model, datamodule=dm)")
    assert findings(source, select=("GPU101", "GPU102")) == VAL_LOADER


def test_a_test_loader_passed_from_its_hook_once_is_silent():
    source = LIGHTNING.format(run="trainer.fit(model, dm)\ntrainer.test(dataloaders=dm.test_dataloader())")
    assert findings(source, select=("GPU101", "GPU102")) == VAL_LOADER


def test_a_test_hook_run_for_every_checkpoint_stays():
    run = "trainer.fit(model, dm)\nfor ckpt in sorted(glob.glob('*.ckpt')):\n    trainer.test(model, datamodule=dm, ckpt_path=ckpt)"
    source = LIGHTNING.format(run=run)
    assert findings(source, select=("GPU101", "GPU102")) == VAL_LOADER + ["20:16 GPU101"]
    workers = source.replace("batch_size=64)\n", "batch_size=64, num_workers=2)\n")
    assert findings(workers, select=("GPU101", "GPU102")) == ["17:16 GPU102", "20:16 GPU102"]


SAMPLING = """\
import torch
import torchvision

device = torch.device("cuda")
net = torchvision.models.resnet50().to(device)

n_steps = 5
x = torch.rand(8, 3, 224, 224).to(device)
history = []
for i in range(n_steps):
    with torch.no_grad():
        pred = net(x)
    history.append(pred.detach().cpu())

n_steps = {second}
x = torch.rand(64, 3, 224, 224).to(device)
for i in range(n_steps):
    with torch.no_grad():
        pred = net(x)
    history.append(pred.detach().cpu())
"""


def test_sampling_demos_whose_step_counts_are_rebound_per_cell_are_silent():
    # each loop sees the literal written just before it (5, then 40): a few steps of a demo
    assert findings(SAMPLING.format(second=40), select=("GPU303",)) == []


def test_a_long_sampling_loop_after_a_short_one_stays():
    assert findings(SAMPLING.format(second=1000), select=("GPU303",)) == ["20:20 GPU303"]


def test_a_step_count_rewritten_inside_the_loop_around_stays():
    source = """\
import torch
import torchvision

device = torch.device("cuda")
net = torchvision.models.resnet50().to(device)
x = torch.rand(8, 3, 224, 224).to(device)
n_steps = 5
for round in range(100):
    for i in range(n_steps):
        with torch.no_grad():
            pred = net(x)
        print(pred.sum().item())
    n_steps = n_steps * 2
"""
    assert findings(source, select=("GPU303",)) == ["12:15 GPU303"]
