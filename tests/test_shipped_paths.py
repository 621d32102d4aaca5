"""Code that never runs as shipped (`analysis/shipped_paths.py`): a training branch that every call of its
notebook function skips (`train_model(..., skip_training=True)`), loaders whose only use is in such a branch, or
that nothing reads at all in a notebook. A tutorial that downloads its trained checkpoints first and trains only
when the checkpoint file is missing (`if os.path.isfile(ckpt): load else: train`) still trains for whoever runs
it without them: its training branch runs (the ninth corpus's labels and judgements).

The repros are minimal shapes of our own, after the fourth and ninth held-out corpora's notebooks.
"""

from __future__ import annotations

import textwrap

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.shipped_paths import never_runs, unshipped_rows
from tests.conftest import diagnostics
from tests.test_notebooks import concise, notebook

DOWNLOAD = """\
for file_name in pretrained_files:
    file_path = os.path.join(CHECKPOINT_PATH, file_name)
    if not os.path.isfile(file_path):
        urllib.request.urlretrieve(base_url + file_name, file_path)
"""

PLAIN_LOOP = """\
import os
import urllib.request

import torch
from torch import nn, optim
from torch.utils import data
from torchvision import datasets, transforms

# %%
CHECKPOINT_PATH = os.environ.get("PATH_CHECKPOINT", "saved_models/")
device = torch.device("cuda")
base_url = "https://example.org/models/"
pretrained_files = ["net_relu.tar", "net_tanh.tar"]
os.makedirs(CHECKPOINT_PATH, exist_ok=True)
{download}
train_set = datasets.FashionMNIST("data", train=True, transform=transforms.ToTensor(), download=True)
val_loader = data.DataLoader(train_set, batch_size=1024, shuffle=False)


def _model_file(model_path, model_name):
    return os.path.join(model_path, model_name + ".tar")


def evaluate(net, loader):
    net.eval()
    correct = 0
    with torch.no_grad():
        for imgs, labels in loader:
            imgs, labels = imgs.to(device), labels.to(device)
            correct += (net(imgs).argmax(-1) == labels).sum()
    return correct


def train_model(net, model_name, max_epochs=50, skip_training=False):
    file_exists = os.path.isfile(_model_file(CHECKPOINT_PATH, model_name))
    if skip_training or file_exists:
        print("Skipping training...")
    else:
        optimizer = optim.SGD(net.parameters(), lr=1e-2)
        loader = data.DataLoader(train_set, batch_size=256, shuffle=True, pin_memory=True)
        for epoch in range(max_epochs):
            for imgs, labels in loader:
                imgs, labels = imgs.to(device), labels.to(device)
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(net(imgs), labels)
                loss.backward()
                optimizer.step()
                print(loss.item())
            evaluate(net, val_loader)
        torch.save(net.state_dict(), _model_file(CHECKPOINT_PATH, model_name))
    net.load_state_dict(torch.load(_model_file(CHECKPOINT_PATH, model_name)))


for name in ["relu", "tanh"]:
    net = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(device)  # not launch-bound
    train_model(net, f"net_{{name}}", skip_training={skip})
"""

LIGHTNING = """\
import os
import urllib.request

import lightning as L
import torch
from torch.utils import data
from torchvision import datasets, transforms

CHECKPOINT_PATH = os.environ.get("PATH_CHECKPOINT", "saved_models/")
base_url = "https://example.org/models/"
pretrained_files = ["ResNet.ckpt"]
{download}
train_set = datasets.CIFAR10("data", train=True, transform=transforms.ToTensor(), download=True)
train_loader = data.DataLoader(train_set, batch_size=128, shuffle=True, num_workers=4, pin_memory=True)
val_loader = data.DataLoader(train_set, batch_size=128, num_workers=4, pin_memory=True)


class CIFARModule(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(3072, 10)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x.flatten(1)), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def train_model(save_name):
    trainer = L.Trainer(default_root_dir=CHECKPOINT_PATH, accelerator="gpu", devices=1, max_epochs=180)
    pretrained_filename = os.path.join(CHECKPOINT_PATH, save_name + ".ckpt")
    if os.path.isfile(pretrained_filename):
        model = CIFARModule.load_from_checkpoint(pretrained_filename)
    else:
        model = CIFARModule()
        trainer.fit(model, train_loader, val_loader)
    return model


model = train_model("ResNet")
"""


