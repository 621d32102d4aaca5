"""GPU406 ddp-accumulation-without-no-sync: gradient accumulation that still all-reduces every micro-step."""

from __future__ import annotations

from typing import Iterator

from gpulint.analysis.parallel import unsynced_accumulation
from gpulint.checks.base import Rule
from gpulint.diagnostics import Diagnostic


class DdpAccumulationWithoutNoSync(Rule):
    code = "GPU406"
    name = "ddp-accumulation-without-no-sync"
    summary = "Gradient accumulation with DDP all-reduces every micro-step (no `no_sync()` / `accelerator.accumulate`)"
    requires = (r"backward", r"DistributedDataParallel|accelerate|lightning")

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        for found in unsynced_accumulation(model):
            wrapper = model.code(found.wrapper.func)
            framework = model.frameworks.wrapper(found.wrapper)
            owner = model.code(found.wrapper.func.value) if framework is not None else "model"
            skip = {
                "accelerate": f"run the micro-steps under `with {owner}.accumulate(model):` (with `Accelerator(gradient_accumulation_steps=k)`)",
                "Fabric": f"run the backward of the first k-1 micro-steps under `with {owner}.no_backward_sync(model):`",
            }.get(framework[0] if framework is not None else "", "run the backward of the first k-1 micro-steps under `with model.no_sync():`")
            message = f"`{model.code(found.backward.func)}()` all-reduces gradients every micro-step of an accumulation"
            help = (
                f"The data-parallel model (`{wrapper}(...)` at line {model.line_of(found.wrapper)}) communicates every "
                f"micro-step, but the optimizer steps only every few (`{model.code(found.step.func)}()` at line "
                f"{model.line_of(found.step)}): {skip}, so only the last micro-step communicates"
            )
            yield self.diagnostic(found.backward, message, help=help)
