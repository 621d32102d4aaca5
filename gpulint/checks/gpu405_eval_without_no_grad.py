"""GPU405 eval-without-no-grad: an evaluation loop records the autograd graph it never uses."""

from __future__ import annotations

from typing import Iterator

from gpulint.analysis.eval_cost import UNPROVEN_HELP, shown_cost
from gpulint.analysis.eval_share import how_often, sliver
from gpulint.checks.base import Option, Rule
from gpulint.diagnostics import Diagnostic, Severity

NO_GRAD_SINCE = (0, 4)  # torch.no_grad arrived in 0.4; before it `Variable(x, volatile=True)` switched autograd off


class EvalWithoutNoGrad(Rule):
    code = "GPU405"
    name = "eval-without-no-grad"
    summary = "Model run in an evaluation loop with autograd on (no `torch.no_grad()` / `torch.inference_mode()`)"
    requires = (r"\.eval\(",)
    project_tags = ("handed-in-eval",)  # `evaluate(model, ...)` of this module, called after `model.eval()` elsewhere
    default_severity = Severity.INFO
    options = (
        Option(
            "unproven-cost", False,
            "Also report evaluations whose cost the code does not show (one sample at a time from a Python list, "
            "a sampling loop over `range(steps)`, with a model of unknown size: microseconds of bookkeeping a forward).",
        ),
    )  # fmt: skip

    def check(self) -> Iterator[Diagnostic]:
        if self.pinned_below(NO_GRAD_SINCE):
            return  # the project's torch has no `no_grad`: its evaluation switches autograd off per Variable
        model = self.model
        for found in model.eval_forwards:
            if sliver(model, found) is not None:
                continue  # a launch-bound model, a few samples, a rate-limited or one-off pass: a sliver of the run
            if found.eval_call is not None and model.residency.is_cpu_module(found.eval_call.func.value):
                continue  # `model = Net().to("cpu")`: the evaluation runs on the CPU, no GPU memory or time to save
            evidence = shown_cost(model, found)
            if evidence is None and not self.settings["unproven-cost"]:
                continue  # no data loader, no batches, no model shown to be large: bookkeeping of a few microseconds
            if found.eval_call is None:
                yield self._handed(found)
                continue
            name = model.code(found.eval_call.func.value)
            if found.caller is not None:
                function = model.enclosing_function(found.forward)
                message = (
                    f"`{name}` runs after `{name}.eval()` with autograd on, on every call of `{function.name.value}` "
                    f"(called in the loop at line {model.line_of(found.caller)})"
                )
            elif found.called is not None:
                function = model.enclosing_function(found.forward)
                message = (
                    f"`{name}` runs in a loop of `{function.name.value}` with autograd on when it is called after "
                    f"`{name}.eval()` (line {model.line_of(found.called)})"
                )
            elif found.through is not None:
                message = f"`{name}` runs in a loop after `{name}.eval()` with autograd on (in `{found.through.name.value}`, called here)"
            else:
                message = f"`{name}` runs in a loop after `{name}.eval()` with autograd on"
            help = (
                "Every forward records a graph and keeps its activations; wrap the loop in `with torch.no_grad():` "
                "(or `torch.inference_mode()`)"
            )
            if found.caller is not None:
                help = "Every call records a graph of the evaluation and keeps its activations; run it under `with torch.no_grad():` (or `torch.inference_mode()`)"
            often = how_often(model, found)
            if often is not None:
                help += f"; it runs {often}"
            if evidence is None:  # shown only because of `unproven-cost = true`: say so, as GPU303 does
                help += f" ({UNPROVEN_HELP})"
            related = [(f"`{name}.eval()`", found.eval_call)]
            if found.caller is None:
                related.append(("the evaluation loop", found.loop))
            yield self.diagnostic(found.forward, message, related=related, help=help)

    def _handed(self, found) -> Diagnostic:
        """A loop of a function that other modules hand a model in eval mode (`analysis/evaluated_params.py`)."""
        model = self.model
        name = found.param.name.value
        function = model.enclosing_function(found.forward)
        shown = next((h for h in found.handed if h[1] and (not h[2] or h[3])), None) or next((h for h in found.handed if not h[4]), found.handed[0])
        message = (
            f"`{name}` runs in a loop of `{function.name.value}` with autograd on: the call at {shown[0]} hands it a "
            f"model in eval mode, outside `torch.no_grad()`"
        )
        help = (
            "Every forward records a graph and keeps its activations; decorate the function with `@torch.no_grad()` "
            "(or wrap the call in `with torch.no_grad():`)"
        )
        often = how_often(model, found)
        if often is not None:
            help += f"; it runs {often}"
        return self.diagnostic(found.forward, message, related=[("the evaluation loop", found.loop)], help=help)
