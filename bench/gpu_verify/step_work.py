"""A step's GPU work against its kernel time (the calibration of `model_size.LAUNCH_BOUND_FLOPS` and
`UPDATE_PARAMETERS`): not yet run on a GPU. Two sweeps, each step forward + cross-entropy + backward + Adam:
- `bag-V`: an `nn.EmbeddingBag(V, 64)` + `nn.Linear(64, 4)` sentence classifier, one 20-word sentence a step, V from
  16k to 1M words: the lookup does no multiply, but Adam updates the whole (dense) table each step;
- `mlp-G`: a 784-W-10 MLP at batch 256, W chosen so the step does about G GFLOP (6 x parameters x batch).

    python bench/gpu_verify/step_work.py OUT.json [--quick]

(`--quick`: the smallest model of each sweep, a smoke test that also runs on a CPU.)

Each row: the step's FLOPs and parameters, kernels per step, GPU kernel time per step (torch.profiler, 10 steps) and
the host's enqueue time per step.
"""

import json
import sys
import time

import torch
from torch import nn

QUICK = "--quick" in sys.argv
OUT = next(a for a in sys.argv[1:] if not a.startswith("--"))
DEV = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Bag(nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, 64)
        self.out = nn.Linear(64, 4)

    def forward(self, tokens, offsets):
        return self.out(self.bag(tokens, offsets))


def measure(name, model, inputs, target, flops):
    optimizer = torch.optim.Adam(model.parameters())

    def step():
        loss = nn.functional.cross_entropy(model(*inputs), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    for _ in range(10):
        step()
    if DEV.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        step()
    enqueue = (time.perf_counter() - start) / 20
    if DEV.type == "cuda":
        torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CUDA] if DEV.type == "cuda" else [torch.profiler.ProfilerActivity.CPU]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(10):
            step()
        if DEV.type == "cuda":
            torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
    kernel_us = sum(e.self_device_time_total for e in events) / 10 if events else None
    kernels = sum(e.count for e in events) / 10 if events else None
    params = sum(p.numel() for p in model.parameters())
    return {"model": name, "parameters": params, "step_gflop": flops / 1e9, "kernels_per_step": kernels,
            "gpu_kernel_ms": None if kernel_us is None else kernel_us / 1000, "enqueue_ms": enqueue * 1000}


def main():
    rows = []
    for vocab in (16_000, 100_000, 300_000, 1_000_000)[: 1 if QUICK else None]:
        tokens = torch.randint(0, vocab, (20,), device=DEV)
        offsets = torch.zeros(1, dtype=torch.long, device=DEV)
        rows.append(measure(f"bag-{vocab}", Bag(vocab).to(DEV), (tokens, offsets), torch.zeros(1, dtype=torch.long, device=DEV), 6 * 64 * 4))
    for gflop in (0.1, 0.25, 0.5, 1, 2, 8)[: 1 if QUICK else None]:
        width = max(8, int(gflop * 1e9 / (6 * 256 * (784 + 10))))
        model = nn.Sequential(nn.Linear(784, width), nn.ReLU(), nn.Linear(width, 10)).to(DEV)
        x, y = torch.randn(256, 784, device=DEV), torch.randint(0, 10, (256,), device=DEV)
        rows.append(measure(f"mlp-{gflop}", model, (x,), y, 6 * 256 * (784 * width + width * 10)))
        print(json.dumps(rows[-1]), flush=True)
    json.dump({"device": torch.cuda.get_device_name(0) if DEV.type == "cuda" else "cpu", "torch": torch.__version__, "rows": rows},
              open(OUT, "w"), indent=1)


if __name__ == "__main__":
    main()
