"""Values replaced before anything reads them: `args = TrainingArguments("out")` and, before any use,
`args = TrainingArguments("out", eval_strategy="epoch")` (a tutorial or notebook that shows a first version, then
the one it trains with). The first call configures nothing that runs: settings advice on it is about dead code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Builtins that read names the code does not spell out.
_DYNAMIC_READS = frozenset({"locals", "globals", "vars", "eval", "exec"})


def replaced_before_use(model: SemanticModel, value: cst.BaseExpression) -> bool:
    """`name = value` is followed in its scope by another write of `name`, and no read anywhere may see this one
    (a read in another function, whose time of running is not known, counts as one that may)."""
    statement = model.parent.get(value)
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 or not isinstance(statement.targets[0].target, cst.Name):
        return False
    key = statement.targets[0].target.value
    flow = model.dataflow
    scope = model.scope_of(statement)
    writes = flow.writes_in_scope(key, scope)
    this = next((w for w in writes if w.statement is statement), None)
    if this is None or not any(w is not this and flow.before(statement, w.statement) for w in writes):
        return False
    for read in flow.reads.get(key, []):
        if model.scope_of(read) is not scope or this in flow.reaching_writes(key, read):
            return False
    return True


def never_read(model: SemanticModel, value: cst.BaseExpression) -> bool:
    """`name = value` whose name nothing reads: in a notebook (no other module imports its names) or in a
    function (a local), a snippet that shows settings (`training_args = TrainingArguments("out", push_to_hub=True)`
    in a lesson about the Hub) and configures nothing that runs. A module-level name of a `.py` file may be
    imported by another module: it counts as read."""
    statement = model.parent.get(value)
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 or not isinstance(statement.targets[0].target, cst.Name):
        return False
    if not model.is_notebook and model.enclosing_function(statement) is None:
        return False
    key = statement.targets[0].target.value
    dynamic = any(isinstance(c.func, cst.Name) and c.func.value in _DYNAMIC_READS for c in model.calls)
    return not model.dataflow.reads.get(key) and not dynamic
