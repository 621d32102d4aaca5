"""A library module's own self-test: the `if __name__ == "__main__":` block at the bottom of `dataset.py` or
`model.py` that builds the thing with made-up or sample input, runs it once and prints shapes or counts.
The project never runs it (train.py imports the module; importing skips the block), and what it does is not
training, so per-step advice there is noise.

It counts only when another module of the project imports the module (`ModuleContext.imported`:
`analysis/uncalled.py`) and the block, with the functions of the module it calls, neither trains (a
backward pass, an optimizer step, a project function that trains: `analysis/hot_loops.py`) nor loads
trained weights or runs a framework's loop (`torch.load`, `load_state_dict`, `from_pretrained`,
`Trainer(...)`, `.fit(...)`): those make it a tool of its own (a training or evaluation entry point), which
stays reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Calls that make a `__main__` block a real job: trained weights loaded, a framework's loop run.
_LOADS_OR_RUNS = frozenset({"load_state_dict", "from_pretrained", "load_from_checkpoint", "fit", "train_model"})
_LOADS_OR_RUNS_QUALIFIED = frozenset({"torch.load", "torch.jit.load", "safetensors.torch.load_file"})


def self_test_rows(model: SemanticModel) -> list[tuple[int, int]]:
    """The line span of the module's `__main__` self-test block, if it has one (see the module docstring)."""
    if not model.project.imported or "__main__" not in model.source:
        return []
    from gpulint.analysis.hot_loops import trains

    spans = []
    for statement in model.module.body:
        if not (isinstance(statement, cst.If) and _is_main_guard(statement.test)):
            continue
        if trains(model, statement) or model.through_calls("loads or runs", statement, lambda here: _loads_or_runs(model, here)):
            continue
        here = model.range(statement)
        spans.append((here.start.line, here.end.line))
    return spans


def _is_main_guard(test: cst.BaseExpression) -> bool:
    """`__name__ == "__main__"` (either way round)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)):
        return False
    sides = [test.left, test.comparisons[0].comparator]
    names = [s for s in sides if isinstance(s, cst.Name) and s.value == "__name__"]
    strings = [s for s in sides if isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__"]
    return len(names) == 1 and len(strings) == 1


def _loads_or_runs(model: SemanticModel, node: cst.CSTNode) -> bool:
    for call in model.calls_inside(node):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _LOADS_OR_RUNS:
            return True
        name = model.qualified_name(call.func) or ""
        if name in _LOADS_OR_RUNS_QUALIFIED or name.rsplit(".", 1)[-1] == "Trainer":
            return True
    return False
