"""What each pattern gpulint reports costs on a real GPU, as a function of what the code shows (batch bytes,
model size, step length): the measurements behind the lines gpulint draws between a finding and noise
(`SMALL_BATCH_BYTES`, `LAUNCH_BOUND_PARAMETERS`, ...). Results: bench/results/cost_facts.md.

    python bench/gpu_verify/cost_facts.py OUT.json [--quick]

Sections (each written to OUT.json as soon as it is measured, so a run cut short keeps what it has):
- copies: one host-to-device copy of B bytes, pageable and blocking vs pinned and non_blocking, alone;
- steps: training steps of MLPs and CNNs from 10k to 50M parameters, each with the patterns gpulint reports added
  one at a time (a pageable copy of the batch, a pinned non-blocking one, `.item()`, `torch.cuda.synchronize()`,
  `torch.cuda.empty_cache()`, a CPU-made `zeros(...).cuda()`, `model.to(device)`, and 1 ms of host work per step
  alone, with `.item()` and with a pageable copy): the step time each adds;
- workers: how long a DataLoader with workers takes to hand out its first batch (what `persistent_workers` saves
  each epoch);
- precision: float32 matmul with and without TF32, bf16 autocast, and Adam's step for-each vs fused;
- zero_grad: `set_to_none=False` vs True.
`--quick` runs every section with few repeats (a smoke test, also on a CPU-only machine where CUDA parts are
skipped).
"""

import json
import os
import statistics
import sys
import time

import torch
from torch import nn

QUICK = "--quick" in sys.argv
OUT = next(a for a in sys.argv[1:] if not a.startswith("--"))
CUDA = torch.cuda.is_available()
DEV = torch.device("cuda" if CUDA else "cpu")
RESULTS = {"env": {"torch": torch.__version__, "cuda": torch.version.cuda, "quick": QUICK,
                   "device": torch.cuda.get_device_name(0) if CUDA else "cpu", "cpus": os.cpu_count()}}


def save():
    with open(OUT + ".part", "w") as f:
        json.dump(RESULTS, f, indent=1)
    os.replace(OUT + ".part", OUT)


def sync():
    if CUDA:
        torch.cuda.synchronize()


