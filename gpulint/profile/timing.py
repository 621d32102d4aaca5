"""Timing-pass numbers (no profiler running) from the per-step records the bootstrap writes."""

from __future__ import annotations

from dataclasses import asdict, dataclass


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolation percentile, q in [0, 1] (numpy's default method)."""
    s = sorted(values)
    if not s:
        return None
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass
class TimingStats:
    steps: int
    step_ms_median: float | None
    step_ms_p10: float | None
    step_ms_p90: float | None
    window_s: float
    steps_per_s: float | None
    samples_per_s: float | None  # None when no batch size could be read from the batches
    samples_total: int | None
    data_wait_ms_median: float | None
    data_wait_ms_p90: float | None
    data_wait_pct: float | None  # share of the window spent inside DataLoader __next__
    batches_per_step: float | None
    gpu_step_ms_median: float | None = None  # CUDA-event time between step boundaries (GPU runs only)

    def to_dict(self) -> dict:
        return asdict(self)


def timing_stats(steps: list[dict]) -> TimingStats:
    """Stats over one run's measured steps (or several runs' steps pooled: throughput is total over total)."""
    walls = [float(s["wall_s"]) for s in steps]
    waits = [float(s.get("data_wait_s", 0.0)) for s in steps]
    total = sum(walls)
    samples = [s.get("samples") for s in steps]
    known = all(x is not None for x in samples) and bool(samples)
    batches = [int(s.get("batches", 0)) for s in steps]
    ms = [w * 1000 for w in walls]
    return TimingStats(
        steps=len(steps),
        step_ms_median=percentile(ms, 0.5),
        step_ms_p10=percentile(ms, 0.1),
        step_ms_p90=percentile(ms, 0.9),
        window_s=total,
        steps_per_s=len(steps) / total if total > 0 else None,
        samples_per_s=(sum(samples) / total) if known and total > 0 else None,
        samples_total=int(sum(samples)) if known else None,
        data_wait_ms_median=percentile([w * 1000 for w in waits], 0.5),
        data_wait_ms_p90=percentile([w * 1000 for w in waits], 0.9),
        data_wait_pct=(100 * sum(waits) / total) if total > 0 and any(batches) else None,
        batches_per_step=(sum(batches) / len(batches)) if batches else None,
        gpu_step_ms_median=percentile([s["gpu_s"] * 1000 for s in steps if s.get("gpu_s") is not None], 0.5),
    )

