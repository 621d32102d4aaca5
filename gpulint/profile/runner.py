"""Run the user's script once under the bootstrap: fresh process, own process group, hard timeout, no orphans."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from gpulint.notebook import write_script
from gpulint.profile import proctree
from gpulint.profile.command import CHILD_BOOTSTRAP, LaunchPlan, child_argv
from gpulint.profile.options import ProfileOptions

POLL_S = 0.2  # the parent wakes 5 times a second: on a busy machine each wake-up competes with the run
EXIT_GRACE_S = 3.0  # after the result is written, how long the process may take to leave
LAUNCHER_GRACE_S = 0.5  # under torchrun the other ranks keep training: rank 0's result is all we need
TERM_GRACE_S = 1.0  # SIGTERM, then SIGKILL
TREE_SCAN_S = 0.5  # under a launcher, how often the run's process tree is recorded (ranks leave its group)
TAIL_LINES = 25

# Statuses of a run. Only "ok" carries a complete timing window.
OK = "ok"
INCOMPLETE = "incomplete"  # the script ended before the measured steps
SCRIPT_ERROR = "error"  # the script raised
NONZERO_EXIT = "exit"  # the script called sys.exit(n != 0)
TIMEOUT = "timeout"
CRASHED = "crashed"  # the process died without writing a result (signal, os._exit, interpreter failure)
INTERNAL = "internal"  # a bug in gpulint's bootstrap
NO_STEPS = "no-steps"  # stopped early: no step gpulint can see within the bound


@dataclass
class RunResult:
    status: str
    message: str  # one sentence for the user
    raw: dict = field(default_factory=dict)  # the bootstrap's JSON result
    returncode: int | None = None
    duration_s: float = 0.0
    traceback_tail: str | None = None
    stderr_tail: str = ""
    stdout_tail: str = ""
    attribution: dict = field(default_factory=dict)  # metrics from the torch.profiler pass (trace_metrics)
    trace_path: str | None = None  # where the attribution trace was copied, if asked to
    label: str = ""
    pgid: int | None = None
    nvml: dict = field(default_factory=dict)  # the NVML side channel's summary of the window
    probe_hits: set = field(default_factory=set)  # (path, line) of the probed changed lines that ran
    new_files: list = field(default_factory=list)  # files this run created or changed in the working folder
    set_aside: str | None = None  # --isolate-runs: where the files it created were moved
    changed_in_place: list = field(default_factory=list)  # --isolate-runs: files that existed and it changed

    def isolate(self, aside, changed_in_place: list, cwd) -> None:
        """Record where --isolate-runs moved this run's new files, and what it could not put back."""
        self.set_aside = os.path.relpath(aside, cwd) if aside is not None else None
        self.changed_in_place = changed_in_place

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def failure_after_window(self) -> str | None:
        """For a measured run: how the script failed after its timing window (in the attribution pass), if it did."""
        if not self.ok:
            return None
        if self.raw.get("exception"):
            return f"the script raised {self.raw['exception']} after the measured steps"
        if self.raw.get("exit_code"):
            return f"the script exited with status {self.raw['exit_code']} after the measured steps"
        return None

    @property
    def steps(self) -> list[dict]:
        window = self.raw.get("window") or {}
        return window.get("steps") or []


def _tail(path: pathlib.Path, lines: int = TAIL_LINES) -> str:
    try:
        data = path.read_bytes()[-20000:]
    except OSError:
        return ""
    text = data.decode("utf-8", "replace")
    kept: list[str] = []
    skip_source_line = False
    for line in text.splitlines():
        if skip_source_line and line[:1].isspace():
            skip_source_line = False
            continue  # the source line Python prints under that warning
        skip_source_line = False
        if "Failed to initialize NumPy" in line:  # torch's import-time noise on numpy-less installs
            skip_source_line = True
            continue
        kept.append(line)
    return "\n".join(kept[-lines:])


