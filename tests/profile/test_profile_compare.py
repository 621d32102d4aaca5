"""Timing stats, A/B statistics and the verdict on synthetic numbers."""

import random

import pytest

from gpulint.profile import compare as cmp
from gpulint.profile.timing import percentile, timing_stats


def steps(step_s, n=30, batch=32, wait_s=0.0, jitter=0.02, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        wall = step_s * (1 + rng.uniform(-jitter, jitter))
        out.append({"wall_s": wall, "data_wait_s": min(wait_s, wall), "samples": batch, "batches": 1})
    return out


def test_percentile_matches_linear_interpolation():
    assert percentile([1, 2, 3, 4], 0.5) == 2.5
    assert percentile([10], 0.9) == 10
    assert percentile([], 0.5) is None
    assert percentile([0, 10], 0.1) == pytest.approx(1.0)


def test_timing_stats():
    s = timing_stats([{"wall_s": 0.1, "data_wait_s": 0.05, "samples": 32, "batches": 1}] * 10)
    assert s.step_ms_median == pytest.approx(100)
    assert s.samples_per_s == pytest.approx(320)
    assert s.steps_per_s == pytest.approx(10)
    assert s.data_wait_pct == pytest.approx(50)
    assert s.data_wait_ms_median == pytest.approx(50)


def test_unknown_batch_size_falls_back_to_steps_per_second():
    s = timing_stats([{"wall_s": 0.5, "data_wait_s": 0.0, "samples": None, "batches": 0}] * 4)
    assert s.samples_per_s is None
    assert s.steps_per_s == pytest.approx(2)
    assert s.data_wait_pct is None  # no DataLoader at all
    c = cmp.compare([[{"wall_s": 0.5, "samples": None}] * 10], [[{"wall_s": 0.25, "samples": None}] * 10])
    assert c.unit == "steps/s"
    assert c.effect == pytest.approx(2.0)


def test_clear_speedup_is_faster():
    a = [steps(0.100, seed=i) for i in range(3)]
    b = [steps(0.050, seed=10 + i) for i in range(3)]
    c = cmp.compare(a, b)
    assert c.verdict == cmp.FASTER
    assert c.effect == pytest.approx(2.0, rel=0.03)
    assert c.ci[0] > 1.8 and c.ci[1] < 2.2
    assert c.noise_floor is not None and c.noise_floor < 0.03
    assert c.summary.startswith("faster: samples/s +")


def test_clear_slowdown_is_slower():
    a = [steps(0.050, seed=i) for i in range(3)]
    b = [steps(0.080, seed=10 + i) for i in range(3)]
    c = cmp.compare(a, b)
    assert c.verdict == cmp.SLOWER
    assert c.ci[1] < 1


def test_change_inside_a_wide_noise_floor_is_too_noisy_to_verify():
    # A runs differ by ~20 % from each other; B is 8 % faster than A on average: within the A-vs-A noise, which is
    # too wide to tell "no change" from a real one.
    a = [steps(0.090), steps(0.100, seed=1), steps(0.110, seed=2)]
    b = [steps(0.092, seed=3), steps(0.092, seed=4), steps(0.092, seed=5)]
    c = cmp.compare(a, b)
    assert c.noise_floor == pytest.approx(0.2, abs=0.03)
    assert c.threshold == c.noise_floor
    assert c.verdict == cmp.TOO_NOISY
    assert c.summary.startswith("too noisy to verify: samples/s +")


def test_change_inside_a_narrow_noise_floor_is_no_measurable_change():
    # A runs differ by ~6 %; B is 2 % faster: below the noise floor, and the floor is narrow enough to say so.
    a = [steps(0.097), steps(0.100, seed=1), steps(0.103, seed=2)]
    b = [steps(0.098, seed=3), steps(0.098, seed=4), steps(0.098, seed=5)]
    c = cmp.compare(a, b)
    assert c.noise_floor == pytest.approx(0.06, abs=0.02)
    assert c.verdict == cmp.NO_CHANGE


def test_tiny_change_below_minimum_effect_is_no_change_even_with_tight_ci():
    a = [steps(0.100, jitter=0.0005, seed=i) for i in range(3)]
    b = [steps(0.099, jitter=0.0005, seed=5 + i) for i in range(3)]
    c = cmp.compare(a, b)
    assert c.ci[0] > 1  # statistically real...
    assert c.verdict == cmp.NO_CHANGE  # ...but below the 3 % that gpulint claims anything for


def test_single_run_per_side_has_no_noise_floor_and_says_so():
    c = cmp.compare([steps(0.1)], [steps(0.05, seed=1)])
    assert c.noise_floor is None
    assert any("noise floor not measured" in n for n in c.notes)
    assert c.verdict == cmp.FASTER


def test_bootstrap_is_deterministic_for_a_seed():
    a = [steps(0.1, seed=i) for i in range(2)]
    b = [steps(0.09, seed=9 + i) for i in range(2)]
    assert cmp.bootstrap_ratio_ci(a, b, "samples/s", seed=1) == cmp.bootstrap_ratio_ci(a, b, "samples/s", seed=1)


def test_batch_size_change_compares_samples_not_steps():
    # B doubles the batch and the step takes 1.5x as long: fewer steps/s but more samples/s.
    a = [steps(0.1, batch=32, seed=i) for i in range(3)]
    b = [steps(0.15, batch=64, seed=5 + i) for i in range(3)]
    c = cmp.compare(a, b)
    assert c.effect == pytest.approx(64 / 0.15 / (32 / 0.1), rel=0.03)
    assert c.verdict == cmp.FASTER


def test_mechanism_verified_bottleneck_elsewhere():
    a = [steps(0.1, wait_s=0.002, seed=i) for i in range(3)]
    b = [steps(0.1, wait_s=0.002, seed=5 + i) for i in range(3)]
    a_attr = [{"h2d": {"pageable": {"count_per_step": 2.0}, "pinned": {"count_per_step": 0.0}}, "syncs_per_step": 2.0}]
    b_attr = [{"h2d": {"pageable": {"count_per_step": 0.0}, "pinned": {"count_per_step": 2.0}}, "syncs_per_step": 0.0}]
    c = cmp.compare(a, b, a_attr, b_attr)
    assert c.verdict == cmp.NO_CHANGE
    assert c.mechanism_verified
    names = {m.name: m for m in c.mechanisms}
    assert names["pageable H2D copies"].improved and names["pinned H2D copies"].improved
    assert names["syncs"].improved
    assert "mechanism verified, bottleneck elsewhere" in c.summary


def test_data_wait_mechanism():
    a = [steps(0.1, wait_s=0.06, seed=i) for i in range(2)]
    b = [steps(0.05, wait_s=0.001, seed=3 + i) for i in range(2)]
    c = cmp.compare(a, b)
    wait = next(m for m in c.mechanisms if m.name == "data wait")
    assert wait.before == pytest.approx(60, abs=2) and wait.after == pytest.approx(2, abs=1)
    assert wait.improved
    assert c.verdict == cmp.FASTER and not c.mechanism_verified


def test_numerics_note():
    assert cmp.numerics_note([1.0, 0.9], [1.0, 0.9]) == "first 2 losses agree"
    assert "differ" in cmp.numerics_note([1.0, 0.9], [1.0, 0.5])
    assert cmp.numerics_note([], [1.0]) is None


def test_comparison_serialises():
    c = cmp.compare([steps(0.1)], [steps(0.05, seed=1)])
    d = c.to_dict()
    assert d["verdict"] == cmp.FASTER and d["summary"] == c.summary
    assert isinstance(d["mechanisms"], list)


def test_throughput_row_says_why_the_batch_size_is_missing():
    from gpulint.profile.report import timing_rows
    from gpulint.profile.timing import timing_stats

    unreadable = [{"wall_s": 0.1, "data_wait_s": 0.01, "batches": 1, "samples": None}] * 4
    no_loader = [{"wall_s": 0.1, "data_wait_s": 0.0, "batches": 0, "samples": None}] * 4
    assert dict(timing_rows(timing_stats(unreadable)))["throughput"] == (
        "10.00 steps/s (batch size could not be read: no tensor with a batch dimension in the batches)"
    )
    assert dict(timing_rows(timing_stats(no_loader)))["throughput"] == "10.00 steps/s (batch size unknown: no DataLoader batches)"


def test_a_speedup_above_the_ceiling_does_not_claim_it_was_possible():
    """H100: a ResNet-50 loader fix gave 5.35x where the idle-time estimate said 4.33x (the fix also removed the
    syncs of pageable copies); "5.35x of a possible 4.33x" contradicted itself."""
    c = cmp.compare([steps(0.1, seed=i) for i in range(3)], [steps(0.02, seed=5 + i) for i in range(3)])
    c.ceiling = 4.33
    assert "of a possible" not in c.summary
    assert "above the 4.33x estimated from the idle time the fixes address" in c.summary
    c.ceiling = 8.0
    assert f"({c.effect:.2f}x of a possible 8.00x)" in c.summary


def test_kernel_busy_falling_because_kernels_got_faster_is_not_worse():
    """H100, nanoGPT-style model with TF32 + fused AdamW: 2.17x faster, kernel busy 84.5 % -> 55.7 %."""
    a = [steps(0.0435, seed=i) for i in range(2)]
    b = [steps(0.0193, seed=5 + i) for i in range(2)]
    a_attr = [{"kernel_busy_pct": 84.5, "profiled_step_ms_median": 43.5}]
    b_attr = [{"kernel_busy_pct": 55.7, "profiled_step_ms_median": 19.3}]
    busy = next(m for m in cmp.compare(a, b, a_attr, b_attr).mechanisms if m.name == "kernel busy")
    assert not busy.worse and not busy.improved
    assert busy.note == "lower: kernels 36.8 -> 10.8 ms per step"
    # the same drop with kernels no faster (the GPU now waits on something) is worse
    b_attr = [{"kernel_busy_pct": 55.7, "profiled_step_ms_median": 66.0}]
    busy = next(m for m in cmp.compare(a, b, a_attr, b_attr).mechanisms if m.name == "kernel busy")
    assert busy.worse and busy.note is None
