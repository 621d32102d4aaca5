"""Lightning loader hooks the run never calls: a `test_dataloader` / `predict_dataloader` of a module that runs its
own Trainer (`trainer.fit(model, datamodule=dm)`) and never calls `.test(...)` / `.predict(...)` (optuna's Lightning
examples: the objective only fits). `fit` reads `train_dataloader` and `val_dataloader` only; the test hook's
`DataLoader(...)` is never built as the code ships, so no batch of it loads in the training process.

`hook_never_run(model, info)`: every use of the loader is such a hook's `return` (no loop, no other framework, no
loop of another module takes it), the module calls `.fit(...)` itself, calls no `.test(...)` / `.predict(...)`
(the hook's runner) anywhere, and no other module of the project imports it (one that does may run the test).
A module with a `trainer.test(...)` call, a library module (no fit of its own), and train/val hooks keep the finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.loader_flow import LoaderInfo
    from gpulint.analysis.model import SemanticModel


def hook_never_run(model: SemanticModel, info: LoaderInfo) -> bool:
    flow = model.loader_flow
    if info.iterations or not info.feeds or flow.consumed_elsewhere(info) or model.project.imported:
        return False
    once = model.frameworks.once_read_hooks
    for feed in info.feeds:
        hook = feed.node
        if not (isinstance(hook, cst.FunctionDef) and hook in once and not feed.per_epoch):
            return False
        if any(True for _ in model.method_calls(_runner(hook))):
            return False  # `trainer.test(...)` runs it
    return any(True for _ in model.method_calls("fit"))


def _runner(hook: cst.FunctionDef) -> str:
    """The Trainer method that runs a loader hook: `test_dataloader` -> `test`, `predict_dataloader` -> `predict`."""
    return hook.name.value.split("_")[0]
