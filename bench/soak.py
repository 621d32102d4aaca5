"""Soak gpulint on real code: `check` and `fix --unsafe-fixes` over a large folder of Python, in memory.

    python bench/soak.py                         # the test environment's site-packages
    python bench/soak.py $(python -c "import torch, os; print(os.path.dirname(torch.__file__))")
    python bench/soak.py PATH --limit 500 --timeout 60 --jobs 4 --json soak.json

For every file: `check_source` with every registered rule (`select=ALL`, preview on) must not raise nor report
an `internal-error`; every span must lie inside the file; `fix_source(unsafe=True)` must drop no fix, its output
must parse and compile, and a second fix must change nothing. Then the edit builders rules use
(`with_keyword_argument` through `replace_node`, `add_import`) rewrite every outermost call of the file at once:
the result must compile (`tests/test_fuzz.py::probe_edits`; `--no-probe` skips it; the total time per file
excludes it). Nothing is ever written to disk.

By default the rules' text prefilter (`Rule.requires`) is bypassed, so every rule analyses every file (a stricter
test than real use, where most files never reach a rule); `--prefilter` measures the product as users run it.
Files run in worker processes; a worker that dies (a segfault in a native parser) or hangs past `--timeout` is
recorded against its file and replaced. gpulint's own per-file budget (`analysis-timeout`) is off, so that a slow
file shows as a timeout here. Ctrl-C (SIGINT) or SIGTERM stops the workers and still prints and writes the summary
of the files finished so far (`"interrupted": true`). Exit status: 0 when nothing failed, 1 otherwise, 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import sysconfig
import threading
import time
import traceback
from collections import Counter, deque
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
FAILURES = ("crash", "internal-error", "bad-span", "broken-fix", "non-idempotent", "broken-edit", "timeout")


# ---- worker: one process checks and fixes a list of files ----------------------------------------------


class _FileTimeout(Exception):
    pass


_STAGE = ["read"]  # what the worker is doing, for the timeout message


def _on_alarm(signum, frame):
    raise _FileTimeout


def _span_problems(diagnostics, text: str) -> list[str]:
    lines = text.splitlines(keepends=True) or [""]
    widths = [len(line.rstrip("\r\n")) for line in lines]
    if text.endswith(("\n", "\r")):
        widths.append(0)  # the empty last line after a final newline
    problems = []

    def inside(location) -> bool:
        return 1 <= location.row <= len(widths) and 1 <= location.column <= widths[location.row - 1] + 1

    for d in diagnostics:
        spans = [(d.location, d.end_location)]
        if d.fix is not None:
            spans += [(e.location, e.end_location) for e in d.fix.edits]
        for start, end in spans:
            if not (inside(start) and inside(end) and start <= end):
                problems.append(f"{d.code or d.name} span {start.row}:{start.column}-{end.row}:{end.column}")
    return problems


def _check_file(path: str, settings, probe: bool = True) -> dict:
    from gpulint.fixer import _compiles, _parses, fix_source, is_applicable
    from gpulint.linter import INTERNAL_ERROR, check_source
    from gpulint.source import SourceError, read_source

    result: dict = {"path": path, "status": "ok"}
    try:
        source = read_source(Path(path))
    except SourceError as error:
        return {**result, "status": "unreadable", "detail": str(error)}
    text = source.text
    start = time.perf_counter()
    _STAGE[0] = "check"
    diagnostics = check_source(text, path, settings)
    result["check_s"] = time.perf_counter() - start
    result["findings"] = sum(1 for d in diagnostics if d.code is not None)
    not_checked = [d for d in diagnostics if d.code is None and d.name != INTERNAL_ERROR]
    if not_checked:
        result["status"] = "not-checked"
        result["detail"] = f"{not_checked[0].name}: {not_checked[0].message}"
    internal = [d for d in diagnostics if d.name == INTERNAL_ERROR]
    if internal:
        return {**result, "status": "internal-error", "detail": "; ".join(d.message for d in internal)}
    problems = _span_problems(diagnostics, text)
    if problems:
        return {**result, "status": "bad-span", "detail": "; ".join(problems[:5])}
    _STAGE[0] = "fix"
    outcome = fix_source(text, path, settings, unsafe=True)
    result["fixes"] = outcome.fixed_count
    if outcome.broken:
        d = outcome.broken[0]
        return {**result, "status": "broken-fix", "detail": f"{d.code} at {d.location.row}:{d.location.column} dropped: result did not parse"}
    if outcome.text != text:
        if not _parses(outcome.text, strict=_compiles(text)):
            return {**result, "status": "broken-fix", "detail": "fixed text does not parse"}
        _STAGE[0] = "second fix"
        again = fix_source(outcome.text, path, settings, unsafe=True)
        if again.text != outcome.text:
            return {**result, "status": "non-idempotent", "detail": f"second fix changed {again.fixed_count} more"}
    elif any(is_applicable(d, True) for d in diagnostics):
        result["detail"] = "fixes offered but none applied"
    result["total_s"] = time.perf_counter() - start
    if probe:
        from tests.test_fuzz import probe_edits

        _STAGE[0] = "edit probe"
        problems = probe_edits(text, path)
        if problems:
            return {**result, "status": "broken-edit", "detail": "; ".join(problems[:3])}
    return result


def worker(args) -> None:
    import signal

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    from gpulint.config import Settings, with_overrides

    if not args.prefilter:
        from gpulint.checks.base import Rule

        Rule.applies_to_text = classmethod(lambda cls, text: True)
    settings = with_overrides(Settings(root=Path.cwd(), analysis_timeout=None), select=("ALL",), preview=True)
    files = json.loads(sys.stdin.read())
    signal.signal(signal.SIGALRM, _on_alarm)
    out = sys.stdout
    for path in files:
        out.write(json.dumps({"start": path}) + "\n")
        out.flush()
        _STAGE[0] = "read"
        signal.setitimer(signal.ITIMER_REAL, args.timeout)
        try:
            result = _check_file(path, settings, probe=not args.no_probe)
        except _FileTimeout:
            result = {"path": path, "status": "timeout", "detail": f"over {args.timeout:g} s (during {_STAGE[0]})"}
        except RecursionError:
            result = {"path": path, "status": "crash", "detail": "RecursionError escaped gpulint"}
        except Exception as error:  # noqa: BLE001 - this is what the soak looks for
            tail = "".join(traceback.format_exception(type(error), error, error.__traceback__)[-4:])
            result = {"path": path, "status": "crash", "detail": f"{type(error).__name__}: {error}\n{tail}"}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        out.write(json.dumps({"end": path, **result}) + "\n")
        out.flush()


# ---- parent: split the files among workers, replace workers that die ---------------------------------


def python_files(roots: list[str]) -> list[str]:
    files = []
    for root in roots:
        if os.path.isfile(root):
            files.append(root)
            continue
        for directory, subdirs, names in os.walk(root):  # symlinked folders are not followed
            subdirs.sort()
            files.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith((".py", ".pyi")))
    return files


def run(files: list[str], args) -> tuple[list[dict], bool]:
    """The results, sorted by path, and whether an interrupt stopped the run before every file was done."""
    queue = deque(files)
    lock = threading.Lock()
    results: list[dict] = []
    stop = threading.Event()
    workers: set[subprocess.Popen] = set()
    hard_limit = args.timeout + 30  # the alarm cannot interrupt native code; past this the worker is killed
    command = [sys.executable, __file__, "--worker", "--timeout", str(args.timeout)]
    if args.prefilter:
        command.append("--prefilter")
    if args.no_probe:
        command.append("--no-probe")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    progress = {"done": 0}

    def run_chunk(chunk: list[str]) -> None:
        pending = list(chunk)
        while pending:
            with lock:
                if stop.is_set():
                    return
                # A session of its own: Ctrl-C in the terminal reaches only the parent, which stops the workers.
                proc = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
                    start_new_session=True,
                )  # fmt: skip
                workers.add(proc)
            try:
                proc.stdin.write(json.dumps(pending))
                proc.stdin.close()
            except BrokenPipeError:
                pass  # the worker is gone already; its exit status says why, below
            current: list = [None, 0.0]
            killed = threading.Event()

            def watchdog() -> None:
                while proc.poll() is None:
                    if current[0] is not None and time.monotonic() - current[1] > hard_limit:
                        killed.set()
                        proc.kill()
                        return
                    time.sleep(0.5)

            threading.Thread(target=watchdog, daemon=True).start()
            for line in proc.stdout:
                if stop.is_set():
                    break
                message = json.loads(line)
                if "start" in message:
                    current[:] = [message["start"], time.monotonic()]
                else:
                    with lock:
                        results.append(message)
                        progress["done"] += 1
                    pending.remove(message["end"])
                    current[0] = None
            proc.wait()
            with lock:
                workers.discard(proc)
            if stop.is_set():
                return  # killed by the interrupt: the file in flight is not a crash
            if current[0] is not None:
                status = "timeout" if killed.is_set() else "crash"
                detail = f"worker killed after {hard_limit:g} s" if killed.is_set() else f"worker died (exit status {proc.returncode})"
                with lock:
                    results.append({"path": current[0], "status": status, "detail": detail})
                    progress["done"] += 1
                pending.remove(current[0])
            elif pending:
                with lock:
                    results.extend({"path": p, "status": "crash", "detail": f"worker exited ({proc.returncode})"} for p in pending)
                return

    def slot() -> None:
        while not stop.is_set():
            with lock:
                chunk = [queue.popleft() for _ in range(min(args.chunk, len(queue)))]
            if not chunk:
                return
            run_chunk(chunk)

    # Daemon threads, and an interrupt handled here: the main thread is the only one a signal reaches.
    threads = [threading.Thread(target=slot, daemon=True) for _ in range(args.jobs)]
    for thread in threads:
        thread.start()
    try:
        while any(t.is_alive() for t in threads):
            time.sleep(0.5)
            if sys.stderr.isatty():
                print(f"\r{progress['done']}/{len(files)}", end="", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        with lock:
            stop.set()
            for proc in workers:
                proc.kill()
        for thread in threads:
            thread.join(timeout=10)
        print(f"\ninterrupted: stopped the workers after {progress['done']} of {len(files)} files", file=sys.stderr)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    with lock:
        return sorted(results, key=lambda r: r["path"]), stop.is_set()


def summarize(results: list[dict], wall: float, args, interrupted: bool = False) -> dict:
    statuses = Counter(r["status"] for r in results)
    checked = [r for r in results if "total_s" in r]
    check_times = sorted(r["check_s"] for r in checked)
    total_times = sorted(r["total_s"] for r in checked)

    def pct(values, q):
        return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0

    slowest = sorted(checked, key=lambda r: r["total_s"], reverse=True)[:5]
    return {
        "interrupted": interrupted,
        "files": len(results),
        "checked": len(checked),
        "mode": "product (prefilter on)" if args.prefilter else "stress (every rule on every file)",
        "statuses": dict(sorted(statuses.items())),
        "crashes": statuses["crash"] + statuses["internal-error"],
        "timeouts": statuses["timeout"],
        "bad_spans": statuses["bad-span"],
        "broken_fixes": statuses["broken-fix"],
        "non_idempotent_fixes": statuses["non-idempotent"],
        "broken_probe_edits": statuses["broken-edit"],
        "findings": sum(r.get("findings", 0) for r in results),
        "files_with_fixes": sum(1 for r in results if r.get("fixes")),
        "fixes_applied": sum(r.get("fixes", 0) for r in results),
        "check_s_per_file": {"mean": statistics.fmean(check_times) if check_times else 0.0, "median": pct(check_times, 0.5), "p95": pct(check_times, 0.95), "max": pct(check_times, 1.0)},
        "total_s_per_file": {"mean": statistics.fmean(total_times) if total_times else 0.0, "median": pct(total_times, 0.5), "p95": pct(total_times, 0.95), "max": pct(total_times, 1.0)},
        "slowest": [(r["path"], round(r["total_s"], 2)) for r in slowest],
        "wall_s": wall,
        "jobs": args.jobs,
        "python": sys.version.split()[0],
        "failures": [r for r in results if r["status"] in FAILURES],
        "not_checked": Counter(r["detail"].split(":")[0] + ": " + r["detail"].split(": ", 2)[-1][:60] for r in results if r["status"] in ("not-checked", "unreadable")).most_common(10),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="folders or files (default: site-packages)")
    parser.add_argument("--limit", type=int, default=None, help="check at most N files (a seeded sample)")
    parser.add_argument("--seed", type=int, default=0, help="sample seed for --limit")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per file before it counts as a timeout")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--chunk", type=int, default=40, help="files per worker process")
    parser.add_argument("--prefilter", action="store_true", help="keep the rules' text prefilter (as users run it)")
    parser.add_argument("--no-probe", action="store_true", help="skip the edit-builder probe on every call")
    parser.add_argument("--json", dest="json_path", help="write the summary and every failure to this file")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    files = python_files(args.paths or [sysconfig.get_paths()["purelib"]])
    if args.limit is not None and args.limit < len(files):
        files = sorted(random.Random(args.seed).sample(files, args.limit))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a CI timeout stops it like Ctrl-C
    start = time.perf_counter()
    results, interrupted = run(files, args)
    summary = summarize(results, time.perf_counter() - start, args, interrupted)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(summary, indent=2) + "\n")
    print(f"files: {summary['files']}{' (interrupted)' if interrupted else ''} ({summary['checked']} checked; mode: {summary['mode']})")
    print(f"statuses: {summary['statuses']}")
    print(
        f"crashes: {summary['crashes']}  timeouts: {summary['timeouts']}  bad spans: {summary['bad_spans']}  "
        f"broken fixes: {summary['broken_fixes']}  non-idempotent fixes: {summary['non_idempotent_fixes']}  "
        f"broken probe edits: {summary['broken_probe_edits']}"
    )
    print(f"findings: {summary['findings']}  files fixed: {summary['files_with_fixes']}  fixes applied: {summary['fixes_applied']}")
    for key in ("check_s_per_file", "total_s_per_file"):
        t = summary[key]
        print(f"{key}: mean {t['mean'] * 1000:.0f} ms, median {t['median'] * 1000:.0f} ms, p95 {t['p95'] * 1000:.0f} ms, max {t['max']:.1f} s")
    print(f"wall: {summary['wall_s']:.0f} s with {args.jobs} jobs; slowest: {summary['slowest'][:3]}")
    for reason, count in summary["not_checked"]:
        print(f"  not checked ({count}): {reason}")
    for failure in summary["failures"]:
        print(f"FAIL {failure['status']}: {failure['path']}: {failure.get('detail', '')}")
    return 130 if interrupted else 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
