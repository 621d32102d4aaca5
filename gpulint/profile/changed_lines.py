"""Which lines show that a fix ran: the statements of the fixed file that hold a changed line.

A fix whose statements never execute in the B runs (a CUDA-only branch on a CPU machine, a function only called
after the measured steps) was not measured: the A/B runs compared two identical programs. The B runs trace
these lines (see `_child._start_line_probes`), and `fix --verify` reports the statements that never ran.
"""

from __future__ import annotations

import ast
import difflib

from gpulint.lines import lines_with_ends

# A statement whose body holds other statements: only its header lines tell that it ran.
_COMPOUND = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.FunctionDef,
             ast.AsyncFunctionDef, ast.ClassDef) + ((ast.Match,) if hasattr(ast, "Match") else ()) + (
    (ast.TryStar,) if hasattr(ast, "TryStar") else ()
)


def _changed_lines(original: str, fixed: str) -> set[int]:
    """1-based lines of the fixed text that differ from the original; a pure deletion marks the lines around it."""
    a, b = lines_with_ends(original), lines_with_ends(fixed)
    changed: set[int] = set()
    for tag, _i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if j2 > j1:
            changed.update(range(j1 + 1, j2 + 1))
        else:
            changed.update(n for n in (j1, j1 + 1) if 1 <= n <= len(b))
    return changed


def _span(node: ast.stmt) -> tuple[int, int]:
    if isinstance(node, _COMPOUND):
        body = getattr(node, "body", None) or []
        first = body[0].lineno if body else node.end_lineno + 1
        start = node.lineno
        return start, max(start, first - 1)
    return node.lineno, node.end_lineno or node.lineno


def probe_groups(original: bytes, fixed: bytes) -> list[tuple[int, ...]]:
    """One group of lines per statement holding a changed line, in file order; a statement ran when any line of
    its group produced a line event. [] when the fixed file does not parse or decode."""
    try:
        tree = ast.parse(fixed)  # bytes: a coding cookie is honoured
    except (SyntaxError, ValueError):
        return []
    fixed_text = fixed.decode("utf-8", "replace")  # only line boundaries matter below
    original_text = original.decode("utf-8", "replace")
    spans = [_span(n) for n in ast.walk(tree) if isinstance(n, ast.stmt)]
    groups: set[tuple[int, ...]] = set()
    for line in _changed_lines(original_text, fixed_text):
        holding = [s for s in spans if s[0] <= line <= s[1]]
        if holding:
            lo, hi = min(holding, key=lambda s: s[1] - s[0])  # the innermost statement
            groups.add(tuple(range(lo, hi + 1)))
    return sorted(groups)
