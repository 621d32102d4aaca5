"""Terminal tables and the JSON document for `gpulint profile` and `gpulint fix --verify`."""

from __future__ import annotations

import json
import os
import pathlib
from dataclasses import asdict

from gpulint.profile.compare import Comparison
from gpulint.profile.options import ProfileOptions
from gpulint.profile.runner import RunResult
from gpulint.profile.timing import TimingStats, timing_stats

NA = "unavailable"


def _fmt(value, spec=".1f", unit=""):
    if value is None:
        return "-"
    return f"{value:{spec}}{(' ' + unit) if unit else ''}"


def _bytes(n) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _counted_by(raw: dict) -> str:
    mode = raw.get("steps_counted_by")
    if mode == "optimizer":
        optimizers = raw.get("optimizers") or []
        if len(optimizers) > 1:
            names = ", ".join(o["name"] for o in optimizers)
            return f"training iterations ({len(optimizers)} optimizers step in each: {names}; the first one's steps mark it)"
        return "optimizer.step()"
    return {
        "marker": "gpulint.profile.step() calls",
        "dataloader": "DataLoader batches (no optimizer seen)",
    }.get(mode, "-")


def _measured_process(raw: dict) -> str | None:
    """A note when the numbers are one process's among several (multiprocessing children, torchrun ranks)."""
    n = raw.get("training_processes") or 0
    if raw.get("process") == "child":
        others = f" of {n} training processes" if n > 1 else ""
        return f"measured in a child process{others} (multiprocessing; the first to step measures): throughput is that process's"
    if (raw.get("world_size") or 1) > 1:
        return f"rank 0 of {raw['world_size']} measured: throughput is per rank"
    return None


def _rows(rows: list[tuple[str, str]], indent: str = "    ") -> list[str]:
    width = max((len(k) for k, _ in rows), default=0)
    return [f"{indent}{k.ljust(width)}  {v}" for k, v in rows]


def _peak_memory(runs: list[RunResult]) -> str | None:
    for r in runs:
        cuda_window = ((r.raw.get("window") or {}).get("cuda")) or None
        if cuda_window:
            used, total = cuda_window["peak_memory_allocated"], cuda_window["total_memory"]
            return f"{_bytes(used)} allocated, {_bytes(cuda_window['peak_memory_reserved'])} reserved of {_bytes(total)}"
    return None


def gpu_missing(runs: list[RunResult]) -> str | None:
    """One line saying why there are no GPU numbers at all, or None when the run used a GPU."""
    raw = runs[0].raw if runs else {}
    cuda = raw.get("cuda") or {}
    if cuda.get("used"):
        return None
    why = "the script did not use CUDA" if cuda.get("available") else "CUDA not available (CPU-only torch or no GPU)"
    nvml = (runs[0].nvml or {}).get("unavailable") if runs else None
    return f"not measured: {why}" + (f"; NVML: {nvml.removeprefix('unavailable: ')}" if nvml else "")


def attribution_rows(attr: dict, loader: bool = True) -> list[tuple[str, str]]:
    """`loader`: the measured steps fetched from a DataLoader (without one, there is no data wait to show)."""
    if not attr or isinstance(attr.get("unavailable"), str):
        return [("attribution", f"{NA}: {(attr or {}).get('unavailable', 'not run')}")]
    rows = [
        ("profiled steps", f"{attr['profiled_steps']} (median {attr['profiled_step_ms_median']:.1f} ms under the profiler)"),
    ]
    reads = f"{attr['scalar_reads_per_step']:.1f} in the loop"
    inside = attr.get("optimizer_scalar_reads_per_step") or 0.0
    if inside:
        reads += f", {inside:.1f} inside optimizer.step (CPU step counters: not syncs)"
    if not attr.get("gpu_activity"):
        if loader:
            rows.append(("data wait (trace)", f"{attr['data_wait_pct']:.1f} % of step"))
        rows.append(("scalar reads / step", reads + "; .item() and friends, which would synchronize with the model on a GPU"))
        return rows
    rows += [
        ("kernel busy", f"{_fmt(attr.get('kernel_busy_pct'))} % (union of kernel intervals)"),
        ("exposed data wait", f"{_fmt(attr.get('data_wait_exposed_pct'))} % (fetching while no kernel ran)"),
    ]
    h2d = attr.get("h2d") or {}
    pg, pn = h2d.get("pageable", {}), h2d.get("pinned", {})
    rows.append(
        (
            "H2D copies / step",
            f"pageable {pg.get('count_per_step', 0):.1f} ({_bytes(pg.get('bytes_per_step'))}), "
            f"pinned {pn.get('count_per_step', 0):.1f} ({_bytes(pn.get('bytes_per_step'))})",
        )
    )
    rows.append(("syncs / step", f"{attr['syncs_per_step']:.1f} (scalar reads: {reads})"))
    return rows


