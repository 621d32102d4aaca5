"""GPU201 tensor-created-then-moved: `torch.zeros(...).cuda()` fills on the CPU, then copies to the GPU."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.factory_bytes import costly_bytes, described_bytes, known_small
from gpulint.analysis.later_moves import moved_later
from gpulint.analysis.residency import CPU, RANDOM_FACTORIES, TRAIN
from gpulint.analysis.step_code import FORWARD, forward_when, per_step
from gpulint.analysis.tensor_size import makes_empty_tensor
from gpulint.checks.base import Option, Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import device_argument, replace_node, with_keyword_argument, with_keyword_value

_BLOCKING_MOVE_KEYWORDS = frozenset({"copy", "memory_format"})
# Factories that carry data: built on the CPU and copied whether or not `device=` is given.
_DATA_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy"})


class TensorCreatedThenMoved(Rule):
    code = "GPU201"
    name = "tensor-created-then-moved"
    summary = "A tensor is filled on the CPU and copied to the GPU every step (`torch.zeros(...).cuda()` in a loop)"
    fix_applicability = Applicability.SAFE
    fix_sometimes_unsafe = True
    requires = (r"\.(cuda|to)\(",)
    # `to_gpu(torch.zeros(n))` with a project helper that moves its argument; `return torch.randint(...)` in a
    # method whose result a step loop of another module moves
    project_tags = ("helper-moves", "returns-moved")
    options = (
        Option("unproven-cost", False, "Also report factories whose size the code does not show (no evidence of their cost)."),
    )

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        residency = model.residency
        for call in model.calls:
            move = residency.move(call)
            if move is None or move[0] == CPU:
                continue
            built = call.func.value  # the factory call, or a dtype conversion of it (`torch.arange(n).long()`)
            factory = residency.converted_factory(built)
            if factory is None:
                continue
            short = residency.factory(factory)
            if short is None or short in _DATA_FACTORIES or (short == "normal" and not _normal_with_size(factory)):
                continue  # `torch.tensor(data, device=d)` builds on the CPU and copies just the same
            if any(a.star for a in factory.args) or makes_empty_tensor(factory, short):
                continue  # (an empty start value, grown later by `torch.cat`: the move copies nothing)
            if short.endswith("_like") and not residency.fills_on_host(factory):
                continue  # `torch.randn_like(x)` draws on x's device: on the GPU, or unknown, the move may copy nothing
            if known_small(model, factory, short):
                continue  # `torch.ones(BATCH_SIZE, 1).cuda()`: a few KB, a copy of tens of µs (analysis/factory_bytes.py)
            size = costly_bytes(model, factory, short)
            if size is None and not self.settings["unproven-cost"]:
                continue  # a size out of sight is no evidence of a cost (judged noise wherever read)
            loop, role = per_step(model, call)
            if role is None:
                continue  # one-time set-up: a copy before training costs nothing per step
            if role == FORWARD:
                when = forward_when(model, loop)
            else:
                when = self.every_step(role, loop)
            name = model.code(factory.func)
            message = f"`{name}(...)` fills {_sized(size)}on the CPU, then `.{call.func.attr.value}()` copies it to the GPU {when}"
            help = _cost(size) + "Create it there with `device=`"
            if short in RANDOM_FACTORIES:
                help += " (the CUDA generator draws different numbers)"
            yield self.diagnostic(call, message, severity=Severity.WARNING if role == TRAIN else Severity.INFO, fix=self._fix(call, factory, move, short, built), help=help)
        yield from self._moved_later()

    def _moved_later(self) -> Iterator[Diagnostic]:
        """`z = torch.randn(n)` then `z = Variable(z).cuda()`, or `to_gpu(torch.zeros(n))` with a project helper
        that moves its argument: reported at the factory, without a fix (the move may sit under `if cuda:`)."""
        model = self.model
        residency = model.residency
        for factory in model.calls:
            short = residency.factory(factory)
            if short is None or short in _DATA_FACTORIES or (short == "normal" and not _normal_with_size(factory)):
                continue
            if any(a.star or (a.keyword is not None and a.keyword.value in ("device", "out")) for a in factory.args):
                continue
            if makes_empty_tensor(factory, short):
                continue
            if short.endswith("_like") and not residency.fills_on_host(factory):
                continue  # built on its argument's device, not known to be the CPU
            if known_small(model, factory, short):
                continue
            size = costly_bytes(model, factory, short)
            if size is None and not self.settings["unproven-cost"]:
                continue
            later = moved_later(model, factory, lambda move: per_step(model, move)[1] is not None)
            if later is None:
                continue
            loop, role = per_step(model, later.call if later.returned_by is not None else factory)
            if role is None or per_step(model, later.call)[1] is None:
                continue  # (a helper's return runs as often as the caller that moves it)
            if role == FORWARD:
                when = forward_when(model, loop)
            else:
                when = self.every_step(role, loop)
            message = f"`{model.code(factory.func)}(...)` fills {_sized(size)}on the CPU, then {later.what} copies it to the GPU {when}"
            if later.where:
                message += f" (the move at {later.where})"
            help = _cost(size) + "Create it on the device with `device=`"
            if short in RANDOM_FACTORIES:
                help += " (the CUDA generator draws different numbers)"
            yield self.diagnostic(factory, message, severity=Severity.WARNING if role == TRAIN else Severity.INFO, help=help)

    def _fix(self, call: cst.Call, factory: cst.Call, move, short: str, built: cst.BaseExpression):
        model = self.model
        if any(a.keyword is not None and a.keyword.value in _BLOCKING_MOVE_KEYWORDS for a in call.args):
            return None
        if built is not factory and move[2] is not None:
            return None  # `torch.arange(n).long().to(device, torch.float)`: two conversions to keep in order
        if any(a.keyword is not None and a.keyword.value in ("out", "device") for a in factory.args):
            return None
        _, device, dtype = move
        new = factory
        if dtype is not None:
            existing = next((a for a in new.args if a.keyword is not None and a.keyword.value == "dtype"), None)
            new = with_keyword_value(new, existing, dtype) if existing is not None else with_keyword_argument(new, "dtype", dtype)
        new = with_keyword_argument(new, "device", device_argument(device))
        requires_grad = next((a for a in factory.args if a.keyword is not None and a.keyword.value == "requires_grad"), None)
        grad_leaf_changes = requires_grad is not None and model.code(requires_grad.value) != "False"
        unsafe = short in RANDOM_FACTORIES or grad_leaf_changes
        if unsafe:
            why = "different random numbers" if short in RANDOM_FACTORIES else "a leaf tensor where there was none"
            message = f"Create the tensor on the device (unsafe: {why})"
        else:
            message = "Create the tensor on the device"
        if built is not factory:
            new = built.deep_replace(factory, new)  # `torch.arange(n, device=d).long()`: the conversion stays
        return self.fix(message, [replace_node(model, call, new)], Applicability.UNSAFE if unsafe else Applicability.SAFE)


def _sized(size) -> str:
    return f"{described_bytes(size)} " if size is not None else ""


def _cost(size) -> str:
    """The evidence, in the help: what a pageable copy of that size measured (bench/results/cost_facts.md)."""
    if size is None:
        return ""
    return (
        f"A fill of {described_bytes(size)} and its blocking pageable copy (8-14 GB/s; a 1.5 MB copy measured +5-20 % "
        "on 3 ms steps) cost the step a measurable share. "
    )


def _normal_with_size(call: cst.Call) -> bool:
    """`torch.normal(mean, std, size)`: the only overload that takes `device=`."""
    return any(a.keyword is not None and a.keyword.value == "size" for a in call.args) or len(
        [a for a in call.args if a.keyword is None]
    ) >= 3
