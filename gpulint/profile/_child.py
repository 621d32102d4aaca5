"""Bootstrap that runs inside the user's interpreter: installs step hooks, then runs their script as __main__.

It is started as a plain file (`python .../gpulint/profile/_child.py`), reads its settings from the JSON file
named by $GPULINT_PROFILE_CONFIG, and imports only the standard library and torch, so it works in whatever
environment the user's `python` belongs to. It writes one JSON result file and leaves with `os._exit`.

Which process measures: the first process of the run to take a training step. Child processes started with
multiprocessing (fork, spawn, forkserver: Hogwild, `mp.spawn`) get the same hooks; the first to step an
optimizer claims the measurement with an exclusive file in the run's folder, and a process that only iterates a
DataLoader never measures while another one steps an optimizer.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time
import traceback

CONFIG_ENV = "GPULINT_PROFILE_CONFIG"
ROLE_ENV = "GPULINT_PROFILE_ROLE"  # "rank": a process torchrun started for the launcher bootstrap
SETTLE_WINDOW = 5  # steps whose spread decides that warm-up is over
SETTLE_REL_IQR = 0.1  # torch.utils.benchmark's adaptive_autorange stop rule
LOSSES_TO_KEEP = 5
TRACEBACK_LINES = 40
LEAD_SWITCH = 3  # consecutive steps of another optimizer, none of the lead's in between, make it the lead
NO_STEP_BACKWARDS_MIN = 50  # backward() calls without any step before concluding the loop is invisible
WATCH_S = 0.25  # how often the watch thread looks (no step yet, parent gone)
SYNC_WARNING = "synchronizing CUDA operation"  # torch.cuda.set_sync_debug_mode("warn") says this

_CFG: dict | None = None  # the run's settings, also in child processes
_TORCH = None
_REC: Recorder | None = None  # this process's recorder; None in a child until it first sees a step
_ORIGINALS: dict = {}  # what the hooks replaced: {"backward": Tensor.backward}


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
    tensor = torch.Tensor
    first = batch[0] if type(batch) in (tuple, list) and batch else batch
    if isinstance(first, tensor):  # the common cases first: a tensor, or (inputs, targets)
        return int(first.shape[0]) if first.dim() > 0 else None
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
    """Write the result once: the first process to write it wins (a parent ending after its measured child
    must not overwrite the child's result), and the parent polling for the file never sees half of it."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links
        if not os.path.exists(path):
            os.replace(tmp, path)
    try:
        os.unlink(tmp)
    except OSError:
        pass


def _touch(path) -> bool:
    """Create the file exclusively; False when it already exists."""
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        return True
    except FileExistsError:
        return False
    except OSError:
        return True  # no claim files possible (read-only folder): behave as a single process


class Recorder:
    """Counts steps from hooks, times a window of them, then profiles a few more, and writes the result."""

    def __init__(self, cfg, torch, role="main"):
        self.torch = torch
        self.pid = os.getpid()
        self.role = role
        self.started = time.monotonic()
        self.warmup = int(cfg["warmup"])
        self.steps = int(cfg["steps"])
        self.warmup_cap = self.warmup + min(max(self.warmup, SETTLE_WINDOW), 20)
        self.warmup_until = self.warmup  # moves on when the window restarts after an epoch boundary
        self.window_restarts = 0
        self.attribution_steps = int(cfg.get("attribution_steps", 0))
        self.result_path = cfg["result_path"]
        self.progress_path = cfg.get("progress_path")
        self.trace_path = cfg.get("trace_path")
        self.claim_dir = cfg.get("claim_dir")  # None: the only process (in-process tests)
        self.first_step_timeout = cfg.get("first_step_timeout")
        self.no_step_backwards = max(NO_STEP_BACKWARDS_MIN, 2 * (self.warmup_cap + self.steps))
        self.mode = None  # "optimizer", "marker" or "dataloader", whichever marks steps
        self.claimed = None  # the claim this process holds: None, "dataloader" or "step"
        self.passive = False  # another process measures
        self.bounds = []  # perf_counter at step boundaries in the current mode
        self.excluded = {}  # step index -> batches fetched without gradients (an evaluation inside the step)
        self.step_eval_batches = 0  # batches fetched without gradients since the last boundary
        self.eval_detection = True
        self.fetches = []  # (start, end, samples) for every training DataLoader __next__
        self.optimizer_steps = 0
        self.optimizers = {}  # id -> [class name, steps]
        self.lead = None  # id of the optimizer whose steps are the step boundaries
        self.other = None
        self.other_run = 0
        self.lead_switches = 0
        self.batches = 0
        self.eval_batches = 0
        self.iterators = 0
        self.backward_calls = 0
        self.marker_steps = 0
        self.phase = "warmup"
        self.window_start = None  # index into self.bounds
        self.measured = 0
        self.excluded_in_window = 0
        self.window_unix = None
        self.window_result = None
        self.warmup_steps_done = None
        self.cuda_window = None
        self.epoch_boundary_in_window = False
        self.losses = []
        self.attribution = None
        self.prof = None
        self.prof_steps = 0
        self.sync_sites = None
        self.sync_site_steps = None
        self._last_progress = 0.0

    # ---- claims: which process measures ------------------------------------------------------------

    def _claim(self, level):
        """level "step" (optimizer or marked steps) or "dataloader"; True when this process may measure."""
        if self.claim_dir is None or self.claimed == "step" or self.claimed == level:
            return True
        step_claim = os.path.join(self.claim_dir, "claim.step")
        if level == "dataloader" and os.path.exists(step_claim):
            return False  # another process steps an optimizer: its batches are the training, not ours
        if _touch(step_claim if level == "step" else os.path.join(self.claim_dir, "claim.dataloader")):
            self.claimed = level
            return True
        return False

    def _another_process_steps(self):
        return (
            self.claim_dir is not None
            and self.claimed != "step"
            and os.path.exists(os.path.join(self.claim_dir, "claim.step"))
        )

    def _go_passive(self):
        """Another process measures: stop counting and take every hook out of this process's way."""
        self.passive = True
        self.bounds = []
        self.fetches = []
        _restore_backward()
        _stop_line_probes()

    # ---- events ------------------------------------------------------------------------------------

    def on_optimizer_step(self, optimizer):
        if self.passive:
            return
        t = time.perf_counter()
        self.optimizer_steps += 1
        key = id(optimizer)
        slot = self.optimizers.get(key)
        if slot is None:
            slot = self.optimizers[key] = [type(optimizer).__name__, 0]
            if self.claim_dir is not None and len(self.optimizers) == 1:
                _touch(os.path.join(self.claim_dir, f"stepped.{self.pid}"))  # counts the training processes
        slot[1] += 1
        if self.mode == "marker":
            return
        if self.mode != "optimizer":
            if not self._claim("step"):
                self._go_passive()
                return
            self._switch_mode("optimizer")
            self.lead = key
        elif key != self.lead:
            # A second optimizer in the same iteration (GAN: D and G) is not a new step; one that steps on its
            # own several times in a row (the lead is gone, or steps less often) takes over.
            self.other_run = self.other_run + 1 if key == self.other else 1
            self.other = key
            if self.other_run < LEAD_SWITCH or self.phase not in ("warmup", "measure"):
                return
            self.lead = key
            self.lead_switches += 1
            self._switch_mode("optimizer")
        self.other, self.other_run = None, 0
        self._boundary(t)

    def on_marker(self):
        """gpulint.profile.step(): the user marks the end of each step by hand; it overrides every other count."""
        if self.passive:
            return
        t = time.perf_counter()
        self.marker_steps += 1
        if self.mode != "marker":
            if self.phase not in ("warmup", "measure"):
                return  # too late (the attribution pass) to change what a step is
            if not self._claim("step"):
                self._go_passive()
                return
            self._switch_mode("marker")
        self._boundary(t)

    def on_batch(self, t0, t1, samples, grad_enabled=True):
        if self.passive:
            return
        if not grad_enabled and self.mode == "optimizer" and self.eval_detection:
            # Fetched without gradients while training: an evaluation inside the loop, not a training batch.
            self.eval_batches += 1
            self.step_eval_batches += 1
            return
        if self.mode is None and not self._claim("dataloader"):
            return  # another process measures
        self.fetches.append((t0, t1, samples))
        self.batches += 1
        if self.mode in ("optimizer", "marker"):
            return
        self.mode = "dataloader"
        self._boundary(t0)  # a fetch starts the next step

    def on_new_iterator(self, grad_enabled=True):
        self.iterators += 1
        if self.phase == "measure" and grad_enabled and not self.passive:
            self._on_epoch_boundary()  # a new epoch: workers restart, the first batches are slow

    def on_backward(self, tensor):
        """Before the first step: counts backward() calls (a loop gpulint cannot see); in warm-up: keeps losses."""
        if self.passive:
            return
        if self.mode is None:
            self.backward_calls += 1
            if self.backward_calls >= self.no_step_backwards and not self._another_process_steps():
                self.finish("no-steps", no_step_reason="backward")
        if self.phase == "warmup" and tensor.numel() == 1 and len(self.losses) < min(LOSSES_TO_KEEP, self.warmup):
            try:
                self.losses.append(float(tensor.detach()))  # warm-up only: this read syncs on CUDA
            except Exception:  # complex, meta or fake tensors: no loss for the numerics note
                self.losses.append(None)
        if self.mode is not None and len(self.losses) >= min(LOSSES_TO_KEEP, self.warmup):
            _restore_backward()

    def _measured_elsewhere(self):
        """Another process of the run holds a claim: it measures (multiprocessing training)."""
        if self.claim_dir is None or self.claimed is not None:
            return False
        return any(os.path.exists(os.path.join(self.claim_dir, f"claim.{c}")) for c in ("step", "dataloader"))

    def watch(self):
        """Called by the watch thread until a step is seen: stops a run that shows none within the bound.
        Returns False once there is nothing left to watch for."""
        if self.mode is not None or self.passive or self._measured_elsewhere():
            return False
        waited = time.monotonic() - self.started
        if self.first_step_timeout is not None and waited >= self.first_step_timeout:
            self.finish("no-steps", no_step_reason="time")
        self._write_progress(self._no_step_text(waited))
        return True

    def _no_step_text(self, waited):
        return (
            f"no step yet after {waited:.0f} s ({self.iterators} DataLoader iterator(s), {self.batches} batch(es), "
            f"{self.backward_calls} backward() call(s), no optimizer.step())"
        )

    def _boundary(self, t):
        if self.step_eval_batches and self.bounds:
            self.excluded[len(self.bounds) - 1] = self.step_eval_batches  # the step that just ended held it
        self.step_eval_batches = 0
        self.bounds.append(t)
        self._advance_guarded()

    def _switch_mode(self, mode):
        self.mode = mode
        self.bounds = []
        self.excluded = {}
        self.step_eval_batches = 0
        self.phase = "warmup"
        self.window_start = None
        self.cuda_window = None

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

    def _window_steps(self):
        """Indexes of the measured steps in the window so far (steps holding an evaluation left out)."""
        return [j for j in range(self.window_start, len(self.bounds) - 1) if j not in self.excluded]

    def _advance(self):
        done = self.completed()
        if self.phase == "warmup":
            if done >= self.warmup_until and len(self.bounds) >= 1 and (done >= self.warmup_cap or self._settled()):
                self._start_window(done)
        elif self.phase == "measure":
            self._record_cuda_boundary()
            if len(self.bounds) - 2 in self.excluded:  # the step that just ended held an evaluation
                self.excluded_in_window += 1
            else:
                self.measured += 1
            if self.excluded_in_window > 2 * self.steps:
                # Nearly every step fetches without gradients: that is how this loop trains, not an evaluation.
                self.eval_detection = False
                self.excluded = {}
                self.measured += self.excluded_in_window
                self.excluded_in_window = 0
            if self.measured >= self.steps:
                if self.mode == "dataloader" and self._another_process_steps():
                    self._go_passive()  # another process trains with an optimizer: its numbers count
                    return
                self._end_window(self._window_steps()[: self.steps])
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
            text = f"step {self.measured}/{self.steps}"
        else:
            text = f"profiling {self.prof_steps}/{self.attribution_steps + 1}"
        self._write_progress(text)

    def _write_progress(self, text):
        if not self.progress_path:
            return
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
        _restore_backward()
        _stop_line_probes()  # coverage is taken from the start through warm-up: the window runs untraced
        self.warmup_steps_done = done
        self.phase = "measure"
        self.window_start = len(self.bounds) - 1
        self.measured = 0  # steps of the window so far, and those left out as evaluation
        self.excluded_in_window = 0
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

    def _end_window(self, measured):
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
        b = self.bounds  # step boundaries as seen: they assign the fetches
        steps = []
        fetches = [f for f in self.fetches if f[0] >= b[measured[0]]]
        k = 0
        for j in measured:
            lo, hi = b[j], b[j + 1]
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
                    "wall_s": hi - lo,
                    "data_wait_s": wait,
                    "batches": n_batches,
                    "samples": None if (unknown or n_batches == 0) else samples,
                }
            )
        steps[-1]["wall_s"] += sync_wait  # wall time: the last step also owns the GPU work still queued at its end
        evs = self.cuda_window
        if evs is not None and len(evs) == len(b) - self.window_start:
            for j, step in zip(measured, steps):  # elapsed_time is valid now: the synchronize completed them
                step["gpu_s"] = evs[j - self.window_start].elapsed_time(evs[j + 1 - self.window_start]) / 1000.0
        last = measured[-1]
        excluded = [
            {"wall_s": b[j + 1] - b[j], "batches_without_grad": n}
            for j, n in sorted(self.excluded.items())
            if self.window_start <= j <= last
        ]
        self.window_result = {
            "steps": steps,
            "wall_s": sum(s["wall_s"] for s in steps),
            "sync_wait_s": sync_wait,
            "excluded_steps": excluded,
            "optimizer_steps_per_step": self._optimizer_counts(),
        }
        self.phase = "done-timing"
        if cuda_info is not None:
            self.window_result["cuda"] = cuda_info
        self.fetches = []

    def _optimizer_counts(self):
        return [{"name": name, "steps": n} for name, n in self.optimizers.values()]

    def _start_attribution(self):
        try:
            from torch.profiler import ProfilerActivity, profile, schedule

            activities = [ProfilerActivity.CPU]
            if self._cuda_in_use():
                activities.append(ProfilerActivity.CUDA)
            rec = self

            def on_ready(prof):
                rec._stop_sync_sites()
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
            if self._cuda_in_use():
                self._start_sync_sites()
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
        self._stop_sync_sites()

    # ---- where the syncs come from (GPU runs, attribution pass only) --------------------------------

    def _start_sync_sites(self):
        import warnings

        torch = self.torch
        sites = self.sync_sites = {}
        saved = (list(warnings.filters), warnings.showwarning)
        torch_dir = os.path.dirname(os.path.abspath(torch.__file__))

        def show(message, category, filename, lineno, file=None, line=None):
            if SYNC_WARNING not in str(message):
                return saved[1](message, category, filename, lineno, file, line)
            site = user_site(sys._getframe(1), (torch_dir, os.path.dirname(warnings.__file__), __file__))
            sites[site] = sites.get(site, 0) + 1

        warnings.filterwarnings("always", message=f".*{SYNC_WARNING}")
        warnings.showwarning = show
        self._sync_restore = saved
        try:
            torch.cuda.set_sync_debug_mode("warn")
        except Exception:
            self._stop_sync_sites()

    def _stop_sync_sites(self):
        saved = getattr(self, "_sync_restore", None)
        if saved is None:
            return
        import warnings

        self._sync_restore = None
        self.sync_site_steps = self.prof_steps  # the sites were counted over the warm-up and active profiler steps
        try:
            self.torch.cuda.set_sync_debug_mode(0)
        except Exception:
            pass
        warnings.filters[:] = saved[0]
        warnings.showwarning = saved[1]

    # ---- result ------------------------------------------------------------------------------------

    def result(self, status, **extra):
        torch = self.torch
        data = {
            "schema": 1,
            "status": status,
            "pid": self.pid,
            "process": self.role,
            "steps_counted_by": self.mode,
            "optimizer_steps": self.optimizer_steps,
            "optimizers": self._optimizer_counts(),
            "lead_optimizer_switches": self.lead_switches,
            "marker_steps": self.marker_steps,
            "dataloader_batches": self.batches,
            "eval_batches": self.eval_batches,
            "eval_detection": self.eval_detection,
            "dataloader_iterators": self.iterators,
            "backward_calls_before_first_step": self.backward_calls,
            "steps_completed": self.completed() if self.mode else 0,
            "requested_warmup": self.warmup,
            "requested_steps": self.steps,
            "warmup_steps": self.warmup_steps_done,
            "phase": self.phase,
            "seconds_since_start": time.monotonic() - self.started,
            "window": None,
            "window_unix": self.window_unix,
            "epoch_boundary_in_window": self.epoch_boundary_in_window,
            "window_restarts": self.window_restarts,
            "losses": [x for x in self.losses if x is not None],
            "attribution": self.attribution,
            "sync_sites": self.sync_sites,
            "sync_site_steps": self.sync_site_steps,
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
        if status != "ok" and self.mode is None:
            extra["measured_elsewhere"] = self.passive or self._measured_elsewhere()
        _write_json_atomic(self.result_path, self.result(status, **extra))
        _flush_and_exit((extra.get("exit_code", 1) or 1) if failed else 0)


def user_site(frame, skip_dirs):
    """`file:line` of the first frame outside torch, warnings and this bootstrap: the user's line that synced."""
    skip = tuple(os.path.join(d, "") for d in skip_dirs if d and os.path.isdir(d))
    files = {d for d in skip_dirs if d and not os.path.isdir(d)}
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith(skip) and name not in files and not name.startswith("<frozen"):
            return f"{name}:{frame.f_lineno}"
        frame = frame.f_back
    return "<unknown>"


# ---- hooks ------------------------------------------------------------------------------------------------


def _recorder():
    """This process's recorder; a child process (fork or spawn) gets its own on its first event."""
    global _REC
    rec = _REC
    if rec is None:
        rec = _REC = Recorder(_CFG, _TORCH, role="child")
    return rec


def _report_internal(e):
    """A bug of ours must not look like the user's script failing: end the run as gpulint's internal error."""
    _recorder().finish("internal", exception=f"{type(e).__name__}: {e}", traceback=traceback.format_exc())


def _install_hooks(torch):
    """Optimizer step post-hook, DataLoader iterator wrappers, a backward() wrapper and the step() marker."""
    global _TORCH
    _TORCH = torch
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.data import dataloader as dl

    def on_step(optimizer, args, kwargs):
        try:
            _recorder().on_optimizer_step(optimizer)
        except Exception as e:
            _report_internal(e)

    register_optimizer_step_post_hook(on_step)
    base = dl._BaseDataLoaderIter
    orig_next = base.__next__
    orig_init = base.__init__
    grad_enabled = torch.is_grad_enabled

    def __next__(it):
        t0 = time.perf_counter()
        batch = orig_next(it)
        t1 = time.perf_counter()
        try:
            _recorder().on_batch(t0, t1, _batch_size(batch, torch), grad_enabled())
        except Exception as e:
            _report_internal(e)
        return batch

    def __init__(it, *args, **kwargs):
        try:
            _recorder().on_new_iterator(grad_enabled())
        except Exception as e:
            _report_internal(e)
        orig_init(it, *args, **kwargs)

    base.__next__ = __next__
    base.__init__ = __init__
    _ORIGINALS["backward"] = torch.Tensor.backward
    orig_backward = _ORIGINALS["backward"]

    def backward(tensor, *args, **kwargs):
        try:
            _recorder().on_backward(tensor)
        except Exception as e:
            _report_internal(e)
        return orig_backward(tensor, *args, **kwargs)

    torch.Tensor.backward = backward
    try:
        import gpulint.profile as marker  # present when the user's environment has gpulint: step() works
    except Exception:
        marker = None
    if marker is not None:

        def on_marker():
            try:
                _recorder().on_marker()
            except Exception as e:
                _report_internal(e)

        marker._step_hook = on_marker


def _restore_backward():
    orig = _ORIGINALS.pop("backward", None)
    if orig is not None and _TORCH is not None:
        _TORCH.Tensor.backward = orig


# ---- child processes ---------------------------------------------------------------------------------------


def _follow_children():
    """Give every multiprocessing child (fork, spawn, forkserver) the same hooks and a recorder of its own."""
    if not _CFG.get("claim_dir"):
        return
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
    try:
        from multiprocessing import spawn
    except Exception:
        return
    orig = spawn.get_preparation_data

    def get_preparation_data(name):
        data = orig(name)
        data["gpulint_profile"] = _SpawnHook(_CFG)  # unpickled (so run) in the child before anything else
        return data

    spawn.get_preparation_data = get_preparation_data


def _after_fork_in_child():
    global _REC
    _REC = None  # a recorder of its own, created on its first event (DataLoader workers never get one)


class _SpawnHook:
    """Travels in multiprocessing's preparation data; unpickling it in the child installs the bootstrap there."""

    def __init__(self, cfg):
        self.cfg = cfg

    def __reduce__(self):
        code = (
            "import runpy\n"
            f"runpy.run_path({os.path.abspath(__file__)!r}, run_name='__gpulint_profile_child__')"
            f"['_spawned_child']({json.dumps(self.cfg)!r})\n"
        )
        return exec, (code, {"__name__": "__gpulint_profile_hook__"})


def _spawned_child(cfg_text):
    """In a spawned child, before its __main__ is imported: probe lines now; hooks once torch is there."""
    global _CFG
    try:
        _CFG = json.loads(cfg_text)
        _start_line_probes(_CFG.get("probes"), _CFG.get("hits_path"))
        from multiprocessing import process

        orig = process.BaseProcess._bootstrap

        def _bootstrap(self, *args, **kwargs):
            torch = sys.modules.get("torch")
            if torch is not None:  # never import torch into a child that does not use it
                try:
                    _install_hooks(torch)
                    _follow_children()
                except Exception:
                    pass
            return orig(self, *args, **kwargs)

        process.BaseProcess._bootstrap = _bootstrap
    except Exception:
        pass  # never break the user's child process


# ---- which changed lines ran (fix --verify's B runs) -------------------------------------------------------

_PROBES: dict = {}


def _start_line_probes(probes, hits_path):
    """Trace only the frames of files that gpulint changed, until every probed line ran or warm-up ends.

    Each line is reported once per process by appending `path:line` to the hits file."""
    if not probes or not hits_path:
        return
    pending = {os.path.realpath(p): set(lines) for p, lines in probes.items()}
    resolved = {}

    def file_of(code):
        name = code.co_filename
        path = resolved.get(name)
        if path is None:
            path = resolved[name] = os.path.realpath(name) if not name.startswith("<") else ""
        return path

    def local(frame, event, arg):
        if event == "line":
            path = file_of(frame.f_code)
            lines = pending.get(path)
            if lines and frame.f_lineno in lines:
                lines.discard(frame.f_lineno)
                try:
                    with open(hits_path, "a") as f:
                        f.write(f"{path}:{frame.f_lineno}\n")
                except OSError:
                    pass
                if not any(pending.values()):
                    _stop_line_probes()
                    return None
        return local

    def call(frame, event, arg):
        lines = pending.get(file_of(frame.f_code))
        return local if lines else None

    _PROBES["tracer"] = call
    sys.settrace(call)


def _stop_line_probes():
    if _PROBES.pop("tracer", None) is None:
        return
    sys.settrace(None)
    frame = sys._getframe()
    while frame is not None:  # frames already being traced keep their tracer otherwise
        frame.f_trace = None
        frame = frame.f_back


# ---- the process's end -------------------------------------------------------------------------------------


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


def _kill_own_group():
    import signal

    try:
        os.killpg(0, signal.SIGKILL)
    finally:
        os._exit(1)


def _watch(parent_fd, expected_ppid):
    """The run dies with gpulint: the pipe gpulint holds open reads EOF when gpulint dies (whatever killed it,
    kill -9 included), or, for a torchrun rank, its parent changes. The whole process group goes then (DataLoader
    workers, multiprocessing children). Until a step is seen, the same thread stops a run that shows none."""
    import select

    watching = True
    while True:
        if parent_fd is None:
            time.sleep(WATCH_S)
            if os.getppid() != expected_ppid:
                _kill_own_group()
        elif watching:
            if select.select([parent_fd], [], [], WATCH_S)[0] and not os.read(parent_fd, 1):
                _kill_own_group()
        elif not os.read(parent_fd, 1):  # blocks, without waking up, until gpulint is gone
            _kill_own_group()
        if watching:
            rec = _REC
            watching = rec is None or rec.watch()


def _start_watch(cfg, role):
    fd = cfg.get("parent_fd") if role != "rank" else None
    if fd is None and role != "rank":
        return
    threading.Thread(target=_watch, args=(fd, os.getppid()), name="gpulint-profile-watch", daemon=True).start()


def _run_launcher(cfg):
    """torchrun runs inside this process, so it dies with gpulint like any run; its ranks are told so."""
    os.environ[ROLE_ENV] = "rank"
    os.environ[CONFIG_ENV] = cfg["config_path"]
    launcher = cfg["launcher"]
    sys.argv = ["torchrun", "--standalone", f"--nproc-per-node={launcher['nproc_per_node']}", os.path.abspath(__file__)]
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)


def main():
    global _CFG, _REC
    cfg_path = os.environ.pop(CONFIG_ENV, None)
    if not cfg_path:
        print("gpulint profile bootstrap: $GPULINT_PROFILE_CONFIG is not set", file=sys.stderr)
        os._exit(2)
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["config_path"] = cfg_path
    _CFG = cfg
    sys.path[0] = ""  # never let the user's `import metrics` find our own modules
    role = "rank" if os.environ.get(ROLE_ENV) == "rank" else "main"
    _start_watch(cfg, role)
    if cfg.get("launcher") and role != "rank":
        _run_launcher(cfg)
        return

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

    rec = _REC = Recorder(cfg, torch, role=role)
    _install_hooks(torch)
    _follow_children()
    _start_line_probes(cfg.get("probes"), cfg.get("hits_path"))
    try:
        _run_target(cfg)
    except SystemExit as e:
        _stop_line_probes()
        code = _exit_code(e)
        if code == 0:
            rec.finish("ended")
        rec.finish("exit", exit_code=code)
    except BaseException as e:
        _stop_line_probes()
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
    _stop_line_probes()
    rec.finish("ended")
    _flush_and_exit(0)


if __name__ == "__main__":
    main()
