"""Attribution metrics computed from a torch.profiler Chrome trace (the attribution pass).

Pure Python on the trace JSON, so the formulas can be tested on recorded traces. Definitions follow
profiling-evidence.md §2.3 and §9.2: busy fractions are unions of intervals over the analysed window (never
sums of kernel times), and the first and last ProfilerStep are dropped.
"""

from __future__ import annotations

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
DATALOADER_NAME = re.compile(r"^enumerate\((DataLoader|DataPipe)\)#.*__next__$")
H2D_NAME = re.compile(r"^Memcpy\s+HtoD\s*\(\s*(\w+)\s*->\s*(\w+)\s*\)")

NO_GPU = "no GPU activity in the trace (CPU-only run)"

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


def sync_counts(events: Iterable[dict], lo: float, hi: float, n_steps: int) -> dict:
    """Scalar reads (.item() and friends) and CUDA runtime syncs per step; a runtime sync inside a scalar
    read is the same synchronization and is counted once."""
    ops = _complete(events)
    scalar = [e for e in ops if e.get("cat") in CPU_OP_CATS and e.get("name") == SCALAR_READ and _in_window(e, lo, hi)]
    if not scalar:  # traces without the inner op
        scalar = [e for e in ops if e.get("cat") in CPU_OP_CATS and e.get("name") == ITEM and _in_window(e, lo, hi)]
    runtime = [
        e for e in ops if e.get("cat") in RUNTIME_CATS and e.get("name") in SYNC_RUNTIME_CALLS and _in_window(e, lo, hi)
    ]
    scalar_spans: dict[tuple, list[Interval]] = {}
    for e in scalar:
        scalar_spans.setdefault((e.get("pid"), e.get("tid")), []).append(_span(e))
    explicit = 0
    by_name: dict[str, int] = {}
    for e in runtime:
        by_name[e["name"]] = by_name.get(e["name"], 0) + 1
        a, b = _span(e)
        inside = any(s <= a and b <= t for s, t in scalar_spans.get((e.get("pid"), e.get("tid")), []))
        if not inside:
            explicit += 1
    steps = max(n_steps, 1)
    return {
        "scalar_reads_per_step": len(scalar) / steps,
        "runtime_syncs_per_step": len(runtime) / steps,
        "syncs_per_step": (len(scalar) + explicit) / steps,
        "runtime_sync_calls": by_name,
    }


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
        "unavailable": {},
    }
    syncs = sync_counts(events, lo, hi, n)
    out["scalar_reads_per_step"] = syncs["scalar_reads_per_step"]
    if gpu:
        busy = merge(kernels + copies + memsets)
        out["kernel_busy_pct"] = 100 * busy_fraction(kernels, lo, hi)
        out["gpu_any_busy_pct"] = 100 * busy_fraction(kernels + copies + memsets, lo, hi)
        exposed = subtract(clip(merge(loader), lo, hi), busy)
        out["data_wait_exposed_pct"] = 100 * length(exposed) / span_us if span_us > 0 else 0.0
        out["kernels_per_step"] = sum(1 for k in kernels if lo <= k[0] < hi) / n
        out["h2d"] = h2d_copies(events, lo, hi, n)
        out["syncs_per_step"] = syncs["syncs_per_step"]
        out["runtime_sync_calls"] = syncs["runtime_sync_calls"]
    else:
        for key in ("kernel_busy_pct", "gpu_any_busy_pct", "data_wait_exposed_pct", "kernels_per_step", "h2d", "syncs_per_step"):
            out[key] = None
            out["unavailable"][key] = NO_GPU
    return out