def found(source: str, path: str = "tutorial.py") -> list[str]:
    return [f"{d.location.row} {d.code}" for d in diagnostics(source, path) if d.code]


def plain(download: str = DOWNLOAD, skip: str = "True") -> str:
    return PLAIN_LOOP.format(download=download, skip=skip)


def test_training_branch_every_call_skips_is_silent():
    assert found(plain()) == []


def test_training_branch_after_the_checkpoints_are_downloaded_still_runs():
    # the lesson trains whenever the checkpoint is missing: a downloaded file decides nothing
    # (no GPU105: the per-step `loss.item()` drains the queue before each copy, GPU303 reports it; see step_syncs)
    expected = ["21 GPU101", "44 GPU101", "52 GPU303"]
    assert found(plain(skip="False")) == expected
    assert found(plain(download="", skip="False")) == [f"{int(row) - 4} {code}" for row, code in (e.split() for e in expected)]


def test_in_an_importable_module_a_parameter_stays_open():
    # `train_model` of a library may be called elsewhere with `skip_training=False`: its training branch may run
    source = plain().replace("# %%\n", "")
    assert found(source) == ["20 GPU101", "43 GPU101", "51 GPU303"]


def test_a_function_passed_around_may_be_called_with_anything():
    source = plain() + "runner = train_model\n"
    assert "52 GPU303" in found(source)


def test_the_skipped_branch_and_the_helper_it_alone_calls_are_unshipped_rows():
    source = plain()
    model = SemanticModel(cst.parse_module(source), "tutorial.py", source)
    download = next(call for call in model.calls if model.qualified_name(call.func) == "urllib.request.urlretrieve")
    assert not never_runs(model, download)  # `if not os.path.isfile(file_path): urlretrieve(...)`
    assert unshipped_rows(model) == [(43, 54), (28, 35)]  # the training branch, and `evaluate` it alone calls


def test_lightning_fit_after_the_checkpoints_are_downloaded_is_found():
    assert found(LIGHTNING.format(download=DOWNLOAD)) == ["18 GPU104", "19 GPU104"]


def test_lightning_fit_without_the_download_keeps_its_findings():
    assert found(LIGHTNING.format(download="")) == ["14 GPU104", "15 GPU104"]


NOTEBOOK_LOADERS = """\
import torch
from torch.utils import data
from torchvision import datasets, transforms

device = torch.device("cuda")
model = torch.nn.Linear(784, 10).to(device)
train_data = datasets.MNIST("data", train=True, transform=transforms.ToTensor(), download=True)
test_data = datasets.MNIST("data", train=False, transform=transforms.ToTensor(), download=True)
train_iterator = data.DataLoader(train_data, shuffle=True, batch_size=64)
test_iterator = data.DataLoader(test_data, batch_size=64)
"""

NOTEBOOK_LOOP = """\
opt = torch.optim.Adam(model.parameters())
for epoch in range(10):
    for x, y in train_iterator:
        x, y = x.to(device).flatten(1), y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_notebook_loader_nothing_reads_is_silent():
    lines = concise(notebook(NOTEBOOK_LOADERS, NOTEBOOK_LOOP))
    assert [line.split(" ", 2)[:2] for line in lines if "GPU101" in line] == [["nb.ipynb:cell", "1:9:18:"]]


def test_a_notebook_loader_that_is_iterated_stays_found():
    # evaluated in a loop of its own (one pass after training would be a one-off pass: analysis/one_off_passes.py)
    evaluation = (
        "for epoch in range(10):\n    with torch.no_grad():\n        for x, y in test_iterator:\n"
        "            print(model(x.to(device).flatten(1)).argmax(1))\n"
    )
    lines = concise(notebook(NOTEBOOK_LOADERS, NOTEBOOK_LOOP, evaluation))
    assert sum("GPU101" in line for line in lines) == 2


def test_a_script_global_loader_nothing_reads_here_is_still_reported():
    # another module may import it: only a notebook's (or a function's) unread loader is known to be unused
    rows = found(textwrap.dedent(NOTEBOOK_LOADERS + NOTEBOOK_LOOP), path="lesson.py")
    assert rows.count("10 GPU101") == 1


HELPER = """\
import os
import urllib.request

