"""Bootstrap that runs inside the user's interpreter: installs step hooks, then runs their script as __main__.

It is started as a plain file (`python .../gpulint/profile/_child.py`), reads its settings from the JSON file
named by $GPULINT_PROFILE_CONFIG, and imports only the standard library and torch, so it works in whatever
environment the user's `python` belongs to. It writes one JSON result file and leaves with `os._exit`.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
import traceback

CONFIG_ENV = "GPULINT_PROFILE_CONFIG"
SETTLE_WINDOW = 5  # steps whose spread decides that warm-up is over
SETTLE_REL_IQR = 0.1  # torch.utils.benchmark's adaptive_autorange stop rule
LOSSES_TO_KEEP = 5
TRACEBACK_LINES = 40


def _percentile(values, q):
    s = sorted(values)
    if not s:
        return None
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _batch_size(batch, torch):
    """dim 0 of the first tensor found in the batch (tensor, tuple/list, dict, nested)."""
    stack = [batch]
    seen = 0
    while stack and seen < 64:
        item = stack.pop(0)
        seen += 1
        if torch.is_tensor(item):
            return int(item.shape[0]) if item.dim() > 0 else None
        if isinstance(item, dict):
            stack[:0] = list(item.values())
        elif isinstance(item, (list, tuple)):
            stack[:0] = list(item)
    return None


def _write_json_atomic(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)  # the parent polls for this file: it must never see half of it


class Recorder:
    """Counts steps from hooks, times a window of them, then profiles a few more, and writes the result."""

    def __init__(self, cfg, torch):
        self.torch = torch
        self.pid = os.getpid()
        self.warmup = int(cfg["warmup"])
        self.steps = int(cfg["steps"])
        self.warmup_cap = self.warmup + min(max(self.warmup, SETTLE_WINDOW), 20)
        self.warmup_until = self.warmup  # moves on when the window restarts after an epoch boundary
        self.window_restarts = 0
        self.attribution_steps = int(cfg.get("attribution_steps", 0))
        self.result_path = cfg["result_path"]
        self.progress_path = cfg.get("progress_path")
        self.trace_path = cfg.get("trace_path")
        self.mode = None  # "optimizer" or "dataloader", whichever marks steps
        self.bounds = []  # perf_counter at step boundaries in the current mode
        self.fetches = []  # (start, end, samples) for every DataLoader __next__
        self.optimizer_steps = 0
        self.batches = 0
        self.phase = "warmup"
        self.window_start = None  # index into self.bounds
        self.window_unix = None
        self.window_result = None
        self.warmup_steps_done = None
        self.cuda_window = None
        self.epoch_boundary_in_window = False
        self.losses = []
        self.attribution = None
        self.prof = None
        self.prof_steps = 0
        self._last_progress = 0.0
        self._orig_backward = None

    # ---- hooks -------------------------------------------------------------------------------------

    def install(self):
        torch = self.torch
        from torch.optim.optimizer import register_optimizer_step_post_hook
        from torch.utils.data import dataloader as dl

        register_optimizer_step_post_hook(self._on_optimizer_step)
        base = dl._BaseDataLoaderIter
        orig_next = base.__next__
        orig_init = base.__init__
        rec = self

        def __next__(it):
            if os.getpid() != rec.pid:  # a forked worker inherited the patch: stay out of its way
                return orig_next(it)
            t0 = time.perf_counter()
            batch = orig_next(it)
            t1 = time.perf_counter()
            rec._on_batch(t0, t1, _batch_size(batch, torch))
            return batch

        def __init__(it, *args, **kwargs):
            if os.getpid() == rec.pid and rec.phase == "measure":
                rec._on_epoch_boundary()  # a new epoch: workers restart, the first batches are slow
            orig_init(it, *args, **kwargs)

        base.__next__ = __next__
        base.__init__ = __init__
        if self.warmup > 0:
            self._orig_backward = torch.Tensor.backward
            orig_backward = self._orig_backward

            def backward(tensor, *args, **kwargs):
                if os.getpid() == rec.pid and tensor.numel() == 1 and len(rec.losses) < min(LOSSES_TO_KEEP, rec.warmup):
                    try:
                        rec.losses.append(float(tensor.detach()))  # warm-up only: this read syncs on CUDA
                    except Exception:  # complex, meta or fake tensors: no loss for the numerics note
                        rec._restore_backward()
                    if len(rec.losses) >= min(LOSSES_TO_KEEP, rec.warmup):
                        rec._restore_backward()
                return orig_backward(tensor, *args, **kwargs)

            torch.Tensor.backward = backward

    def _restore_backward(self):
        if self._orig_backward is not None:
            self.torch.Tensor.backward = self._orig_backward
            self._orig_backward = None

    def _on_optimizer_step(self, optimizer, args, kwargs):
        if os.getpid() != self.pid:
            return
        t = time.perf_counter()
        self.optimizer_steps += 1
        if self.mode != "optimizer":
            # The first optimizer step decides: steps are optimizer steps from now on.
            self.mode = "optimizer"
            self.bounds = []
            self.phase = "warmup"
            self.window_start = None
            self.cuda_window = None
        self.bounds.append(t)
        self._advance_guarded()

    def _on_batch(self, t0, t1, samples):
        self.fetches.append((t0, t1, samples))
        self.batches += 1
        if self.mode == "optimizer":
            return
        self.mode = "dataloader"
        self.bounds.append(t0)  # a fetch starts the next step
        self._advance_guarded()

    def _advance_guarded(self):
        try:
            self._advance()
        except Exception as e:  # a bug of ours must not look like the user's script failing
            self.finish("internal", exception=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())

    # ---- state machine -----------------------------------------------------------------------------

    def completed(self):
        return len(self.bounds) - (1 if self.mode == "dataloader" else 0)

    def _settled(self):
        if self.warmup < SETTLE_WINDOW:
            return True  # a short warm-up was asked for explicitly: honour it
        if len(self.bounds) < SETTLE_WINDOW + 1:
            return False  # not enough step times yet to judge; the cap still bounds the wait
        b = self.bounds[-(SETTLE_WINDOW + 1):]
        d = [y - x for x, y in zip(b, b[1:])]
        med = _percentile(d, 0.5)
        if not med:
            return True
        return (_percentile(d, 0.75) - _percentile(d, 0.25)) / med < SETTLE_REL_IQR

    def _advance(self):
        done = self.completed()
        if self.phase == "warmup":
            if done >= self.warmup_until and len(self.bounds) >= 1 and (done >= self.warmup_cap or self._settled()):
                self._start_window(done)
        elif self.phase == "measure":
            self._record_cuda_boundary()
            if len(self.bounds) - 1 - self.window_start >= self.steps:
                self._end_window()
                if self.attribution_steps > 0:
                    self._start_attribution()
                else:
                    self.attribution = {"unavailable": "attribution pass disabled"}
                    self.finish("ok")
        elif self.phase == "attribute":
            self.prof_steps += 1
            try:
                self.prof.step()
            except Exception as e:  # a profiler failure must not lose the timing result
                self.attribution = {"unavailable": f"torch.profiler failed: {type(e).__name__}: {e}"}
                self.finish("ok")
            if self.prof_steps >= self.attribution_steps + 1:  # 1 warm-up + N active steps
                self._stop_profiler()
                if self.attribution is None:
                    self.attribution = {"unavailable": "the profiler produced no trace"}
                self.finish("ok")
        self._progress()

    def _progress(self):
        if not self.progress_path:
            return
        now = time.monotonic()
        if self.phase == "measure" and now - self._last_progress < 0.2:
            return  # throttled only where it could cost measured time; warm-up reports every step
        self._last_progress = now
        if self.phase == "warmup":
            text = f"warm-up {self.completed()}/{self.warmup_until}"
        elif self.phase == "measure":
            text = f"step {len(self.bounds) - 1 - self.window_start}/{self.steps}"
        else:
            text = f"profiling {self.prof_steps}/{self.attribution_steps + 1}"
        try:
            with open(self.progress_path, "w") as f:
                f.write(text)
        except OSError:
            pass

    def _on_epoch_boundary(self):
        """Restart the window once after a short re-warm-up; a second boundary (epochs shorter than the
        window) is accepted and reported."""
        if self.window_restarts >= 1:
            self.epoch_boundary_in_window = True
            return
        self.window_restarts += 1
        done = self.completed()
        self.phase = "warmup"
        self.window_start = None
        self.window_unix = None
        self.cuda_window = None
        self.warmup_until = done + max(1, min(self.warmup, SETTLE_WINDOW))
        self.warmup_cap = self.warmup_until + SETTLE_WINDOW

    def _cuda_in_use(self):
        cuda = self.torch.cuda
        try:
            return cuda.is_available() and cuda.is_initialized()
        except Exception:
            return False

    def _start_window(self, done):
        self._restore_backward()
        self.warmup_steps_done = done
        self.phase = "measure"
        self.window_start = len(self.bounds) - 1
        self.window_unix = [time.time(), None]
        if self._cuda_in_use():
            cuda = self.torch.cuda
            t = time.perf_counter()
            cuda.synchronize()  # one sync at each end of the window, never per step
            # The warm-up's queued GPU work drained here: it belongs to warm-up, not to the first measured step.
            if self.mode == "dataloader":
                # The bound is the start of the fetch that opened this step (before the sync): move both.
                drained = time.perf_counter() - t
                self.bounds[-1] += drained
                if self.fetches:
                    f0, f1, n = self.fetches[-1]
                    self.fetches[-1] = (f0 + drained, f1 + drained, n)
            else:
                self.bounds[-1] = time.perf_counter()
            cuda.reset_peak_memory_stats()
            start = cuda.Event(enable_timing=True)
            start.record()
            self.cuda_window = [start]

    def _record_cuda_boundary(self):
        if self.cuda_window is not None:
            ev = self.torch.cuda.Event(enable_timing=True)
            ev.record()
            self.cuda_window.append(ev)

    def _end_window(self):
        cuda_info = None
        sync_wait = 0.0
        if self.cuda_window is not None:
            cuda = self.torch.cuda
            t = time.perf_counter()
            cuda.synchronize()
            sync_wait = time.perf_counter() - t  # the queued GPU work belongs to the window's last step
            dev = cuda.current_device()
            props = cuda.get_device_properties(dev)
            cuda_info = {
                "peak_memory_allocated": int(cuda.max_memory_allocated(dev)),
                "peak_memory_reserved": int(cuda.max_memory_reserved(dev)),
                "total_memory": int(props.total_memory),
            }
        self.window_unix[1] = time.time()
        s = self.window_start
        marks = list(self.bounds[s : s + self.steps + 1])  # step boundaries as seen: they assign the fetches
        bounds = list(marks)
        bounds[-1] += sync_wait  # wall time: the last step also owns the GPU work still queued at its end
        steps = []
        fetches = [f for f in self.fetches if f[0] >= marks[0]]
        k = 0
        for j in range(self.steps):
            lo, hi = marks[j], marks[j + 1]
            wait = 0.0
            samples = 0
            n_batches = 0
            unknown = False
            while k < len(fetches) and fetches[k][0] < hi:
                f = fetches[k]
                if f[0] >= lo:
                    wait += f[1] - f[0]
                    n_batches += 1
                    if f[2] is None:
                        unknown = True
                    else:
                        samples += f[2]
                k += 1
            steps.append(
                {
                    "wall_s": bounds[j + 1] - bounds[j],
                    "data_wait_s": wait,
                    "batches": n_batches,
                    "samples": None if (unknown or n_batches == 0) else samples,
                }
            )
        if self.cuda_window is not None and len(self.cuda_window) == len(steps) + 1:
            evs = self.cuda_window  # elapsed_time is valid now: the synchronize above completed every event
            for j, step in enumerate(steps):
                step["gpu_s"] = evs[j].elapsed_time(evs[j + 1]) / 1000.0
        self.window_result = {"steps": steps, "wall_s": bounds[-1] - bounds[0], "sync_wait_s": sync_wait}
        self.phase = "done-timing"
        if cuda_info is not None:
            self.window_result["cuda"] = cuda_info
        self.fetches = []

    def _start_attribution(self):
        try:
            from torch.profiler import ProfilerActivity, profile, schedule

            activities = [ProfilerActivity.CPU]
            if self._cuda_in_use():
                activities.append(ProfilerActivity.CUDA)
            rec = self

            def on_ready(prof):
                if rec.trace_path:
                    prof.export_chrome_trace(rec.trace_path)
                    rec.attribution = {"trace_path": rec.trace_path, "profiled_steps": rec.attribution_steps}
                else:
                    rec.attribution = {"unavailable": "no trace path given"}

            self.prof = profile(
                activities=activities,
                schedule=schedule(wait=0, warmup=1, active=self.attribution_steps, repeat=1),
                on_trace_ready=on_ready,
                record_shapes=False,
                profile_memory=False,
                with_stack=False,
            )
            self.prof.start()
            self.phase = "attribute"
            self.prof_steps = 0
        except Exception as e:
            self.prof = None
            self.attribution = {"unavailable": f"torch.profiler could not start: {type(e).__name__}: {e}"}
            self.finish("ok")

    def _stop_profiler(self):
        if self.prof is not None:
            prof, self.prof = self.prof, None
            try:
                prof.stop()
            except Exception:
                pass

    # ---- result ------------------------------------------------------------------------------------

    def result(self, status, **extra):
        torch = self.torch
        data = {
            "schema": 1,
            "status": status,
            "pid": self.pid,
            "steps_counted_by": self.mode,
            "optimizer_steps": self.optimizer_steps,
            "dataloader_batches": self.batches,
            "steps_completed": self.completed() if self.mode else 0,
            "requested_warmup": self.warmup,
            "requested_steps": self.steps,
            "warmup_steps": self.warmup_steps_done,
            "phase": self.phase,
            "window": None,
            "window_unix": self.window_unix,
            "epoch_boundary_in_window": self.epoch_boundary_in_window,
            "window_restarts": self.window_restarts,
            "losses": self.losses,
            "attribution": self.attribution,
            "torch_version": getattr(torch, "__version__", None),
            "python_version": sys.version.split()[0],
            "rank": int(os.environ.get("RANK", "0") or 0),
            "world_size": int(os.environ.get("WORLD_SIZE", "1") or 1),
            "cuda": self._cuda_facts(),
        }
        if self.window_result is not None:
            data["window"] = self.window_result
        data.update(extra)
        return data

    def _cuda_facts(self):
        cuda = self.torch.cuda
        facts = {"available": False, "used": False}
        try:
            facts["available"] = bool(cuda.is_available())
            facts["used"] = bool(self._cuda_in_use())
            if facts["used"]:
                dev = cuda.current_device()
                props = cuda.get_device_properties(dev)
                facts["device_name"] = props.name
                facts["device_uuid"] = str(getattr(props, "uuid", "")) or None
                facts["cuda_version"] = self.torch.version.cuda
        except Exception as e:
            facts["error"] = f"{type(e).__name__}: {e}"
        return facts

    def finish(self, status, **extra):
        if self.phase == "attribute":
            self._stop_profiler()
            if self.attribution is None:
                self.attribution = {"unavailable": "the script ended before the attribution window completed"}
        failed = status in ("exit", "error", "internal")
        if status in ("ended", "exit", "error") and self.window_result is not None:
            # The timing window is complete, so the numbers stand; but the script still failed (during the
            # attribution pass): `script_status` and the exit code keep that for `fix --verify`.
            extra["script_status"] = status
            status = "ok"
        _write_json_atomic(self.result_path, self.result(status, **extra))
        _flush_and_exit((extra.get("exit_code", 1) or 1) if failed else 0)


def _flush_and_exit(code):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)  # skip checkpointing, final evaluation and worker-shutdown hangs


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # what Python prints for sys.exit("message")
    return 1


def _user_frames(tb):
    """Skip the bootstrap's and runpy's frames so the traceback starts in the user's code."""
    ours = {os.path.abspath(__file__), getattr(runpy, "__file__", None), "<frozen runpy>"}
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename in ours:
        tb = tb.tb_next
    return tb