def kill_group(pgid: int, wait_s: float = 3.0) -> None:
    """SIGKILL every process left in the group (DataLoader workers, torchrun ranks) and wait until it is gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.02)  # zombies waiting for init to reap them keep the group alive a little longer


def _terminate(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    kill_group(proc.pid)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        pass


def child_env(options: ProfileOptions, config_path: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(options.env)
    env["GPULINT_PROFILE_CONFIG"] = config_path
    env.setdefault("PYTHONHASHSEED", str(options.seed))  # same hashing in A and B runs
    env.setdefault("WANDB_MODE", "disabled")  # a verification run must not log to experiment trackers
    env.setdefault("PYTHONUNBUFFERED", "1")  # so the output tail is complete when we kill the group
    return env


def run_once(
    plan: LaunchPlan,
    options: ProfileOptions,
    *,
    attribution: bool = True,
    label: str = "",
    on_progress: Callable[[str], None] | None = None,
    on_started: Callable[[int], None] | None = None,
    on_finished: Callable[[], None] | None = None,
    trace_copy_to: str | os.PathLike | None = None,
    probes: dict[str, list[int]] | None = None,
) -> RunResult:
    """Run the plan once and return what happened; never raises for anything the user's script does.

    `probes` ({file: [line, ...]}) are lines whose execution is recorded (from the start through warm-up)."""
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="gpulint-profile-"))
    try:
        return _run_in(workdir, plan, options, attribution, label, on_progress, on_started, on_finished, trace_copy_to, probes)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)  # also on Ctrl-C


def _run_in(workdir, plan, options, attribution, label, on_progress, on_started, on_finished, trace_copy_to, probes):
    result_path = workdir / "result.json"
    progress_path = workdir / "progress.txt"
    trace_path = workdir / "trace.json"
    hits_path = workdir / "hits.txt"
    # The child watches this pipe: gpulint holds the only write end, so the run dies with gpulint (kill -9 too).
    watch_r, watch_w = os.pipe()
    config = {
        "kind": plan.kind,
        "target": write_script(plan.target, workdir) if plan.target.endswith(".ipynb") else plan.target,
        "argv0": plan.argv0,
        "args": plan.args,
        "warmup": options.warmup,
        "steps": options.steps,
        "attribution_steps": options.attribution_steps if attribution else 0,
        "result_path": str(result_path),
        "progress_path": str(progress_path),
        "trace_path": str(trace_path),
        "seed": options.seed,
        "claim_dir": str(workdir),
        "parent_fd": watch_r,
        "first_step_timeout": options.first_step_timeout,
        "launcher": {"nproc_per_node": options.nproc_per_node} if options.launcher else None,
        "probes": probes or None,
        "hits_path": str(hits_path),
    }
    config_path = workdir / "config.json"
    config_path.write_text(json.dumps(config))
    out_path, err_path = workdir / "stdout.txt", workdir / "stderr.txt"
    argv = child_argv(plan, options.launcher, options.nproc_per_node)
    started = time.monotonic()
    timed_out = False
    proc = None
    tree: dict[int, tuple[int, int]] = {}  # descendants seen so far: {pid: (pgid, start time)}
    last_scan = 0.0
    try:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            # Files, not pipes: grandchildren (workers) keep inherited pipes open and would stall a reader.
            proc = subprocess.Popen(
                argv,
                cwd=plan.cwd or None,
                env=child_env(options, str(config_path)),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,  # own process group: one killpg reaches every worker
                pass_fds=(watch_r,),
            )
        os.close(watch_r)
        watch_r = None
        if on_started:
            on_started(proc.pid)
        deadline = started + options.timeout
        result_seen_at = None
        last_progress = None
        while True:
            if proc.poll() is not None:
                break
            now = time.monotonic()
            if result_seen_at is None and result_path.exists():
                result_seen_at = now
            grace = LAUNCHER_GRACE_S if options.launcher else EXIT_GRACE_S
            if result_seen_at is not None and now - result_seen_at > grace:
                break  # torchrun ranks or a stuck shutdown: the result is in, stop waiting
            if now >= deadline:
                timed_out = not result_path.exists()
                break
            if options.launcher and now - last_scan >= TREE_SCAN_S:
                # torchrun's ranks run in sessions of their own: remember them, in case torchrun dies first.
                tree.update(proctree.descendants(proc.pid))
                last_scan = now
            if on_progress:
                try:
                    text = progress_path.read_text()
                except OSError:
                    text = None
                if text and text != last_progress:
                    last_progress = text
                    on_progress(text)
            time.sleep(POLL_S)
    finally:
        if proc is not None:
            tree.update(proctree.descendants(proc.pid))  # before anything dies and is reparented
            if proc.poll() is None:
                _terminate(proc)
            kill_group(proc.pid)  # workers orphaned by os._exit would linger for seconds otherwise
            proctree.kill_all(tree, skip_pgids={proc.pid})  # descendants that left the group (torchrun ranks)
        for fd in (watch_r, watch_w):
            if fd is not None:
                os.close(fd)
        if on_finished:
            on_finished()
    duration = time.monotonic() - started
    try:
        last_seen = progress_path.read_text()
    except OSError:
        last_seen = ""
    result = _interpret(
        options,
        result_path,
        proc.returncode if proc else None,
        timed_out,
        duration,
        _tail(out_path),
        _tail(err_path),
        last_seen,
    )
    result.raw["training_processes"] = len(list(workdir.glob("stepped.*")))
    result.probe_hits = _hits(hits_path)
    result.label = label
    result.pgid = proc.pid if proc else None
    result.attribution = _attribution(result.raw, trace_path)
    if trace_copy_to is not None and trace_path.exists():
        dest = pathlib.Path(trace_copy_to)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(trace_path, dest)
        result.trace_path = str(dest)
    return result


def _hits(path: pathlib.Path) -> set[tuple[str, int]]:
    try:
        text = path.read_text()
    except OSError:
        return set()
    hits = set()
    for line in text.splitlines():
        file, _, number = line.rpartition(":")
        if number.isdigit():
            hits.add((file, int(number)))
    return hits


def _attribution(raw: dict, trace_path: pathlib.Path) -> dict:
    from gpulint.profile import trace_metrics

    info = raw.get("attribution") or {}
    if not trace_path.exists() or not info.get("trace_path"):
        reason = info.get("unavailable") or "the run ended before the attribution pass"
        return {"unavailable": reason}
    try:
        events = trace_metrics.load_trace(trace_path)
        return trace_metrics.attribution_metrics(events)
    except (OSError, ValueError) as e:
        return {"unavailable": f"could not read the profiler trace: {e}"}


def run_measured(plan: LaunchPlan, options: ProfileOptions, **kwargs) -> RunResult:
    """run_once with the NVML side channel sampling the GPU in a background thread."""
    from gpulint.profile.nvml import NvmlSampler, check_device

    sampler = NvmlSampler()
    sampler.start()
    user_started = kwargs.pop("on_started", None)

    def started(pid: int) -> None:
        sampler.own_pgid = pid
        if user_started:
            user_started(pid)

    result = None
    try:
        result = run_once(plan, options, on_started=started, **kwargs)
    finally:
        window = (result.raw.get("window_unix") if result else None) or None
        summary = sampler.stop(tuple(window) if window and window[1] else None)
        if result is not None:
            check_device(summary, result.raw.get("cuda"))
            result.nvml = summary
    return result


MARK_STEPS_HINT = (
    "a loop without torch.optim and without a DataLoader can mark its steps: call gpulint.profile.step() at the "
    "end of each step (it does nothing outside gpulint)"
)


def _seen(raw: dict) -> str:
    """What the bootstrap saw before any step, for the messages that say why there was nothing to measure."""
    return (
        f"{raw.get('dataloader_iterators', 0)} DataLoader iterator(s), {raw.get('dataloader_batches', 0)} batch(es), "
        f"{raw.get('backward_calls_before_first_step', 0)} backward() call(s), no optimizer.step()"
    )


def _interpret(options, result_path, returncode, timed_out, duration, out_tail, err_tail, last_seen) -> RunResult:
    raw: dict = {}
    if result_path.exists():
        try:
            raw = json.loads(result_path.read_text())
        except (OSError, ValueError):
            raw = {}
    done = raw.get("steps_completed", 0)
    where = _where(raw)
    common = dict(raw=raw, returncode=returncode, duration_s=duration, stderr_tail=err_tail, stdout_tail=out_tail)
    if timed_out:
        if last_seen.startswith("no step yet"):
            detail = f"; no training step was seen ({last_seen.split('(', 1)[-1].rstrip(')')}); {MARK_STEPS_HINT}"
        elif last_seen:
            detail = f" (last seen: {last_seen})"
        else:
            detail = " while starting (importing torch or the script's own imports)"
        return RunResult(TIMEOUT, f"timed out after {options.timeout:g} s{detail}; the whole process group was killed", **common)
    status = raw.get("status")
    if status == OK:
        return RunResult(OK, "measured", traceback_tail=raw.get("traceback"), **common)
    if status == "error":
        exc = raw.get("exception") or "an exception"
        return RunResult(
            SCRIPT_ERROR,
            f"the script raised {exc}{where}",
            traceback_tail=raw.get("traceback"),
            **common,
        )
    if status == "exit":
        return RunResult(NONZERO_EXIT, f"the script exited with status {raw.get('exit_code')}{where}", **common)
    if status == NO_STEPS:
        if raw.get("no_step_reason") == "backward":
            msg = (
                f"stopped early: the script called backward() {raw.get('backward_calls_before_first_step')} times in "
                f"{raw.get('seconds_since_start', 0):.1f} s, but gpulint saw no optimizer.step() and no DataLoader batch, "
                f"so it cannot tell where a step ends; {MARK_STEPS_HINT}"
            )
        else:
            msg = (
                f"stopped early: no training step within {options.first_step_timeout:g} s of the start ({_seen(raw)}); "
                f"{MARK_STEPS_HINT}; if the script needs longer to start, raise --first-step-timeout"
            )
        return RunResult(NO_STEPS, msg, **common)
    if status == "ended":
        if raw.get("measured_elsewhere"):
            msg = (
                "the script finished before its training reached the measured steps; the training ran in a child "
                "process (multiprocessing)" + (f", last seen: {last_seen}" if last_seen else "")
            )
        elif not raw.get("steps_counted_by"):
            msg = f"the script finished without a single training step ({_seen(raw)}), so there was nothing to measure; {MARK_STEPS_HINT}"
        elif raw.get("window_restarts"):
            # The first window met an epoch boundary and started again after it: more steps were needed than
            # --warmup + --steps, and the epoch length is what the user can act on.
            msg = (
                f"the script finished after {done} steps and never completed the measured steps: a new epoch began "
                f"inside the first window, which restarted after it ({options.steps} measured steps after a short "
                "re-warm-up) and the script ended first; use a longer run (more epochs or steps per epoch) or "
                "fewer --steps"
            )
        else:
            need = options.warmup + options.steps
            msg = (
                f"the script finished after {done} steps and never reached the measured steps "
                f"(needs at least {need}: {options.warmup} warm-up + {options.steps} measured; "
                "use a longer run or smaller --warmup/--steps)"
            )
        return RunResult(INCOMPLETE, msg, **common)
    if status == "internal":
        return RunResult(
            INTERNAL,
            f"internal error in gpulint's profiling bootstrap: {raw.get('exception')}",
            traceback_tail=raw.get("traceback"),
            **common,
        )
    # No result: the process died on its own.
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        msg = f"the script was killed by {name} before writing a result"
    else:
        msg = f"the script exited with status {returncode} without writing a result (did it call os._exit?)"
    return RunResult(CRASHED, msg, **common)


def _where(raw: dict) -> str:
    mode = raw.get("steps_counted_by")
    done = raw.get("steps_completed")
    if not mode:
        return " before the first step"
    unit = {"optimizer": "optimizer steps", "marker": "marked steps"}.get(mode, "DataLoader batches")
    return f" after {done} {unit}"


__all__ = ["RunResult", "run_once", "run_measured", "kill_group", "CHILD_BOOTSTRAP"]
