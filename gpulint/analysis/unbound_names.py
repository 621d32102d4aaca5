"""Notebook cells that stop at a name nothing binds: the rest of the cell never runs.

A code cell whose top-level statement surely reads a name that no statement of the notebook binds (not an
import, an assignment, a parameter, a `def`; not a builtin) raises `NameError` there, and the kernel runs
none of the cell's later statements: an illustrative snippet the notebook says to save as a script, with
`dataset`, `loss_fn` or `arg.local_rank` never defined. What it would do past that point does not run as
shipped. Read only where nothing can bind names out of sight: no `from x import *`, no `exec`, `globals()`,
`vars()`, `setattr` on a module, no masked IPython line (`%run script.py` binds what the script binds).
"""

from __future__ import annotations

import ast
import builtins
import re
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# The line that closes each cell of a notebook's module, and a masked IPython line (`gpulint.notebook`).
_CELL_END = re.compile(r"#[\ue000-\uf8ff]cell \d+$")
_MASKED = re.compile(r"#[\ue000-\uf8ff]\d+\s*$")
# Names IPython binds in every kernel.
_KERNEL_NAMES = frozenset({"In", "Out", "get_ipython", "display", "exit", "quit", "_", "__", "___", "_i", "_ii", "_iii", "_ih", "_oh", "_dh"})
# Calls that bind names a reader of the source cannot see.
_HIDDEN_BINDERS = frozenset({"exec", "eval", "globals", "vars", "locals", "setattr", "__import__"})


def rows_after_name_errors(model: SemanticModel) -> list[tuple[int, int]]:
    """(first, last) rows of each notebook cell's part from a statement that raises `NameError` on an unbound
    name to the end of the cell; none for a script, or where names may be bound out of sight."""
    if not model.is_notebook:
        return []
    lines = model.source.splitlines()
    if any(_MASKED.search(line) for line in lines):
        return []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(model.source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    bound = _bound_names(tree)
    if bound is None:
        return []
    ends = [row for row, line in enumerate(lines, 1) if _CELL_END.match(line)]
    spans = []
    for statement in tree.body:
        if any(name not in bound for name in _surely_read(statement)):
            end = next((row for row in ends if row > statement.lineno), len(lines))
            if not spans or spans[-1][1] < statement.lineno:
                spans.append((statement.lineno, end))
    return spans


def _bound_names(tree: ast.Module) -> set[str] | None:
    """Every name the module binds anywhere (any scope), builtins and the kernel's included; None when a star
    import or a call that binds names out of sight is there."""
    bound = set(dir(builtins)) | _KERNEL_NAMES
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _HIDDEN_BINDERS:
            return None
        elif isinstance(node, ast.Name) and node.id.startswith("__") and node.id.endswith("__"):
            bound.add(node.id)  # `__file__`, `__name__`: the kernel's module attributes
    return bound


def _surely_read(statement: ast.stmt) -> list[str]:
    """The names a top-level statement reads whenever it runs: a simple statement's, a `for`'s iterable, an
    `if`'s test, a `with`'s items; never those under a lambda, a comprehension, `and`/`or`, a conditional
    expression or a `try`."""
    if isinstance(statement, (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
        parts: list[ast.AST] = [statement]
    elif isinstance(statement, (ast.For, ast.AsyncFor)):
        parts = [statement.iter]
    elif isinstance(statement, (ast.If, ast.While)):
        parts = [statement.test]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        parts = [item.context_expr for item in statement.items]
    else:
        return []
    names: list[str] = []
    pending = list(parts)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Lambda, ast.BoolOp, ast.IfExp, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.append(node.id)
        pending.extend(ast.iter_child_nodes(node))
    return names
