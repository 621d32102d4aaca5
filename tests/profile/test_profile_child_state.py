"""The bootstrap's step state machine in-process, with a fake clock and a fake CUDA (the GPU path runs here too)."""

import types

import pytest

from gpulint.profile import _child


class Stop(BaseException):  # like os._exit, nothing in the bootstrap may catch it
    pass


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


class FakeEvent:
    clock = None

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.t = None

    def record(self):
        self.t = FakeEvent.clock.t

    def elapsed_time(self, other):
        return (other.t - self.t) * 1000.0  # ms, like torch.cuda.Event


def fake_torch(cuda_used):
    calls = {"synchronize": 0, "reset_peak": 0}

    def sync():
        calls["synchronize"] += 1

    def reset():
        calls["reset_peak"] += 1

    cuda = types.SimpleNamespace(
        is_available=lambda: cuda_used,
        is_initialized=lambda: cuda_used,
        synchronize=sync,
        reset_peak_memory_stats=reset,
        max_memory_allocated=lambda dev: 1 << 30,
        max_memory_reserved=lambda dev: 2 << 30,
        current_device=lambda: 0,
        get_device_properties=lambda dev: types.SimpleNamespace(total_memory=80 << 30, name="Fake H100", uuid="GPU-1"),
        Event=FakeEvent,
    )
    torch = types.SimpleNamespace(cuda=cuda, version=types.SimpleNamespace(cuda="12.4"), __version__="2.13.0")
    return torch, calls


@pytest.fixture
def harness(monkeypatch):
    clock = Clock()
    FakeEvent.clock = clock
    monkeypatch.setattr(_child.time, "perf_counter", clock)
    written = {}

    def write(path, data):
        written["result"] = data

    def leave(code):
        written["code"] = code
        raise Stop()

    monkeypatch.setattr(_child, "_write_json_atomic", write)
    monkeypatch.setattr(_child, "_flush_and_exit", leave)
    return clock, written


def recorder(torch, warmup=3, steps=5):
    cfg = {"warmup": warmup, "steps": steps, "attribution_steps": 0, "result_path": "unused"}
    return _child.Recorder(cfg, torch)


def drive_optimizer(rec, clock, durations, fetch_s=0.0, samples=32):
    """One fetch then one optimizer step per duration; returns when the recorder finishes."""
    with pytest.raises(Stop):
        for d in durations:
            start = clock.t
            clock.t += fetch_s
            rec.on_batch(start, clock.t, samples)
            clock.t += d - fetch_s
            rec.on_optimizer_step(None)
        raise AssertionError("the recorder never finished")


def test_cuda_window_uses_events_and_two_syncs(harness):
    clock, written = harness
    torch, calls = fake_torch(cuda_used=True)
    rec = recorder(torch, warmup=3, steps=5)
    drive_optimizer(rec, clock, [0.1] * 20, fetch_s=0.02)
    result = written["result"]
    assert result["status"] == "ok" and written["code"] == 0
    assert calls["synchronize"] == 2  # window start and end, never per step
    assert calls["reset_peak"] == 1
    steps = result["window"]["steps"]
    assert len(steps) == 5
    for s in steps:
        assert s["wall_s"] == pytest.approx(0.1)
        assert s["gpu_s"] == pytest.approx(0.1)
        assert s["data_wait_s"] == pytest.approx(0.02)
        assert s["samples"] == 32 and s["batches"] == 1
    assert result["window"]["cuda"] == {"peak_memory_allocated": 1 << 30, "peak_memory_reserved": 2 << 30, "total_memory": 80 << 30}
    assert result["cuda"]["used"] and result["cuda"]["device_name"] == "Fake H100"
    assert result["warmup_steps"] == 3


def test_cpu_window_has_no_gpu_times(harness):
    clock, written = harness
    torch, calls = fake_torch(cuda_used=False)
    drive_optimizer(recorder(torch), clock, [0.05] * 20)
    assert calls["synchronize"] == 0
    assert all("gpu_s" not in s for s in written["result"]["window"]["steps"])
    assert "cuda" not in written["result"]["window"]


