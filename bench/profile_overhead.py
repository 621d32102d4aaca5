"""What `gpulint profile` costs the script it measures: the script's own hand-timed step time with and without
gpulint, and what one step's hooks cost.

Method (written to the results file too):
1. End to end: bench/hand_timed_loop.py times its own steps (perf_counter after each optimizer.step()) and
   writes the durations of steps FIRST..FIRST+COUNT. It is run alternately as `python hand_timed_loop.py ...`
   and as `gpulint profile --repeat 1 --warmup W --steps N -- python hand_timed_loop.py ...`, PAIRS times each,
   with OMP_NUM_THREADS=1 and in a session of its own either way (as gpulint starts it: under the kernel's
   autogroup scheduling a session is also a CPU-share group), in pairs whose order alternates. FIRST is past gpulint's whole warm-up (W + its
   settling cap), so the hand-timed steps lie inside gpulint's measured window (no profiler: that pass comes
   after the window). Overhead = the median over pairs of (hand-timed median under gpulint / hand-timed median
   without it) - 1: a pair's two runs are seconds apart, so the machine's slow swings cancel. Also reported:
   the ratio of the medians over all runs, and gpulint's own median step time against the hand-timed one of the
   same run (does gpulint report the right number?).
2. Per step, in process: the hooks a measured step goes through (the optimizer step post-hook and the DataLoader
   `__next__` wrapper), called in a tight loop with a real Recorder in its measuring state, in µs per step.
   This is the floor the end-to-end figure cannot resolve on a noisy machine.

    python bench/profile_overhead.py [--pairs 7] [--out bench/results/profile_overhead.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
LOOP = REPO / "bench" / "hand_timed_loop.py"
WARMUP, STEPS = 5, 120
FIRST, COUNT = 30, 80  # past warm-up + the settling cap (5 + 5): inside gpulint's window of 120 steps


def _env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("CI", None)
    return env


def _median_of(path: pathlib.Path) -> float:
    return statistics.median(float(x) for x in path.read_text().split())


def plain_run(tmp: pathlib.Path, extra: list[str]) -> float:
    out = tmp / "plain.txt"
    # In a session of its own, as gpulint starts the script: with the kernel's autogroup scheduling a new session
    # is also a new CPU-share group, which on a busy machine moves the numbers by itself.
    subprocess.run(
        [sys.executable, str(LOOP), str(out), str(FIRST), str(COUNT), *extra], env=_env(), check=True, timeout=600, start_new_session=True
    )
    return _median_of(out)


def gpulint_run(tmp: pathlib.Path, extra: list[str]) -> tuple[float, float]:
    out, doc = tmp / "profiled.txt", tmp / "profile.json"
    subprocess.run(
        [sys.executable, "-m", "gpulint", "profile", "--repeat", "1", "--warmup", str(WARMUP), "--steps", str(STEPS),
         "--json", str(doc), "--", sys.executable, str(LOOP), str(out), str(FIRST), str(COUNT), *extra],
        env=_env(), check=True, timeout=600, stdout=subprocess.DEVNULL,
    )
    reported = json.loads(doc.read_text())["summary"]["timing"]["step_ms_median"] / 1000
    return _median_of(out), reported


def hook_cost_us(iterations: int = 200_000) -> dict:
    """µs per step spent in gpulint's hooks while measuring (optimizer post-hook + DataLoader __next__ wrapper)."""
    sys.path.insert(0, str(REPO))
    import torch

    from gpulint.profile import _child

    cfg = {"warmup": 0, "steps": 10**9, "attribution_steps": 0, "result_path": os.devnull}
    rec = _child.Recorder(cfg, torch)
    rec.on_batch(0.0, 0.0, 64)
    rec.on_optimizer_step(None)
    assert rec.phase == "measure"
    batch = (torch.zeros(64, 1), torch.zeros(64))
    t0 = time.perf_counter()
    for _ in range(iterations):
        a = time.perf_counter()
        b = time.perf_counter()
        rec.on_batch(a, b, _child._batch_size(batch, torch), torch.is_grad_enabled())
        rec.on_optimizer_step(None)
    hooks = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(iterations):  # the same loop without the hooks' work: the timer calls only
        a = time.perf_counter()
        b = time.perf_counter()
    base = time.perf_counter() - t0
    return {"us_per_step": (hooks - base) / iterations * 1e6, "iterations": iterations}


