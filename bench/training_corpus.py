"""A generated training-heavy corpus for bench/lint_speed.py: projects shaped like research code, vendor
examples and tutorials (data / models / utils / engine / train modules, argparse, helpers called every
step), where nearly every file passes the prefilter. Deterministic for a seed; about 10 files a project.

    python bench/training_corpus.py OUT [--projects 30] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import textwrap
from pathlib import Path

_LAYERS = ("nn.Linear({a}, {b})", "nn.Conv2d({a}, {b}, 3, padding=1)", "nn.BatchNorm1d({a})", "nn.LayerNorm({a})", "nn.Dropout(0.{c})")
_ACTIVATIONS = ("nn.ReLU()", "nn.GELU()", "nn.SiLU()", "nn.Tanh()")
_DEVICES = (
    'torch.device("cuda" if torch.cuda.is_available() else "cpu")',
    "torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device(\"cpu\")",
    'torch.device(f"cuda:{args.local_rank}")',
    "torch.device(args.device)",
)


def _model_module(rng: random.Random, name: str) -> str:
    classes = []
    for index in range(rng.randint(6, 14)):
        width = rng.choice((32, 64, 128, 256))
        layers = ",\n            ".join(
            rng.choice(_LAYERS).format(a=width, b=width, c=rng.randint(1, 5)) + ", " + rng.choice(_ACTIVATIONS) for _ in range(rng.randint(2, 6))
        )
        classes.append(f'''
class {name}Block{index}(nn.Module):
    """Block {index}: {rng.randint(2, 6)} layers of width {width}."""

    def __init__(self, width: int = {width}, dropout: float = 0.{rng.randint(1, 5)}) -> None:
        super().__init__()
        self.width = width
        self.body = nn.Sequential(
            {layers},
        )
        self.head = nn.Linear(width, {rng.choice((2, 10, 100, 1000))})
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        x = self.body(x)
        if x.shape == residual.shape:
            x = x + residual
        return self.head(self.dropout(x))
''')
    factory = f'''

def build_model(name: str = "{name.lower()}", pretrained: bool = False) -> nn.Module:
    blocks = {{"{name.lower()}": {name}Block0}}
    model = blocks[name]()
    if pretrained:
        model.load_state_dict(torch.load("weights.pt", map_location="cpu"))
    return model
'''
    return '"""Models."""\n\nimport torch\nfrom torch import nn\n' + "".join(classes) + factory


def _data_module(rng: random.Random) -> str:
    workers = rng.choice(("0", "4", "args.workers", "workers"))
    pin = rng.choice(("", ", pin_memory=True", ", pin_memory=torch.cuda.is_available()"))
    persistent = rng.choice(("", ", persistent_workers=True")) if workers != "0" else ""
    batch = rng.choice(("batch_size", "8", "64", "256"))
    return f'''"""Datasets and loaders."""

import random

import torch
from torch.utils.data import DataLoader, Dataset


class Synthetic(Dataset):
    def __init__(self, size: int, features: int = 64, classes: int = 10, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.inputs = torch.randn(size, features, generator=generator)
        self.targets = torch.randint(0, classes, (size,), generator=generator)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        x = self.inputs[index]
        if random.random() < 0.5:
            x = x.flip(0)
        return x, self.targets[index]


def collate(batch):
    inputs, targets = zip(*batch)
    return torch.stack(inputs), torch.stack(targets)


def make_loaders(args, batch_size: int = 64, workers: int = {rng.randint(0, 8)}):
    train = DataLoader(Synthetic(4096), batch_size={batch}, shuffle=True, num_workers={workers}{pin}{persistent}, collate_fn=collate)
    val = DataLoader(Synthetic(512, seed=1), batch_size={batch}, num_workers={workers}{pin})
    return train, val
'''


def _utils_module(rng: random.Random) -> str:
    accuracy_sync = rng.choice((".item()", ""))
    return f'''"""Helpers the training loop calls."""

import time

import torch


class AverageMeter:
    def __init__(self, name: str) -> None:
        self.name = name
        self.reset()

    def reset(self) -> None:
        self.sum = 0.0
        self.count = 0

    def update(self, value, n: int = 1) -> None:
        self.sum += value * n
        self.count += n

    @property
    def average(self) -> float:
        return self.sum / max(self.count, 1)


def to_device(batch, device):
    inputs, targets = batch
    return inputs.to(device{rng.choice(("", ", non_blocking=True"))}), targets.to(device{rng.choice(("", ", non_blocking=True"))})


def accuracy(output, target, topk=(1,)):
    maxk = max(topk)
    _, predicted = output.topk(maxk, 1, True, True)
    correct = predicted.t().eq(target.view(1, -1).expand_as(predicted.t()))
    return [correct[:k].reshape(-1).float().sum(0){accuracy_sync} * 100.0 / target.size(0) for k in topk]


def log_metrics(step: int, loss, every: int = {rng.choice((10, 50, 100))}) -> None:
    if step % every == 0:
        print(f"step {{step}} loss {{loss.item():.4f}} at {{time.strftime('%H:%M:%S')}}")


def save_checkpoint(model, optimizer, epoch: int, path: str = "checkpoint.pt") -> None:
    torch.save({{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}}, path)
'''


def _engine_module(rng: random.Random, package: bool) -> str:
    prefix = "." if package else ""
    sync = rng.choice(("        losses.update(loss.item(), inputs.size(0))\n", "        losses.update(loss.detach(), inputs.size(0))\n"))
    amp = rng.random() < 0.5
    forward = (
        "        with torch.autocast(device.type, enabled=use_amp):\n            output = model(inputs)\n            loss = criterion(output, targets)\n"
        if amp
        else "        output = model(inputs)\n        loss = criterion(output, targets)\n"
    )
    return f'''"""Training and evaluation loops."""

import torch

from {prefix}utils import AverageMeter, accuracy, log_metrics, to_device


def train_one_epoch(model, criterion, loader, optimizer, device, epoch: int, use_amp: bool = False):
    model.train()
    losses = AverageMeter("loss")
    for step, batch in enumerate(loader):
        inputs, targets = to_device(batch, device)
{forward}        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
{sync}        log_metrics(step, loss)
    return losses.average


@torch.no_grad()
def evaluate(model, criterion, loader, device):
    model.eval()
    top1 = AverageMeter("acc@1")
    for inputs, targets in loader:
        inputs, targets = inputs.to(device), targets.to(device)
        output = model(inputs)
        top1.update(accuracy(output, targets)[0], inputs.size(0))
    return top1.average
'''


def _train_script(rng: random.Random, package: str | None) -> str:
    device = rng.choice(_DEVICES)
    imports = (
        f"from {package}.data import make_loaders\nfrom {package}.engine import evaluate, train_one_epoch\nfrom {package}.models import build_model\n"
        if package
        else "from data import make_loaders\nfrom engine import evaluate, train_one_epoch\nfrom models import build_model\n"
    )
    return f'''"""Entry point."""

import argparse

import torch
from torch import nn

{imports}

def get_args():
    parser = argparse.ArgumentParser(description="train")
    parser.add_argument("--epochs", type=int, default={rng.randint(1, 100)})
    parser.add_argument("--lr", type=float, default=0.{rng.randint(1, 9)})
    parser.add_argument("--workers", type=int, default={rng.randint(0, 8)})
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--local-rank", type=int, default=0)
    parser.add_argument("--amp", action="store_true")
    return parser.parse_args()


def main(args) -> None:
    device = {device}
    train_loader, val_loader = make_loaders(args)
    model = build_model().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.{rng.choice(("SGD", "AdamW", "Adam"))}(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, args.epochs)
    for epoch in range(args.epochs):
        loss = train_one_epoch(model, criterion, train_loader, optimizer, device, epoch, args.amp)
        accuracy = evaluate(model, criterion, val_loader, device)
        scheduler.step()
        print(f"epoch {{epoch}}: loss {{loss:.3f}} accuracy {{accuracy:.2f}}")


if __name__ == "__main__":
    main(get_args())
'''


def _tutorial(rng: random.Random) -> str:
    report = rng.choice(("if batch_idx % log_interval == 0:\n            print(loss.item())", "print(f'epoch {epoch}: {loss.item():.4f}')"))
    return f'''"""A one-file tutorial."""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(784, {rng.choice((128, 256, 512))})
        self.fc2 = nn.Linear({rng.choice((128, 256, 512))}, 10)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x.flatten(1)))), dim=1)


def train(model, device, loader, optimizer, epoch, log_interval: int = 10):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        {report}


def test(model, device, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            correct += model(data).argmax(1).eq(target).sum().item()
    return correct / len(loader.dataset)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(1024, 1, 28, 28), torch.randint(0, 10, (1024,)))
    loader = DataLoader(data, batch_size={rng.choice((1, 32, 64))}, shuffle=True)
    model = Net().to(device)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    for epoch in range(1, 4):
        train(model, device, loader, optimizer, epoch)
        print(test(model, device, loader))


if __name__ == "__main__":
    main()
'''


def generate(target: Path, projects: int = 30, seed: int = 0) -> list[Path]:
    """Write the corpus under `target` (emptied first); the files written, in order."""
    rng = random.Random(seed)
    written: list[Path] = []

    def write(path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        written.append(path)

    for index in range(projects):
        root = target / f"project{index:02d}"
        kind = index % 3
        if kind == 0:  # research layout
            write(root / "data.py", _data_module(rng))
            write(root / "models.py", _model_module(rng, f"Net{index}"))
            write(root / "utils.py", _utils_module(rng))
            write(root / "engine.py", _engine_module(rng, False))
            write(root / "train.py", _train_script(rng, None))
            for extra in range(rng.randint(3, 6)):
                write(root / f"models_{extra}.py", _model_module(rng, f"Extra{extra}"))
        elif kind == 1:  # vendor layout: a package and a main script
            package = root / f"pkg{index}"
            write(package / "__init__.py", "")
            write(package / "data.py", _data_module(rng))
            write(package / "models.py", _model_module(rng, f"Vendor{index}"))
            write(package / "utils.py", _utils_module(rng))
            write(package / "engine.py", _engine_module(rng, True))
            write(root / "main.py", _train_script(rng, f"pkg{index}"))
            for extra in range(rng.randint(3, 5)):
                write(package / f"layers_{extra}.py", _model_module(rng, f"Layer{extra}"))
        else:  # tutorials
            for extra in range(rng.randint(8, 11)):
                write(root / f"tutorial_{extra}.py", _tutorial(rng))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("--projects", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    files = generate(Path(args.out), args.projects, args.seed)
    print(f"{len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
