"""A test pass run once per call of a function that trains for several epochs itself
(`one_off_passes.once_per_training_call`): `train()` ends with `self._test(test_loader)` after its epoch loop, and a
driver in another module calls `train()` once per target. However often the driver runs it, each run makes one test
pass beside its epochs, so what the pass's reads cost is a sliver of the run: GPU303 is silent there by default.
A read in a branch that runs only without a GPU is no wait of a GPU run (`read_cost.waits_per_step`).
The per-epoch validation of the same trainer stays, as does a test pass called inside the epoch loop or on
another object. Minimal shapes of our own after the twentieth corpus (a molecular-property fine-tuning trainer)."""

from __future__ import annotations

from gpulint.config import Settings
from gpulint.linter import lint_files
from tests.projects_helper import write

TRAINER = """\
import torch
import torchvision
from torch.utils.data import DataLoader


class Trainer:
    def __init__(self, device):
        self.device = device
        self.model = torchvision.models.resnet50().to(device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        tf = torchvision.transforms.ToTensor()
        self.train_dl = DataLoader(torchvision.datasets.CIFAR10(".", transform=tf), batch_size=64, num_workers=8)
        self.test_dl = DataLoader(torchvision.datasets.CIFAR10(".", train=False, transform=tf), batch_size=64, num_workers=8)

    def train(self):
        for epoch in range(100):
            for x, y in self.train_dl:
                x, y = x.to(self.device), y.to(self.device)
                loss = torch.nn.functional.cross_entropy(self.model(x), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            {per_epoch}
        {after}

    def _evaluate(self, loader):
        preds, labels = [], []
        total = 0.0
        with torch.no_grad():
            for x, y in loader:
                x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
                out = self.model(x)
                total += torch.nn.functional.cross_entropy(out, y).item()
                out = self.model(x.flip(3))
                preds.extend(out.cpu().numpy())
                out = self.model(x.flip(2))
                labels.extend(out.argmax(1).cpu().numpy())
                out = self.model(x * 0.5)
                print(out.max().item())
        return total, preds, labels
"""

MAIN = """\
import torch
from trainer import Trainer

for target in ["a", "b", "c", "d", "e"]:
    trainer = Trainer(torch.device("cuda"))
    trainer.train()
"""


def _gpu303(tmp_path, monkeypatch, per_epoch: str, after: str) -> list[str]:
    root = write(tmp_path, {"trainer.py": TRAINER.replace("{per_epoch}", per_epoch).replace("{after}", after), "main.py": MAIN})
    monkeypatch.chdir(root)
    settings = Settings(root=root, select=("GPU303",))
    results = lint_files(sorted(root.rglob("*.py")), settings, jobs=1, use_cache=False)
    return sorted(f"{d.filename}:{d.location.row}" for r in results for d in r.diagnostics if d.code == "GPU303")


READS = ["trainer.py:33", "trainer.py:35", "trainer.py:37", "trainer.py:39"]


def test_a_test_pass_once_after_the_epochs_of_a_train_run_per_target_is_silent(tmp_path, monkeypatch):
    assert _gpu303(tmp_path, monkeypatch, "pass", "self._evaluate(self.test_dl)") == []


def test_the_same_pass_run_every_epoch_stays(tmp_path, monkeypatch):
    assert _gpu303(tmp_path, monkeypatch, "self._evaluate(self.test_dl)", "pass") == READS


def test_a_pass_run_every_epoch_and_once_after_stays(tmp_path, monkeypatch):
    assert _gpu303(tmp_path, monkeypatch, "self._evaluate(self.test_dl)", "self._evaluate(self.test_dl)") == READS


def test_a_pass_called_on_another_object_stays(tmp_path, monkeypatch):
    assert _gpu303(tmp_path, monkeypatch, "pass", "self._evaluate(self.test_dl)\n        other = Trainer(self.device)\n        for i in range(3):\n            other._evaluate(self.test_dl)") == [
        f"trainer.py:{int(r.split(':')[1]) + 3}" for r in READS
    ]


# A read in a branch that runs only without a GPU (`gpu_free_branches`) is no wait of a GPU run
# (`read_cost.waits_per_step`): three waits a step are no evidence, the read of the CPU branch does not count.
LAST_READS = """\
                out = self.model(x.flip(2))
                labels.extend(out.argmax(1).cpu().numpy())
                out = self.model(x * 0.5)
                print(out.max().item())
"""
CPU_BRANCH = """\
                out = self.model(x.flip(2))
                if self.device == "cpu":
                    labels.extend(out.numpy())
                else:
                    labels.extend(out.cpu().numpy())
"""


def _with_branch(tmp_path, monkeypatch, branch: str) -> list[str]:
    global TRAINER
    saved = TRAINER
    assert LAST_READS in TRAINER
    TRAINER = TRAINER.replace(LAST_READS, branch)
    try:
        return _gpu303(tmp_path, monkeypatch, "self._evaluate(self.test_dl)", "pass")
    finally:
        TRAINER = saved


def test_a_read_in_a_branch_run_only_without_a_gpu_is_no_wait_of_the_step(tmp_path, monkeypatch):
    assert _with_branch(tmp_path, monkeypatch, CPU_BRANCH) == []


def test_the_same_reads_and_a_fourth_on_every_step_stay(tmp_path, monkeypatch):
    branch = CPU_BRANCH + "                out = self.model(x * 0.5)\n                print(out.max().item())\n"
    assert _with_branch(tmp_path, monkeypatch, branch) == ["trainer.py:33", "trainer.py:35", "trainer.py:40", "trainer.py:42"]
