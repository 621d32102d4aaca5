"""`gpulint profile`: run the user's command (once or --repeat times) and report what one training step costs."""

from __future__ import annotations

import pathlib
import sys

from gpulint.profile.command import CommandError, child_argv, plan_command
from gpulint.profile.errors import print_failure
from gpulint.profile.options import ProfileOptions
from gpulint.profile.progress import Progress
from gpulint.profile.report import environment, failure_text, options_to_dict, profile_text, run_to_dict, write_reports
from gpulint.profile.runner import run_measured
from gpulint.profile.workspace import FolderWatch


def run_profile(command: list[str], options: ProfileOptions, *, out=None, err=None) -> int:
    """Profile `command`; print the report; return 0 when measured, 2 when it could not be (with the cause)."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        plan = plan_command(command, options.cwd)
        child_argv(plan, options.launcher, options.nproc_per_node)  # validates the launcher options
    except CommandError as e:
        print_failure(str(e), stream=err)
        return 2
    progress = Progress(options.show_progress(), err)
    total = options.repeat_for_profile()
    runs = []
    outputs = {p for p in (options.json_path, options.html_path, options.trace_dir) if p is not None}
    watch = FolderWatch(pathlib.Path(plan.cwd), pathlib.Path(plan.target) if plan.kind == "script" else None, outputs, options.isolate_runs)
    for i in range(total):
        progress.run(i + 1, total, "profile")
        trace_to = options.trace_dir / "profile.pt.trace.json" if options.trace_dir and i == 0 else None
        watch.start()
        try:
            result = run_measured(
                plan,
                options,
                attribution=i == 0,  # one profiled window is enough; later runs are timing only
                label=f"run {i + 1}",
                on_progress=progress.show,
                trace_copy_to=trace_to,
            )
        finally:
            progress.clear()
        result.new_files, after = watch.stop()
        if options.isolate_runs:
            result.isolate(*watch.set_aside(f"run {i + 1}", after), watch.cwd)
        runs.append(result)
        if not result.ok:
            break
    out.write(profile_text(plan.describe(), runs, options))
    out.flush()
    failed = next((r for r in runs if not r.ok), None)
    write_reports(
        options,
        {
            "kind": "profile",
            "command": list(command),
            "options": options_to_dict(options),
            "status": "measured" if failed is None else failed.status,
            "message": None if failed is None else failed.message,
            "summary": _summary(runs),
            "runs": [run_to_dict(r) for r in runs],
            "environment": environment(runs),
        },
        err,
    )
    if failed is not None:
        details = failure_text(failed).split("\n", 1)
        print_failure(f"could not profile `{plan.describe()}`: {failed.message}", details[1] if len(details) > 1 else None, err)
        return 2
    return 0


def _summary(runs) -> dict | None:
    """Timing over the measured steps of every successful run pooled, plus the run-to-run spread."""
    from gpulint.profile.compare import run_throughputs, spread, throughput_unit
    from gpulint.profile.timing import timing_stats

    from gpulint.profile.idle import explain

    ok = [r.steps for r in runs if r.ok and r.steps]
    if not ok:
        return None
    unit = throughput_unit(ok)
    stats = timing_stats([s for steps in ok for s in steps])
    exp = explain(stats, next(r.attribution for r in runs if r.ok))
    return {
        "timing": stats.to_dict(),
        "idle": exp.to_dict() if exp else None,
        "throughput_unit": unit,
        "run_throughputs": run_throughputs(ok, unit),
        "run_spread": spread(run_throughputs(ok, unit)),
    }
