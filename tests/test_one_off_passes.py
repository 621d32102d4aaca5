"""Issue 13's N6 noise on the ninth corpus's fresh read: evaluation passes that run once as shipped, beside
training (`analysis/one_off_passes.py`): a final test pass after the epochs at module level or in a function
called once, a feature extraction under `@torch.no_grad()`, `trainer.test(model, test_loader)`. Their loaders'
worker and pinning advice (GPU101, GPU102) is silent (their per-batch reads, GPU303, stay: issue 13 asks for the
accumulate-on-the-GPU advice there); a per-epoch
evaluation, an evaluation called in a loop, an inference script that trains nothing and a training loop stay.
Minimal shapes of our own after the corpus's (a CelebA classifier's final test pass, Lightning notebooks)."""

from __future__ import annotations

from tests.conftest import findings

HEAD = """\
import torch
import torchvision
from torch.utils.data import DataLoader

device = torch.device("cuda")
train_set = torchvision.datasets.CIFAR10(".", train=True, transform=torchvision.transforms.ToTensor())
test_set = torchvision.datasets.CIFAR10(".", train=False, transform=torchvision.transforms.ToTensor())
model = torchvision.models.resnet50().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
train_dl = DataLoader(train_set, batch_size=64, shuffle=True)
test_dl = DataLoader(test_set, batch_size=64)


def train_epoch(model, train_dl):
    for x, y in train_dl:
        x = x.to(device)
        y = y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


"""

EVALUATE = """\
def evaluate(model, loader):
    correct = 0
    model.eval()
    with torch.no_grad():
        for x, y in loader:
            x = x.to(device)
            y = y.to(device)
            correct += (model(x).argmax(-1) == y).float().sum().cpu()
    return correct


"""

FINAL_PASS = """\
correct = 0
model.eval()
with torch.no_grad():
    for x, y in test_dl:
        x = x.to(device)
        y = y.to(device)
        correct += (model(x).argmax(-1) == y).float().sum().cpu()
print(correct)
"""

# (GPU101's findings carry GPU102's `pin_memory` advice for these torchvision loaders without workers:
# analysis/loader_bound.py; `test_with_workers_the_pinning_advice_follows_the_same_passes` checks GPU102's own.)
TRAIN_LOADER = ["10:12 GPU101"]
TEST_LOADER = ["11:11 GPU101"]
RULES = ("GPU101", "GPU102", "GPU303")


def test_a_final_test_pass_after_training_keeps_only_its_reads():
    # its loader's workers and pinning would save next to nothing; the per-batch reads stay (GPU303 advises
    # accumulating on the GPU and copying once after the loop: issue 13)
    source = HEAD + "for epoch in range(10):\n    train_epoch(model, train_dl)\n\n" + FINAL_PASS
    assert findings(source, select=RULES) == TRAIN_LOADER + ["33:20 GPU303"]


def test_a_final_test_pass_in_a_function_called_once_keeps_only_its_reads():
    source = HEAD + EVALUATE + "for epoch in range(10):\n    train_epoch(model, train_dl)\nprint(evaluate(model, test_dl))\n"
    assert findings(source, select=RULES) == TRAIN_LOADER + ["31:24 GPU303"]


def test_an_evaluation_every_epoch_stays():
    source = HEAD + EVALUATE + "for epoch in range(10):\n    train_epoch(model, train_dl)\n    print(evaluate(model, test_dl))\n"
    assert findings(source, select=RULES) == TRAIN_LOADER + TEST_LOADER + ["31:24 GPU303"]


def test_an_evaluation_called_in_a_loop_of_its_own_stays():
    source = HEAD + EVALUATE + "for epoch in range(10):\n    train_epoch(model, train_dl)\nfor k in range(100):\n    print(evaluate(model, test_dl))\n"
    assert findings(source, select=RULES) == TRAIN_LOADER + TEST_LOADER + ["31:24 GPU303"]


def test_an_inference_script_that_trains_nothing_stays():
    source = HEAD.replace("        loss.backward()\n", "").replace("        opt.step()\n", "") + FINAL_PASS
    found = findings(source, select=RULES)
    assert set(TEST_LOADER) <= set(found) and any(f.endswith("GPU303") for f in found)


def test_a_training_pass_run_once_stays():
    source = HEAD + "for x, y in test_dl:\n    x = x.to(device)\n    y = y.to(device)\n    loss = torch.nn.functional.cross_entropy(model(x), y)\n    opt.zero_grad()\n    loss.backward()\n    opt.step()\n    print(loss.item())\n"
    found = findings(source, select=RULES)
    assert set(TEST_LOADER) <= set(found) and any(f.endswith("GPU303") for f in found)


