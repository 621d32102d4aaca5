"""Loops over a loader that holds the whole dataset in one batch (`DataLoader(test_data,
batch_size=len(test_data))`): the loop runs once per pass, so a read in it is one read per pass, not one per step
(`batch_cost.one_batch_per_pass` decides the loader)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel


def one_batch_loop(model: SemanticModel, loop: Loop) -> bool:
    """`loop` is a `for` over loaders of this module, every one of which hands out the whole dataset as one
    batch."""
    flow = model.loader_flow
    found = False
    for info in flow.infos:
        if any(iteration.is_for and iteration.loop is loop for iteration in info.iterations):
            if not model.batch_cost.one_batch_per_pass(info.loader):
                return False
            found = True
    return found