def sync_site_rows(raw: dict, steps: int, limit: int = 5) -> list[tuple[str, str]]:
    """The user's lines that synchronized during the attribution pass, most frequent first (GPU runs)."""
    sites = raw.get("sync_sites") or {}
    top = sorted(sites.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
    return [(f"sync at {site}", f"{n / max(steps, 1):.1f} per step") for site, n in top]


def idle_rows(exp) -> list[tuple[str, str]]:
    """The "why is the GPU idle" table: each cause, its share, its speedup ceiling and the rules that remove it."""
    rows: list[tuple[str, str]] = []
    if exp.kind == "gpu":
        rows.append(
            ("GPU time", f"compute {exp.compute_pct:.1f} %, non-compute {exp.non_compute_pct:.1f} %, idle {exp.idle_pct:.1f} % of the step")
        )
    for c in exp.causes:
        if c.share_pct < 0.05 and exp.kind == "gpu":
            continue
        text = f"{c.share_pct:5.1f} % of step"
        if c.ceiling is not None:
            text += f"; removing it: up to {c.ceiling:.2f}x"
        if c.rules:
            text += f"; {', '.join(c.rules)}"
        elif c.remedy:
            text += f"; {c.remedy}"
        rows.append((c.label, text))
    if exp.launch and exp.launch.get("kernels_per_step"):
        la = exp.launch
        text = f"{la['kernels_per_step']:.0f} kernels/step, {la.get('short_kernel_pct', 0):.0f} % shorter than 10 µs"
        if la.get("launch_delay_us_p50") is not None:
            text += f", launch delay p50 {la['launch_delay_us_p50']:.0f} µs / p90 {la['launch_delay_us_p90']:.0f} µs"
        rows.append(("launch-bound signals", text))
    return rows


def nvml_rows(nv: dict) -> list[tuple[str, str]]:
    if not nv:
        return [("NVML", f"{NA}: not sampled")]
    if nv.get("unavailable"):
        return [("NVML", nv["unavailable"])]
    rows = [("GPU", f"{nv.get('name')} (driver {nv.get('driver')})")]
    if nv.get("device_mismatch"):
        rows.append(("wrong GPU sampled", nv["device_mismatch"]))
    if "utilization_gpu_mean_pct" in nv:
        rows.append(
            (
                "NVML utilization",
                f"{nv['utilization_gpu_mean_pct']:.0f} % mean over {nv['utilization_gpu_samples']} samples "
                "(share of time >= 1 kernel ran; not SM activity)",
            )
        )
    elif nv.get("utilization_unavailable"):
        rows.append(("NVML utilization", nv["utilization_unavailable"]))
    if nv.get("gpm"):
        g = nv["gpm"]
        rows.append(("SM activity (GPM)", ", ".join(f"{k.replace('_pct', '')} {v:.0f} %" for k, v in g.items())))
    else:
        rows.append(("SM activity (GPM)", nv.get("gpm_unavailable") or f"{NA}: needs Hopper or newer"))
    if nv.get("memory_used_max") is not None:
        rows.append(("device memory used", f"{_bytes(nv['memory_used_max'])} max (all processes)"))
    if nv.get("sm_clock_mhz_median") is not None:
        rows.append(("SM clock", f"{nv['sm_clock_mhz_median']} MHz median in the window (min {nv['sm_clock_mhz_min']})"))
    if nv.get("throttle_reasons"):
        rows.append(("clock throttling", ", ".join(nv["throttle_reasons"])))
    if nv.get("other_processes"):
        rows.append(("other GPU processes", f"{nv['other_processes']}: timings are unreliable"))
    return rows


def timing_rows(stats: TimingStats) -> list[tuple[str, str]]:
    rows = [
        ("step time", f"{_fmt(stats.step_ms_median)} ms median (p10 {_fmt(stats.step_ms_p10)}, p90 {_fmt(stats.step_ms_p90)})"),
    ]
    if stats.gpu_step_ms_median is not None:
        rows.append(("GPU time / step", f"{stats.gpu_step_ms_median:.1f} ms median (CUDA events at step boundaries)"))
    if stats.samples_per_s is not None:
        rows.append(("throughput", f"{stats.samples_per_s:.1f} samples/s ({stats.steps_per_s:.2f} steps/s)"))
    else:
        why = "could not be read: no tensor with a batch dimension in the batches" if stats.batches_per_step else "unknown: no DataLoader batches"
        rows.append(("throughput", f"{_fmt(stats.steps_per_s, '.2f')} steps/s (batch size {why})"))
    if stats.data_wait_pct is not None:
        rows.append(
            ("data wait", f"{stats.data_wait_pct:.1f} % of step ({_fmt(stats.data_wait_ms_median)} ms/step median, p90 {_fmt(stats.data_wait_ms_p90)})")
        )
    else:
        rows.append(("data wait", f"{NA}: no DataLoader in the measured steps"))
    return rows


def run_notes(runs: list[RunResult]) -> list[str]:
    notes = []
    for r in runs:
        label = r.label or "run"
        if r.raw.get("window_restarts"):
            notes.append(f"{label}: a new epoch began in the measured window; the window was restarted after it")
        if r.raw.get("epoch_boundary_in_window"):
            notes.append(f"{label}: the measured window crossed an epoch boundary (workers restart there)")
        excluded = ((r.raw.get("window") or {}).get("excluded_steps")) or []
        if excluded:
            batches = sum(e["batches_without_grad"] for e in excluded)
            seconds = sum(e["wall_s"] for e in excluded)
            notes.append(
                f"{label}: left out {len(excluded)} step(s) holding an evaluation ({batches} batches fetched without "
                f"gradients, {seconds:.2f} s); the measured steps are training steps only"
            )
        if r.raw.get("eval_detection") is False:
            notes.append(f"{label}: every step fetched its batches without gradients, so none was left out as evaluation")
        if r.raw.get("lead_optimizer_switches"):
            notes.append(f"{label}: another optimizer took over marking the steps (it stepped on its own repeatedly)")
        if r.failure_after_window:
            notes.append(f"{label}: {r.failure_after_window}")
        if (r.nvml or {}).get("device_mismatch"):
            notes.append(f"{label}: {r.nvml['device_mismatch']}")
        if (r.nvml or {}).get("unreliable"):
            notes.append(f"{label}: other processes used the GPU; timings are unreliable")
        if r.new_files:
            shown = ", ".join(r.new_files[:5]) + (f" and {len(r.new_files) - 5} more" if len(r.new_files) > 5 else "")
            if r.set_aside or r.changed_in_place:
                notes.append(_isolation_note(label, shown, r))
            else:
                notes.append(
                    f"{label} wrote files in the working folder: {shown}. Later runs may read them (a checkpoint one "
                    "run writes and the next resumes from makes the runs dependent); gpulint leaves them in place "
                    "(--isolate-runs moves them aside after each run)"
                )
    return notes


def _isolation_note(label: str, shown: str, r: RunResult) -> str:
    parts = [f"{label} wrote files in the working folder: {shown}"]
    if r.set_aside:
        parts.append(f"the new ones were moved to {r.set_aside}, so the next run starts without them")
    if r.changed_in_place:
        changed = ", ".join(r.changed_in_place[:5]) + (" and more" if len(r.changed_in_place) > 5 else "")
        parts.append(f"files that existed before were changed in place and could not be put back: {changed}; later runs may read them")
    return "; ".join(parts)


def profile_text(command_text: str, runs: list[RunResult], options: ProfileOptions) -> str:
    from gpulint.profile.idle import explain

    ok = [r for r in runs if r.ok]
    lines = [f"gpulint profile: {command_text}"]
    first = (ok or runs)[0].raw if runs else {}
    head = [
        f"{len(runs)} run{'s' if len(runs) != 1 else ''}",
        f"{first.get('warmup_steps') or options.warmup} warm-up + {options.steps} measured steps",
    ]
    if first.get("steps_counted_by"):
        head.append(f"counted by {_counted_by(first)}")
    if first.get("torch_version"):
        head.append(f"torch {first['torch_version']}")
    lines.append("  " + " · ".join(head))
    who = _measured_process(first)
    if who:
        lines.append(f"  {who}")
    if ok:
        stats = timing_stats([s for r in ok for s in r.steps])
        lines.append("")
        lines.append("  Timing (no profiler)")
        rows = timing_rows(stats)
        if len(ok) > 1:
            from gpulint.profile.compare import run_throughputs, spread, throughput_unit

            runs_steps = [r.steps for r in ok]
            sp = spread(run_throughputs(runs_steps, throughput_unit(runs_steps)))
            rows.append(("run-to-run spread", f"{_fmt(sp * 100 if sp is not None else None)} % of throughput"))
        memory = _peak_memory(ok)
        if memory:
            rows.append(("peak GPU memory", memory))
        lines += _rows(rows)
        exp = explain(stats, ok[0].attribution)
        if exp is not None:
            lines.append("")
            lines.append("  Why the GPU is idle" if exp.kind == "gpu" else "  Where the step goes (CPU-only run: what the CPU can measure)")
            lines += _rows(idle_rows(exp))
        lines.append("")
        lines.append("  Attribution (torch.profiler, separate window)")
        attr = ok[0].attribution
        rows = attribution_rows(attr, loader=stats.data_wait_pct is not None)
        site_steps = ok[0].raw.get("sync_site_steps") or (attr or {}).get("profiled_steps") or 1
        lines += _rows(rows + sync_site_rows(ok[0].raw, site_steps))
        missing = gpu_missing(ok)
        if missing:
            lines.append("")
            lines += _rows([("GPU", missing)], indent="  ")
        else:
            lines.append("")
            lines.append("  GPU side channel (NVML)")
            lines += _rows(nvml_rows(ok[0].nvml))
    notes = run_notes(runs)
    if notes:
        lines.append("")
        lines.append("  Notes")
        lines += [f"    {n}" for n in notes]
    return "\n".join(lines) + "\n"


def user_traceback(text: str, limit: int = 20) -> list[str]:
    """The traceback's frames in the user's own files plus the last frame and the exception; library
    frames in between (multiprocessing, torch) are elided."""
    lines = text.splitlines()
    frames: list[list[str]] = []
    tail: list[str] = []
    for line in lines[1:] if lines and lines[0].startswith("Traceback") else lines:
        if line.startswith("  File "):
            frames.append([line])
        elif line.startswith("    ") and frames and not tail:
            frames[-1].append(line)
        else:
            tail.append(line)
    if not frames:
        return lines[-limit:]

    def library(frame):
        head = frame[0]
        return "site-packages" in head or "/lib/python" in head or "<frozen " in head

    kept: list[str] = []
    skipped = 0
    for i, frame in enumerate(frames):
        if library(frame) and i != len(frames) - 1:
            skipped += 1
            continue
        if skipped:
            kept.append(f"  ... {skipped} library frame{'s' if skipped > 1 else ''} ...")
            skipped = 0
        kept += frame
    out = ["Traceback (most recent call last):", *kept, *tail]
    return out[-limit:]


def failure_text(result: RunResult) -> str:
    lines = [f"{result.label + ': ' if result.label else ''}{result.message}"]
    if result.traceback_tail:
        lines.append("  traceback:")
        lines += ["    " + line for line in user_traceback(result.traceback_tail)]
    elif result.stderr_tail and not result.ok:
        lines.append("  stderr (last lines):")
        lines += ["    " + line for line in result.stderr_tail.splitlines()[-10:]]
    return "\n".join(lines)


def comparison_text(cmp: Comparison, a_runs: list[RunResult], b_runs: list[RunResult]) -> str:
    a_stats = timing_stats([s for r in a_runs for s in r.steps])
    b_stats = timing_stats([s for r in b_runs for s in r.steps])
    rows: list[tuple[str, ...]] = [("metric", "before (A)", "after (B)", "change", "moved by")]
    change = "-"
    if cmp.effect is not None:
        change = f"{(cmp.effect - 1) * 100:+.1f} %"
        if cmp.ci:
            change += f" (95 % CI {(cmp.ci[0] - 1) * 100:+.1f} .. {(cmp.ci[1] - 1) * 100:+.1f} %)"
    rows.append(("throughput", f"{_fmt(cmp.before)} {cmp.unit}", f"{_fmt(cmp.after)} {cmp.unit}", change, ""))
    if a_stats.step_ms_median and b_stats.step_ms_median:
        rel = (b_stats.step_ms_median / a_stats.step_ms_median - 1) * 100
        rows.append(("step time (median)", f"{a_stats.step_ms_median:.1f} ms", f"{b_stats.step_ms_median:.1f} ms", f"{rel:+.1f} %", ""))
    for m in cmp.mechanisms:
        mark = "improved" if m.improved else ("worse" if m.worse else (m.note or "same"))
        rows.append((m.name, f"{m.before:.1f} {m.unit}", f"{m.after:.1f} {m.unit}", mark, ", ".join(m.rules)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = ["  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    lines.insert(1, "  " + "  ".join("-" * w for w in widths))
    noise = f"{cmp.noise_floor * 100:.1f} %" if cmp.noise_floor is not None else "not measured"
    lines.append("")
    lines.append(f"  noise floor (A-vs-A spread): {noise}; smallest change that counts: {cmp.threshold * 100:.1f} %")
    lines.append(f"  verdict: {cmp.summary}")
    if cmp.numerics:
        lines.append(f"  numerics: {cmp.numerics}")
    for n in cmp.notes:
        lines.append(f"  note: {n}")
    return "\n".join(lines)


# ---- JSON --------------------------------------------------------------------------------------------------


def run_to_dict(r: RunResult) -> dict:
    raw = dict(r.raw)
    window = raw.pop("window", None) or {}
    return {
        "label": r.label,
        "status": r.status,
        "message": r.message,
        "returncode": r.returncode,
        "duration_s": r.duration_s,
        "timing": timing_stats(window["steps"]).to_dict() if window.get("steps") else None,
        "steps": window.get("steps"),
        "window_s": window.get("wall_s"),
        "cuda_memory": window.get("cuda"),
        "attribution": r.attribution,
        "nvml": r.nvml,
        "traceback_tail": r.traceback_tail,
        "stderr_tail": r.stderr_tail if not r.ok else None,
        "trace_path": r.trace_path,
        "new_files": r.new_files,
        "set_aside": r.set_aside,
        "changed_in_place": r.changed_in_place,
        "details": raw,
    }


def options_to_dict(options: ProfileOptions) -> dict:
    d = asdict(options)
    for key in ("json_path", "html_path", "trace_dir", "cwd"):
        if d.get(key) is not None:
            d[key] = str(d[key])
    d.pop("env", None)
    return d


def unified_diff(path: str, original: bytes, fixed: bytes) -> str:
    import difflib

    from gpulint.lines import lines_with_ends

    a = lines_with_ends(original.decode("utf-8", "replace"))
    b = lines_with_ends(fixed.decode("utf-8", "replace"))
    return "".join(difflib.unified_diff(a, b, fromfile=path, tofile=path))


def environment(runs: list[RunResult]) -> dict:
    """What the numbers were measured on: interpreter, torch, machine, load, and the GPU as NVML saw it."""
    import platform

    raw = next((r.raw for r in runs if r.raw.get("torch_version")), {})
    env = {
        "python": raw.get("python_version") or platform.python_version(),
        "torch": raw.get("torch_version"),
        "platform": platform.platform(terse=True),
        "cpus": os.cpu_count(),
        "cuda": raw.get("cuda"),
    }
    try:
        env["load_average"] = round(os.getloadavg()[0], 2)
    except OSError:
        pass
    nv = next((r.nvml for r in runs if r.nvml and not r.nvml.get("unavailable")), None)
    if nv:
        env["gpu"] = {k: nv.get(k) for k in ("name", "driver", "sm_clock_mhz_median", "throttle_reasons", "other_processes")}
    else:
        env["gpu"] = {"unavailable": next((r.nvml.get("unavailable") for r in runs if r.nvml), "not sampled")}
    return env


def write_json(path: os.PathLike | str, document: dict) -> None:
    """Atomically, through gpulint's one atomic writer: a temp file made by mkstemp in the target folder, then
    os.replace (never a predictable `FILE.tmp` a symlink could redirect)."""
    from gpulint.fixer import write_atomic

    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, (json.dumps(document, indent=2, default=str) + "\n").encode())


def write_reports(options: ProfileOptions, document: dict, err) -> None:
    """--json and --html; a report that cannot be written is said on stderr and never hides the result."""
    from gpulint.fixer import WriteError

    for path, render in ((options.json_path, None), (options.html_path, "html")):
        if path is None:
            continue
        try:
            if render == "html":
                from gpulint.profile.html_report import write_html

                write_html(path, document)
            else:
                write_json(path, document)
        except (OSError, WriteError) as e:
            err.write(f"gpulint: {path}: report not written: {e}\n")
