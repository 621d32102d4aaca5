"""GPU106 pin-then-copy."""

from __future__ import annotations

import textwrap

from gpulint.diagnostics import Applicability, Severity
from tests.conftest import diagnostics, findings, fixed

ONLY = {"select": ("GPU106",)}


def test_pin_then_copy_in_a_training_loop():
    source = """\
        import torch

        for i in range(100):
            x = data[i].pin_memory().to("cuda", non_blocking=True)
            y = labels[i].pin_memory().cuda()
            loss_fn(model(x), y).backward()
            optimizer.step()
    """
    assert findings(source, **ONLY) == ["4:9 GPU106", "5:9 GPU106"]
    [d, _] = diagnostics(source, **ONLY)
    assert d.severity == Severity.WARNING and d.fix.applicability == Applicability.UNSAFE
    assert fixed(source, unsafe=False, **ONLY) == textwrap.dedent(source)
    # No `non_blocking=True` left on what is now pageable memory.
    expected = textwrap.dedent(source).replace('.pin_memory().to("cuda", non_blocking=True)', '.to("cuda")').replace(".pin_memory()", "")
    assert fixed(source, unsafe=True, **ONLY) == expected


def test_in_a_function_called_from_a_loader_loop_under_no_grad_is_info():
    source = """\
        import torch
        from torch.utils.data import DataLoader

        device = torch.device("cuda")

        def to_gpu(t):
            return t.pin_memory().to(device)

        loader = DataLoader(ds, batch_size=64)
        with torch.no_grad():
            for x in loader:
                model(to_gpu(x))
    """
    assert findings(source, **ONLY) == ["7:12 GPU106"]
    [d] = diagnostics(source, **ONLY)
    assert d.severity == Severity.INFO
    assert "return t.to(device)" in fixed(source, **ONLY)


def test_fix_is_idempotent():
    source = """\
        import torch

        while True:
            x = batch().pin_memory().cuda()
            model(x).backward()
    """
    once = fixed(source, **ONLY)
    assert fixed(once, **ONLY) == once and findings(once, **ONLY) == []


# ---- no finding expected ---------------------------------------------------------------------------


def test_outside_hot_loops():
    assert findings("""\
        import torch

        weights = torch.load("w.pt").pin_memory().to("cuda")
        for name in names:
            print(name)
            table[name].pin_memory().cuda()
    """, **ONLY) == []


def test_prefetcher_on_a_side_stream():
    assert findings("""\
        import torch

        stream = torch.cuda.Stream()
        for i in range(100):
            with torch.cuda.stream(stream):
                nxt = data[i + 1].pin_memory().cuda(non_blocking=True)
            model(cur).backward()
            optimizer.step()
    """, **ONLY) == []


def test_prefetcher_entering_the_stream_itself():
    assert findings("""\
        import torch

        stream = torch.cuda.Stream()
        for i in range(100):
            with stream:
                nxt = data[i + 1].pin_memory().cuda(non_blocking=True)
            model(cur).backward()
            optimizer.step()
    """, **ONLY) == []


def test_pin_memory_not_followed_by_a_cuda_copy():
    assert findings("""\
        import torch

        for i in range(100):
            buffers.append(data[i].pin_memory())
            data[i].pin_memory().to(torch.float16)
            model(x).backward()
    """, **ONLY) == []
