"""`gpulint fix --apply --verify`: measure the original (A), apply the fixes, measure the fixed version (B),
alternating A B A B, and keep the fixes only when B runs, the changed lines ran, and B is not slower beyond the
noise (nor too noisy to tell).

The fixes are planned first and written by this module: nothing is profiled when there is nothing to fix, and a
journal holding the originals is on disk (see `journal.py`) before any file changes, until the final write."""

from __future__ import annotations

import os
import pathlib
import signal
import stat
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

from gpulint.fixer import WriteError
from gpulint.profile import runner as runner_mod
from gpulint.profile.changed_lines import probe_groups
from gpulint.profile.command import CommandError, child_argv, plan_command
from gpulint.profile.compare import SLOWER, TOO_NOISY, Comparison, compare
from gpulint.profile.errors import print_failure
from gpulint.profile.file_swap import FileSwap
from gpulint.profile.journal import Journal, files_in_leftovers
from gpulint.profile.options import ProfileOptions
from gpulint.profile.progress import Progress
from gpulint.profile.report import (
    comparison_text,
    environment,
    failure_text,
    options_to_dict,
    run_notes,
    run_to_dict,
    unified_diff,
    write_reports,
)
from gpulint.profile.runner import RunResult
from gpulint.profile.workspace import FolderWatch

KEPT = 0
ROLLED_BACK = 1  # also "not verified": the files are restored either way
ERROR = 2

_B_FAILURE = {
    runner_mod.SCRIPT_ERROR: "the fixed script crashed",
    runner_mod.NONZERO_EXIT: "the fixed script exited with a non-zero status",
    runner_mod.TIMEOUT: "the fixed script timed out",
    runner_mod.INCOMPLETE: "the fixed script never reached the measured steps",
    runner_mod.CRASHED: "the fixed script died without a result",
    runner_mod.INTERNAL: "the fixed run hit an internal error",
    runner_mod.NO_STEPS: "the fixed script showed no step gpulint can see",
}


@dataclass
class PlannedFix:
    """One file the fixes change: both versions, and how many fixes of each rule it holds."""

    path: pathlib.Path
    original: bytes
    fixed: bytes
    rules: dict[str, int] = field(default_factory=dict)


@contextmanager
def _no_interrupts():
    """Hold SIGINT and SIGTERM while files are restored, so a second Ctrl-C (or the CLI's SIGTERM handler, which
    raises) cannot stop a restore half-way; a held signal is delivered when the block ends."""
    can_block = hasattr(signal, "pthread_sigmask") and _is_main_thread()
    if can_block:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        if can_block:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _interrupted_code(interrupt: KeyboardInterrupt) -> int:
    """128 + the signal, as the CLI exits: 130 for Ctrl-C, 143 for SIGTERM (which the CLI raises as Terminated)."""
    from gpulint.api import Terminated

    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


