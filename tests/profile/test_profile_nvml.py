"""The NVML side channel: the real no-driver path on this machine, and the GPU path against a fake pynvml."""

import os
import subprocess
import sys
import time
import types

import pytest

from gpulint.profile import nvml
from gpulint.profile.report import nvml_rows


def test_no_driver_here_is_unavailable_with_reason():
    pytest.importorskip("pynvml")
    if nvml.probe() is None:
        pytest.skip("this machine has an NVIDIA driver")
    sampler = nvml.NvmlSampler()
    sampler.start()
    summary = sampler.stop((0.0, 1.0))
    assert summary == {"unavailable": "unavailable: no NVIDIA driver (NVMLError_LibraryNotFound)"}
    assert nvml_rows(summary) == [("NVML", "unavailable: no NVIDIA driver (NVMLError_LibraryNotFound)")]


INVISIBLE_PID = 4_194_000  # above any pid this machine hands out: "not in our PID namespace"


class FakeNVMLError(Exception):
    pass


def fake_pynvml(init_error=None, foreign_pid=None, own_pid=None):
    m = types.SimpleNamespace()
    m.NVMLError = FakeNVMLError
    m.NVML_CLOCK_SM = 1
    m.NVML_TEMPERATURE_GPU = 0
    m.NVML_SUCCESS = 0
    m.nvmlClocksThrottleReasonSwPowerCap = 4
    m.nvmlClocksThrottleReasonHwSlowdown = 8

    def init():
        if init_error:
            raise init_error

    m.nvmlInit = init
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetHandleByIndex = lambda i: f"handle{i}"
    m.nvmlDeviceGetHandleByUUID = lambda u: f"handle-{u}"
    m.nvmlDeviceGetName = lambda h: b"NVIDIA H100 80GB HBM3"
    m.nvmlSystemGetDriverVersion = lambda: "560.35.03"
    m.nvmlDeviceGetUUID = lambda h: "GPU-1234"
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=80 << 30, used=10 << 30)
    m.nvmlDeviceGetClockInfo = lambda h, kind: 1980
    m.nvmlDeviceGetTemperature = lambda h, kind: 40
    m.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=60, memory=20)
    pids = [p for p in (foreign_pid, own_pid) if p]
    state = {"calls": 0}

    def processes(h):
        state["calls"] += 1
        # Before the run only the foreign process; during it also ours and one from another PID namespace.
        present = [foreign_pid] if state["calls"] == 1 else pids + [INVISIBLE_PID]
        return [types.SimpleNamespace(pid=p) for p in present if p]

    m.nvmlDeviceGetComputeRunningProcesses = processes
    m.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 4

    class NotSupported(FakeNVMLError):
        pass

    NotSupported.__name__ = "NVMLError_NotSupported"

    def gpm_support(h):
        raise NotSupported()

    m.nvmlGpmQueryDeviceSupport = gpm_support
    return m


def test_driver_not_loaded(monkeypatch):
    class DriverNotLoaded(FakeNVMLError):
        pass

    DriverNotLoaded.__name__ = "NVMLError_DriverNotLoaded"
    monkeypatch.setattr(nvml, "_nvml", lambda: fake_pynvml(init_error=DriverNotLoaded()))
    sampler = nvml.NvmlSampler()
    sampler.start()
    assert sampler.stop() == {"unavailable": "unavailable: no NVIDIA driver (NVMLError_DriverNotLoaded)"}


def test_missing_nvidia_ml_py(monkeypatch):
    def missing():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(nvml, "_nvml", missing)
    sampler = nvml.NvmlSampler()
    sampler.start()
    assert "nvidia-ml-py is not installed" in sampler.stop()["unavailable"]


def test_gpu_path_with_fake_nvml(monkeypatch):
    # Our own run: a child in its own process group, which the sampler must not count as a foreign tenant.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        fake = fake_pynvml(foreign_pid=1, own_pid=child.pid)
        monkeypatch.setattr(nvml, "_nvml", lambda: fake)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
        sampler = nvml.NvmlSampler(poll_s=0.02)
        sampler.start()
        sampler.own_pgid = child.pid
        t0 = time.time()
        time.sleep(0.3)
        summary = sampler.stop((t0, time.time()))
    finally:
        child.kill()
        child.wait()
    assert summary["name"] == "NVIDIA H100 80GB HBM3" and summary["driver"] == "560.35.03"
    assert summary["utilization_gpu_mean_pct"] == 60
    assert summary["utilization_gpu_samples"] >= 3
    assert summary["memory_used_max"] == 10 << 30
    assert summary["other_processes"] == [1] and summary["unreliable"] is True
    assert summary["throttle_reasons"] == ["power cap (software)"]
    assert summary["gpm_unavailable"] == "unavailable: not supported on this GPU (NVMLError_NotSupported)"
    rows = dict(nvml_rows(summary))
    assert "not SM activity" in rows["NVML utilization"]
    assert "unreliable" in rows["other GPU processes"]


