"""NVML side channel: a background thread that samples the GPU while a run is in flight.

NVML's `utilization.gpu` means "at least one kernel was running during the sample period" (1/6 s to 1 s,
device-wide), not "the SMs were busy"; the report labels it so. On Hopper and newer, GPM gives SM activity,
occupancy and tensor activity. Without an NVIDIA driver every number is unavailable with the reason.
"""

from __future__ import annotations

import os
import threading
import time

from gpulint.profile.proctree import is_descendant

POLL_S = 0.2
GPM_INTERVAL_S = 1.0  # GPM needs two samples spaced apart


def _nvml():
    import pynvml  # provided by nvidia-ml-py

    return pynvml


def unavailable_reason(exc: BaseException) -> str:
    """A sentence for an NVML failure; the no-driver cases say so plainly."""
    name = type(exc).__name__
    if name in ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"):
        return f"unavailable: no NVIDIA driver ({name})"
    if name == "NVMLError_NotSupported":
        return f"unavailable: not supported on this GPU ({name})"
    if name == "NVMLError_NoPermission":
        return f"unavailable: no permission ({name})"
    if isinstance(exc, ImportError):
        return "unavailable: nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    return f"unavailable: {name}: {exc}"


def _device_selector() -> tuple[str, str | int]:
    """Which GPU the script will see as cuda:0, from CUDA_VISIBLE_DEVICES (index or UUID).

    A numeric entry is an NVML (PCI bus order) index only under CUDA_DEVICE_ORDER=PCI_BUS_ID; CUDA's default
    order is FASTEST_FIRST, so otherwise the guess is checked afterwards against the device the script
    reports (`check_device`)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if visible.startswith(("GPU-", "MIG-")):
        return "uuid", visible
    if visible.isdigit():
        return "index", int(visible)
    return "index", 0


class NvmlSampler:
    """start() before the run (then set `own_pgid` to the run's pid), stop(window) after it; the result is a
    plain dict for the report."""

    def __init__(self, poll_s: float = POLL_S):
        self.poll_s = poll_s
        self.unavailable: str | None = None
        self._nvml = None
        self._handle = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        # (unix time, util.gpu %, memory used bytes, SM clock MHz or None, clock-event/throttle mask or None)
        self._samples: list[tuple[float, int, int, int | None, int | None]] = []
        self._gpm: list[tuple[float, float, dict]] = []  # (t0, t1, metrics) per GPM interval
        self._others: set[int] = set()  # compute processes on the GPU outside our run's process group
        self._baseline: set[int] = set()
        self.own_pgid: int | None = None  # set once the run has started
        self._facts: dict = {}

    def start(self) -> None:
        try:
            nvml = _nvml()
            nvml.nvmlInit()
        except Exception as e:  # pynvml.NVMLError, or ImportError without nvidia-ml-py
            self.unavailable = unavailable_reason(e)
            return
        self._nvml = nvml
        try:
            how, which = _device_selector()
            if how == "uuid":
                self._handle = nvml.nvmlDeviceGetHandleByUUID(which)
            else:
                self._handle = nvml.nvmlDeviceGetHandleByIndex(which)
            self._facts = self._device_facts()
        except nvml.NVMLError as e:
            self.unavailable = unavailable_reason(e)
            self._shutdown()
            return
        # Processes already on the GPU before our run starts are certainly someone else's.
        self._baseline = {pid for pid in self._compute_pids() if pid != os.getpid()}
        self._thread = threading.Thread(target=self._loop, name="gpulint-nvml", daemon=True)
        self._thread.start()

    def _device_facts(self) -> dict:
        nvml, h = self._nvml, self._handle
        facts = {"name": _text(nvml.nvmlDeviceGetName(h)), "driver": _text(nvml.nvmlSystemGetDriverVersion())}
        facts["uuid"] = _safe(lambda: _text(nvml.nvmlDeviceGetUUID(h)))
        facts["memory_total"] = _safe(lambda: int(nvml.nvmlDeviceGetMemoryInfo(h).total))
        facts["sm_clock_mhz_start"] = _safe(lambda: int(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)))
        facts["temperature_c_start"] = _safe(
            lambda: int(nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU))
        )
        return facts

    def _loop(self) -> None:
        nvml, h = self._nvml, self._handle
        gpm_ok = self._gpm_supported()
        gpm_prev = self._gpm_sample() if gpm_ok else None
        gpm_prev_t = time.time()
        while not self._stop.wait(self.poll_s):
            now = time.time()
            try:
                util = nvml.nvmlDeviceGetUtilizationRates(h)
                mem = nvml.nvmlDeviceGetMemoryInfo(h)
                # Clock and throttle state while the run is busy: read after it, the GPU is idle again.
                clock = _safe(lambda: int(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM)))
                mask = _safe(lambda: _throttle_mask(nvml, h))
                self._samples.append((now, int(util.gpu), int(mem.used), clock, mask))
                for pid in self._compute_pids():
                    if pid in self._baseline:
                        self._others.add(pid)
                    elif pid != os.getpid() and not _is_own(pid, self.own_pgid) and _visible(pid):
                        # A process we can see that is not in our run's group. One we cannot see at all is
                        # most likely our own run seen through a container's PID namespace: not counted.
                        self._others.add(pid)
            except nvml.NVMLError:
                pass
            if gpm_prev is not None and now - gpm_prev_t >= GPM_INTERVAL_S:
                cur = self._gpm_sample()
                if cur is not None:
                    metrics = self._gpm_metrics(gpm_prev, cur)
                    if metrics:
                        self._gpm.append((gpm_prev_t, now, metrics))
                    self._gpm_free(gpm_prev)
                    gpm_prev, gpm_prev_t = cur, now
        if gpm_prev is not None:
            self._gpm_free(gpm_prev)

    def _gpm_free(self, sample) -> None:
        try:
            self._nvml.nvmlGpmSampleFree(sample)
        except Exception:
            pass

    def _compute_pids(self) -> list[int]:
        try:
            return [int(p.pid) for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)]
        except self._nvml.NVMLError:
            return []

    # ---- GPM (Hopper and newer) ------------------------------------------------------------------------

    def _gpm_supported(self) -> bool:
        nvml = self._nvml
        try:
            if bool(nvml.nvmlGpmQueryDeviceSupport(self._handle).isSupportedDevice):
                return True
            self._facts["gpm_unavailable"] = "unavailable: GPM needs Hopper or newer"
            return False
        except (AttributeError, nvml.NVMLError) as e:
            self._facts["gpm_unavailable"] = (
                unavailable_reason(e) if isinstance(e, nvml.NVMLError) else "unavailable: nvidia-ml-py without GPM"
            )
            return False

    def _gpm_sample(self):
        nvml = self._nvml
        try:
            sample = nvml.nvmlGpmSampleAlloc()
            nvml.nvmlGpmSampleGet(self._handle, sample)
            return sample
        except nvml.NVMLError:
            return None

    def _gpm_metrics(self, s1, s2) -> dict:
        nvml = self._nvml
        wanted = {
            "sm_util_pct": nvml.NVML_GPM_METRIC_SM_UTIL,
            "sm_occupancy_pct": nvml.NVML_GPM_METRIC_SM_OCCUPANCY,
            "tensor_util_pct": nvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
            "dram_bw_util_pct": nvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
        }
        try:
            req = nvml.c_nvmlGpmMetricsGet_t()
            req.version = nvml.NVML_GPM_METRICS_GET_VERSION
            req.numMetrics = len(wanted)
            req.sample1 = s1
            req.sample2 = s2
            for i, metric_id in enumerate(wanted.values()):
                req.metrics[i].metricId = metric_id
            nvml.nvmlGpmMetricsGet(req)
            return {
                name: float(req.metrics[i].value)
                for i, name in enumerate(wanted)
                if int(req.metrics[i].nvmlReturn) == nvml.NVML_SUCCESS
            }
        except (nvml.NVMLError, AttributeError):
            return {}

    # ---- results -----------------------------------------------------------------------------------------

    def stop(self, window: tuple[float, float] | None = None) -> dict:
        """Stop sampling; summarise the samples inside `window` (unix seconds) and flag other GPU tenants."""
        if self.unavailable is not None:
            return {"unavailable": self.unavailable}
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        out = dict(self._facts)
        nvml = self._nvml
        samples = self._samples
        utilization_samples = samples
        if window is not None and window[1] is not None:
            inside = [s for s in samples if window[0] <= s[0] <= window[1]]
            samples = inside or samples  # memory and clocks: a window shorter than one poll keeps the whole run's
            # utilization of the whole run (start-up included) is not the window's: an H100 showed 2 % beside 62 % kernel busy
            utilization_samples = inside
            if not inside:
                out["utilization_unavailable"] = (
                    f"unavailable: the measured window ({window[1] - window[0]:.2f} s) fell between two NVML polls "
                    f"({self.poll_s:g} s apart)"
                )
            gpm = [m for t0, t1, m in self._gpm if t0 >= window[0] - GPM_INTERVAL_S and t1 <= window[1] + GPM_INTERVAL_S]
            if not gpm and self._gpm and "gpm_unavailable" not in out:
                out["gpm_unavailable"] = f"unavailable: the measured window is shorter than one GPM sample ({GPM_INTERVAL_S:g} s)"
        else:
            gpm = [m for _, _, m in self._gpm]
        if utilization_samples:
            utils = [s[1] for s in utilization_samples]
            out["utilization_gpu_mean_pct"] = sum(utils) / len(utils)
            out["utilization_gpu_samples"] = len(utils)
            out["utilization_gpu_ge90_fraction"] = sum(u >= 90 for u in utils) / len(utils)
        if samples:
            out["memory_used_max"] = max(s[2] for s in samples)
            clocks = sorted(s[3] for s in samples if s[3] is not None)
            if clocks:
                out["sm_clock_mhz_min"] = clocks[0]
                out["sm_clock_mhz_median"] = clocks[len(clocks) // 2]
            masks = [s[4] for s in samples if s[4] is not None]
            if masks:
                combined = 0
                for m in masks:
                    combined |= m  # any reason seen in any sample of the window
                out["throttle_reasons"] = _reason_names(nvml, combined)
        out["utilization_label"] = "NVML utilization.gpu: share of time at least one kernel ran (device-wide)"
        if gpm:
            keys = set().union(*gpm)
            out["gpm"] = {k: sum(m[k] for m in gpm if k in m) / sum(1 for m in gpm if k in m) for k in sorted(keys)}
        others = sorted(self._others)
        out["other_processes"] = others
        out["unreliable"] = bool(others)  # another tenant on the GPU invalidates timing comparisons
        self._shutdown()
        return out

    def _shutdown(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._nvml = None


def _is_own(pid: int, run_pid: int | None) -> bool:
    """The run's process (its group leader, `run_pid`) or one of its descendants: DataLoader workers share its
    group; torchrun's ranks run in sessions of their own but descend from it."""
    return _in_group(pid, run_pid) or is_descendant(pid, run_pid)


def _in_group(pid: int, pgid: int | None) -> bool:
    if pgid is None:
        return False
    try:
        return os.getpgid(pid) == pgid
    except (ProcessLookupError, PermissionError, OSError):
        return False  # gone by now, or in another PID namespace: cannot tell, count it as foreign


def _visible(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else


def _throttle_mask(nvml, h) -> int:
    getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(getter(h))


def _reason_names(nvml, mask: int) -> list[str]:
    names = {
        "nvmlClocksThrottleReasonSwPowerCap": "power cap (software)",
        "nvmlClocksThrottleReasonHwSlowdown": "hardware slowdown",
        "nvmlClocksThrottleReasonSwThermalSlowdown": "thermal (software)",
        "nvmlClocksThrottleReasonHwThermalSlowdown": "thermal (hardware)",
        "nvmlClocksThrottleReasonHwPowerBrakeSlowdown": "power brake",
    }
    return [label for attr, label in names.items() if mask & int(getattr(nvml, attr, 0))]


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def probe() -> str | None:
    """None when NVML answers, else the unavailable-reason sentence."""
    try:
        nvml = _nvml()
        nvml.nvmlInit()
        nvml.nvmlShutdown()
        return None
    except Exception as e:
        return unavailable_reason(e)


def _bare_uuid(uuid) -> str | None:
    if not uuid:
        return None
    text = str(uuid).strip().lower()
    return text[4:] if text.startswith("gpu-") else text


def check_device(summary: dict, child_cuda: dict | None) -> None:
    """Flag an NVML summary taken on another GPU than the one the script used (UUIDs differ)."""
    sampled, used = _bare_uuid(summary.get("uuid")), _bare_uuid((child_cuda or {}).get("device_uuid"))
    if not sampled or not used or sampled.startswith("mig-") or used.startswith("mig-") or sampled == used:
        return
    hint = ""
    if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        hint = " (CUDA numbers GPUs fastest first, NVML by PCI bus: set CUDA_DEVICE_ORDER=PCI_BUS_ID or use GPU UUIDs)"
    summary["device_mismatch"] = (
        f"NVML sampled GPU-{sampled} but the script ran on GPU-{used}{hint}: the NVML numbers describe another GPU"
    )