import torch
from torch import nn

# %%
CHECKPOINT_PATH = "saved_models/"
device = torch.device("cuda")
urllib.request.urlretrieve("https://example.org/net.tar", os.path.join(CHECKPOINT_PATH, "net.tar"))


# %%
def train_epoch(net, optimizer, loader):
    for imgs, labels in loader:
        imgs, labels = imgs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(net(imgs), labels)
        loss.backward()
        optimizer.step()
        print(f"loss={loss.item():4.2f}")


def train_model(net, loader, model_name):
    if os.path.isfile(os.path.join(CHECKPOINT_PATH, model_name + ".tar")):
        net.load_state_dict(torch.load(os.path.join(CHECKPOINT_PATH, model_name + ".tar")))
    else:
        train_epoch(net, torch.optim.SGD(net.parameters(), lr=0.1), loader)
"""


def test_a_notebook_helper_called_only_by_the_training_behind_a_checkpoint_test_is_found():
    assert found(HELPER) == ["21 GPU303"]


def test_the_same_helper_in_an_importable_module_is_api_and_stays_found():
    assert found(HELPER.replace("# %%\n", "")) == ["19 GPU303"]


DATAMODULE = """\
import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


# %%
class MNISTDataModule(pl.LightningDataModule):
    def setup(self, stage=None):
        self.train = datasets.MNIST("data", train=True, transform=transforms.ToTensor())
        self.test = datasets.MNIST("data", train=False, transform=transforms.ToTensor())

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=64, num_workers=4, pin_memory=True, persistent_workers=True)

    def test_dataloader(self):
        return DataLoader(self.test, batch_size=1000)


class LitModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Linear(784, 10)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x.flatten(1)), y)

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("acc", (self.net(x.flatten(1)).argmax(1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())


# %%
trainer = pl.Trainer(accelerator="gpu", devices=1, max_epochs=3)
trainer.fit(LitModel(), MNISTDataModule())
"""


def test_a_notebook_test_dataloader_without_trainer_test_is_silent():
    assert found(DATAMODULE) == []


def test_trainer_test_runs_the_test_dataloader():
    # (one `trainer.test` after the fit reads it once: a one-off pass, silent; tests/test_short_demo_loops.py)
    source = DATAMODULE + "for ckpt in sorted(glob.glob('*.ckpt')):\n    trainer.test(datamodule=MNISTDataModule(), ckpt_path=ckpt)\n"
    assert found(source) == ["17 GPU101"]  # (with GPU102's `pin_memory` advice: loader_bound.py)


def test_a_cli_can_run_the_test_subcommand():
    source = DATAMODULE.replace("import torch\n", "import torch\nfrom lightning.pytorch.cli import LightningCLI\n")
    assert found(source) == ["18 GPU101"]


def test_a_library_data_module_keeps_its_test_dataloader():
    # a module without a fit of its own is a library: a training script elsewhere may call `trainer.test` with it
    library = DATAMODULE.replace("# %%\n", "").split("trainer = pl.Trainer")[0]
    assert found(library) == ["16 GPU101"]


def test_a_script_that_only_fits_and_that_no_module_imports_never_runs_its_test_dataloader():
    # (optuna's Lightning examples: the objective fits; nothing calls `trainer.test`, no CLI can)
    assert found(DATAMODULE.replace("# %%\n", "")) == []


def test_a_notebook_kept_as_script_with_its_fit_commented_out_has_an_unused_loader():
    source = """\
        import torch
        from torch.utils.data import DataLoader
        from torchvision import datasets, transforms

        # %%
        device = torch.device("cuda")
        model = torch.nn.Linear(784, 10).to(device)
        train_loader = DataLoader(datasets.MNIST("data", transform=transforms.ToTensor()), batch_size=64)

        # %%
        # trainer.fit(model, train_loader)
        """
    assert found(textwrap.dedent(source)) == []
    library = textwrap.dedent(source).replace("# %%\n", "")
    assert found(library) == ["7 GPU101"]