def timed(fn, reps, warmup):
    """Median seconds of one `fn()` over `reps` calls, each ended by a device synchronize."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


SECTIONS = {}


def section(name):
    def wrap(fn):
        SECTIONS[name] = fn
        return fn
    return wrap


def run_section(name):
    start = time.perf_counter()
    try:
        RESULTS[name] = SECTIONS[name]()
    except Exception as error:  # one section's failure must not lose the others
        RESULTS[name] = {"error": f"{type(error).__name__}: {error}"}
    RESULTS.setdefault("seconds", {})[name] = round(time.perf_counter() - start, 1)
    save()
    print(f"{name}: {RESULTS['seconds'][name]} s", flush=True)


@section("copies")
def copies():
    rows = []
    sizes = [64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 16 << 20, 64 << 20]
    for size in sizes[:3] if QUICK and not CUDA else sizes:
        host = torch.randint(0, 255, (size,), dtype=torch.uint8)
        reps = 5 if QUICK else 30
        row = {"bytes": size, "pageable_blocking_s": timed(lambda: host.to(DEV), reps, 3)}
        if CUDA:
            pinned = host.pin_memory()
            row["pinned_nonblocking_s"] = timed(lambda: pinned.to(DEV, non_blocking=True), reps, 3)
            row["pin_memory_call_s"] = timed(lambda: host.pin_memory(), reps, 3)
            row["pageable_nonblocking_s"] = timed(lambda: host.to(DEV, non_blocking=True), reps, 3)
            start = time.perf_counter()
            for _ in range(reps):
                pinned.to(DEV, non_blocking=True)
            row["pinned_nonblocking_enqueue_s"] = (time.perf_counter() - start) / reps
            sync()
        rows.append(row)
    return rows


def mlp(width, depth, inputs, classes=10):
    layers, last = [], inputs
    for _ in range(depth):
        layers += [nn.Linear(last, width), nn.ReLU()]
        last = width
    return nn.Sequential(*layers, nn.Linear(last, classes))


def cnn(channels, blocks, in_channels, size, classes=10):
    layers, last = [], in_channels
    for i in range(blocks):
        layers += [nn.Conv2d(last, channels * 2 ** i, 3, padding=1), nn.BatchNorm2d(channels * 2 ** i), nn.ReLU()]
        if size > 4:
            layers.append(nn.MaxPool2d(2))
            size //= 2
        last = channels * 2 ** i
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(last, classes))


# name (with its parameter count), builder, one sample's shape, batch size; runs 5-8 named some by a planned size
# (mlp-300k = 269k, lenet-60k = 0.9k, cnn-300k = 95k, cnn-1m = 0.9M, cnn-5m-cifar = 3.5M, mlp-4m = 4.2M, cnn-5m-224 = 1.6M)
MODELS = [
    ("mlp-10k-mnist", lambda: mlp(12, 1, 784), (784,), 64),
    ("mlp-100k-mnist", lambda: mlp(128, 1, 784), (784,), 64),
    ("mlp-270k-mnist", lambda: mlp(256, 2, 784), (784,), 128),
    ("cnn-0.9k-mnist", lambda: cnn(6, 2, 1, 28), (1, 28, 28), 64),
    ("cnn-95k-cifar", lambda: cnn(32, 3, 3, 32), (3, 32, 32), 128),
    ("cnn-0.9m-cifar", lambda: cnn(48, 4, 3, 32), (3, 32, 32), 128),
    ("cnn-3.5m-cifar", lambda: cnn(96, 4, 3, 32), (3, 32, 32), 128),
    ("mlp-4.2m-wide", lambda: mlp(2048, 1, 2048), (2048,), 512),
    ("cnn-1.6m-224", lambda: cnn(64, 4, 3, 224), (3, 224, 224), 64),
    ("mlp-50m", lambda: mlp(4096, 3, 4096), (4096,), 1024),
]
VARIANTS = ("resident", "pageable_copy", "pinned_copy", "item", "pageable_copy_item", "synchronize",
            "empty_cache", "zeros_cuda", "zeros_device", "module_to", "host_work", "host_work_item",
            "host_work_pageable_copy")
_chosen = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--variants=")), None)
if _chosen:
    VARIANTS = ("resident",) + tuple(v for v in VARIANTS if v in _chosen and v != "resident")
HOST_WORK_S = 0.001  # Python-side work a step does on the host (batch preparation in the training process)


def host_work():
    start = time.perf_counter()
    while time.perf_counter() - start < HOST_WORK_S:
        pass


@section("steps")
def steps():
    rows = []
    for name, build, shape, batch in MODELS[:3] if QUICK and not CUDA else MODELS:
        torch.manual_seed(0)
        model = build().to(DEV)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        params = sum(p.numel() for p in model.parameters())
        host_x = torch.randn(batch, *shape)
        host_y = torch.randint(0, 10, (batch,))
        pinned = (host_x.pin_memory(), host_y.pin_memory()) if CUDA else (host_x, host_y)
        resident = (host_x.to(DEV), host_y.to(DEV))

        def step(x, y, variant):
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if variant in ("item", "pageable_copy_item", "host_work_item"):
                loss.item()
            elif variant == "synchronize":
                sync()
            elif variant == "empty_cache" and CUDA:
                torch.cuda.empty_cache()
            elif variant == "zeros_cuda":
                torch.zeros(batch, 64).to(DEV)
            elif variant == "zeros_device":
                torch.zeros(batch, 64, device=DEV)
            elif variant == "module_to":
                model.to(DEV)

        def run(variant, count):
            for _ in range(count):
                if variant.startswith("host_work"):
                    host_work()  # the next batch made in the training process, while the GPU runs the last step
                if variant in ("pageable_copy", "pageable_copy_item", "host_work_pageable_copy"):
                    x, y = host_x.to(DEV), host_y.to(DEV)
                elif variant == "pinned_copy":
                    x, y = pinned[0].to(DEV, non_blocking=True), pinned[1].to(DEV, non_blocking=True)
                else:
                    x, y = resident
                step(x, y, variant)

        row = {"model": name, "parameters": params, "batch": batch,
               "batch_bytes": host_x.numel() * host_x.element_size() + host_y.numel() * 8}
        # GPU time of one step and the host's time to enqueue it, from an idle queue
        run("resident", 10)
        sync()
        start = time.perf_counter()
        run("resident", 1)
        row["enqueue_s"] = time.perf_counter() - start
        sync()
        row["step_alone_s"] = time.perf_counter() - start
        if CUDA:  # the GPU's own work a step (kernel time, kernel count), whatever the host's launch speed
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                run("resident", 10)
                sync()
            kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            row["gpu_kernel_s"] = sum(e.device_time_total for e in kernels) / 10 / 1e6
            row["kernels_per_step"] = len(kernels) / 10
        # about 0.25 s a sample, 10 to 60 steps: the large models' steps take tens of milliseconds
        count = 5 if QUICK else max(10, min(60, int(0.25 / max(row["step_alone_s"], 1e-6))))
        row["steps_timed"] = count
        for variant in VARIANTS:
            if variant in ("pinned_copy", "empty_cache") and not CUDA:
                continue
            samples = []
            for _ in range(1 if QUICK else 3):
                run(variant, 3)
                sync()
                start = time.perf_counter()
                run(variant, count)
                sync()
                samples.append((time.perf_counter() - start) / count)
            row[variant + "_s"] = statistics.median(samples)
        rows.append(row)
        del model, optimizer, resident, pinned
        if CUDA:
            torch.cuda.empty_cache()
    return rows


class _Samples(torch.utils.data.Dataset):
    def __len__(self):
        return 4096

    def __getitem__(self, i):
        return torch.full((3, 32, 32), float(i)), i % 10


@section("workers")
def workers():
    rows = []
    for count in (2, 4) if QUICK else (2, 4, 8):
        for persistent in (False, True):
            loader = torch.utils.data.DataLoader(_Samples(), batch_size=128, num_workers=count,
                                                 persistent_workers=persistent)
            firsts, epochs = [], []
            for _ in range(2 if QUICK else 4):
                start = time.perf_counter()
                iterator = iter(loader)
                next(iterator)
                firsts.append(time.perf_counter() - start)
                for _ in iterator:
                    pass
                epochs.append(time.perf_counter() - start)
            rows.append({"num_workers": count, "persistent_workers": persistent, "first_batch_s": firsts,
                         "epoch_s": epochs, "batches_per_epoch": len(loader)})
            del loader
    return rows


@section("precision")
def precision():
    if not CUDA:
        return {"skipped": "no CUDA"}
    rows = {"matmul": [], "adam": []}
    for size in (1024, 4096, 8192):
        a, b = torch.randn(size, size, device=DEV), torch.randn(size, size, device=DEV)
        row = {"n": size}
        for tf32 in (False, True):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            row[f"fp32_tf32_{tf32}_s"] = timed(lambda: a @ b, 10 if QUICK else 30, 3)
        torch.backends.cuda.matmul.allow_tf32 = False
        with torch.autocast("cuda", dtype=torch.bfloat16):
            row["bf16_autocast_s"] = timed(lambda: a @ b, 10 if QUICK else 30, 3)
        rows["matmul"].append(row)
        del a, b
    for total in (1_000_000, 10_000_000, 100_000_000):
        params = [nn.Parameter(torch.randn(total // 50, device=DEV)) for _ in range(50)]
        for p in params:
            p.grad = torch.randn_like(p)
        row = {"parameters": total, "tensors": 50}
        for mode, options in (("foreach", {"foreach": True}), ("fused", {"fused": True}),
                              ("for_loop", {"foreach": False})):
            optimizer = torch.optim.AdamW(params, lr=1e-3, **options)
            row[f"{mode}_s"] = timed(optimizer.step, 5 if QUICK else 20, 3)
        rows["adam"].append(row)
        del params
    return rows


@section("zero_grad")
def zero_grad():
    rows = []
    for total in (1_000_000, 100_000_000) if CUDA else (1_000_000,):
        params = [nn.Parameter(torch.randn(total // 100, device=DEV)) for _ in range(100)]
        optimizer = torch.optim.SGD(params, lr=0.1)
        row = {"parameters": total}
        for to_none in (True, False):
            def cycle():
                for p in params:
                    if p.grad is None:
                        p.grad = torch.ones_like(p)
                    else:
                        p.grad.add_(1.0)
                optimizer.zero_grad(set_to_none=to_none)
            row[f"set_to_none_{to_none}_s"] = timed(cycle, 5 if QUICK else 20, 3)
        rows.append(row)
        del params, optimizer
    return rows


if __name__ == "__main__":
    # --only=steps,copies runs those sections; --variants=a,b those step variants (with "resident" always)
    only = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--only=")), list(SECTIONS))
    for name in only:
        run_section(name)
    print(json.dumps(RESULTS["env"]))
