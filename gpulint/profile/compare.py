"""A/B comparison of runs: effect on throughput with a confidence interval, the A-vs-A noise floor, a verdict,
and the mechanism deltas that explain it.

Method (documented in docs/profiling.md):
- throughput of a side = total samples / total time over the measured steps of all its runs (samples/s; steps/s
  when a batch size could not be read); effect = throughput(B) / throughput(A);
- 95 % CI of the effect by a two-level bootstrap: resample runs within each side, then steps within each
  resampled run (so run-to-run drift widens the interval, not only step jitter); 2000 replicates, fixed seed;
- noise floor = A-vs-A spread, (max - min) / median of the per-run throughputs of A (needs >= 2 A runs);
- verdict "faster" when the CI lies above 1 and the gain exceeds max(3 %, noise floor); "slower" symmetrically;
  otherwise "no measurable change", or "too noisy to verify" when the noise floor itself exceeds 10 % (a change
  that size could hide in it).
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field

from gpulint.profile.timing import percentile, timing_stats

MIN_EFFECT = 0.03  # below ~3 % nothing is claimed, whatever the CI says
MAX_NOISE = 0.10  # a noise floor above this cannot tell "no change" from a real change
N_BOOT = 2000
CI_LEVEL = 0.95

FASTER = "faster"
SLOWER = "slower"
NO_CHANGE = "no measurable change"
TOO_NOISY = "too noisy to verify"


def throughput_unit(runs: list[list[dict]]) -> str:
    known = all(s.get("samples") is not None for steps in runs for s in steps) and any(runs)
    return "samples/s" if known else "steps/s"


def _amount(step: dict, unit: str) -> float:
    return float(step["samples"]) if unit == "samples/s" else 1.0


def pooled_throughput(runs: list[list[dict]], unit: str) -> float | None:
    work = sum(_amount(s, unit) for steps in runs for s in steps)
    time = sum(float(s["wall_s"]) for steps in runs for s in steps)
    return work / time if time > 0 else None


def run_throughputs(runs: list[list[dict]], unit: str) -> list[float]:
    return [t for t in (pooled_throughput([steps], unit) for steps in runs) if t is not None]


def spread(values: list[float]) -> float | None:
    """(max - min) / median, the relative range of per-run throughputs; None with fewer than two runs."""
    if len(values) < 2:
        return None
    med = percentile(values, 0.5)
    return (max(values) - min(values)) / med if med else None


def bootstrap_ratio_ci(
    a_runs: list[list[dict]],
    b_runs: list[list[dict]],
    unit: str,
    n_boot: int = N_BOOT,
    level: float = CI_LEVEL,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Two-level bootstrap CI of throughput(B) / throughput(A)."""
    a_runs = [r for r in a_runs if r]
    b_runs = [r for r in b_runs if r]
    if not a_runs or not b_runs:
        return None
    rng = random.Random(seed)
    # Per run, (work, time) pairs, so a replicate is sums over resampled indices.
    a_pairs = [[(_amount(s, unit), float(s["wall_s"])) for s in r] for r in a_runs]
    b_pairs = [[(_amount(s, unit), float(s["wall_s"])) for s in r] for r in b_runs]

    def side(pairs):
        work = time = 0.0
        chosen = rng.choices(pairs, k=len(pairs)) if len(pairs) > 1 else pairs
        for run in chosen:
            for w, t in rng.choices(run, k=len(run)):
                work += w
                time += t
        return work / time if time > 0 else float("nan")

    ratios = []
    for _ in range(n_boot):
        ta = side(a_pairs)
        tb = side(b_pairs)
        if ta > 0 and not math.isnan(ta) and not math.isnan(tb):
            ratios.append(tb / ta)
    if not ratios:
        return None
    alpha = (1 - level) / 2
    return percentile(ratios, alpha), percentile(ratios, 1 - alpha)


@dataclass
class MechanismDelta:
    name: str
    before: float
    after: float
    unit: str
    improved: bool
    worse: bool
    rules: tuple[str, ...] = ()  # the gpulint rules whose fixes should move this number
    note: str | None = None  # why a change is neither better nor worse (shown instead of "same")