def _run_target(cfg):
    if cfg["kind"] == "module":
        sys.argv = [cfg["target"], *cfg["args"]]
        sys.path[0] = os.getcwd()  # what `python -m` puts first
        runpy.run_module(cfg["target"], run_name="__main__", alter_sys=True)
    else:
        sys.argv = [cfg["argv0"], *cfg["args"]]
        sys.path[0] = os.path.dirname(cfg["target"])  # what `python script.py` puts first
        runpy.run_path(cfg["target"], run_name="__main__")


def main():
    cfg_path = os.environ.pop(CONFIG_ENV, None)
    if not cfg_path:
        print("gpulint profile bootstrap: $GPULINT_PROFILE_CONFIG is not set", file=sys.stderr)
        os._exit(2)
    with open(cfg_path) as f:
        cfg = json.load(f)
    sys.path[0] = ""  # never let the user's `import metrics` find our own modules

    if int(os.environ.get("RANK", "0") or 0) != 0:
        _run_target(cfg)  # other ranks run unmeasured
        return

    try:
        import torch
    except Exception as e:  # the user's interpreter has no usable torch: nothing to hook
        _write_json_atomic(
            cfg["result_path"],
            {"schema": 1, "status": "error", "exception": f"torch could not be imported: {type(e).__name__}: {e}",
             "traceback": traceback.format_exc(limit=-5)},
        )
        _flush_and_exit(1)
    try:
        seed = cfg.get("seed")
        if seed is not None:
            import random

            random.seed(seed)  # same seeds for A and B; the script's own seeding still wins
            torch.manual_seed(seed)
    except Exception:
        pass

    rec = Recorder(cfg, torch)
    rec.install()
    try:
        _run_target(cfg)
    except SystemExit as e:
        code = _exit_code(e)
        if code == 0:
            rec.finish("ended")
        rec.finish("exit", exit_code=code)
    except BaseException as e:
        tb = traceback.format_exception(type(e), e, _user_frames(e.__traceback__))
        text = "".join(tb)
        sys.stderr.write(text)
        lines = text.splitlines()
        rec.finish(
            "error",
            exit_code=1,
            exception=f"{type(e).__name__}: {e}",
            traceback="\n".join(lines[-TRACEBACK_LINES:]),
        )
    rec.finish("ended")


if __name__ == "__main__":
    main()
