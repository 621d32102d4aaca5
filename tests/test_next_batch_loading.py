"""GPU303's loading evidence (`analysis/read_cost.py`, `loading_serialized`) for loops that take their batch with
`next()` from an iterator kept across steps, as step-counted and gradient-accumulation loops do: `dl_iter =
iter(loader)` or `cycle(loader)` at module level, or `self.dl_iter = cycle(self.dl)` in a trainer's `__init__`
read in its `train_step` (`analysis/loader_flow.py`, `_attribute_iterator`). The loader's batches are then made
in the training process while the GPU waits behind the read, as for a `for` over the loader."""

from __future__ import annotations

from tests.conftest import diagnostics, findings
from tests.projects_helper import found, lint, write

DEFAULT = {"select": ("GPU303",), "rule_options": ()}
EVERY_READ = {"select": ("GPU303",)}  # the tests' settings: `unproven-cost` on

HEAD = """\
import torch
import torchvision
import torchvision.transforms as T
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = torchvision.models.resnet50().to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = torch.nn.CrossEntropyLoss()
FOLDER = torchvision.datasets.ImageFolder("data/train", transform=T.Compose([T.RandomResizedCrop(224), T.ToTensor()]))


def cycle(dl):
    while True:
        for batch in dl:
            yield batch


"""


def _steps(loader: str, iterator: str, take: str = "next(dl_iter)") -> str:
    return HEAD + f"""\
loader = {loader}
dl_iter = {iterator}
for step in range(100000):
    x, y = {take}
    loss = criterion(model(x.to(device)), y.to(device))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())
"""


def test_a_batch_taken_with_next_from_an_in_process_loader_is_loading_evidence():
    for iterator in ("iter(loader)", "cycle(loader)"):
        source = _steps("DataLoader(FOLDER, batch_size=64)", iterator)
        [finding] = diagnostics(source, **DEFAULT)
        assert (finding.location.row, finding.code) == (27, "GPU303")
        assert finding.help.startswith(
            "It waits after the step's GPU work, while the next batch is made in the training process (`DataLoader` at "
            "line 19, no workers, images decoded and transformed per sample)"
        )


def test_next_from_a_loader_with_workers_or_from_a_new_iterator_each_step_is_no_loading_evidence():
    for iterator in ("iter(loader)", "cycle(loader)"):
        source = _steps("DataLoader(FOLDER, batch_size=64, num_workers=8)", iterator)
        assert findings(source, **DEFAULT) == []
        assert findings(source, **EVERY_READ) == ["27:11 GPU303"]
    # `next(iter(loader))`: a new iterator every step (its cost is the restart, not the read's)
    restarting = _steps("DataLoader(FOLDER, batch_size=64)", "None", take="next(iter(loader))")
    assert findings(restarting, **DEFAULT) == []
    assert findings(restarting, **EVERY_READ) == ["27:11 GPU303"]


TRAINER = """\
import torch
import torchvision
import torchvision.transforms as T
from accelerate import Accelerator
from torch.utils.data import DataLoader


def cycle(dl):
    while True:
        for batch in dl:
            yield batch


class Trainer:
    def __init__(self, model, folder, grad_accum_every=8, num_train_steps=100000):
        self.accelerator = Accelerator()
        self.device = self.accelerator.device
        dataset = torchvision.datasets.ImageFolder(folder, transform=T.Compose([T.RandomResizedCrop(224), T.ToTensor()]))
        self.dl = DataLoader(dataset, batch_size=16{workers})
        self.optim = torch.optim.Adam(model.parameters())
        self.model, self.optim, self.dl = self.accelerator.prepare(model, self.optim, self.dl)
        self.dl_iter = {iterator}
        self.grad_accum_every = grad_accum_every
        self.num_train_steps = num_train_steps
        self.steps = 0

    def train_step(self):
        logs = {{}}
        for i in range(self.grad_accum_every):
            x, y = next(self.dl_iter)
            loss = torch.nn.functional.cross_entropy(self.model(x.to(self.device)), y.to(self.device))
            self.accelerator.backward(loss / self.grad_accum_every)
            logs["loss"] = logs.get("loss", 0.0) + loss.item() / self.grad_accum_every
        self.optim.step()
        self.optim.zero_grad()
        return logs

    def train(self):
        while self.steps < self.num_train_steps:
            print(self.train_step())
            self.steps += 1
"""

SCRIPT = """\
import torchvision
from trainer import Trainer

Trainer(torchvision.models.resnet50(), "data/train").train()
"""


def _project(tmp_path, monkeypatch, **fill) -> list[str]:
    root = write(tmp_path, {"trainer.py": TRAINER.format(**fill), "train.py": SCRIPT})
    return sorted(found(lint(root, monkeypatch, select=("GPU303",), rule_options=())))


def test_an_accumulation_step_taking_batches_from_an_iterator_kept_on_the_trainer_is_loading_evidence(tmp_path, monkeypatch):
    # the accelerate trainer shape: model prepared by an `Accelerator`, device from `accelerator.device`, one
    # read per micro-step after `accelerator.backward`, the batch from `self.dl_iter` made in `__init__`
    assert _project(tmp_path / "cycle", monkeypatch, workers="", iterator="cycle(self.dl)") == ["trainer.py:33 GPU303"]
    assert _project(tmp_path / "iter", monkeypatch, workers="", iterator="iter(self.dl)") == ["trainer.py:33 GPU303"]


def test_the_same_trainer_fed_by_workers_or_through_another_iterator_is_silent(tmp_path, monkeypatch):
    # workers make the next batch meanwhile: one wait per micro-step, a few per cent (unproven)
    assert _project(tmp_path / "workers", monkeypatch, workers=", num_workers=8", iterator="cycle(self.dl)") == []
    # an iterator over something else than the loader (here a list of its first batches): not this loader's batches
    assert _project(tmp_path / "other", monkeypatch, workers="", iterator="iter(list(self.dl)[:4])") == []


def _accumulating(loader: str) -> str:
    return HEAD + f"""\
loader = {loader}
dl_iter = cycle(loader)
for step in range(100000):
    for i in range(8):
        x, y = next(dl_iter)
        loss = criterion(model(x.to(device)), y.to(device))
        (loss / 8).backward()
        print(loss.item())
    optimizer.step()
    optimizer.zero_grad()
"""


def test_a_read_per_micro_step_with_the_batches_made_in_process_is_loading_evidence():
    [finding] = diagnostics(_accumulating("DataLoader(FOLDER, batch_size=64)"), **DEFAULT)
    assert (finding.location.row, finding.code) == (26, "GPU303")
    assert finding.help.startswith("It waits after the step's GPU work, while the next batch is made in the training process")


def test_a_read_per_micro_step_fed_by_workers_is_no_repeated_read():
    # each iteration of the accumulation loop is a forward and a backward: one wait per micro-step, a few per cent
    # of it (as one read a step), not many waits for little work as a read per class or per image is
    source = _accumulating("DataLoader(FOLDER, batch_size=64, num_workers=8)")
    assert findings(source, **DEFAULT) == []
    assert findings(source, **EVERY_READ) == ["26:15 GPU303"]