@dataclass
class Comparison:
    unit: str
    before: float | None
    after: float | None
    effect: float | None  # after / before
    ci: tuple[float, float] | None
    noise_floor: float | None  # A-vs-A relative spread
    b_spread: float | None
    threshold: float  # smallest relative change that counts
    verdict: str
    runs_a: int
    runs_b: int
    mechanisms: list[MechanismDelta] = field(default_factory=list)
    mechanism_verified: bool = False  # a mechanism improved although throughput did not move
    numerics: str | None = None
    notes: list[str] = field(default_factory=list)
    unreliable: bool = False  # other processes used the GPU during some run (NVML)
    ceiling: float | None = None  # the most the applied fixes could give: 1 / (1 - share of what they remove)

    def mark_unreliable(self, labels: list[str]) -> None:
        """Other GPU tenants during these runs: the timings, and so the verdict, cannot be trusted."""
        self.unreliable = True
        self.notes.append(
            f"other processes used the GPU during {', '.join(labels)}: the comparison is unreliable "
            "(run it on an idle GPU)"
        )

    @property
    def summary(self) -> str:
        if self.effect is None:
            return "no comparison: no throughput could be measured"
        pct = (self.effect - 1) * 100
        text = f"{self.verdict}: {self.unit} {pct:+.1f} %"
        if self.ceiling is not None and self.effect > self.ceiling:
            # the ceiling comes from the profiled window's idle time; a fix can remove more (the syncs of pageable copies)
            text += f" ({self.effect:.2f}x, above the {self.ceiling:.2f}x estimated from the idle time the fixes address)"
        elif self.ceiling is not None and self.effect > 0:
            text += f" ({self.effect:.2f}x of a possible {self.ceiling:.2f}x)"
        if self.ci:
            text += f" (95 % CI {100 * (self.ci[0] - 1):+.1f} % .. {100 * (self.ci[1] - 1):+.1f} %)"
        if self.verdict in (NO_CHANGE, TOO_NOISY) and self.mechanism_verified:
            text += "; mechanism verified" + (", bottleneck elsewhere" if self.verdict == NO_CHANGE else "")
        if self.unreliable:
            text += " [unreliable: other processes used the GPU]"
        return text

    def to_dict(self) -> dict:
        d = asdict(self)
        d["summary"] = self.summary
        return d


def decide(effect: float | None, ci: tuple[float, float] | None, threshold: float, noise: float | None = None) -> str:
    if effect is None or ci is None:
        return NO_CHANGE
    if ci[0] > 1 and effect - 1 > threshold:
        return FASTER
    if ci[1] < 1 and 1 - effect > threshold:
        return SLOWER
    return TOO_NOISY if noise is not None and noise > MAX_NOISE else NO_CHANGE


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


DATA_RULES = ("GPU101", "GPU104", "GPU107")  # GPU107: a Trainer's dataloader_num_workers / persistent workers
COPY_RULES = ("GPU102", "GPU105", "GPU106", "GPU107", "GPU201", "GPU202", "GPU204")  # fewer or pinned H2D copies
SYNC_RULES = ("GPU303", "GPU304", "GPU305", "GPU306")
MECHANISM_RULES = {
    "data wait": DATA_RULES,
    "data wait per step": DATA_RULES,
    "exposed data wait": DATA_RULES,
    "pageable H2D copies": COPY_RULES,
    "pinned H2D copies": COPY_RULES,
    "syncs": SYNC_RULES + ("GPU102", "GPU105"),  # a pageable copy waits for the GPU (cudaStreamSynchronize)
    "scalar reads in the loop (.item() etc.)": SYNC_RULES,
    "kernel busy": DATA_RULES + COPY_RULES + SYNC_RULES + ("GPU103", "GPU901", "GPU902", "GPU903", "GPU904"),
}


def mechanism_deltas(
    a_runs: list[list[dict]],
    b_runs: list[list[dict]],
    a_attr: list[dict],
    b_attr: list[dict],
) -> list[MechanismDelta]:
    """Before/after of the numbers a fix is meant to move; only those measured on both sides."""
    out: list[MechanismDelta] = []

    def add(name, a, b, unit, min_abs, rel=0.0, higher_is_better=False):
        if a is None or b is None or a == b == 0:
            return  # not measured on one side, or nothing there to move
        gain = (b - a) if higher_is_better else (a - b)
        need = max(min_abs, rel * abs(a))
        out.append(MechanismDelta(name, a, b, unit, improved=gain >= need, worse=-gain >= need, rules=MECHANISM_RULES[name]))

    a_wait = _mean([timing_stats(r).data_wait_pct for r in a_runs if r])
    b_wait = _mean([timing_stats(r).data_wait_pct for r in b_runs if r])
    add("data wait", a_wait, b_wait, "% of step", 2.0, 0.25)
    # A loop that only waits for data keeps ~100 % wait after a fix; the wait itself still shrinks.
    a_ms = _mean([timing_stats(r).data_wait_ms_median for r in a_runs if r])
    b_ms = _mean([timing_stats(r).data_wait_ms_median for r in b_runs if r])
    if a_wait is not None and b_wait is not None:
        add("data wait per step", a_ms, b_ms, "ms", 1.0, 0.25)

    def attr(side, key, sub=None):
        vals = []
        for a in side:
            v = a.get(key) if isinstance(a, dict) else None
            if sub and isinstance(v, dict):
                v = (v.get(sub[0]) or {}).get(sub[1])
            vals.append(v)
        return _mean(vals)

    add("exposed data wait", attr(a_attr, "data_wait_exposed_pct"), attr(b_attr, "data_wait_exposed_pct"), "% of step", 2.0, 0.25)
    add(
        "pageable H2D copies",
        attr(a_attr, "h2d", ("pageable", "count_per_step")),
        attr(b_attr, "h2d", ("pageable", "count_per_step")),
        "per step",
        0.5,
    )
    add(
        "pinned H2D copies",
        attr(a_attr, "h2d", ("pinned", "count_per_step")),
        attr(b_attr, "h2d", ("pinned", "count_per_step")),
        "per step",
        0.5,
        higher_is_better=True,
    )
    syncs_a, syncs_b = attr(a_attr, "syncs_per_step"), attr(b_attr, "syncs_per_step")
    if syncs_a is not None and syncs_b is not None:
        add("syncs", syncs_a, syncs_b, "per step", 0.5)
    else:  # CPU run: the loop's .item() and friends are what would synchronize on a GPU
        add("scalar reads in the loop (.item() etc.)", attr(a_attr, "scalar_reads_per_step"), attr(b_attr, "scalar_reads_per_step"), "per step", 0.5)
    add("kernel busy", attr(a_attr, "kernel_busy_pct"), attr(b_attr, "kernel_busy_pct"), "%", 5.0, higher_is_better=True)
    busy = out[-1] if out and out[-1].name == "kernel busy" else None
    a_kernel_ms, b_kernel_ms = _kernel_ms_per_step(a_attr), _kernel_ms_per_step(b_attr)
    if busy and busy.worse and a_kernel_ms and b_kernel_ms and b_kernel_ms < 0.9 * a_kernel_ms:
        # faster kernels (TF32, AMP) leave a smaller busy share of a shorter step: not a regression
        busy.worse = False
        busy.note = f"lower: kernels {a_kernel_ms:.1f} -> {b_kernel_ms:.1f} ms per step"
    return out