def measure(pairs: int, extra: list[str]) -> dict:
    plain, profiled, reported = [], [], []
    with tempfile.TemporaryDirectory(prefix="gpulint-overhead-") as d:
        tmp = pathlib.Path(d)
        for i in range(pairs):
            order = (0, 1) if i % 2 == 0 else (1, 0)  # alternate which goes first
            for which in order:
                if which == 0:
                    plain.append(plain_run(tmp, extra))
                else:
                    hand, rep = gpulint_run(tmp, extra)
                    profiled.append(hand)
                    reported.append(rep)
            print(f"[profile_overhead] {extra or 'fast'} pair {i + 1}/{pairs}: plain {plain[-1] * 1e3:.3f} ms, "
                  f"under gpulint {profiled[-1] * 1e3:.3f} ms (gpulint says {reported[-1] * 1e3:.3f})", file=sys.stderr, flush=True)
    p, q = statistics.median(plain), statistics.median(profiled)
    ratios = [b / a for a, b in zip(plain, profiled)]
    return {
        "pair_ratios": ratios,
        "overhead_pct": (statistics.median(ratios) - 1) * 100,
        "overhead_of_medians_pct": (q / p - 1) * 100,
        "plain_ms": [x * 1e3 for x in plain],
        "profiled_ms": [x * 1e3 for x in profiled],
        "reported_ms": [x * 1e3 for x in reported],
        "plain_median_ms": p * 1e3,
        "profiled_median_ms": q * 1e3,
        "reported_vs_hand_pct": statistics.median((r / h - 1) * 100 for r, h in zip(reported, profiled)),
    }


def render(results: dict, hooks: dict, pairs: int, load: tuple) -> str:
    def spread(xs):
        return f"{min(xs):.3f} – {max(xs):.3f}"

    lines = [
        "# Profiler overhead",
        "",
        "What `gpulint profile` costs the script it measures, measured with `python bench/profile_overhead.py`",
        f"(--pairs {pairs}). Method: see the script's docstring; in short, a training loop times its own steps by",
        "hand (perf_counter after each optimizer.step()) and is run alternately with and without gpulint; the",
        f"hand-timed steps {FIRST}..{FIRST + COUNT} lie inside gpulint's measured window ({WARMUP} warm-up + {STEPS}",
        "steps, `--repeat 1`, OMP_NUM_THREADS=1, each run in a session of its own as gpulint starts it), in pairs of",
        "runs seconds apart (order alternating). Overhead =",
        "median over pairs of (with gpulint / without) - 1; the ratio of the medians over all runs is shown too.",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d')}; {platform.platform(terse=True)}; "
        f"Python {platform.python_version()}; {os.cpu_count()} CPUs; load average before/after: "
        f"{load[0]:.1f} / {load[1]:.1f} (a shared machine: other jobs inflate the spread)",
        "",
        "| loop | step without gpulint (median of run medians; range) | with gpulint | overhead (median pair ratio; range) | ratio of the medians | gpulint's reported step vs the hand-timed one |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in results.items():
        lines.append(
            f"| {name} | {r['plain_median_ms']:.3f} ms ({spread(r['plain_ms'])}) | {r['profiled_median_ms']:.3f} ms "
            f"({spread(r['profiled_ms'])}) | {r['overhead_pct']:+.1f} % ({(min(r['pair_ratios']) - 1) * 100:+.0f} .. "
            f"{(max(r['pair_ratios']) - 1) * 100:+.0f} %) | {r['overhead_of_medians_pct']:+.1f} % | {r['reported_vs_hand_pct']:+.1f} % |"
        )
    lines += [
        "",
        f"Hooks per measured step, in process ({hooks['iterations']:,} iterations): **{hooks['us_per_step']:.2f} µs** "
        "(the optimizer post-hook and the DataLoader `__next__` wrapper with its batch-size read; the watch",
        "thread sleeps in a blocking read once steps are seen). That is "
        + ", ".join(f"{hooks['us_per_step'] / (r['plain_median_ms'] * 1e3) * 100:.2f} % of the {name} step" for name, r in results.items())
        + ", the floor under the end-to-end figures, which on this machine are within their run-to-run noise.",
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=15)
    parser.add_argument("--loops", choices=["fast", "20ms", "both"], default="both")
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "bench" / "results" / "profile_overhead.md")
    args = parser.parse_args(argv)
    load0 = os.getloadavg()[0]
    loops = {
        "fast": ("fast CPU step (tiny MLP, batch 64)", []),
        "20ms": ("20 ms step (same loop + 20 ms of host work)", ["--step-ms", "20"]),
    }
    chosen = loops if args.loops == "both" else {args.loops: loops[args.loops]}
    results = {name: measure(args.pairs, extra) for name, extra in chosen.values()}
    hooks = hook_cost_us()
    text = render(results, hooks, args.pairs, (load0, os.getloadavg()[0]))
    if str(args.out) == "-":
        print(text)
    else:
        args.out.write_text(text)
        print(f"[profile_overhead] wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