def _holds(path: pathlib.Path, data: bytes) -> bool:
    try:
        return path.read_bytes() == data
    except OSError:
        return False


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _display(path: pathlib.Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _unwritable(path: pathlib.Path) -> str | None:
    """Why the file cannot take the fixes (checked before anything is run), or None."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        return e.strerror or str(e)
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return "file is read-only"
    return None if os.access(path, os.W_OK) else "no permission to write the file"


def _rules_text(rules: dict[str, int]) -> str:
    return ", ".join(f"{n} × {code}" for code, n in sorted(rules.items()))


def noise_advice() -> str:
    """What makes timings repeatable, with this machine's load as it is now."""
    text = "rerun with more runs (--repeat 5 or more), pin the threads (OMP_NUM_THREADS=1, or taskset -c), on a quieter machine"
    try:
        load = os.getloadavg()[0]
        text += f" (load average now {load:.1f} on {os.cpu_count()} CPUs)"
    except OSError:
        pass
    return text


def run_verify(
    command: list[str],
    plan_fixes: Callable[[], list[PlannedFix]],
    options: ProfileOptions,
    *,
    out=None,
    err=None,
    run=None,
) -> int:
    """Plan the fixes; profile A, write the fixes, profile B, alternate; keep or restore. Returns 0 kept (or
    nothing to fix), 1 rolled back or not verified, 2 error.

    plan_fixes() returns the files the fixes would change (writing nothing). Every changed file ends in its final
    state (fixed when kept, original otherwise), even on Ctrl-C; a journal covers a kill -9.
    `run` replaces runner.run_measured (tests inject synthetic results through it).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    run = run or runner_mod.run_measured
    try:
        plan = plan_command(command, options.cwd)
        child_argv(plan, options.launcher, options.nproc_per_node)
    except CommandError as e:
        print_failure(str(e), stream=err)
        return ERROR
    repeat = options.repeat_for_verify()
    total = 2 * repeat
    progress = Progress(options.show_progress(), err)
    a_runs: list[RunResult] = []
    b_runs: list[RunResult] = []
    doc: dict = {"kind": "verify", "command": list(command), "options": options_to_dict(options), "files": [], "fixes": []}

    def finish(outcome: str, reason: str | None, code: int, cmp: Comparison | None = None) -> int:
        runs = _interleave(a_runs, b_runs)
        doc.update(
            outcome=outcome,
            reason=reason,
            exit_code=code,
            comparison=cmp.to_dict() if cmp else None,
            runs=[run_to_dict(r) for r in runs],
            environment=environment(runs),
        )
        write_reports(options, doc, err)
        return code

    out.write(f"gpulint fix --verify: {plan.describe()}\n")
    try:
        planned = [p for p in plan_fixes() if p.fixed != p.original]
    except Exception as e:  # the fixer's own failure: report it, never a traceback
        print_failure(f"computing the fixes failed: {type(e).__name__}: {e}", stream=err)
        return finish("error", f"computing the fixes failed: {e}", ERROR)
    for p in list(planned):
        why = _unwritable(p.path)
        if why:  # as `fix --apply` does: this file stays as it is, the others are still fixed and verified
            err.write(f"gpulint: {_display(p.path)}: not written: {why}\n")
            planned.remove(p)
    if not planned:
        out.write("Nothing to fix: no file would change, so there is nothing to verify (nothing was run).\n")
        return finish("nothing to fix", None, KEPT)
    left = files_in_leftovers(p.path for p in planned)
    if left:
        print_failure(
            f"an interrupted `fix --verify` left unverified fixes in {', '.join(_display(p) for p in left)}; "
            "run `gpulint fix --restore` first, so the original is what gets verified",
            stream=err,
        )
        return finish("error", "leftover journal", ERROR)

    files = [_display(p.path) for p in planned]
    doc["files"] = files
    doc["fixes"] = [
        {"path": _display(p.path), "rules": p.rules, "diff": unified_diff(_display(p.path), p.original, p.fixed)} for p in planned
    ]
    groups = {str(p.path.resolve()): probe_groups(p.original, p.fixed) for p in planned}
    probes = {path: sorted({line for g in gs for line in g}) for path, gs in groups.items() if gs}
    try:
        journal = Journal.create({p.path: (p.original, p.fixed) for p in planned}, command)
    except WriteError as e:
        print_failure(
            f"cannot write the verification journal ({e}); nothing was changed. Set GPULINT_STATE_DIR to a writable folder",
            stream=err,
        )
        return finish("error", f"journal not written: {e}", ERROR)
    swap = FileSwap({p.path: p.original for p in planned}, {p.path: p.fixed for p in planned})
    out.write(
        f"  A = original, B = with fixes ({'; '.join(f'{f}: {_rules_text(p.rules)}' if p.rules else f for f, p in zip(files, planned))}); "
        f"{repeat} runs each, alternating A B\n"
    )
    outputs = {p for p in (options.json_path, options.html_path, options.trace_dir) if p is not None}
    watch = FolderWatch(pathlib.Path(plan.cwd), pathlib.Path(plan.target) if plan.kind == "script" else None, {p.path for p in planned} | outputs, options.isolate_runs)

    def measure(variant: str, i: int) -> RunResult:
        index = 2 * i + (1 if variant == "A" else 2)
        label = f"{variant} {i + 1}/{repeat} ({'original' if variant == 'A' else 'fixed'})"
        progress.run(index, total, label)
        first = i == 0  # the attribution pass runs once per side
        trace_to = options.trace_dir / f"{variant}.pt.trace.json" if options.trace_dir and first else None
        watch.start()
        try:
            result = run(
                plan,
                options,
                attribution=first,
                label=label,
                on_progress=progress.show,
                trace_copy_to=trace_to,
                probes=probes if variant == "B" else None,
            )
        finally:
            progress.clear()
        result.new_files, after = watch.stop()
        if options.isolate_runs:
            result.isolate(*watch.set_aside(label, after), watch.cwd)
        return result

    keep = False
    outcome = "rolled back"
    conflicts: list[pathlib.Path] = []  # files the user changed while we ran: left as they are
    failed: RunResult | None = None
    reason: str | None = None
    cmp: Comparison | None = None
    never_ran: list[str] = []
    try:
        for i in range(repeat):
            if i > 0:
                conflicts += swap.use("original")
                if conflicts:
                    break
            a = measure("A", i)
            a_runs.append(a)
            if not a.ok:
                failed = a
                if i == 0:
                    break
                reason = f"the original script failed on run {i + 1}, so the comparison is void: {a.message}"
                break
            conflicts += swap.use("fixed")
            if conflicts:
                break
            b = measure("B", i)
            b_runs.append(b)
            if not b.ok:
                failed = b
                reason = f"{_B_FAILURE.get(b.status, 'the fixed run failed')}: {b.message}"
                break
            if b.failure_after_window:
                # The timing window completed, but the fixed script then failed (in the attribution pass):
                # a fix that breaks the script is not kept, whatever its throughput.
                failed = b
                reason = f"the fixed script failed: {b.failure_after_window}"
                same = a_runs[0].failure_after_window
                if same:
                    reason += f" (the original also failed there: {same})"
                break
        if not conflicts and failed is not None and failed is a_runs[0]:
            journal.remove()  # nothing was ever written
            out.write("Nothing was changed: the original script could not be measured, so no fix can be verified.\n")
            details = failure_text(failed).split("\n", 1)
            print_failure(
                f"could not measure the original `{plan.describe()}`: {failed.message}",
                details[1] if len(details) > 1 else None,
                err,
            )
            return finish("error", failed.message, ERROR)
        if not conflicts and failed is None:
            cmp = _compare(a_runs, b_runs, planned, options)
            never_ran = _never_ran(groups, b_runs)
            doc["never_ran"] = never_ran
            # Some changed statements ran (the training loop's) and others did not (an evaluation after the
            # measured steps): the runs did compare two programs, and the report names what was not measured.
            none_ran = len(never_ran) == sum(len(statements) for statements in groups.values())
            if cmp.verdict == SLOWER:
                reason = "the fixed script is slower beyond the noise"
            elif never_ran and none_ran:
                outcome = "not verified"
                reason = (
                    f"its changed lines never ran in the B runs ({', '.join(never_ran)}), so the runs compared two "
                    "identical programs"
                )
            elif cmp.verdict == TOO_NOISY and not cmp.mechanism_verified:
                outcome = "not verified"
                reason = (
                    f"the runs are too noisy to verify: the original's own runs differ by {cmp.noise_floor * 100:.1f} % "
                    "(the noise floor), which would hide the change a fix makes"
                )
            else:
                keep = True
    except BaseException as interrupt:  # Ctrl-C, SIGTERM, a file we cannot write, or a bug: restore first
        with _no_interrupts():
            try:
                swap.use("original")
            except (OSError, WriteError):
                pass  # reported below as not restored
        restored = [p for p in swap.originals if p not in swap.conflicts and _holds(p, swap.originals[p])]
        if len(restored) + len(swap.conflicts) == len(swap.originals):
            journal.remove()
        if isinstance(interrupt, WriteError):
            print_failure(f"could not write the fixes: {interrupt}; every file is as it was", stream=err)
            return finish("error", f"could not write the fixes: {interrupt}", ERROR)
        if not isinstance(interrupt, KeyboardInterrupt):
            raise
        err.write(f"\ngpulint: interrupted; restored {len(restored)} file(s) to their original contents\n")
        for p in swap.originals:
            if p not in restored:
                err.write(f"gpulint: {_display(p)}: not restored: it was changed on disk during the runs or could not be written\n")
        finish("interrupted", "interrupted", _interrupted_code(interrupt))  # what the CLI then exits with
        raise
    try:
        with _no_interrupts():
            conflicts += swap.use("fixed" if keep else "original")
    except (OSError, WriteError) as e:
        print_failure(f"could not write back {', '.join(files)}: {e}; the originals are kept in {journal.path}", stream=err)
        return finish("error", f"could not restore files: {e}", ERROR)
    journal.remove()
    if swap.conflicts:
        edited = ", ".join(_display(p) for p in swap.conflicts)
        others = [_display(p) for p in swap.originals if p not in swap.conflicts]
        state = "with the fixes" if keep else "restored to the original"
        detail = f"{edited} changed on disk while gpulint was verifying it and was left as it is now"
        if others:
            detail += f"; {', '.join(others)} {'is' if len(others) == 1 else 'are'} {state}"
        out.flush()
        print_failure(f"the verification was stopped: {detail}", stream=err)
        doc["conflicts"] = [_display(p) for p in swap.conflicts]
        return finish("error", detail, ERROR, cmp)

    out.write("\n")
    if cmp is not None:
        out.write(comparison_text(cmp, a_runs, b_runs) + "\n")
    notes = run_notes(_interleave(a_runs, b_runs))
    if notes:
        out.write("  notes:\n" + "".join(f"    {n}\n" for n in notes))
    if cmp is not None or notes:
        out.write("\n")
    if keep:
        what = cmp.verdict
        if cmp.mechanism_verified:
            what = "mechanism verified, bottleneck elsewhere" if cmp.verdict != TOO_NOISY else "mechanism verified; throughput too noisy to measure"
        out.write(f"Kept the fixes in {', '.join(files)} ({what}).\n")
        if never_ran:
            out.write(f"Not measured: {', '.join(never_ran)} did not run in the measured runs (code after the measured "
                      "steps, or a branch this machine does not take); the verdict is about the changes that ran.\n")
        out.flush()
        return finish("kept", None, KEPT, cmp)
    if outcome == "not verified":
        advice = noise_advice() if cmp.verdict == TOO_NOISY and not never_ran else (
            "run the verification where this code runs (a GPU, for a CUDA-only branch), or apply the fixes without --verify"
        )
        out.write(f"Not verified: restored {', '.join(files)} to the original, because {reason}. To verify: {advice}.\n")
        out.flush()
        return finish(outcome, reason, ROLLED_BACK, cmp)
    out.write(f"Rolled back: restored {', '.join(files)} to the original, because {reason}.\n")
    if failed is not None:
        details = failure_text(failed).split("\n", 1)
        if len(details) > 1:
            out.write(details[1] + "\n")
    out.flush()
    return finish("rolled back", reason, ROLLED_BACK, cmp)


def _compare(a_runs: list[RunResult], b_runs: list[RunResult], planned: list[PlannedFix], options: ProfileOptions) -> Comparison:
    from gpulint.profile.idle import explain
    from gpulint.profile.timing import timing_stats

    cmp = compare(
        [r.steps for r in a_runs],
        [r.steps for r in b_runs],
        [r.attribution for r in a_runs],
        [r.attribution for r in b_runs],
        a_runs[0].raw.get("losses"),
        b_runs[0].raw.get("losses"),
        seed=options.seed,
    )
    applied = {code for p in planned for code in p.rules}
    for m in cmp.mechanisms:  # "moved by": the applied fixes that act on this number, not every rule that could
        m.rules = tuple(code for code in m.rules if code in applied)
    exp = explain(timing_stats([s for r in a_runs for s in r.steps]), a_runs[0].attribution)
    if exp is not None:
        cmp.ceiling = exp.ceiling_for(applied)
    shared = [r.label for r in _interleave(a_runs, b_runs) if (r.nvml or {}).get("unreliable")]
    if shared:
        cmp.mark_unreliable(shared)
    if cmp.verdict == TOO_NOISY:
        cmp.notes.append(f"too noisy to verify: {noise_advice()}")
    return cmp


def _never_ran(groups: dict[str, list[tuple[int, ...]]], b_runs: list[RunResult]) -> list[str]:
    """`file:line` of every changed statement that no B run executed."""
    hits: set = set()
    for r in b_runs:
        hits |= r.probe_hits
    missing = []
    for path, statements in groups.items():
        for lines in statements:
            if not any((path, line) in hits for line in lines):
                missing.append(f"{_display(pathlib.Path(path))}:{lines[0]}")
    return missing


def _interleave(a: list[RunResult], b: list[RunResult]) -> list[RunResult]:
    out = []
    for i in range(max(len(a), len(b))):
        out += a[i : i + 1] + b[i : i + 1]
    return out