def _kernel_ms_per_step(attrs: list[dict]) -> float | None:
    """GPU kernel time per profiled step: the busy share times the median profiled step."""
    values = [
        a["kernel_busy_pct"] / 100 * a["profiled_step_ms_median"]
        for a in attrs
        if isinstance(a, dict) and a.get("kernel_busy_pct") is not None and a.get("profiled_step_ms_median")
    ]
    return sum(values) / len(values) if values else None


def numerics_note(a_losses: list[float], b_losses: list[float], rtol: float = 1e-3, atol: float = 1e-5) -> str | None:
    """Do the first losses of A and B agree? None when losses were not captured."""
    n = min(len(a_losses or []), len(b_losses or []))
    if n == 0:
        return None
    pairs = list(zip(a_losses[:n], b_losses[:n]))
    if all(abs(a - b) <= atol + rtol * abs(a) for a, b in pairs):
        return f"first {n} losses agree"
    worst = max(abs(a - b) / max(abs(a), 1e-12) for a, b in pairs)
    return (
        f"first {n} losses differ (largest relative difference {worst:.2g}): expected when the fix changes the "
        "batch size or worker-side randomness (augmentations in workers); otherwise check the fix"
    )


def compare(
    a_runs: list[list[dict]],
    b_runs: list[list[dict]],
    a_attr: list[dict] | None = None,
    b_attr: list[dict] | None = None,
    a_losses: list[float] | None = None,
    b_losses: list[float] | None = None,
    *,
    min_effect: float = MIN_EFFECT,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> Comparison:
    """Compare the measured steps of the A runs (original) with those of the B runs (fixed)."""
    unit = throughput_unit(a_runs + b_runs)
    before = pooled_throughput(a_runs, unit)
    after = pooled_throughput(b_runs, unit)
    effect = after / before if before and after is not None else None
    ci = bootstrap_ratio_ci(a_runs, b_runs, unit, n_boot=n_boot, seed=seed)
    noise = spread(run_throughputs(a_runs, unit))
    b_noise = spread(run_throughputs(b_runs, unit))
    threshold = max(min_effect, noise or 0.0)
    verdict = decide(effect, ci, threshold, noise)
    mechanisms = mechanism_deltas(a_runs, b_runs, a_attr or [], b_attr or [])
    notes = []
    if noise is None:
        notes.append("noise floor not measured: it needs at least 2 runs of the original (--repeat 2 or more)")
    if unit == "steps/s":
        notes.append("no batch size could be read from the batches: throughput is in steps/s")
    return Comparison(
        unit=unit,
        before=before,
        after=after,
        effect=effect,
        ci=ci,
        noise_floor=noise,
        b_spread=b_noise,
        threshold=threshold,
        verdict=verdict,
        runs_a=len(a_runs),
        runs_b=len(b_runs),
        mechanisms=mechanisms,
        mechanism_verified=verdict in (NO_CHANGE, TOO_NOISY) and any(m.improved for m in mechanisms),
        numerics=numerics_note(a_losses or [], b_losses or []),
        notes=notes,
    )
