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


def test_cpu_only_events_mark_gpu_metrics_unavailable_with_one_reason():
    events = [step(0, 0, 100), step(1, 100, 100), step(2, 200, 100)]
    m = tm.attribution_metrics(events)
    assert m["gpu_activity"] is False
    for key in ("kernel_busy_pct", "data_wait_exposed_pct", "h2d", "syncs_per_step", "gpu_breakdown"):
        assert m[key] is None
    assert m["unavailable"] == {"gpu": tm.NO_GPU}  # one reason for every GPU number, not one line each


def test_cpu_step_counters_of_adam_are_not_scalar_reads_of_the_loop():
    """Adam/AdamW read their per-parameter `step` counters with .item() inside Optimizer.step; those tensors
    stay on the CPU on purpose (no sync on a GPU either). Only the loop's own .item() counts."""
    events = [step(0, 0, 100), step(1, 100, 100), step(2, 200, 100), step(3, 300, 100)]
    for base in (100, 200):
        events.append(ev("user_annotation", "Optimizer.step#Adam.step", base + 50, 30))
        events += [ev("cpu_op", "aten::item", base + 52 + 5 * i, 2) for i in range(4)]  # 4 parameters
        events.append(ev("cpu_op", "aten::item", base + 90, 2))  # loss.item() in the loop
    m = tm.attribution_metrics(events)
    assert m["scalar_reads_per_step"] == pytest.approx(1.0)
    assert m["optimizer_scalar_reads_per_step"] == pytest.approx(4.0)


def test_a_scalar_read_of_a_cpu_tensor_is_not_a_gpu_sync():
    """On a GPU run, an .item() with no CUDA runtime call inside it read host memory: no synchronization."""
    events = gpu_trace()
    events.append(ev("cpu_op", "aten::item", 150, 2))  # no runtime call inside: a CPU tensor
    m = tm.attribution_metrics(events)
    assert m["syncs_per_step"] == pytest.approx(1.0)  # unchanged: the device read and the explicit sync
    assert m["device_scalar_reads_per_step"] == pytest.approx(0.5)


