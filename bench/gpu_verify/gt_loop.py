"""The ground-truth script: an MLP trained on batches copied from pageable host memory, reading the loss
with .item() every step. `python gt_loop.py` trains (to be run under `gpulint profile`); `--hand-timed FILE`
writes its own per-step times; `--self-measure FILE` also records its own torch.profiler trace and counts the
synchronizations with torch.cuda.set_sync_debug_mode, to check gpulint's figures against."""

import argparse
import json
import time
import warnings

import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--hand-timed", default=None)
    parser.add_argument("--self-measure", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    batches = [(torch.randn(1024, 2048), torch.randint(0, 10, (1024,))) for _ in range(16)]
    model = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(i):
        x, y = batches[i % len(batches)]
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    if args.self_measure:
        for i in range(20):
            step(i)
        torch.cuda.synchronize()
        sync_counts = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            for i in range(20):
                before = len(caught)
                step(i)
                sync_counts.append(len(caught) - before)
            torch.cuda.set_sync_debug_mode("default")
        schedule = torch.profiler.schedule(wait=2, warmup=3, active=10, repeat=1)
        activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=activities, schedule=schedule) as prof:
            for i in range(16):
                step(i)
                prof.step()
        prof.export_chrome_trace(args.self_measure + ".trace.json")
        json.dump({"sync_counts_per_step": sync_counts}, open(args.self_measure, "w"))
        return

    times = []
    for i in range(args.steps):
        start = time.perf_counter()
        step(i)  # .item() waits for the GPU: each step's host time is its GPU time
        times.append(time.perf_counter() - start)
    if args.hand_timed:
        json.dump({"step_s": times}, open(args.hand_timed, "w"))


if __name__ == "__main__":
    main()
