"""GPU404 zero-grad-keeps-zeros: `zero_grad(set_to_none=False)` writes zeros into every gradient each step."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.gradients import (
    ZeroGradCall,
    is_torch_optimizer_or_module,
    uses_cuda_graphs,
    works_on_gradient_tensors,
    zero_grad_calls,
)
from gpulint.analysis.hot_loops import is_hot
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import replace_node, with_keyword_argument

# `set_to_none` defaults to True since torch 2.0 (pytorch/pytorch#92731); before, a bare call kept zeros.
SET_TO_NONE_DEFAULT_SINCE = (2, 0)
# `zero_grad(set_to_none=...)` itself appeared in torch 1.7 (pytorch/pytorch#42754).
SET_TO_NONE_SINCE = (1, 7)


class ZeroGradKeepsZeros(Rule):
    code = "GPU404"
    name = "zero-grad-keeps-zeros"
    summary = "`zero_grad(set_to_none=False)` fills every gradient with zeros each step"
    fix_applicability = Applicability.UNSAFE
    requires = (r"zero_grad",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        if works_on_gradient_tensors(model) or uses_cuda_graphs(model):
            return  # gradient surgery by hand, or CUDA graphs that replay into fixed gradient buffers
        if self.pinned_below(SET_TO_NONE_SINCE):
            return  # the project's torch has no `set_to_none`: zeros are all it can do
        old_default = self.target_torch < SET_TO_NONE_DEFAULT_SINCE
        for zero_grad in zero_grad_calls(model):
            receiver = zero_grad.call.func.value  # method_calls guarantees an attribute
            if not is_torch_optimizer_or_module(model, receiver):
                continue
            if zero_grad.set_to_none is None:
                if old_default and not zero_grad.call.args:
                    yield self._report(zero_grad, "before torch 2.0, `zero_grad()` keeps zeros (`set_to_none=False`)")
                continue
            resolved = model.values.resolve(zero_grad.set_to_none.value)
            if resolved is None or resolved.value is not False:
                continue
            where = resolved.describe(model)
            yield self._report(zero_grad, f"`zero_grad` uses `set_to_none=False`{f' ({where})' if where else ''}")

    def _severity(self, call: cst.Call) -> Severity:
        loops = self.model.enclosing_loops(call)
        return Severity.WARNING if any(is_hot(self.model, loop) for loop in loops) else Severity.INFO

    def _report(self, zero_grad: ZeroGradCall, what: str) -> Diagnostic:
        help = (
            "Every step writes zeros into each gradient and backward then adds to them; "
            "`None` gradients save that memory pass and the memory between steps"
        )
        return self.diagnostic(zero_grad.call, what, severity=self._severity(zero_grad.call), fix=self._fix(zero_grad), help=help)

    def _fix(self, zero_grad: ZeroGradCall):
        call, arg = zero_grad.call, zero_grad.set_to_none
        if arg is not None and not (isinstance(arg.value, cst.Name) and arg.value.value == "False"):
            return None  # the False comes from elsewhere (a flag, a constant): the user decides there
        if self.oldest_torch < SET_TO_NONE_SINCE:
            return None  # `target-torch` below 1.7: the argument does not exist there
        if self.oldest_torch < SET_TO_NONE_DEFAULT_SINCE:
            # The default still keeps zeros there: say `set_to_none=True` explicitly.
            if arg is None:
                new = with_keyword_argument(call, "set_to_none", cst.Name("True"))
            else:
                new = call.with_changes(args=[a.with_changes(value=cst.Name("True")) if a is arg else a for a in call.args])
            return self.fix("Pass `set_to_none=True`", [replace_node(self.model, call, new)], Applicability.UNSAFE)
        if len(call.args) != 1:
            return None
        new = call.with_changes(args=[])
        message = "Drop the argument (`set_to_none=True` is the default)"
        return self.fix(message, [replace_node(self.model, call, new)], Applicability.UNSAFE)
