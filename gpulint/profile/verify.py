"""`gpulint fix --apply --verify`: measure the original (A), apply the fixes, measure the fixed version (B),
alternating A B A B, and keep the fixes only when B runs and is not slower beyond the noise."""

from __future__ import annotations

import os
import pathlib
import signal
import sys
from contextlib import contextmanager
from typing import Callable

from gpulint.fixer import WriteError
from gpulint.profile import runner as runner_mod
from gpulint.profile.command import CommandError, child_argv, plan_command
from gpulint.profile.compare import SLOWER, Comparison, compare
from gpulint.profile.errors import print_failure
from gpulint.profile.file_swap import FileSwap
from gpulint.profile.options import ProfileOptions
from gpulint.profile.progress import Progress
from gpulint.profile.report import comparison_text, failure_text, options_to_dict, run_notes, run_to_dict, write_json
from gpulint.profile.runner import RunResult

KEPT = 0
ROLLED_BACK = 1
ERROR = 2

_B_FAILURE = {
    runner_mod.SCRIPT_ERROR: "the fixed script crashed",
    runner_mod.NONZERO_EXIT: "the fixed script exited with a non-zero status",
    runner_mod.TIMEOUT: "the fixed script timed out",
    runner_mod.INCOMPLETE: "the fixed script never reached the measured steps",
    runner_mod.CRASHED: "the fixed script died without a result",
    runner_mod.INTERNAL: "the fixed run hit an internal error",
}


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


def run_verify(
    command: list[str],
    apply_fixes: Callable[[], dict[pathlib.Path, bytes]],
    options: ProfileOptions,
    *,
    out=None,
    err=None,
    run=None,
) -> int:
    """Profile A, call apply_fixes(), profile B, alternate; keep or roll back. Returns 0 kept, 1 rolled back, 2 error.

    apply_fixes() writes the fixed files and returns {path: original bytes} for each file it changed. Every
    changed file ends in its final state (fixed when kept, original when rolled back), even on Ctrl-C.
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
    doc: dict = {"command": list(command), "options": options_to_dict(options), "files": []}

    def measure(variant: str, i: int) -> RunResult:
        index = 2 * i + (1 if variant == "A" else 2)
        label = f"{variant} {i + 1}/{repeat} ({'original' if variant == 'A' else 'fixed'})"
        progress.run(index, total, label)
        first = i == 0  # the attribution pass runs once per side
        trace_to = options.trace_dir / f"{variant}.pt.trace.json" if options.trace_dir and first else None
        try:
            return run(plan, options, attribution=first, label=label, on_progress=progress.show, trace_copy_to=trace_to)
        finally:
            progress.clear()

    def finish(outcome: str, reason: str | None, code: int, cmp: Comparison | None = None) -> int:
        doc.update(
            outcome=outcome,
            reason=reason,
            exit_code=code,
            comparison=cmp.to_dict() if cmp else None,
            runs=[run_to_dict(r) for r in _interleave(a_runs, b_runs)],
        )
        if options.json_path:
            write_json(options.json_path, doc)
        return code

    out.write(f"gpulint fix --verify: {plan.describe()}\n")
    a_first = measure("A", 0)
    a_runs.append(a_first)
    if not a_first.ok:
        out.write("Nothing was changed: the original script could not be measured, so no fix can be verified.\n")
        details = failure_text(a_first).split("\n", 1)
        print_failure(
            f"could not measure the original `{plan.describe()}`: {a_first.message}",
            details[1] if len(details) > 1 else None,
            err,
        )
        return finish("error", a_first.message, ERROR)

    try:
        originals = apply_fixes()
    except Exception as e:  # the fixer's own failure: report it, never a traceback
        print_failure(f"applying the fixes failed: {type(e).__name__}: {e}", stream=err)
        return finish("error", f"applying the fixes failed: {e}", ERROR)
    if not originals:
        out.write("Nothing to fix: no file was changed, so there is nothing to verify.\n")
        return finish("nothing to fix", None, KEPT)

    swap = FileSwap.after_fixes(originals)
    files = [_display(p) for p in swap.originals]
    doc["files"] = files
    out.write(
        f"  A = original, B = with fixes ({len(files)} file{'s' if len(files) != 1 else ''}: {', '.join(files)}); "
        f"{repeat} runs each, alternating A B; {options.warmup} warm-up + {options.steps} measured steps per run\n"
    )
    keep = False
    conflicts: list[pathlib.Path] = []  # files the user changed while we ran: left as they are
    failed: RunResult | None = None
    reason: str | None = None
    cmp: Comparison | None = None
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
                same = a_first.failure_after_window
                if same:
                    reason += f" (the original also failed there: {same})"
                break
        if not conflicts and failed is None:
            cmp = compare(
                [r.steps for r in a_runs],
                [r.steps for r in b_runs],
                [r.attribution for r in a_runs],
                [r.attribution for r in b_runs],
                a_runs[0].raw.get("losses"),
                b_runs[0].raw.get("losses"),
                seed=options.seed,
            )
            shared = [r.label for r in _interleave(a_runs, b_runs) if (r.nvml or {}).get("unreliable")]
            if shared:
                cmp.mark_unreliable(shared)
            if cmp.verdict == SLOWER:
                reason = "the fixed script is slower beyond the noise"
            else:
                keep = True
    except BaseException as interrupt:  # Ctrl-C, SIGTERM, or a bug: no file may stay fixed and unverified
        with _no_interrupts():
            try:
                swap.use("original")
            except (OSError, WriteError):
                pass  # reported below as not restored
        if not isinstance(interrupt, KeyboardInterrupt):
            raise
        restored = [_display(p) for p in swap.originals if p not in swap.conflicts and _holds(p, swap.originals[p])]
        err.write(f"\ngpulint: interrupted; restored {len(restored)} file(s) to their original contents\n")
        for p in swap.originals:
            if _display(p) not in restored:
                err.write(f"gpulint: {_display(p)}: not restored: it was changed on disk during the runs or could not be written\n")
        finish("interrupted", "interrupted", _interrupted_code(interrupt))  # what the CLI then exits with
        raise
    try:
        with _no_interrupts():
            conflicts += swap.use("fixed" if keep else "original")
    except (OSError, WriteError) as e:
        print_failure(f"could not write back {', '.join(files)}: {e}", stream=err)
        return finish("error", f"could not restore files: {e}", ERROR)
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
        what = "mechanism verified, bottleneck elsewhere" if cmp and cmp.mechanism_verified else cmp.verdict
        out.write(f"Kept the fixes in {', '.join(files)} ({what}).\n")
        out.flush()
        return finish("kept", None, KEPT, cmp)
    out.write(f"Rolled back: restored {', '.join(files)} to the original, because {reason}.\n")
    if failed is not None:
        details = failure_text(failed).split("\n", 1)
        if len(details) > 1:
            out.write(details[1] + "\n")
    out.flush()
    return finish("rolled back", reason, ROLLED_BACK, cmp)


def _interleave(a: list[RunResult], b: list[RunResult]) -> list[RunResult]:
    out = []
    for i in range(max(len(a), len(b))):
        out += a[i : i + 1] + b[i : i + 1]
    return out
