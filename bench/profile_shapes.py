"""How `gpulint profile` handles each script shape, measured: every fixture of fixtures/profile that stands for a
shape is profiled once (`--repeat 1`), and the table records what gpulint counted, which process it measured,
what it left out, the step time and throughput it reports, and how long the whole `gpulint profile` took.

    python bench/profile_shapes.py [--out bench/results/profile_shapes.md]
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import platform
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpulint.profile.command import plan_command  # noqa: E402
from gpulint.profile.options import ProfileOptions  # noqa: E402
from gpulint.profile.runner import run_once  # noqa: E402
from gpulint.profile.timing import timing_stats  # noqa: E402

FIXTURES = REPO / "fixtures" / "profile"
SHAPES = [  # (shape, fixture and arguments)
    ("plain loop: DataLoader + one optimizer", ["tiny_train.py"]),
    ("slow data loading", ["slow_loader.py"]),
    ("two optimizers per iteration (GAN: D and G), Adam", ["two_optimizers.py"]),
    ("evaluation every 4 steps inside the window (40 batches, no_grad)", ["eval_in_window.py"]),
    ("training in mp.Process children (spawn), evaluation in the parent", ["hogwild.py", "process"]),
    ("training via torch.multiprocessing.spawn", ["hogwild.py", "spawn"]),
    ("training in mp.Process children (fork)", ["hogwild.py", "fork"]),
    ("manual SGD: no optimizer, no DataLoader", ["manual_sgd.py"]),
    ("manual SGD with gpulint.profile.step() marks", ["manual_sgd.py", "--mark"]),
    ("no step at all (tensor work only)", ["no_steps.py"]),
    ("DataLoader only, no optimizer (inference)", ["loader_only.py"]),
]


def row(shape: str, args: list[str], options: ProfileOptions) -> list[str]:
    plan = plan_command([sys.executable, str(FIXTURES / args[0]), *args[1:]])
    t0 = time.monotonic()
    r = run_once(plan, options, attribution=True)
    wall = time.monotonic() - t0
    raw = r.raw
    what = r.message if not r.ok else f"measured ({raw.get('steps_counted_by')})"
    process = raw.get("process") or "-"
    if raw.get("training_processes", 0) > 1:
        process += f" (1 of {raw['training_processes']} training processes)"
    if not r.ok:
        return [shape, f"`{' '.join(args)}`", what, process, "-", "-", "-", f"{wall:.1f} s"]
    stats = timing_stats(r.steps)
    batches = sorted({s["batches"] for s in r.steps})
    excluded = (raw.get("window") or {}).get("excluded_steps") or []
    left_out = f"{len(excluded)} step(s), {sum(e['batches_without_grad'] for e in excluded)} eval batches" if excluded else "-"
    optimizers = ", ".join(o["name"] for o in raw.get("optimizers") or []) or "none"
    tput = f"{stats.samples_per_s:.0f} samples/s" if stats.samples_per_s else f"{stats.steps_per_s:.1f} steps/s"
    reads = r.attribution.get("scalar_reads_per_step")
    inside = r.attribution.get("optimizer_scalar_reads_per_step")
    read_text = f"; .item() in loop {reads:.1f}/step, in optimizer {inside:.1f}/step" if reads is not None else ""
    return [
        shape,
        f"`{' '.join(args)}`",
        f"{what}; optimizers: {optimizers}; batches per step: {batches}{read_text}",
        process,
        left_out,
        f"{stats.step_ms_median:.1f} ms",
        tput,
        f"{wall:.1f} s",
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=REPO / "bench" / "results" / "profile_shapes.md")
    args = parser.parse_args(argv)
    options = ProfileOptions(steps=20, warmup=5, timeout=300, first_step_timeout=120, progress=False)
    load0 = os.getloadavg()[0]
    rows = []
    for shape, fixture in SHAPES:
        print(f"[profile_shapes] {shape} ...", file=sys.stderr, flush=True)
        rows.append(row(shape, fixture, options))
    head = ["shape", "fixture", "what gpulint did", "measured process", "left out", "step (median)", "throughput", "gpulint wall time"]
    lines = [
        "# gpulint profile on each script shape",
        "",
        "`python bench/profile_shapes.py`: each fixture of `fixtures/profile` profiled once (5 warm-up + 20 measured",
        "steps, the attribution pass included, CPU). \"wall time\" is the whole run: start-up, torch import, warm-up,",
        "window, attribution pass, and for the failures the time to the early stop.",
        "",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d')}; {platform.platform(terse=True)}; "
        f"Python {platform.python_version()}; {os.cpu_count()} CPUs; load average before/after: {load0:.1f} / {os.getloadavg()[0]:.1f}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"[profile_shapes] wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