LIGHTNING = """\
import lightning.pytorch as pl
import torch
import torchvision
from torch.utils.data import DataLoader

train_set = torchvision.datasets.CIFAR10(".", train=True, transform=torchvision.transforms.ToTensor())
val_set = torchvision.datasets.CIFAR10(".", train=False, transform=torchvision.transforms.ToTensor())
val_loader = DataLoader(val_set, batch_size=64, num_workers=4)
test_loader = DataLoader(val_set, batch_size=64, num_workers=4)


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torchvision.models.resnet50()

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test_loss", torch.nn.functional.cross_entropy(self.net(x), y))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())


def train_model(name):
    trainer = pl.Trainer(accelerator="gpu", devices=1, max_epochs=100)
    model = Net()
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
    trainer.fit(model, train_loader, val_loader)
    return trainer.test(model, test_loader)


resnet = train_model("resnet")
"""


def test_a_lightning_test_loader_read_once_after_fit_is_silent():
    assert findings(LIGHTNING, select=("GPU102",)) == ["8:14 GPU102"]  # the validation loader, read every epoch, stays


def test_a_lightning_test_loader_tested_per_model_in_a_loop_stays():
    source = LIGHTNING.replace('resnet = train_model("resnet")\n', 'for name in ["a", "b", "c"]:\n    train_model(name)\n')
    assert findings(source, select=("GPU102",)) == ["8:14 GPU102", "9:15 GPU102"]


def test_a_loader_also_fit_in_a_branch_the_shipped_settings_skip_stays():
    """Training behind a flag off by default still runs for whoever trains: the loader it validates with is
    read every epoch there, so testing with it once elsewhere does not make it a one-off loader."""
    source = LIGHTNING.replace("import lightning.pytorch as pl\n", "import argparse\nimport lightning.pytorch as pl\n")
    source = source.replace("    trainer.fit(model, train_loader, val_loader)\n    return trainer.test(model, test_loader)\n",
                            "    if args.train:\n        trainer.fit(model, train_loader, val_loader)\n    trainer.test(model, test_loader)\n    return trainer.test(model, val_loader)\n")
    source = source.replace('resnet = train_model("resnet")\n', 'parser = argparse.ArgumentParser()\nparser.add_argument("--train", action="store_true")\nargs = parser.parse_args()\nresnet = train_model("resnet")\n')
    assert "9:14 GPU102" in findings(source, select=("GPU102",))


def test_a_loader_also_fit_behind_a_downloaded_checkpoint_stays():
    """The lessons download pretrained checkpoints and fit only when none is there (the shipped run skips
    the fit): the validation loader handed to that fit is still read every epoch by whoever trains."""
    source = LIGHTNING.replace("import lightning.pytorch as pl\n", "import os\nimport urllib.request\nimport lightning.pytorch as pl\n")
    source = source.replace("    trainer.fit(model, train_loader, val_loader)\n    return trainer.test(model, test_loader)\n",
                            "    path = os.path.join(CHECKPOINT_PATH, name + \".ckpt\")\n    if os.path.isfile(path):\n        model = Net.load_from_checkpoint(path)\n    else:\n        trainer.fit(model, train_loader, val_loader)\n    trainer.test(model, test_loader)\n    return trainer.test(model, val_loader)\n")
    source = source.replace('resnet = train_model("resnet")\n', 'CHECKPOINT_PATH = "saved_models"\nfor file_name in ["resnet.ckpt"]:\n    file_path = os.path.join(CHECKPOINT_PATH, file_name)\n    if not os.path.isfile(file_path):\n        urllib.request.urlretrieve("https://example.org/" + file_name, file_path)\nresnet = train_model("resnet")\n')
    assert findings(source, select=("GPU102",)) == ["10:14 GPU102"]


def test_with_workers_the_pinning_advice_follows_the_same_passes():
    head = HEAD.replace("shuffle=True)", "shuffle=True, num_workers=2)").replace("batch_size=64)\n", "batch_size=64, num_workers=2)\n")
    # 160 CIFAR images (1.9 MB): pinning saves ~0.13 ms, a measurable share of a ResNet step (64 images save under 3 %)
    head = head.replace("batch_size=64", "batch_size=160")
    # no read per batch: a read before each 0.8 MB copy would leave pinning nothing but the bytes (`drained_copy_cheap`)
    evaluate = EVALUATE.replace(".sum().cpu()", ".sum()")
    once = head + evaluate + "for epoch in range(10):\n    train_epoch(model, train_dl)\nprint(evaluate(model, test_dl))\n"
    assert findings(once, select=("GPU101", "GPU102")) == ["10:12 GPU102"]
    every = head + evaluate + "for epoch in range(10):\n    train_epoch(model, train_dl)\n    print(evaluate(model, test_dl))\n"
    assert findings(every, select=("GPU101", "GPU102")) == ["10:12 GPU102", "11:11 GPU102"]
    # the same per-epoch evaluation reading its count every batch copies into an empty queue: GPU102 is silent on it
    read_every_batch = head + EVALUATE + "for epoch in range(10):\n    train_epoch(model, train_dl)\n    print(evaluate(model, test_dl))\n"
    assert findings(read_every_batch, select=("GPU101", "GPU102")) == ["10:12 GPU102"]
