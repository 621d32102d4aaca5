"""Attribution metrics: formulas on hand-built events (GPU-style too) and on a real recorded CPU trace."""

import gzip
import json

import pytest
from profile_helpers import DATA

from gpulint.profile import trace_metrics as tm


def step(n, ts, dur):
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "ts": ts, "dur": dur, "pid": 1, "tid": 1}


def ev(cat, name, ts, dur, tid=1, pid=1, **args):
    e = {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid}
    if args:
        e["args"] = args
    return e


def gpu_trace():
    """4 steps of 100 µs; steps 1 and 2 (the kept ones) cover [100, 300)."""
    events = [step(0, 0, 100), step(1, 100, 100), step(2, 200, 100), step(3, 300, 100)]
    # Kernels on two streams, overlapping: union inside the window is [110,150) + [180,220) + [250,260) = 90 µs.
    events += [
        ev("kernel", "gemm", 110, 40, tid=7, pid=0),
        ev("kernel", "relu", 120, 10, tid=8, pid=0),
        ev("kernel", "gemm", 180, 40, tid=7, pid=0),
        ev("kernel", "outside", 350, 20, tid=7, pid=0),
        ev("kernel", "late", 250, 10, tid=7, pid=0),
    ]
    # Copies: two pageable HtoD of 1000 bytes and one pinned of 500 in the window, one pageable outside.
    events += [
        ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 100, 5, tid=7, pid=0, bytes=1000),
        ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 200, 5, tid=7, pid=0, bytes=1000),
        ev("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 230, 5, tid=7, pid=0, bytes=500),
        ev("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 240, 5, tid=7, pid=0, bytes=4),
        ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 320, 5, tid=7, pid=0, bytes=1000),
    ]
    # Host: a DataLoader fetch [150, 200) partly overlapping the kernel at 180: exposed 30 µs.
    events.append(ev("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 150, 50))
    # Syncs: an .item() whose cudaStreamSynchronize is inside it (1 sync), plus an explicit device sync.
    events += [
        ev("cpu_op", "aten::item", 240, 20),
        ev("cpu_op", "aten::_local_scalar_dense", 241, 18),
        ev("cuda_runtime", "cudaMemcpyAsync", 242, 3),
        ev("cuda_runtime", "cudaStreamSynchronize", 246, 10),
        ev("cuda_runtime", "cudaDeviceSynchronize", 280, 5),
        ev("cuda_runtime", "cudaStreamSynchronize", 330, 5),  # in the dropped last step
    ]
    return events


def test_interval_union_and_subtract():
    merged = tm.merge([(0, 10), (5, 15), (20, 30), (30, 31)])
    assert merged == [(0, 15), (20, 31)]
    assert tm.length(merged) == 26
    assert tm.clip(merged, 10, 25) == [(10, 15), (20, 25)]
    assert tm.subtract([(0, 100)], [(10, 20), (50, 60)]) == [(0, 10), (20, 50), (60, 100)]
    assert tm.subtract([(0, 10)], [(0, 10)]) == []
    assert tm.busy_fraction([(0, 50), (25, 75)], 0, 100) == 0.75


def test_first_and_last_profiler_step_are_dropped():
    window = tm.analysis_window(tm.profiler_steps(gpu_trace()))
    assert window == (100, 300, 2)


def test_gpu_style_metrics():
    m = tm.attribution_metrics(gpu_trace())
    assert m["gpu_activity"] is True
    assert m["profiled_steps"] == 2
    assert m["kernel_busy_pct"] == pytest.approx(100 * 90 / 200)
    # Copies add [100,105), [230,235), [240,245); [200,205) is already inside the kernel [180,220).
    assert m["gpu_any_busy_pct"] == pytest.approx(100 * 105 / 200)
    assert m["data_wait_pct"] == pytest.approx(25.0)
    assert m["data_wait_exposed_pct"] == pytest.approx(15.0)  # [150,180) of 200 µs
    assert m["h2d"]["pageable"] == {"count_per_step": 1.0, "bytes_per_step": 1000.0}
    assert m["h2d"]["pinned"] == {"count_per_step": 0.5, "bytes_per_step": 250.0}
    # .item() (its inner stream sync is the same sync) + one explicit device sync, over 2 steps.
    assert m["syncs_per_step"] == pytest.approx(1.0)
    assert m["scalar_reads_per_step"] == pytest.approx(0.5)
    assert m["kernels_per_step"] == pytest.approx(2.0)
    assert m["unavailable"] == {}


def test_old_category_names_are_understood():
    events = gpu_trace()
    rename = {"kernel": "Kernel", "gpu_memcpy": "Memcpy", "cuda_runtime": "Runtime", "cpu_op": "Operator"}
    for e in events:
        e["cat"] = rename.get(e["cat"], e["cat"])
    assert tm.attribution_metrics(events)["kernel_busy_pct"] == pytest.approx(45.0)
    assert tm.attribution_metrics(events)["syncs_per_step"] == pytest.approx(1.0)


def test_cpu_only_events_mark_gpu_metrics_unavailable():
    events = [step(0, 0, 100), step(1, 100, 100), step(2, 200, 100)]
    m = tm.attribution_metrics(events)
    assert m["gpu_activity"] is False
    for key in ("kernel_busy_pct", "data_wait_exposed_pct", "h2d", "syncs_per_step"):
        assert m[key] is None
        assert m["unavailable"][key] == tm.NO_GPU


def test_trace_without_steps():
    assert "unavailable" in tm.attribution_metrics([ev("cpu_op", "aten::mm", 0, 10)])


def test_recorded_cpu_trace():
    """A real torch 2.13 trace of a tiny CPU loop with one .item() per step (tests/profile/data)."""
    path = DATA / "cpu_train_trace.json"
    assert path.stat().st_size < 300 * 1024
    events = tm.load_trace(path)
    steps = tm.profiler_steps(events)
    assert [s[0] for s in steps] == [1, 2, 3, 4, 5]
    m = tm.attribution_metrics(events)
    assert m["profiled_steps"] == 3
    assert m["gpu_activity"] is False
    assert m["scalar_reads_per_step"] == pytest.approx(1.0)  # exactly one loss.item() per step
    assert 0 < m["data_wait_pct"] < 100
    assert m["kernel_busy_pct"] is None and "CPU-only" in m["unavailable"]["kernel_busy_pct"]


def test_load_trace_gz_and_bare_list(tmp_path):
    events = gpu_trace()
    gz = tmp_path / "t.json.gz"
    with gzip.open(gz, "wt") as f:
        json.dump({"traceEvents": events}, f)
    assert len(tm.load_trace(gz)) == len(events)
    bare = tmp_path / "t.json"
    bare.write_text(json.dumps(events))
    assert len(tm.load_trace(bare)) == len(events)
