"""GPU405 eval-without-no-grad: an evaluation loop records the autograd graph it never uses."""

from __future__ import annotations

from typing import Iterator

from gpulint.analysis.few_samples import every_few_steps, few_samples_per_epoch
from gpulint.checks.base import Rule
from gpulint.diagnostics import Diagnostic, Severity

NO_GRAD_SINCE = (0, 4)  # torch.no_grad arrived in 0.4; before it `Variable(x, volatile=True)` switched autograd off


class EvalWithoutNoGrad(Rule):
    code = "GPU405"
    name = "eval-without-no-grad"
    summary = "Model run in an evaluation loop with autograd on (no `torch.no_grad()` / `torch.inference_mode()`)"
    requires = (r"\.eval\(",)
    default_severity = Severity.INFO

    def check(self) -> Iterator[Diagnostic]:
        if self.pinned_below(NO_GRAD_SINCE):
            return  # the project's torch has no `no_grad`: its evaluation switches autograd off per Variable
        model = self.model
        for found in model.eval_forwards:
            loops = model.enclosing_loops(found.forward)
            if model.model_size.launch_bound_model(found.eval_call.func.value, loops[0] if loops else None):
                continue  # a small model (a LeNet, a toy RNN) or a forward of little work: its graph costs next to nothing
            if few_samples_per_epoch(model, found.loop):
                continue  # `for _ in range(5): generate()` beside an epoch of training steps: a few graphs an epoch
            anchor = found.caller if found.caller is not None else found.called if found.called is not None else found.loop
            if every_few_steps(model, anchor) is not None:
                continue  # `if step % EVAL_EVERY == 0:` in the training loop: a few evaluations a run
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
            yield self.diagnostic(found.forward, message, help=help)
