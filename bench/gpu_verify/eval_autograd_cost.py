"""Host cost of recording the autograd graph in an eval-mode forward (GPU405; bench/results/cost_facts.md section 7).

Each model runs in eval mode with autograd on and under `torch.no_grad()`, interleaved (41 samples of 50 forwards
each mode, minimum kept, so a busy moment of a shared host hits both alike). `--device cuda` runs the same on the GPU
(with a synchronize after each sample). Prints one Markdown row per model.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn


class CBoW(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(10000, 64)
        self.linear = nn.Linear(64, 5)

    def forward(self, x):
        return self.linear(self.embedding(x).sum(0).view(1, -1))


def sample(model, x, grad: bool, device: str, n: int = 50) -> float:
    with torch.enable_grad() if grad else torch.no_grad():
        for _ in range(3):
            y = model(x)
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            y = model(x)
            del y
        if device == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for depth in (1, 4):
        layers: list[nn.Module] = []
        for _ in range(depth):
            layers += [nn.Linear(128, 128), nn.ReLU()]
        rows.append((f"MLP, {depth} Linear+ReLU 128-wide, 1 row", nn.Sequential(*layers), torch.randn(1, 128), 2 * depth))
    rows.append(("CBoW (Embedding, sum, view, Linear), 1 sentence of 20 words", CBoW(), torch.randint(0, 10000, (20,)), 4))
    for name, model, x, ops in rows:
        model = model.to(args.device).eval()
        x = x.to(args.device)
        on, off = [], []
        for _ in range(41):
            on.append(sample(model, x, True, args.device))
            off.append(sample(model, x, False, args.device))
        g, ng = min(on), min(off)
        print(f"| {name} | {ops} | {ng:.1f} | {g:.1f} | {g - ng:+.1f} µs | {(g - ng) / ops:+.1f} µs |")


if __name__ == "__main__":
    main()
