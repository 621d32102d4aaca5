"""Loops over a loader that every caller hands in already placed by a framework.

    def train(fabric, state, train_dataloader):       # main: train(fabric, state, fabric.setup_dataloaders(dl))
        for train_data in train_dataloader:            # each batch is on Fabric's device: the loop's values are GPU values
            loss = loss_func(model(train_data), ...)

`placed_by_callers(model, loop)` answers whether `loop` iterates (through `enumerate` / `tqdm` / `iter`) a parameter
that every caller of its function gives a loader of `fabric.setup_dataloaders` / `accelerator.prepare_data_loader`
(the summaries' `PLACED_LOADER`, `summary.py`), and no caller gives anything else.
"""

from __future__ import annotations

import libcst as cst

from gpulint.analysis.model import SemanticModel
from gpulint.analysis.summary import PLACED_LOADER

_WRAPPERS = ("enumerate", "tqdm", "iter", "trange")


def placed_by_callers(model: SemanticModel, loop: cst.For) -> bool:
    expr = loop.iter
    while isinstance(expr, cst.Call) and expr.args and isinstance(expr.func, (cst.Name, cst.Attribute)):
        if (model.qualified_name(expr.func) or model.code(expr.func)).rsplit(".", 1)[-1] not in _WRAPPERS:
            return False
        expr = expr.args[0].value
    if not isinstance(expr, cst.Name):
        return False
    binders = model.bindings_of(expr.value, expr)
    if len(binders) != 1 or not isinstance(binders[0], cst.Param):
        return False  # rebound in the function: the caller's loader is not what the loop iterates
    func = model.enclosing_function(binders[0])
    if func is None:
        return False
    owner = model.parent.get(model.parent.get(func))
    key = f"{owner.name.value}.{func.name.value}" if isinstance(owner, cst.ClassDef) else func.name.value
    return set(model.project.receives(key, expr.value)) == {PLACED_LOADER}
