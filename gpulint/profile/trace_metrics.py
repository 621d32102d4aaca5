"""Attribution metrics computed from a torch.profiler Chrome trace (the attribution pass).

Pure Python on the trace JSON, so the formulas can be tested on recorded traces. Definitions follow
profiling-evidence.md §2.3 and §9.2: busy fractions are unions of intervals over the analysed window (never
sums of kernel times), and the first and last ProfilerStep are dropped.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import statistics
from typing import Iterable

# Both the new (kineto 2022+) and the old (schemaVersion 1) category names.
KERNEL_CATS = {"kernel", "Kernel"}
MEMCPY_CATS = {"gpu_memcpy", "Memcpy"}
MEMSET_CATS = {"gpu_memset", "Memset"}
RUNTIME_CATS = {"cuda_runtime", "Runtime", "cuda_driver"}
CPU_OP_CATS = {"cpu_op", "Operator"}

SYNC_RUNTIME_CALLS = {
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "cudaMemcpy",  # the synchronous copy; cudaMemcpyAsync is not a host sync
    "cudaMemcpy2D",
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
    "hipEventSynchronize",
    "hipMemcpy",
}
SCALAR_READ = "aten::_local_scalar_dense"  # under every .item(), float(t), bool(t), int(t)
ITEM = "aten::item"
STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
GPU_ANNOTATION_CATS = {"gpu_user_annotation"}
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")  # torch.optim wraps every step in record_function
COMM_KERNEL = re.compile(r"nccl|hccl|rccl", re.IGNORECASE)
KERNEL_WAIT_US = 30.0  # HTA's consecutive_kernel_delay (its docstring says ns; its data are µs)
SYNC_GAP_US = 5.0  # a gap opening this close to a sync's return is the queue refilling after it
SHORT_KERNEL_US = 10.0
TIMELINE_STEPS = 3
TIMELINE_MAX_PER_LANE = 400  # keeps the HTML report small: 3 steps in 400 buckets per lane
DATALOADER_NAME = re.compile(r"^enumerate\((DataLoader|DataPipe)\)#.*__next__$")
H2D_NAME = re.compile(r"^Memcpy\s+HtoD\s*\(\s*(\w+)\s*->\s*(\w+)\s*\)")

NO_GPU = "no GPU activity in the trace (CPU-only run): kernel busy, idle breakdown, copies and syncs need a GPU"

Interval = tuple[float, float]


# ---- intervals ------------------------------------------------------------------------------------------


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint union of the intervals (touching or overlapping ones are joined)."""
    out: list[list[float]] = []
    for lo, hi in sorted((a, b) for a, b in intervals if b > a):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return [(a, b) for a, b in out]


def clip(merged: list[Interval], lo: float, hi: float) -> list[Interval]:
    return [(max(a, lo), min(b, hi)) for a, b in merged if b > lo and a < hi]


def length(merged: list[Interval]) -> float:
    return sum(b - a for a, b in merged)


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """Parts of the merged intervals `a` not covered by the merged intervals `b`."""
    out: list[Interval] = []
    j = 0
    for lo, hi in a:
        cur = lo
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < hi:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            if cur >= hi:
                break
            k += 1
        if cur < hi:
            out.append((cur, hi))
    return out


# ---- trace reading --------------------------------------------------------------------------------------


