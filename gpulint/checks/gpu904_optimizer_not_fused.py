"""GPU904 optimizer-not-fused (preview): Adam/AdamW on CUDA parameters without the fused implementation."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.optimizers import adam_calls
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import replace_node, with_keyword_argument

# `fused=True` is checked when the optimizer is built before torch 2.4 (CUDA parameters only); since 2.4 it is
# checked when it steps, and CPU parameters are allowed.
_FUSED_CHECKED_AT_STEP = (2, 4)
# `fused=` appeared in torch 1.13 for Adam and in 2.0 for AdamW (pytorch/pytorch#88015).
FUSED_SINCE = {"Adam": (1, 13), "AdamW": (2, 0)}


class OptimizerNotFused(Rule):
    code = "GPU904"
    name = "optimizer-not-fused"
    summary = "Adam/AdamW on CUDA parameters without `fused=True` (or with `foreach=False`)"
    preview = True
    fix_applicability = Applicability.UNSAFE
    requires = (r"Adam",)
    default_severity = Severity.INFO

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        for adam in adam_calls(model):
            if not adam.on_gpu or "fused" in adam.arguments or "differentiable" in adam.arguments:
                continue  # `fused=` given (a choice, or a flag), or `differentiable=True`, which fused does not support
            if self.pinned_below(FUSED_SINCE[adam.name]):
                continue  # the project's torch has no `fused=` for this optimizer
            if adam.few_tensors:
                continue  # a frozen model's new head or adapters: the update is negligible next to the forward
            if model.training_setup.time_steps:
                continue  # each step loops over time steps of small recurrent kernels: the update is a sliver of it
            foreach = adam.arguments.get("foreach")
            resolved = model.values.resolve(foreach.value) if foreach is not None else None
            if foreach is not None and (resolved is None or resolved.value is not False):
                continue  # `foreach=True` chosen on purpose, or a flag
            how = "with `foreach=False` it loops over the parameters in Python, a few kernels each" if foreach else (
                "its default multi-tensor (`foreach`) implementation still launches several kernels per step for "
                "each group of parameters"
            )
            message = f"`{model.code(adam.call.func)}(...)` updates CUDA parameters without `fused=True`"
            help = (
                f"{how[0].upper()}{how[1:]}; `fused=True` runs the whole update (moments, weight decay, step) as fused "
                "kernels over all parameters at once (results differ from the default in the last bits)"
            )
            yield self.diagnostic(adam.call, message, fix=self._fix(adam, foreach), help=help)

    def _fix(self, adam, foreach: cst.Arg | None):
        if adam.by_setting:
            return None  # `fused=True` would also reach the optimizers another `--optim` picks, some without it
        if not adam.on_gpu_when_built and self.oldest_torch < _FUSED_CHECKED_AT_STEP:
            return None  # parameters still on the CPU here: older torch raises in the constructor
        call = adam.call
        if foreach is not None:
            new = call.with_changes(args=[a.with_changes(keyword=cst.Name("fused"), value=cst.Name("True")) if a is foreach else a for a in call.args])
        else:
            new = with_keyword_argument(call, "fused", cst.Name("True"))
        return self.fix("Use the fused implementation (`fused=True`)", [replace_node(self.model, call, new)], Applicability.UNSAFE)
