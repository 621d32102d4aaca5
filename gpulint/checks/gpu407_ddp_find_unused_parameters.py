"""GPU407 ddp-find-unused-parameters: DDP searches the autograd graph for unused parameters every step."""

from __future__ import annotations

from typing import Iterator

from gpulint.analysis.parallel import ddp_calls
from gpulint.analysis.partial_submodules import trains_part_of_a_submodule
from gpulint.analysis.varying_steps import varying_step_branch
from gpulint.checks.base import Rule
from gpulint.diagnostics import Diagnostic


class DdpFindUnusedParameters(Rule):
    code = "GPU407"
    name = "ddp-find-unused-parameters"
    summary = "`DistributedDataParallel(find_unused_parameters=True)`: an autograd-graph traversal every step"
    requires = (r"find_unused_parameters",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        settings = []
        for call in ddp_calls(model):
            value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "find_unused_parameters"), None)
            resolved = model.values.resolve(value) if value is not None else None
            if resolved is not None and resolved.value is True:
                where = resolved.describe(model)
                settings.append((value, "`DistributedDataParallel(find_unused_parameters=True)`" + (f" ({where})" if where else "")))
        settings.extend(model.frameworks.unused_parameter_searches)
        if settings and varying_step_branch(model) is not None:
            return  # a module or loss joins only some steps: the unused parameters change, DDP must search for them
        if settings and trains_part_of_a_submodule(model):
            return  # `self.backbone.encode(x)` only: the rest of the backbone (a ViT's head) never gets a gradient
        for node, what in settings:
            message = f"{what} makes DDP walk the autograd graph after every forward pass"
            help = (
                "It looks for parameters that get no gradient, extra CPU work each step while the GPU waits; remove it "
                "unless the model really skips parameters (DDP then names them in its error), or use "
                "`static_graph=True` when the same ones are skipped every step"
            )
            yield self.diagnostic(node, message, help=help)
