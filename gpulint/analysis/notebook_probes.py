"""`in_ipynb()`: a function of the notebook that asks whether it runs in IPython, and is True in the notebook.

    def in_ipynb():
        try:
            cfg = get_ipython().config
            return True
        except NameError:
            return False

`get_ipython` is a builtin in every IPython kernel, so in a notebook the `try` body returns True. Only this
shape counts: a module-level function whose whole body is one `try` that calls `get_ipython()` and ends with
`return True`, every handler returning False (in a script the same function is False, or True under IPython:
the linter says nothing there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as m

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel


def asks_for_a_notebook(model: SemanticModel, call: cst.Call) -> bool:
    """`call` runs a module-level function of this file shaped like `in_ipynb()` above, with no arguments."""
    if not isinstance(call.func, cst.Name) or call.args:
        return False
    found = model.functions.get(call.func.value, ())
    return len(found) == 1 and model.parent.get(found[0]) is model.module and _probes_ipython(found[0])


def _probes_ipython(func: cst.FunctionDef) -> bool:
    body = [s for s in func.body.body if not _docstring(s)] if isinstance(func.body, cst.IndentedBlock) else []
    if func.params.params or len(body) != 1 or not isinstance(body[0], cst.Try):
        return False
    attempt = body[0]
    if attempt.orelse is not None or attempt.finalbody is not None or not attempt.handlers:
        return False
    asks = any(m.findall(s, m.Call(func=m.Name("get_ipython"))) for s in attempt.body.body)
    early = any(m.findall(s, m.Return()) for s in attempt.body.body[:-1])  # `return False` on some other test
    return asks and not early and _returns(attempt.body.body[-1], "True") and all(
        len(h.body.body) >= 1 and _returns(h.body.body[-1], "False") and all(_harmless(s) for s in h.body.body[:-1])
        for h in attempt.handlers
    )


def _returns(statement: cst.BaseStatement, value: str) -> bool:
    return m.matches(statement, m.SimpleStatementLine(body=[m.Return(value=m.Name(value))]))


def _harmless(statement: cst.BaseStatement) -> bool:
    """`pass` or a bare expression (`print(...)`) before the handler's `return False`."""
    return m.matches(statement, m.SimpleStatementLine(body=[m.OneOf(m.Pass(), m.Expr())]))


def _docstring(statement: cst.BaseStatement) -> bool:
    return m.matches(statement, m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString())]))
