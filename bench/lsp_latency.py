"""Benchmark: how soon the language server publishes diagnostics after an edit to a 1,000-line training script.

    python bench/lsp_latency.py [--lines 1000] [--edits 20] [--out bench/results/lsp_latency.md]

The script is generated (never committed): a training program in the shape real ones have (argparse options,
datasets, a model, AMP, a training loop with logging and checkpoints, evaluation) with the usual slips that
gpulint reports, padded with more model blocks and metrics to the requested length. `gpulint server` runs as
a subprocess, driven by the test suite's LSP client (`tests/lsp_client.py`) over stdio, as an editor drives it.

Measured, with the default settings (50 ms debounce):
  * open: `didOpen` -> the first `publishDiagnostics`;
  * edit: `didChange` (one line changed in the training loop) -> `publishDiagnostics` for that version, one edit
    at a time; the wall time, and the CPU time the server spent (from /proc, so that a busy machine shows);
  * burst: ten changes 30 ms apart (typing) -> diagnostics for the last one;
  * for comparison, the CPU time of `api.check` on the same text in this process (what the server's check costs
    without the protocol around it).

Writes the figures to `--out`. Numbers are recorded, not asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.lsp_client import LspClient  # noqa: E402

HEAD = '''\
"""Train an image classifier: mixed precision, cosine schedule, checkpoints, evaluation every epoch."""

import argparse
import json
import math
import os
import random
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


def get_args():
    parser = argparse.ArgumentParser(description="image classification")
    parser.add_argument("--data", type=str, default="data/")
    parser.add_argument("--out", type=str, default="runs/")
    parser.add_argument("--epochs", type=int, default=90)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--amp", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--resume", type=str, default="")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--image-size", type=int, default=224)
    return parser.parse_args()


class SyntheticImages(Dataset):
    def __init__(self, size, image_size, num_classes, seed=0):
        self.size = size
        self.image_size = image_size
        self.num_classes = num_classes
        self.seed = seed

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(self.seed + index)
        image = torch.randn(3, self.image_size, self.image_size, generator=generator)
        label = int(torch.randint(self.num_classes, (1,), generator=generator))
        return image, label


class AverageMeter:
    def __init__(self, name):
        self.name = name
        self.reset()

    def reset(self):
        self.sum = 0.0
        self.count = 0

    def update(self, value, n=1):
        self.sum += value * n
        self.count += n

    @property
    def avg(self):
        return self.sum / max(self.count, 1)


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        return [correct[:k].reshape(-1).float().sum(0) * 100.0 / target.size(0) for k in topk]


def cosine_lr(optimizer, epoch, step, steps_per_epoch, args):
    total = args.epochs * steps_per_epoch
    current = epoch * steps_per_epoch + step
    warmup = args.warmup * steps_per_epoch
    if current < warmup:
        lr = args.lr * current / max(warmup, 1)
    else:
        lr = 0.5 * args.lr * (1 + math.cos(math.pi * (current - warmup) / max(total - warmup, 1)))
    for group in optimizer.param_groups:
        group["lr"] = lr
    return lr
'''

BLOCK = '''

class Block{n}(nn.Module):
    def __init__(self, channels, expansion=4, drop=0.0):
        super().__init__()
        hidden = channels * expansion
        self.conv1 = nn.Conv2d(channels, hidden, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(hidden)
        self.conv2 = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False)
        self.bn2 = nn.BatchNorm2d(hidden)
        self.conv3 = nn.Conv2d(hidden, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)
        self.drop = nn.Dropout(drop)

    def forward(self, x):
        residual = x
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(x)))
        x = self.bn3(self.conv3(x))
        return F.relu(self.drop(x) + residual)
'''

METRIC = '''

def metric_{n}(output, target, eps=1e-6):
    """Macro precision over the classes present in the batch (variant {n})."""
    pred = output.argmax(dim=1)
    classes = target.unique()
    scores = []
    for c in classes:
        tp = ((pred == c) & (target == c)).sum()
        fp = ((pred == c) & (target != c)).sum()
        scores.append(tp / (tp + fp + eps))
    return torch.stack(scores).mean()
'''

TAIL = '''

class Net(nn.Module):
    def __init__(self, width, depth, num_classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.blocks = nn.Sequential(*[Block0(width) for _ in range(depth)])
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        x = self.blocks(self.stem(x))
        return self.head(x.mean(dim=(2, 3)))


def save_checkpoint(model, optimizer, scaler, epoch, path):
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(), "epoch": epoch}
    torch.save(state, path)


def train_one_epoch(model, loader, criterion, optimizer, scaler, epoch, device, args):
    model.train()
    losses = AverageMeter("loss")
    top1 = AverageMeter("acc@1")
    start = time.time()
    for step, (images, target) in enumerate(loader):
        lr = cosine_lr(optimizer, epoch, step, len(loader), args)
        images = images.to(device)
        target = target.to(device)
        with torch.autocast("cuda", enabled=args.amp):
            output = model(images)
            loss = criterion(output, target)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        losses.update(loss.item(), images.size(0))
        top1.update(accuracy(output, target)[0].item(), images.size(0))
        if step % args.log_every == 0:
            elapsed = time.time() - start
            print(f"epoch {epoch} step {step} loss {losses.avg:.4f} acc {top1.avg:.2f} lr {lr:.5f} {elapsed:.1f}s")
    return losses.avg, top1.avg


def evaluate(model, loader, criterion, device):
    model.eval()
    losses = AverageMeter("loss")
    top1 = AverageMeter("acc@1")
    for images, target in loader:
        images = images.to(device)
        target = target.to(device)
        output = model(images)
        loss = criterion(output, target)
        losses.update(loss.item(), images.size(0))
        top1.update(accuracy(output, target)[0].item(), images.size(0))
    return losses.avg, top1.avg


def main():
    args = get_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device("cuda")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train_set = SyntheticImages(100_000, args.image_size, args.num_classes, args.seed)
    val_set = SyntheticImages(10_000, args.image_size, args.num_classes, args.seed + 1)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    val_loader = DataLoader(val_set, batch_size=args.batch_size, num_workers=args.workers)
    model = Net(args.width, args.depth, args.num_classes).to(device)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp)
    start_epoch = 0
    if args.resume:
        state = torch.load(args.resume, map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch = state["epoch"] + 1
    history = []
    for epoch in range(start_epoch, args.epochs):
        train_loss, train_acc = train_one_epoch(model, train_loader, criterion, optimizer, scaler, epoch, device, args)
        val_loss, val_acc = evaluate(model, val_loader, criterion, device)
        history.append({"epoch": epoch, "train_loss": train_loss, "val_loss": val_loss, "val_acc": val_acc})
        save_checkpoint(model, optimizer, scaler, epoch, out / "last.pt")
        (out / "history.json").write_text(json.dumps(history, indent=2))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
'''

EDIT_MARKER = "        losses.update(loss.item(), images.size(0))\n"


def training_script(lines: int) -> str:
    """HEAD + model blocks and metrics (alternating) + TAIL: at least `lines` lines."""
    body, n = [], 0
    while len((HEAD + "".join(body) + TAIL).splitlines()) < lines:
        body.append((BLOCK if n % 2 == 0 else METRIC).format(n=n // 2))
        n += 1
    return HEAD + "".join(body) + TAIL


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux), in seconds."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def edited(text: str, i: int) -> str:
    """The script with the line in the training loop changed (a different logging call each time)."""
    return text.replace(EDIT_MARKER, EDIT_MARKER.replace("images.size(0))", f"images.size(0))  # edit {i}"), 1)


def measure(lines: int, edits: int) -> dict:
    text = training_script(lines)
    with tempfile.TemporaryDirectory(prefix="gpulint-lsp-bench-") as folder:
        root = Path(folder)
        (root / "pyproject.toml").write_text("[tool.gpulint]\n", encoding="utf-8")
        path = root / "train.py"
        path.write_text(text, encoding="utf-8")
        client = LspClient(root)
        try:
            client.initialize()
            start = time.perf_counter()
            uri = client.open(path, text)
            first = client.diagnostics(uri, 1)
            opened = time.perf_counter() - start
            walls, cpus = [], []
            version = 1
            for i in range(edits):
                version += 1
                after = len(client.messages)
                cpu = cpu_seconds(client.process.pid)
                start = time.perf_counter()
                client.change(uri, edited(text, i), version)
                client.diagnostics(uri, version, after=after)
                walls.append(time.perf_counter() - start)
                cpus.append(cpu_seconds(client.process.pid) - cpu)
            after = len(client.messages)
            for i in range(10):
                version += 1
                client.change(uri, edited(text, 1000 + i), version)
                last = time.perf_counter()
                time.sleep(0.03)
            client.diagnostics(uri, version, after=after)
            burst = time.perf_counter() - last
            client.shutdown()
        finally:
            client.kill()
    return {
        "check_cpu": _check_cpu(text),
        "lines": len(text.splitlines()),
        "findings": sorted({d["code"] for d in first}),
        "open": opened,
        "walls": walls,
        "cpus": cpus,
        "burst": burst,
    }


def _check_cpu(text: str, repeat: int = 5) -> list[float]:
    from gpulint import api

    settings = api.discover_settings(REPO)
    api.check(api.Source(text, "train.py"), settings)  # imports and first-use costs
    times = []
    for _ in range(repeat):
        start = time.process_time()
        api.check(api.Source(text, "train.py"), settings)
        times.append(time.process_time() - start)
    return times


def report(result: dict) -> str:
    def ms(seconds: float) -> str:
        return f"{seconds * 1000:.0f} ms"

    walls, cpus = sorted(result["walls"]), sorted(result["cpus"])
    p90 = walls[min(len(walls) - 1, int(len(walls) * 0.9))]
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("n/a",)
    return textwrap.dedent(
        f"""\
        # Language server latency

        `python bench/lsp_latency.py` on a generated {result['lines']}-line training script (findings:
        {', '.join(result['findings'])}); `gpulint server` over stdio, default settings (50 ms debounce).

        | measured | time |
        |---|---|
        | open -> first diagnostics | {ms(result['open'])} |
        | edit -> diagnostics, median of {len(walls)} | {ms(statistics.median(walls))} |
        | edit -> diagnostics, 90th percentile | {ms(p90)} |
        | edit -> diagnostics, slowest | {ms(walls[-1])} |
        | server CPU per edit, median | {ms(statistics.median(cpus))} |
        | `api.check` CPU in-process, median of {len(result['check_cpu'])} | {ms(statistics.median(result['check_cpu']))} |
        | burst of 10 changes 30 ms apart -> diagnostics for the last | {ms(result['burst'])} |

        Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, load average
        {', '.join(f'{x:.1f}' for x in load) if isinstance(load[0], float) else 'n/a'} at the end of the run.
        """
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "lsp_latency.md")
    args = parser.parse_args()
    text = report(measure(args.lines, args.edits))
    args.out.write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