def test_device_selection_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc,GPU-def")
    assert nvml._device_selector() == ("uuid", "GPU-abc")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert nvml._device_selector() == ("index", 3)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert nvml._device_selector() == ("index", 0)
    assert os.environ.get("CUDA_VISIBLE_DEVICES") is None


def test_clock_and_throttle_are_read_while_the_run_is_busy(monkeypatch):
    """The GPU slows down (hardware slowdown, 1400 MHz) during the window and recovers once the run is killed:
    the summary must describe the window, not the idle GPU that stop() would see."""
    fake = fake_pynvml()
    state = {"clock": 1400, "mask": 8}
    fake.nvmlDeviceGetClockInfo = lambda h, kind: state["clock"]
    fake.nvmlDeviceGetCurrentClocksEventReasons = lambda h: state["mask"]
    monkeypatch.setattr(nvml, "_nvml", lambda: fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sampler = nvml.NvmlSampler(poll_s=0.02)
    sampler.start()
    t0 = time.time()
    time.sleep(0.2)
    state["mask"] = 4  # one sample with another reason, still inside the window
    time.sleep(0.1)
    t1 = time.time()
    state.update(clock=1980, mask=0)  # the run is over: idle, full clock
    time.sleep(0.1)
    summary = sampler.stop((t0, t1))
    assert summary["throttle_reasons"] == ["power cap (software)", "hardware slowdown"]
    assert summary["sm_clock_mhz_min"] == 1400 and summary["sm_clock_mhz_median"] == 1400
    assert "sm_clock_mhz_end" not in summary
    rows = dict(nvml_rows(summary))
    assert rows["clock throttling"] == "power cap (software), hardware slowdown"
    assert rows["SM clock"] == "1400 MHz median in the window (min 1400)"


def test_a_window_between_two_polls_reports_no_utilization(monkeypatch):
    """H100: a 0.14 s window of 4.5 ms steps fell between two polls, and the summary averaged the whole run's
    samples (start-up included): "2 % mean over 54 samples" beside 62 % kernel busy. The window had no sample."""
    fake = fake_pynvml()
    monkeypatch.setattr(nvml, "_nvml", lambda: fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    sampler = nvml.NvmlSampler(poll_s=0.05)
    sampler.start()
    time.sleep(0.3)
    now = time.time()
    summary = sampler.stop((now - 0.001, now - 0.0005))  # between two polls
    assert "utilization_gpu_mean_pct" not in summary
    assert summary["utilization_unavailable"] == (
        "unavailable: the measured window (0.00 s) fell between two NVML polls (0.05 s apart)"
    )
    assert summary["memory_used_max"] == 10 << 30  # memory and clocks still come from the nearest samples
    assert dict(nvml_rows(summary))["NVML utilization"] == summary["utilization_unavailable"]


def test_sampling_another_gpu_than_the_script_used_is_flagged(monkeypatch):
    from gpulint.profile.report import run_notes
    from gpulint.profile.runner import OK, RunResult

    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    summary = {"name": "NVIDIA H100", "uuid": "GPU-aaaa-1111"}
    nvml.check_device(summary, {"used": True, "device_uuid": "bbbb-2222"})  # torch's uuid has no GPU- prefix
    assert summary["device_mismatch"].startswith("NVML sampled GPU-aaaa-1111 but the script ran on GPU-bbbb-2222")
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in summary["device_mismatch"]
    assert dict(nvml_rows(summary))["wrong GPU sampled"] == summary["device_mismatch"]
    r = RunResult(OK, "measured", label="run 1", nvml=summary)
    assert run_notes([r]) == [f"run 1: {summary['device_mismatch']}"]

    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    summary = {"uuid": "GPU-aaaa"}
    nvml.check_device(summary, {"device_uuid": "bbbb"})
    assert "CUDA_DEVICE_ORDER" not in summary["device_mismatch"]


def test_the_same_gpu_or_an_unknown_one_is_not_flagged():
    for child in ({"device_uuid": "AAAA-1111"}, {"device_uuid": None}, {}, None):
        summary = {"uuid": "GPU-aaaa-1111"}
        nvml.check_device(summary, child)
        assert "device_mismatch" not in summary
    summary = {"unavailable": "unavailable: no NVIDIA driver (NVMLError_LibraryNotFound)"}
    nvml.check_device(summary, {"device_uuid": "bbbb"})
    assert "device_mismatch" not in summary
