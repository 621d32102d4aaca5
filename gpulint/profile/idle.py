"""Why the GPU is idle: each cause of lost time, its share of the step, the speedup removing it could give at
most (`1 / (1 - share)`, the step shrinking by exactly that time), and the gpulint rules that remove it.

On a GPU run the causes are the idle-time categories of `trace_metrics.gpu_time_breakdown` (HTA's temporal and
idle-time breakdowns) plus pageable copies the GPU waited for. On a CPU run the same structure comes from what the
CPU can measure: the time the loop waits for data (timing pass) and the host's split of the step (trace).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gpulint.profile.timing import TimingStats

# cause -> (what the user reads, rules whose fixes remove it, what removes it otherwise)
CAUSES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "data_loading": ("waiting for data (DataLoader)", ("GPU101", "GPU104"), "more workers, persistent workers"),
    "pageable_copies": ("pageable host-to-device copies", ("GPU102", "GPU105", "GPU106"), "pin_memory=True with non_blocking=True"),
    "after_sync": ("queue drained by a synchronization", ("GPU303", "GPU304", "GPU305", "GPU306"), "read values every N steps"),
    "host_overhead": ("CPU too slow to launch (Python, optimizer, launch overhead)", ("GPU103", "GPU904"), "bigger batches, a fused optimizer, torch.compile or CUDA graphs"),
    "kernel_wait": ("launch gaps between back-to-back kernels", (), "fewer, larger kernels (torch.compile, CUDA graphs)"),
    "other": ("waiting on events or other streams", (), ""),
    "optimizer": ("optimizer step", ("GPU904",), "a fused or foreach optimizer"),
    "compute": ("model and Python (forward, backward, the rest of the loop)", (), ""),
}


@dataclass
class Cause:
    key: str
    label: str
    share_pct: float
    ceiling: float | None  # the speedup if this time went away entirely; None for time that is the work itself
    rules: tuple[str, ...]
    remedy: str


@dataclass
class IdleExplanation:
    kind: str  # "gpu" or "cpu"
    causes: list[Cause] = field(default_factory=list)
    compute_pct: float | None = None
    non_compute_pct: float | None = None
    idle_pct: float | None = None
    launch: dict | None = None
    gpu_unavailable: str | None = None  # one line: why no GPU breakdown
    source: str = ""

    def ceiling_for(self, rules) -> float | None:
        """Most the throughput could grow if everything these rules address went away (None: nothing does)."""
        rules = set(rules)
        if rules & KERNEL_SPEED_RULES:
            return None  # these fixes make the work itself faster: idle time does not bound their speedup
        share = sum(c.share_pct for c in self.causes if c.ceiling is not None and rules & set(c.rules))
        return _ceiling(share) if share > 0 else None

    def to_dict(self) -> dict:
        return asdict(self)


KERNEL_SPEED_RULES = {"GPU901", "GPU902", "GPU903"}  # mixed precision, TF32, cuDNN autotuning


def _ceiling(share_pct: float) -> float | None:
    return 1.0 / (1.0 - share_pct / 100.0) if share_pct < 100.0 else None


def _cause(key: str, share: float, removable: bool = True) -> Cause:
    label, rules, remedy = CAUSES[key]
    if not removable:  # part of the step's work on this run: nothing to point at
        return Cause(key, label, share, None, (), "")
    return Cause(key, label, share, _ceiling(share), rules, remedy)


def explain(stats: TimingStats | None, attribution: dict | None) -> IdleExplanation | None:
    """The breakdown for one side (the first run's attribution pass plus the pooled timing)."""
    attribution = attribution or {}
    gpu = attribution.get("gpu_breakdown")
    if gpu:
        idle = gpu["idle"]
        causes = [_cause(k, idle[k]) for k in ("data_loading", "after_sync", "host_overhead", "kernel_wait", "other")]
        causes.append(_cause("pageable_copies", gpu.get("pageable_copy_pct", 0.0)))
        causes.sort(key=lambda c: -c.share_pct)
        return IdleExplanation(
            "gpu",
            causes,
            compute_pct=gpu["compute_pct"],
            non_compute_pct=gpu["non_compute_pct"],
            idle_pct=gpu["idle_pct"],
            launch=gpu.get("launch"),
            source="trace of the attribution pass (union of GPU activity over the profiled steps)",
        )
    host = attribution.get("host")
    data = stats.data_wait_pct if stats is not None else None
    if data is None and host and host["data_loading_pct"]:
        data = host["data_loading_pct"]
    if data is None and not host:
        return None
    causes = [_cause("data_loading", data)] if data is not None else []  # no DataLoader: nothing to wait for
    if host:
        # The trace's split of the rest of the step, scaled to what the timing pass left after the data wait.
        rest = max(0.0, 100.0 - (data or 0.0))
        non_data = host["optimizer_pct"] + host["other_pct"]
        scale = rest / non_data if non_data > 0 else 0.0
        causes.append(_cause("optimizer", host["optimizer_pct"] * scale, removable=False))
        causes.append(_cause("compute", host["other_pct"] * scale, removable=False))
    unavailable = (attribution.get("unavailable") or {}).get("gpu") if isinstance(attribution.get("unavailable"), dict) else None
    return IdleExplanation(
        "cpu",
        causes,
        gpu_unavailable=unavailable or "no GPU activity measured",
        source="timing pass (data wait) and the attribution trace (the rest of the step)",
    )
