"""Phase boundaries inside a training loop: the statements that switch a periodic block into evaluation
(`model.eval()`, a `torch.no_grad()` block), so that what runs beside them runs once per evaluation, between
the training phase and the evaluation phase, not once per step."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_GRAD_OFF = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})


def starts_evaluation_beside(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`model.eval()` or a `with torch.no_grad():` block in `node`'s block or in the blocks of the `if`s that
    hold it (two levels): `node` belongs to the switch from training to an evaluation pass."""
    for sibling in _statements_beside(model, node):
        if isinstance(sibling, cst.SimpleStatementLine):
            if any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "eval" and not c.args for c in model.calls_inside(sibling)):
                return True
        elif isinstance(sibling, cst.With):
            if any(isinstance(i.item, cst.Call) and model.call_name(i.item) in _GRAD_OFF for i in sibling.items):
                return True
    return False


def _statements_beside(model: SemanticModel, node: cst.CSTNode) -> Iterator[cst.BaseStatement]:
    statement = model.enclosing_statement(node)
    for _ in range(2):
        block = model.parent.get(statement)
        siblings = block.body if isinstance(block, cst.IndentedBlock) else ()
        yield from (s for s in siblings if s is not statement)
        holder = model.parent.get(block) if block is not None else None
        if not isinstance(holder, cst.If):
            break
        statement = holder
