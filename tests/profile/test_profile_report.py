"""The terminal report's "why is the GPU idle" section, on a GPU-shaped trace and on a real CPU trace."""

import pytest
from profile_helpers import DATA, fast_options

from gpulint.profile import trace_metrics
from gpulint.profile.idle import explain
from gpulint.profile.report import profile_text
from gpulint.profile.runner import RunResult
from gpulint.profile.timing import timing_stats


def squeeze(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines()]


def run(attribution, cuda_used, wait_s=0.004):
    steps = [{"wall_s": 0.01, "data_wait_s": wait_s, "samples": 32, "batches": 1, "gpu_s": 0.009} for _ in range(10)]
    raw = {"window": {"steps": steps}, "steps_counted_by": "optimizer", "optimizers": [{"name": "SGD", "steps": 30}],
           "cuda": {"available": cuda_used, "used": cuda_used}, "torch_version": "2.13.0"}
    return RunResult("ok", "measured", raw=raw, attribution=attribution, label="run 1",
                     nvml={} if cuda_used else {"unavailable": "unavailable: no NVIDIA driver (NVMLError_LibraryNotFound)"})


def test_gpu_run_explains_idle_time_with_ceilings_and_rules():
    from test_profile_trace_metrics import correlated_trace

    text = profile_text("python train.py", [run(trace_metrics.attribution_metrics(correlated_trace()), True)], fast_options())
    section = squeeze(text.split("Why the GPU is idle\n")[1].split("\n\n")[0])
    assert section == [
        "GPU time compute 45.0 %, non-compute 0.0 %, idle 55.0 % of the step",
        "CPU too slow to launch (Python, optimizer, launch overhead) 15.0 % of step; removing it: up to 1.18x; GPU103, GPU904",
        "waiting on events or other streams 15.0 % of step; removing it: up to 1.18x",
        "waiting for data (DataLoader) 10.0 % of step; removing it: up to 1.11x; GPU101, GPU104",
        "queue drained by a synchronization 10.0 % of step; removing it: up to 1.11x; GPU303, GPU304, GPU305, GPU306",
        "launch gaps between back-to-back kernels 5.0 % of step; removing it: up to 1.05x; fewer, larger kernels (torch.compile, CUDA graphs)",
        "launch-bound signals 2 kernels/step, 0 % shorter than 10 µs, launch delay p50 5 µs / p90 5 µs",
    ]
    assert "not measured" not in text and "syncs / step 0.0 (scalar reads: 0.5 in the loop)" in squeeze(text)


def test_cpu_run_says_where_the_step_goes_and_why_gpu_numbers_are_missing_once():
    attribution = trace_metrics.attribution_metrics(trace_metrics.load_trace(DATA / "cpu_train_trace.json"))
    text = profile_text("python train.py", [run(attribution, False)], fast_options())
    assert "Where the step goes (CPU-only run: what the CPU can measure)" in text
    assert "waiting for data (DataLoader) 40.0 % of step; removing it: up to 1.67x; GPU101, GPU104" in squeeze(text)
    assert text.count("NVIDIA") == 1 and "unavailable" not in text.replace("NVML: no NVIDIA", "")
    exp = explain(timing_stats(run(attribution, False).steps), attribution)
    assert exp.kind == "cpu" and abs(sum(c.share_pct for c in exp.causes) - 100) < 1e-6
    assert exp.ceiling_for({"GPU101"}) == pytest.approx(1 / (1 - 0.4))
    assert exp.ceiling_for({"GPU303"}) is None  # nothing this run spends time on


def test_sync_sites_per_step_divide_by_the_steps_they_were_counted_in():
    """H100: the sites are counted over the attribution pass (1 warm-up + 6 active steps = 7) but were divided by
    the profiled steps: 2 copies and 1 .item() per step read "2.8" and "1.4 per step"."""
    from test_profile_trace_metrics import correlated_trace

    result = run(trace_metrics.attribution_metrics(correlated_trace()), True)
    result.raw.update(sync_sites={"train.py:31": 14, "train.py:36": 7}, sync_site_steps=7)
    text = squeeze(profile_text("python train.py", [result], fast_options()))
    assert "sync at train.py:31 2.0 per step" in text and "sync at train.py:36 1.0 per step" in text
