"""GPU407 ddp-find-unused-parameters: DDP searches the autograd graph for unused parameters every step."""

from __future__ import annotations

from typing import Iterator

from gpulint.analysis.forward_coverage import EVERY, wrapped_coverage
from gpulint.analysis.parallel import ddp_calls
from gpulint.analysis.partial_submodules import trains_part_of_a_submodule
from gpulint.analysis.varying_steps import varying_step_branch
from gpulint.checks.base import Option, Rule
from gpulint.diagnostics import Diagnostic


class DdpFindUnusedParameters(Rule):
    code = "GPU407"
    name = "ddp-find-unused-parameters"
    summary = "`DistributedDataParallel(find_unused_parameters=True)`: an autograd-graph traversal every step"
    requires = (r"find_unused_parameters",)
    options = (
        Option(
            "unproven-models", False,
            "Also report settings whose model gpulint cannot follow (a library model, a submodule the caller hands in, "
            "a framework's trainer): the model may need the search, and the advice could break training.",
        ),
    )  # fmt: skip

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        settings = []
        for call in ddp_calls(model):
            value = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "find_unused_parameters"), None)
            resolved = model.values.resolve(value) if value is not None else None
            if resolved is not None and resolved.value is True:
                where = resolved.describe(model)
                settings.append((value, "`DistributedDataParallel(find_unused_parameters=True)`" + (f" ({where})" if where else ""), wrapped_coverage(model, call)))
        # a framework's trainer: the model it trains is out of sight (unknown)
        settings.extend((node, what, None) for node, what in model.frameworks.unused_parameter_searches)
        if settings and varying_step_branch(model) is not None:
            return  # a module or loss joins only some steps: the unused parameters change, DDP must search for them
        if settings and trains_part_of_a_submodule(model):
            return  # `self.backbone.encode(x)` only: the rest of the backbone (a ViT's head) never gets a gradient
        for node, what, verdict in settings:
            if isinstance(verdict, list):
                continue  # the code shows parameters left out of some steps: DDP needs the search
            if verdict != EVERY and not self.settings["unproven-models"]:
                continue  # the model is out of sight: it may skip parameters, and removing the setting would fail
            message = f"{what} makes DDP walk the autograd graph after every forward pass"
            if verdict == EVERY:
                help = (
                    "It looks for parameters that get no gradient, extra CPU work each step while the GPU waits, and "
                    "the model's forward runs every submodule it builds on every call (analysis/forward_coverage.py): "
                    "remove it"
                )
            else:  # shown only because of `unproven-models = true`
                help = (
                    "It looks for parameters that get no gradient, extra CPU work each step while the GPU waits; "
                    "gpulint cannot see whether the model uses every parameter on every step: remove it unless the "
                    "model really skips parameters (DDP then names them in its error), or use `static_graph=True` "
                    "when the same ones are skipped every step"
                )
            yield self.diagnostic(node, message, help=help)
