"""Before/after numbers for the profiling fixtures, as a markdown table.

For each fixture script: copy it to a temp folder, then let `run_verify` profile the original (A), fix the
copy with gpulint's fixer, unsafe fixes included (B), alternate A B, and report. Runs on CPU too
(GPU columns then read "unavailable"), so it can be smoke-tested anywhere; the numbers that matter come from a
GPU machine, where it writes bench/results/gpu_verify.md (not committed until such a run has been made).

item_every_step.py syncs on `loss.item()` every step (GPU303), which has no automatic fix: its row measures
the loader fixes gpulint does apply to that script, not the removal of the sync (the table says so).

    python bench/gpu_verify.py [--scripts slow_loader.py ...] [--steps 30] [--warmup 10] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import pathlib
import platform
import shutil
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gpulint.profile.options import ProfileOptions  # noqa: E402
from gpulint.profile.verify import run_verify  # noqa: E402

FIXTURES = REPO / "fixtures" / "profile"
DEFAULT_OUT = REPO / "bench" / "results" / "gpu_verify.md"

DEFAULT_SCRIPTS = ["slow_loader.py", "pageable_copies.py", "item_every_step.py"]
# Said under the table for scripts whose main problem gpulint reports but does not fix.
NOT_FIXED = {
    "item_every_step.py": "GPU303 (`.item()` every step) has no automatic fix; the row measures only the loader "
    "fixes (GPU101/GPU102/GPU103) applied to it",
}


FIXER = "gpulint's fixer, unsafe fixes included (what `gpulint fix --apply --unsafe-fixes` writes)"


def make_plan_fixes(path: pathlib.Path, log: dict):
    from gpulint.config import Settings, with_overrides
    from gpulint.fixer import fix_source
    from gpulint.profile.verify import PlannedFix

    def plan_fixes() -> list:
        before = path.read_bytes()
        outcome = fix_source(before.decode(), path.name, with_overrides(Settings(root=path.parent), unsafe_fixes=True))
        log["fix"] = FIXER
        log["fixed_rules"] = dict(outcome.fixed)
        fixed = outcome.text.encode()
        return [PlannedFix(path, before, fixed, dict(outcome.fixed))] if fixed != before else []

    return plan_fixes


def verify_script(name: str, options: ProfileOptions) -> dict:
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="gpulint-bench-"))
    try:
        script = workdir / name
        shutil.copy(FIXTURES / name, script)
        log: dict = {}
        options.json_path = workdir / "verify.json"
        out = io.StringIO()
        code = run_verify([sys.executable, str(script)], make_plan_fixes(script, log), options, out=out, err=out)
        doc = json.loads(options.json_path.read_text()) if options.json_path.exists() else {}
        doc.update(script=name, exit_code=code, text=out.getvalue(), **log)
        return doc
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _pair(a, b, fmt="{:.1f}") -> str:
    if a is None or b is None:
        return "unavailable"
    return f"{fmt.format(a)} → {fmt.format(b)}"


def _first_attr(doc: dict, variant: str) -> dict:
    for r in doc.get("runs", []):
        if r["label"].startswith(variant) and isinstance(r.get("attribution"), dict):
            return r["attribution"]
    return {}


def _first_timing(doc: dict, variant: str) -> dict:
    for r in doc.get("runs", []):
        if r["label"].startswith(variant) and r.get("timing"):
            return r["timing"]
    return {}


def row(doc: dict) -> list[str]:
    cmp = doc.get("comparison") or {}
    a_attr, b_attr = _first_attr(doc, "A"), _first_attr(doc, "B")
    a_t, b_t = _first_timing(doc, "A"), _first_timing(doc, "B")
    unit = cmp.get("unit", "samples/s")
    if cmp.get("effect") is not None:
        ci = cmp.get("ci") or [None, None]
        change = f"{(cmp['effect'] - 1) * 100:+.1f} %"
        if ci[0] is not None:
            change += f" [{(ci[0] - 1) * 100:+.0f}, {(ci[1] - 1) * 100:+.0f}]"
        tput = f"{cmp['before']:.0f} → {cmp['after']:.0f} {unit} ({change})"
    else:
        tput = "-"
    if a_attr.get("data_wait_exposed_pct") is not None:
        wait = _pair(a_attr.get("data_wait_exposed_pct"), b_attr.get("data_wait_exposed_pct")) + " % (exposed)"
    else:
        wait = _pair(a_t.get("data_wait_pct"), b_t.get("data_wait_pct")) + " % (host)"
    h2d_a, h2d_b = a_attr.get("h2d"), b_attr.get("h2d")
    if h2d_a and h2d_b:
        copies = (
            f"pageable {h2d_a['pageable']['count_per_step']:.1f} → {h2d_b['pageable']['count_per_step']:.1f}, "
            f"pinned {h2d_a['pinned']['count_per_step']:.1f} → {h2d_b['pinned']['count_per_step']:.1f}"
        )
    else:
        copies = "unavailable"
    if a_attr.get("syncs_per_step") is not None:
        syncs = _pair(a_attr.get("syncs_per_step"), b_attr.get("syncs_per_step"))
    else:
        syncs = "unavailable (CPU); .item() reads " + _pair(a_attr.get("scalar_reads_per_step"), b_attr.get("scalar_reads_per_step"))
    verdict = cmp.get("summary", "").split(":")[0] if cmp else ""
    outcome = doc.get("outcome", "?")
    if outcome == "rolled back":
        outcome += f" ({doc.get('reason')})"
    return [
        doc["script"],
        tput,
        verdict or "-",
        _pair(a_attr.get("kernel_busy_pct"), b_attr.get("kernel_busy_pct")),
        wait,
        copies,
        syncs,
        outcome,
    ]


def environment(docs: list[dict]) -> list[str]:
    nv = {}
    cuda = {}
    for doc in docs:
        for r in doc.get("runs", []):
            nv = nv or (r.get("nvml") or {})
            cuda = cuda or ((r.get("details") or {}).get("cuda") or {})
    import torch

    gpu = f"{nv.get('name')} (driver {nv.get('driver')})" if nv.get("name") else nv.get("unavailable", "unavailable")
    return [
        f"- date: {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- GPU: {gpu}",
        f"- CUDA device used by the scripts: {cuda.get('device_name') or 'none (CPU run)'}",
        f"- torch {torch.__version__} (CUDA {torch.version.cuda}), Python {platform.python_version()}, {os.cpu_count()} CPUs",
    ]


def render(docs: list[dict], options: ProfileOptions) -> str:
    lines = ["# gpulint fix --verify on the profiling fixtures", ""]
    lines += environment(docs)
    fixes = sorted({d.get("fix", "none") for d in docs})
    lines.append(f"- fixes applied by: {', '.join(fixes)}")
    lines.append(
        f"- runs per side: {options.repeat_for_verify()}, alternating A B; {options.warmup} warm-up + {options.steps} measured steps per run"
    )
    lines.append("")
    head = ["script", "throughput before → after (95 % CI)", "verdict", "kernel busy %", "data wait", "H2D copies / step", "syncs / step", "outcome"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for d in docs:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row(d)) + " |")
    lines.append("")
    lines.append("Kernel busy = union of kernel intervals over the profiled window; data wait = time inside")
    lines.append("DataLoader `__next__` (exposed: while no kernel ran); H2D copies from `Memcpy HtoD (Pageable|Pinned -> Device)`")
    lines.append("trace events; syncs = `.item()`-style scalar reads plus explicit CUDA synchronizations. See docs/profiling.md.")
    notes = [f"- {d['script']}: {NOT_FIXED[d['script']]}" for d in docs if d["script"] in NOT_FIXED]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scripts", nargs="*", default=DEFAULT_SCRIPTS)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    docs = []
    for name in args.scripts:
        options = ProfileOptions(steps=args.steps, warmup=args.warmup, repeat=args.repeat, timeout=args.timeout)
        print(f"[gpu_verify] {name} ...", file=sys.stderr, flush=True)
        docs.append(verify_script(name, options))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render(docs, options))
    print(f"[gpu_verify] wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