def test_warmup_extends_until_step_times_settle(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    # 5 warm-up steps asked; the first 8 alternate 0.05 / 0.2 s (not settled), then steady 0.1 s.
    durations = [0.05, 0.2] * 4 + [0.1] * 30
    drive_optimizer(recorder(torch, warmup=5, steps=4), clock, durations)
    result = written["result"]
    assert result["warmup_steps"] > 5
    assert all(s["wall_s"] == pytest.approx(0.1) for s in result["window"]["steps"])


def test_warmup_is_capped_when_steps_never_settle(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    drive_optimizer(recorder(torch, warmup=5, steps=4), clock, [0.05, 0.2] * 40)
    assert written["result"]["warmup_steps"] == 10  # warm-up + min(max(warm-up, 5), 20)


def test_dataloader_steps_until_an_optimizer_appears(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = recorder(torch, warmup=2, steps=3)
    for _ in range(2):  # e.g. a sanity pass over a few batches before training
        rec.on_batch(clock.t, clock.t + 0.01, 8)
        clock.t += 0.05
    assert rec.mode == "dataloader" and rec.completed() == 1
    drive_optimizer(rec, clock, [0.1] * 10, fetch_s=0.01, samples=8)
    result = written["result"]
    assert result["steps_counted_by"] == "optimizer"
    assert all(s["samples"] == 8 for s in result["window"]["steps"])


def test_gradient_accumulation_counts_every_batch_of_a_step(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = recorder(torch, warmup=1, steps=3)
    with pytest.raises(Stop):
        for _ in range(10):
            for _ in range(4):  # 4 micro-batches per optimizer step
                rec.on_batch(clock.t, clock.t + 0.01, 16)
                clock.t += 0.02
            rec.on_optimizer_step(None)
    steps = written["result"]["window"]["steps"]
    assert all(s["batches"] == 4 and s["samples"] == 64 for s in steps)
    assert all(s["data_wait_s"] == pytest.approx(0.04) for s in steps)


def test_batch_size_from_nested_batches():
    torch = pytest.importorskip("torch")
    assert _child._batch_size((torch.zeros(7, 3), torch.zeros(7)), torch) == 7
    assert _child._batch_size({"input_ids": torch.zeros(5, 9, dtype=torch.long)}, torch) == 5
    assert _child._batch_size([["text"], {"x": torch.zeros(3)}], torch) == 3
    assert _child._batch_size(torch.tensor(1.0), torch) is None
    assert _child._batch_size(["no tensors"], torch) is None


def test_window_restarts_once_after_an_epoch_boundary(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = recorder(torch, warmup=2, steps=6)
    with pytest.raises(Stop):
        for i in range(40):
            if i in (3, 7):  # a new DataLoader iterator (next epoch) while measuring, twice
                assert rec.phase == "measure"
                rec._on_epoch_boundary()
            clock.t += 0.1
            rec.on_optimizer_step(None)
    result = written["result"]
    assert result["window_restarts"] == 1
    assert result["epoch_boundary_in_window"] is True  # the second boundary fell inside the new window
    assert result["warmup_steps"] == 5  # 3 steps done + 2 re-warm-up steps after the first boundary


def test_crash_after_the_window_keeps_the_numbers_but_not_the_exit_status(harness):
    """A crash in the attribution pass: the timing window stands (status ok), but the failure is recorded and
    the bootstrap exits non-zero, so `fix --verify` can refuse a fix that breaks the script."""
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = _child.Recorder({"warmup": 2, "steps": 3, "attribution_steps": 4, "result_path": "unused"}, torch)
    rec._start_attribution = lambda: setattr(rec, "phase", "attribute")  # no real profiler in this test
    for _ in range(5):  # 2 warm-up + 3 measured: the window is complete
        clock.t += 0.1
        rec.on_optimizer_step(None)
    assert rec.phase == "attribute" and rec.window_result is not None
    with pytest.raises(Stop):
        rec.finish("error", exit_code=1, exception="ValueError: boom", traceback="Traceback ...\nValueError: boom")
    result = written["result"]
    assert result["status"] == "ok" and result["script_status"] == "error"
    assert result["exception"] == "ValueError: boom"
    assert written["code"] == 1
    assert len(result["window"]["steps"]) == 3


def test_clean_end_after_the_window_exits_zero(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = _child.Recorder({"warmup": 2, "steps": 3, "attribution_steps": 4, "result_path": "unused"}, torch)
    rec._start_attribution = lambda: setattr(rec, "phase", "attribute")
    for _ in range(5):  # 2 warm-up + 3 measured: the window is complete
        clock.t += 0.1
        rec.on_optimizer_step(None)
    with pytest.raises(Stop):
        rec.finish("ended")
    assert written["result"]["status"] == "ok" and written["result"]["script_status"] == "ended"
    assert "exception" not in written["result"]
    assert written["code"] == 0


def test_a_warmup_below_five_is_taken_as_asked(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    drive_optimizer(recorder(torch, warmup=3, steps=4), clock, [0.05, 0.2] * 20)  # never settles
    assert written["result"]["warmup_steps"] == 3


def slow_syncs(torch, clock, *drains):
    """cuda.synchronize() that takes `drains[i]` seconds on its i-th call (queued GPU work draining)."""
    pending = list(drains)

    def sync():
        clock.t += pending.pop(0) if pending else 0.0

    torch.cuda.synchronize = sync


def test_warmup_backlog_drained_at_window_start_is_not_the_first_steps_time(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=True)
    slow_syncs(torch, clock, 0.5, 0.0)  # 0.5 s of warm-up work still queued when the window opens
    drive_optimizer(recorder(torch, warmup=3, steps=5), clock, [0.1] * 20, fetch_s=0.02)
    steps = written["result"]["window"]["steps"]
    assert [round(s["wall_s"], 6) for s in steps] == [0.1] * 5
    assert all(s["data_wait_s"] == pytest.approx(0.02) and s["batches"] == 1 for s in steps)


def test_warmup_backlog_in_dataloader_mode_keeps_the_first_batch(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=True)
    slow_syncs(torch, clock, 0.5, 0.0)
    rec = recorder(torch, warmup=2, steps=4)
    with pytest.raises(Stop):
        for _ in range(20):
            rec.on_batch(clock.t, clock.t + 0.01, 8)
            clock.t += 0.1
    steps = written["result"]["window"]["steps"]
    assert [round(s["wall_s"], 6) for s in steps] == [0.1] * 4
    assert all(s["batches"] == 1 and s["samples"] == 8 for s in steps)
    assert all(s["data_wait_s"] == pytest.approx(0.01) for s in steps)


def test_end_sync_without_optimizer_keeps_the_next_batch_out_of_the_last_step(harness):
    """No optimizer on CUDA: the window ends at the fetch that starts step N+1; the 0.3 s drain at the end
    belongs to the last step's wall time, but that fetch must not be counted as one of its batches."""
    clock, written = harness
    torch, _ = fake_torch(cuda_used=True)
    slow_syncs(torch, clock, 0.0, 0.3)
    rec = recorder(torch, warmup=2, steps=4)
    with pytest.raises(Stop):
        for _ in range(20):
            rec.on_batch(clock.t, clock.t + 0.01, 8)
            clock.t += 0.1
    steps = written["result"]["window"]["steps"]
    assert [s["batches"] for s in steps] == [1, 1, 1, 1]
    assert [s["samples"] for s in steps] == [8, 8, 8, 8]
    assert steps[-1]["wall_s"] == pytest.approx(0.1 + 0.3)
    assert written["result"]["window"]["sync_wait_s"] == pytest.approx(0.3)


def test_sync_sites_are_the_users_lines_most_frequent_first(tmp_path):
    """On a GPU run the attribution pass turns torch.cuda.set_sync_debug_mode("warn") on and records the user's
    file:line of every synchronizing op (the first frame outside torch), top sites first in the report."""
    import warnings

    from gpulint.profile.report import sync_site_rows

    modes = []
    torch, _ = fake_torch(cuda_used=True)
    torch.cuda.set_sync_debug_mode = modes.append
    (tmp_path / "torch").mkdir()
    torch.__file__ = str(tmp_path / "torch" / "__init__.py")
    rec = recorder(torch)
    rec._start_sync_sites()

    def item():  # stands in for the C++ warning raised inside .item()
        warnings.warn("called a synchronizing CUDA operation", UserWarning)

    for _ in range(3):
        item()
    rec.prof_steps = 3  # three attribution steps ran while the sites were counted
    rec._stop_sync_sites()
    assert modes == ["warn", 0]
    assert rec.sync_site_steps == 3  # the denominator of "per step": the steps the sites were counted in
    inside = f"{__file__}:{item.__code__.co_firstlineno + 1}"
    assert rec.sync_sites == {inside: 3}  # the first frame outside torch/warnings: here the helper's line
    assert sync_site_rows({"sync_sites": {"train.py:12": 8, "train.py:40": 2}}, steps=2) == [
        ("sync at train.py:12", "4.0 per step"),
        ("sync at train.py:40", "1.0 per step"),
    ]


class Opt:  # stands in for an optimizer: only its identity matters to the recorder
    pass


def test_a_second_optimizer_in_the_same_iteration_is_not_a_step(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = recorder(torch, warmup=2, steps=4)
    d, g = Opt(), Opt()
    with pytest.raises(Stop):
        for _ in range(20):
            rec.on_batch(clock.t, clock.t + 0.01, 16)
            clock.t += 0.03
            rec.on_optimizer_step(d)
            clock.t += 0.07
            rec.on_optimizer_step(g)
    steps = written["result"]["window"]["steps"]
    assert [round(s["wall_s"], 6) for s in steps] == [0.1] * 4  # one iteration, not half of one
    assert all(s["batches"] == 1 and s["samples"] == 16 for s in steps)
    assert [o["name"] for o in written["result"]["optimizers"]] == ["Opt", "Opt"]


def test_an_optimizer_stepping_alone_repeatedly_takes_over(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = recorder(torch, warmup=2, steps=3)
    pre, main = Opt(), Opt()
    rec.on_optimizer_step(pre)  # e.g. a short pre-training phase with its own optimizer
    with pytest.raises(Stop):
        for _ in range(20):
            clock.t += 0.1
            rec.on_optimizer_step(main)
    assert written["result"]["lead_optimizer_switches"] == 1
    assert len(written["result"]["window"]["steps"]) == 3


def test_batches_fetched_without_gradients_mark_an_evaluation_step_that_is_left_out(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = recorder(torch, warmup=2, steps=4)
    with pytest.raises(Stop):
        for i in range(20):
            rec.on_batch(clock.t, clock.t + 0.01, 16)
            clock.t += 0.1
            if i == 4:  # an evaluation of 30 batches inside this step
                for _ in range(30):
                    rec.on_batch(clock.t, clock.t + 0.01, 64, grad_enabled=False)
                    clock.t += 0.02
            rec.on_optimizer_step(None)
    window = written["result"]["window"]
    assert [(round(s["wall_s"], 6), s["batches"], s["samples"]) for s in window["steps"]] == [(0.1, 1, 16)] * 4
    assert [e["batches_without_grad"] for e in window["excluded_steps"]] == [30]
    assert written["result"]["eval_batches"] == 30


def test_a_loop_that_always_fetches_without_gradients_is_not_all_evaluation(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = recorder(torch, warmup=2, steps=3)
    with pytest.raises(Stop):
        for _ in range(40):
            rec.on_batch(clock.t, clock.t + 0.01, 16, grad_enabled=False)
            clock.t += 0.1
            rec.on_optimizer_step(None)
    assert written["result"]["eval_detection"] is False
    assert len(written["result"]["window"]["steps"]) == 3


def test_marked_steps_override_optimizer_steps(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = recorder(torch, warmup=2, steps=3)
    with pytest.raises(Stop):
        for _ in range(20):
            for _ in range(3):  # three optimizer steps per marked step: the marks decide
                clock.t += 0.01
                rec.on_optimizer_step(None)
            clock.t += 0.07
            rec.on_marker()
    assert written["result"]["steps_counted_by"] == "marker"
    assert [round(s["wall_s"], 6) for s in written["result"]["window"]["steps"]] == [0.1] * 3


def test_backward_calls_without_any_step_stop_the_run_early(harness):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    rec = recorder(torch, warmup=2, steps=4)
    loss = types.SimpleNamespace(numel=lambda: 2)
    with pytest.raises(Stop):
        for _ in range(1000):
            rec.on_backward(loss)
    assert written["result"]["status"] == "no-steps" and written["result"]["no_step_reason"] == "backward"
    assert written["result"]["backward_calls_before_first_step"] == _child.NO_STEP_BACKWARDS_MIN


def test_the_first_process_to_step_measures_and_the_others_stand_aside(harness, tmp_path):
    clock, written = harness
    torch, _ = fake_torch(cuda_used=False)
    cfg = {"warmup": 2, "steps": 3, "attribution_steps": 0, "result_path": "unused", "claim_dir": str(tmp_path)}
    parent = _child.Recorder(cfg, torch)
    child = _child.Recorder(cfg, torch, role="child")
    parent.on_batch(clock.t, clock.t + 0.01, 8)  # the parent peeks at a batch first (dataloader claim)
    child.on_optimizer_step(Opt())  # a child trains: it takes the measurement
    parent.on_optimizer_step(Opt())
    assert parent.passive and not child.passive
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claim.dataloader", "claim.step", f"stepped.{child.pid}"]
    late = _child.Recorder(cfg, torch)
    late.on_batch(clock.t, clock.t + 0.01, 8)  # e.g. the parent's evaluation after training: not measured
    assert late.mode is None and late.batches == 0