def correlated_trace():
    """Window [100, 300) (steps 1 and 2 of four 100 µs steps). Kernels with their CPU launches (correlation):
    K1 [100,140) launched at 90; K2 [150,170) launched at 130 (before the gap opened, 10 µs gap: kernel wait);
    K3 [200,220) launched at 190 (after the GPU went idle at 170: host wait, nothing else going on: host
    overhead); K4 [260,270) launched at 250: host wait over [220,260), with a DataLoader fetch [225,245) (data)
    and an .item() returning at 221 (the rest: after a sync); K5 [310,320) launched at 230, before the gap
    [270,300) opened, 30 µs: other."""
    events = [step(n, 100 * n, 100) for n in range(4)]
    for corr, (k0, k1, launch) in enumerate([(100, 140, 90), (150, 170, 130), (200, 220, 190), (260, 270, 250), (310, 320, 230)], 1):
        events.append(ev("kernel", f"k{corr}", k0, k1 - k0, tid=7, pid=0, correlation=corr))
        events.append(ev("cuda_runtime", "cudaLaunchKernel", launch, 5, correlation=corr))
    events.append(ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 110, 10, tid=7, pid=0, bytes=64))  # under K1
    events.append(ev("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 225, 20))
    events.append(ev("cpu_op", "aten::item", 210, 11))
    return events


def test_gpu_time_breakdown_and_idle_causes():
    m = tm.attribution_metrics(correlated_trace())
    b = m["gpu_breakdown"]
    assert b["compute_pct"] == pytest.approx(45.0)  # 40 + 20 + 20 + 10 of 200 µs
    assert b["non_compute_pct"] == pytest.approx(0.0)  # the copy hides under K1
    assert b["idle_pct"] == pytest.approx(55.0)
    assert b["idle"] == pytest.approx(
        {"kernel_wait": 5.0, "host_overhead": 15.0, "data_loading": 10.0, "after_sync": 10.0, "other": 15.0}
    )
    assert sum(b["idle"].values()) == pytest.approx(b["idle_pct"])
    assert b["pageable_copy_pct"] == pytest.approx(0.0)
    launch = b["launch"]
    assert launch["kernels_per_step"] == pytest.approx(2.0)  # K1..K4 in the window, 2 steps
    assert launch["launch_delay_us_p50"] == pytest.approx(5.0)
    assert launch["short_kernel_pct"] == pytest.approx(0.0)


def test_timeline_of_a_few_steps():
    t = tm.attribution_metrics(correlated_trace())["timeline"]
    assert t["steps"] == [[0.0, 100.0, "step 1"], [100.0, 100.0, "step 2"], [200.0, 100.0, "step 3"]]
    assert [k[:2] for k in t["lanes"]["kernel"]][:2] == [[0.0, 40.0], [50.0, 20.0]]  # relative to step 1 (100 µs)
    assert [k[2] for k in t["lanes"]["kernel"]] == ["k1", "k2", "k3", "k4", "k5"]
    assert t["lanes"]["data"] == [[125.0, 20.0, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"]]
    assert t["lanes"]["sync"] == [[110.0, 11.0, "aten::item"]]
    assert t["lanes"]["copy_pageable"][0][:2] == [10.0, 10.0]


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
    assert m["kernel_busy_pct"] is None and "CPU-only" in m["unavailable"]["gpu"]
    host = m["host"]
    assert host["data_loading_pct"] > 0 and host["optimizer_pct"] > 0
    assert host["data_loading_pct"] + host["optimizer_pct"] + host["other_pct"] == pytest.approx(100.0)
    assert {"data", "optimizer", "sync"} <= set(m["timeline"]["lanes"])


def test_load_trace_gz_and_bare_list(tmp_path):
    events = gpu_trace()
    gz = tmp_path / "t.json.gz"
    with gzip.open(gz, "wt") as f:
        json.dump({"traceEvents": events}, f)
    assert len(tm.load_trace(gz)) == len(events)
    bare = tmp_path / "t.json"
    bare.write_text(json.dumps(events))
    assert len(tm.load_trace(bare)) == len(events)


def test_the_gpu_side_step_annotation_is_not_a_step():
    """Seen on an H100 (torch 2.11): besides the host's ProfilerStep#1..#6 the trace holds a GPU-side
    `gpu_user_annotation` ProfilerStep#1 spanning the GPU work of all six steps. Taken as a step it stretched the
    window over an extra step and miscounted: 2.4 copies and 3.4 syncs per step where the script makes 2 and 3."""
    events = [step(n, 100 * n, 100) for n in range(1, 7)]
    events.append(ev("gpu_user_annotation", "ProfilerStep#1", 110, 590, tid=7, pid=0))
    for n in range(1, 7):  # two pageable copies and one .item() (a stream sync) per step
        events += [
            ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 100 * n + 10, 5, tid=7, pid=0, bytes=1000),
            ev("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 100 * n + 20, 5, tid=7, pid=0, bytes=1000),
            ev("cuda_runtime", "cudaStreamSynchronize", 100 * n + 30, 2),
            ev("cuda_runtime", "cudaStreamSynchronize", 100 * n + 40, 2),
            ev("cpu_op", "aten::item", 100 * n + 50, 10),
            ev("cpu_op", "aten::_local_scalar_dense", 100 * n + 51, 8),
            ev("cuda_runtime", "cudaStreamSynchronize", 100 * n + 52, 2),
        ]
    steps = tm.profiler_steps(events)
    assert [n for n, _, _ in steps] == [1, 2, 3, 4, 5, 6]
    lo, hi, n = tm.analysis_window(steps)
    assert (lo, hi, n) == (200, 600, 4)
    assert tm.h2d_copies(events, lo, hi, n)["pageable"] == {"count_per_step": 2.0, "bytes_per_step": 2000.0}
    assert tm.sync_counts(events, lo, hi, n)["syncs_per_step"] == 3.0
