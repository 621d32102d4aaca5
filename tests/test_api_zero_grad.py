"""GPU404 zero-grad-keeps-zeros: `zero_grad(set_to_none=False)`; bare `zero_grad()` when targeting torch < 2.0."""

from __future__ import annotations

import textwrap

from gpulint.diagnostics import Severity
from tests.conftest import diagnostics, findings, fixed

GPU404 = {"select": ("GPU404",)}

LOOP = """\
    import torch

    model = torch.nn.Linear(8, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in batches:
        optimizer.zero_grad(set_to_none=False)
        model(x.cuda()).sum().backward()
        optimizer.step()
    """


def test_keyword_false_in_a_training_loop():
    assert findings(LOOP, **GPU404) == ["6:5 GPU404"]
    (diagnostic,) = diagnostics(LOOP, **GPU404)
    assert diagnostic.severity == Severity.WARNING
    assert diagnostic.fix.applicability == "unsafe"


def test_fix_drops_the_argument():
    result = fixed(LOOP, **GPU404)
    assert "\n    optimizer.zero_grad()\n" in result
    assert fixed(result, **GPU404) == result
    assert fixed(LOOP, unsafe=False, **GPU404) == textwrap.dedent(LOOP)  # unsafe: not applied by default


def test_positional_false_on_a_module():
    source = """\
        import torch

        model = torch.nn.Linear(8, 1).cuda()
        model.zero_grad(False)
        """
    assert findings(source, **GPU404) == ["4:1 GPU404"]
    assert "model.zero_grad()\n" in fixed(source, **GPU404)


def test_false_from_argparse_is_reported_without_a_fix():
    source = """\
        import argparse

        import torch

        parser = argparse.ArgumentParser()
        parser.add_argument("--none-grads", default=False)
        args = parser.parse_args()
        model = torch.nn.Linear(8, 1).cuda()
        opt = torch.optim.Adam(model.parameters())
        opt.zero_grad(set_to_none=args.none_grads)
        """
    (diagnostic,) = diagnostics(source, **GPU404)
    assert "argparse default at train.py:6" in diagnostic.message
    assert diagnostic.fix is None


def test_before_torch_2_bare_zero_grad_is_reported_and_fixed_with_true():
    source = """\
        import torch

        optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9)
        optimizer.zero_grad()
        optimizer.zero_grad(set_to_none=False)
        x = torch.zeros(1).cuda()
        """
    assert findings(source, **GPU404) == ["5:1 GPU404"]
    assert findings(source, target_torch=(1, 13), **GPU404) == ["4:1 GPU404", "5:1 GPU404"]
    result = fixed(source, target_torch=(1, 13), **GPU404)
    assert result.count("optimizer.zero_grad(set_to_none=True)") == 2


def test_true_and_unknown_values_are_silent():
    source = """\
        import torch

        optimizer = torch.optim.SGD(params, lr=0.1)
        optimizer.zero_grad(set_to_none=True)
        optimizer.zero_grad(set_to_none=keep)
        model.cuda()
        """
    assert findings(source, **GPU404) == []


def test_manual_gradient_accumulation_is_silent():
    source = """\
        import torch

        model = torch.nn.Linear(8, 1).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        optimizer.zero_grad(set_to_none=False)
        for p, g in zip(model.parameters(), extra_grads):
            p.grad += g
        """
    assert findings(source, **GPU404) == []


def test_gradient_surgery_with_in_place_methods_is_silent():
    source = """\
        import torch

        model.zero_grad(set_to_none=False)
        model.weight.grad.data.mul_(0.5)
        model.cuda()
        """
    assert findings(source, **GPU404) == []


def test_other_libraries_optimizers_are_silent():
    source = """\
        import torch
        from apex.optimizers import FusedAdam

        optimizer = FusedAdam(model.parameters())
        optimizer.zero_grad(False)
        model.cuda()
        """
    assert findings(source, **GPU404) == []


def test_unknown_receivers_are_silent():
    source = """\
        import torch

        tape.zero_grad(False)
        torch.zeros(1).cuda()
        """
    assert findings(source, **GPU404) == []


def test_cuda_graphs_need_the_zeroed_buffers():
    # Captured graphs replay into fixed gradient buffers: `None` gradients would break the replay.
    source = """\
        import torch

        model = torch.nn.Linear(8, 1).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        graph = torch.cuda.CUDAGraph()
        optimizer.zero_grad(set_to_none=False)
        with torch.cuda.graph(graph):
            model(static_input).sum().backward()
            optimizer.step()
        """
    assert findings(source, **GPU404) == []
    compiled = """\
        import torch

        model = torch.compile(torch.nn.Linear(8, 1).cuda(), mode="reduce-overhead")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        optimizer.zero_grad(set_to_none=False)
        """
    assert findings(compiled, **GPU404) == []