def load_trace(path) -> list[dict]:
    """Events of a Chrome trace file (.json or .json.gz; a {"traceEvents": [...]} object or a bare list)."""
    path = str(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        data = json.load(f)
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ValueError("not a Chrome trace: no traceEvents list")
    return events


def _complete(events: Iterable[dict]) -> list[dict]:
    return [e for e in events if e.get("ph") == "X" and "ts" in e]


def _span(e: dict) -> Interval:
    ts = float(e["ts"])
    return ts, ts + float(e.get("dur", 0) or 0)


def profiler_steps(events: Iterable[dict]) -> list[tuple[int, float, float]]:
    """(step number, start µs, end µs) of every ProfilerStep#N annotation, in order."""
    steps = []
    for e in _complete(events):
        if e.get("cat") in GPU_ANNOTATION_CATS:
            continue  # the GPU-side copy of an annotation spans the GPU work of several steps (seen on an H100)
        m = STEP_NAME.match(str(e.get("name", "")))
        if m:
            lo, hi = _span(e)
            steps.append((int(m.group(1)), lo, hi))
    steps.sort(key=lambda s: s[1])
    return steps


def analysis_window(steps: list[tuple[int, float, float]]) -> tuple[float, float, int] | None:
    """Window over the profiled steps minus the first and last (warm-up edge, trace export), if enough."""
    if not steps:
        return None
    kept = steps[1:-1] if len(steps) >= 3 else steps
    return kept[0][1], max(s[2] for s in kept), len(kept)


# ---- metrics --------------------------------------------------------------------------------------------


def _in_window(e: dict, lo: float, hi: float) -> bool:
    return lo <= float(e["ts"]) < hi


def busy_fraction(intervals: Iterable[Interval], lo: float, hi: float) -> float:
    """|∪ intervals ∩ [lo, hi]| / (hi - lo)."""
    if hi <= lo:
        return 0.0
    return length(clip(merge(intervals), lo, hi)) / (hi - lo)


def h2d_copies(events: Iterable[dict], lo: float, hi: float, n_steps: int) -> dict:
    """Host-to-device copies per step by source memory kind: {"pageable": {count, bytes}, "pinned": ...}."""
    kinds: dict[str, dict[str, float]] = {}
    for e in _complete(events):
        if e.get("cat") not in MEMCPY_CATS or not _in_window(e, lo, hi):
            continue
        m = H2D_NAME.match(str(e.get("name", "")))
        if not m:
            continue
        kind = m.group(1).lower()
        slot = kinds.setdefault(kind, {"count": 0, "bytes": 0})
        slot["count"] += 1
        slot["bytes"] += int((e.get("args") or {}).get("bytes", 0) or 0)
    steps = max(n_steps, 1)
    out = {}
    for kind in sorted(set(kinds) | {"pageable", "pinned"}):
        slot = kinds.get(kind, {"count": 0, "bytes": 0})
        out[kind] = {"count_per_step": slot["count"] / steps, "bytes_per_step": slot["bytes"] / steps}
    return out


def _spans_by_thread(events: Iterable[dict]) -> dict[tuple, list[Interval]]:
    spans: dict[tuple, list[Interval]] = {}
    for e in events:
        spans.setdefault((e.get("pid"), e.get("tid")), []).append(_span(e))
    return spans


def _inside(e: dict, spans: dict[tuple, list[Interval]]) -> bool:
    a, b = _span(e)
    return any(s <= a and b <= t for s, t in spans.get((e.get("pid"), e.get("tid")), []))


def _inside_other(e: dict, spans: dict[tuple, list[Interval]]) -> bool:
    """Strictly inside another span of the same thread (not just its own)."""
    a, b = _span(e)
    return any(s <= a and b <= t and (s, t) != (a, b) for s, t in spans.get((e.get("pid"), e.get("tid")), []))


def _contains_any(e: dict, inner: dict[tuple, list[Interval]]) -> bool:
    a, b = _span(e)
    return any(a <= s and t <= b for s, t in inner.get((e.get("pid"), e.get("tid")), []))


def sync_counts(events: Iterable[dict], lo: float, hi: float, n_steps: int) -> dict:
    """Per step: scalar reads (.item() and friends) split by what they cost, and the host syncs.

    A scalar read synchronizes only when it reads device memory: then CUDA runtime calls (the device-to-host
    copy and the stream sync) run inside it. Reads of CPU tensors (Adam's per-parameter step counters, kept on
    the CPU on purpose) are not syncs; on a CPU run, reads inside `Optimizer.step` are those counters, and the
    others are the reads that would synchronize with the model on a GPU. A runtime sync inside a scalar read is
    the same synchronization and is counted once."""
    ops = _complete(events)
    reads = [e for e in ops if e.get("cat") in CPU_OP_CATS and e.get("name") == SCALAR_READ and _in_window(e, lo, hi)]
    if not reads:  # traces without the inner op
        reads = [e for e in ops if e.get("cat") in CPU_OP_CATS and e.get("name") == ITEM and _in_window(e, lo, hi)]
    runtime_all = [e for e in ops if e.get("cat") in RUNTIME_CATS and _in_window(e, lo, hi)]
    runtime_syncs = [e for e in runtime_all if e.get("name") in SYNC_RUNTIME_CALLS]
    optimizer = _spans_by_thread(e for e in ops if OPTIMIZER_STEP.match(str(e.get("name", ""))))
    device_reads = [e for e in reads if _contains_any(e, _spans_by_thread(runtime_all))]
    read_spans = _spans_by_thread(reads)
    explicit = [e for e in runtime_syncs if not _inside(e, read_spans)]
    by_name: dict[str, int] = {}
    for e in runtime_syncs:
        by_name[e["name"]] = by_name.get(e["name"], 0) + 1
    in_optimizer = sum(1 for e in reads if _inside(e, optimizer))
    steps = max(n_steps, 1)
    return {
        "scalar_reads_per_step": (len(reads) - in_optimizer) / steps,
        "optimizer_scalar_reads_per_step": in_optimizer / steps,
        "device_scalar_reads_per_step": len(device_reads) / steps,
        "runtime_syncs_per_step": len(runtime_syncs) / steps,
        "syncs_per_step": (len(device_reads) + len(explicit)) / steps,
        "runtime_sync_calls": by_name,
    }


def _correlation(e: dict):
    return (e.get("args") or {}).get("correlation")


def gpu_time_breakdown(events: list[dict], lo: float, hi: float, n_steps: int) -> dict:
    """HTA's temporal breakdown over the step window, with its idle time split by cause.

    compute = kernels (not communication), non-compute = memcpy/memset/communication not hidden under compute,
    idle = no GPU activity at all. Idle time is split as HTA's idle-time breakdown does, by the CPU launch that
    ends each gap (its `correlation`): "host wait" when the launch was issued after the GPU went idle (the GPU
    waited for the CPU), "kernel wait" for shorter gaps between back-to-back launches, "other" otherwise.
    Host wait is then split by what the CPU was doing: fetching data (DataLoader `__next__`), refilling the
    queue after a synchronization (a gap that opens while a sync or device scalar read returns), or other host
    work (Python, the optimizer, launch overhead). The shares add up to 100 % of the window."""
    window = hi - lo
    if window <= 0:
        return {}
    kernels = [e for e in events if e.get("cat") in KERNEL_CATS]
    copies = [e for e in events if e.get("cat") in MEMCPY_CATS]
    memsets = [e for e in events if e.get("cat") in MEMSET_CATS]
    compute = clip(merge(_span(e) for e in kernels if not COMM_KERNEL.search(str(e.get("name", "")))), lo, hi)
    busy = clip(merge(_span(e) for e in kernels + copies + memsets), lo, hi)
    non_compute = length(subtract(busy, compute))
    idle = subtract([(lo, hi)], busy)
    launches = {}
    for e in events:
        if e.get("cat") in RUNTIME_CATS and _correlation(e) is not None:
            launches[_correlation(e)] = e
    gpu_starts = sorted((float(e["ts"]), _correlation(e) or -1) for e in kernels + copies + memsets)
    start_times = [t for t, _ in gpu_starts]
    loader = merge(_span(e) for e in events if DATALOADER_NAME.match(str(e.get("name", ""))))
    sync_ends = sorted(
        _span(e)[1]
        for e in events
        if (e.get("cat") in RUNTIME_CATS and e.get("name") in SYNC_RUNTIME_CALLS)
        or (e.get("cat") in CPU_OP_CATS and e.get("name") in (SCALAR_READ, ITEM))
    )
    totals = {"data_loading": 0.0, "after_sync": 0.0, "host_overhead": 0.0, "kernel_wait": 0.0, "other": 0.0}
    for a, b in idle:
        data = length(clip(loader, a, b))
        totals["data_loading"] += data
        rest = (b - a) - data
        if rest <= 0:
            continue
        i = bisect.bisect_left(start_times, b)  # the GPU work that ended this gap
        launch = launches.get(gpu_starts[i][1]) if i < len(gpu_starts) else None
        if launch is None or float(launch["ts"]) >= a:  # no launch known (edge of the trace) counts as host wait
            j = bisect.bisect_left(sync_ends, a - SYNC_GAP_US)
            synced = j < len(sync_ends) and sync_ends[j] <= b
            totals["after_sync" if synced else "host_overhead"] += rest
        elif b - a < KERNEL_WAIT_US:
            totals["kernel_wait"] += rest
        else:
            totals["other"] += rest
    out = {
        "compute_pct": 100 * length(compute) / window,
        "non_compute_pct": 100 * non_compute / window,
        "idle_pct": 100 * length(idle) / window,
        "idle": {k: 100 * v / window for k, v in totals.items()},
        "pageable_copy_pct": 100
        * length(
            subtract(
                clip(merge(_span(e) for e in copies if str(e.get("name", "")).startswith("Memcpy HtoD (Pageable")), lo, hi),
                compute,
            )
        )
        / window,
    }
    out["launch"] = launch_stats(kernels, launches, lo, hi, n_steps)
    return out


def launch_stats(kernels: list[dict], launches: dict, lo: float, hi: float, n_steps: int) -> dict:
    """Launch-bound signals: kernels per step, the share shorter than 10 µs, HTA's launch delay (GPU start minus
    the end of its CPU launch call) and short kernels (a kernel shorter than its own launch call)."""
    inside = [e for e in kernels if lo <= float(e["ts"]) < hi]
    if not inside:
        return {"kernels_per_step": 0.0}
    delays = []
    shorter_than_launch = 0
    for e in inside:
        launch = launches.get(_correlation(e))
        if launch is None:
            continue
        cpu_end = float(launch["ts"]) + float(launch.get("dur", 0) or 0)
        delays.append(max(0.0, float(e["ts"]) - cpu_end))
        if float(e.get("dur", 0) or 0) < float(launch.get("dur", 0) or 0):
            shorter_than_launch += 1
    short = sum(1 for e in inside if float(e.get("dur", 0) or 0) < SHORT_KERNEL_US)
    return {
        "kernels_per_step": len(inside) / max(n_steps, 1),
        "short_kernel_pct": 100 * short / len(inside),
        "kernel_shorter_than_launch_pct": 100 * shorter_than_launch / len(delays) if delays else None,
        "launch_delay_us_p50": statistics.median(delays) if delays else None,
        "launch_delay_us_p90": sorted(delays)[int(0.9 * (len(delays) - 1))] if delays else None,
    }


def host_breakdown(events: list[dict], lo: float, hi: float) -> dict:
    """Where the host's step time goes (the CPU view, on any run): data loading, the optimizer step, the rest."""
    window = hi - lo
    if window <= 0:
        return {}
    loader = clip(merge(_span(e) for e in events if DATALOADER_NAME.match(str(e.get("name", "")))), lo, hi)
    optimizer = subtract(clip(merge(_span(e) for e in events if OPTIMIZER_STEP.match(str(e.get("name", "")))), lo, hi), loader)
    return {
        "data_loading_pct": 100 * length(loader) / window,
        "optimizer_pct": 100 * length(optimizer) / window,
        "other_pct": 100 * (window - length(loader) - length(optimizer)) / window,
    }


def timeline(events: list[dict], steps: list[tuple[int, float, float]], n: int = TIMELINE_STEPS) -> dict:
    """A few whole steps of the trace for the HTML report's timeline strip: step bounds and, per lane, intervals
    relative to the first shown step's start (µs), each [start, duration, label]. Lanes: data, optimizer, syncs
    (runtime syncs and scalar reads), kernels, copies (by pageable/pinned/other), memset."""
    if len(steps) < 3:
        shown = steps
    else:
        shown = steps[1 : 1 + n]  # the first profiled step is the profiler's warm-up edge
    if not shown:
        return {}
    lo, hi = shown[0][1], max(s[2] for s in shown)
    lanes: dict[str, list] = {k: [] for k in ("data", "optimizer", "sync", "kernel", "copy_pageable", "copy_pinned", "copy_other", "memset")}
    reads = _spans_by_thread(e for e in events if e.get("cat") in CPU_OP_CATS and e.get("name") in (SCALAR_READ, ITEM))
    for e in events:
        a, b = _span(e)
        if b < lo or a > hi:
            continue
        name = str(e.get("name", ""))
        cat = e.get("cat")
        if DATALOADER_NAME.match(name):
            lane = "data"
        elif OPTIMIZER_STEP.match(name):
            lane = "optimizer"
        elif cat in CPU_OP_CATS and name in (SCALAR_READ, ITEM):
            if name == SCALAR_READ and _inside_other(e, reads):
                continue  # the read inside aten::item: one sync, shown once
            lane = "sync"
        elif cat in RUNTIME_CATS and name in SYNC_RUNTIME_CALLS:
            if _inside(e, reads):
                continue  # the stream sync inside an .item() is that same sync
            lane = "sync"
        elif cat in KERNEL_CATS:
            lane = "kernel"
        elif cat in MEMCPY_CATS:
            kind = H2D_NAME.match(name)
            lane = f"copy_{kind.group(1).lower()}" if kind and kind.group(1).lower() in ("pageable", "pinned") else "copy_other"
        elif cat in MEMSET_CATS:
            lane = "memset"
        else:
            continue
        lanes[lane].append([round(a - lo, 3), round(b - a, 3), name[:80]])
    for key, items in lanes.items():
        items.sort()
        if len(items) > TIMELINE_MAX_PER_LANE:
            items[:] = coarsen(items, (hi - lo) / TIMELINE_MAX_PER_LANE)
    return {
        "span_us": round(hi - lo, 3),
        "steps": [[round(a - lo, 3), round(b - a, 3), f"step {k}"] for k, a, b in shown],
        "lanes": {k: v for k, v in lanes.items() if v},
    }


def coarsen(items: list, bucket: float) -> list:
    """Join intervals closer than `bucket` µs so a lane stays small; the label counts what was joined."""
    out: list = []
    for start, dur, name in items:
        if out and start - (out[-1][0] + out[-1][1]) < bucket:
            last = out[-1]
            last[1] = max(last[0] + last[1], start + dur) - last[0]
            last[3] += 1
        else:
            out.append([start, dur, name, 1])
    return [[s, d, n if c == 1 else f"{c} events"] for s, d, n, c in out]


def attribution_metrics(events: list[dict]) -> dict:
    """Every attribution number the report shows; GPU-only numbers are None with a reason under "unavailable"."""
    events = _complete(events)
    steps = profiler_steps(events)
    window = analysis_window(steps)
    if window is None:
        return {"unavailable": "the trace has no ProfilerStep annotations"}
    lo, hi, n = window
    span_us = hi - lo
    kernels = [_span(e) for e in events if e.get("cat") in KERNEL_CATS]
    copies = [_span(e) for e in events if e.get("cat") in MEMCPY_CATS]
    memsets = [_span(e) for e in events if e.get("cat") in MEMSET_CATS]
    gpu = bool(kernels or copies or memsets)
    loader = [_span(e) for e in events if DATALOADER_NAME.match(str(e.get("name", "")))]
    kept_steps = [s for s in steps if lo <= s[1] < hi]
    out: dict = {
        "profiled_steps": n,
        "window_ms": span_us / 1000,
        "profiled_step_ms_median": statistics.median([(s[2] - s[1]) / 1000 for s in kept_steps]) if kept_steps else None,
        "gpu_activity": gpu,
        "data_wait_pct": 100 * busy_fraction(loader, lo, hi),
        "host": host_breakdown(events, lo, hi),
        "timeline": timeline(events, steps),
        "unavailable": {},
    }
    syncs = sync_counts(events, lo, hi, n)
    out["scalar_reads_per_step"] = syncs["scalar_reads_per_step"]
    out["optimizer_scalar_reads_per_step"] = syncs["optimizer_scalar_reads_per_step"]
    if gpu:
        busy = merge(kernels + copies + memsets)
        out["kernel_busy_pct"] = 100 * busy_fraction(kernels, lo, hi)
        out["gpu_any_busy_pct"] = 100 * busy_fraction(kernels + copies + memsets, lo, hi)
        exposed = subtract(clip(merge(loader), lo, hi), busy)
        out["data_wait_exposed_pct"] = 100 * length(exposed) / span_us if span_us > 0 else 0.0
        out["kernels_per_step"] = sum(1 for k in kernels if lo <= k[0] < hi) / n
        out["h2d"] = h2d_copies(events, lo, hi, n)
        out["syncs_per_step"] = syncs["syncs_per_step"]
        out["device_scalar_reads_per_step"] = syncs["device_scalar_reads_per_step"]
        out["runtime_sync_calls"] = syncs["runtime_sync_calls"]
        out["gpu_breakdown"] = gpu_time_breakdown(events, lo, hi, n)
    else:
        for key in ("kernel_busy_pct", "gpu_any_busy_pct", "data_wait_exposed_pct", "kernels_per_step", "h2d", "syncs_per_step", "gpu_breakdown"):
            out[key] = None
        out["unavailable"]["gpu"] = NO_GPU
    return out
