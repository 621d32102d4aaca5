"""Reading a Databricks notebook exported as source, whose IPython escapes Python rejects.

Databricks exports a notebook as a `.py` file that starts with `# Databricks notebook source` and separates its
cells with `# COMMAND ----------`; magics are written as `# MAGIC %sh ...` comments, but a shell escape typed in a
Python cell (`!deepspeed --module training.trainer \\` and its continuation lines) stays as it was. The file runs
where it was written (a Databricks cluster runs each cell through IPython), so such a line is no syntax error
there. `read_export` masks each escape line, and its backslash continuation lines, into a comment of the same
length (every row and column stays where it was): the rest of the file is checked as Python, the file is not
reported as `invalid-syntax`, and no fix is offered in it (the fixed text could not be written back around the
masked lines). A file that still does not parse once masked is reported at its own error, not at an escape line that
is valid where it runs. Nothing here knows about PyTorch.
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass

from gpulint.notebook import CellScan

# The first line Databricks writes into every notebook it exports as Python source.
HEADER = "# Databricks notebook source"
# IPython escapes at the start of a statement: shell (`!cmd`, `!!cmd`) and line magics (`%pip install x`).
_ESCAPES = ("!", "%")


@dataclass(frozen=True)
class Export:
    """A Databricks source export read with its IPython escape lines masked."""

    text: str  # the user's text, each escape line turned into a comment of the same length
    tree: ast.Module  # CPython's tree of `text`


def read_export(text: str) -> Export | SyntaxError | None:
    """The Databricks source export `text` with its IPython escapes masked, when they are all that keeps CPython
    from parsing it; the masked text's own syntax error when something else is broken too; None for any other
    file (no header, no escape)."""
    if not text.startswith(HEADER):
        return None
    masked = _masked(text)
    if masked == text:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(masked)
    except SyntaxError as error:
        return error  # the rows are the user's: masking keeps every line where it was
    except (ValueError, RecursionError, MemoryError):
        return None
    return Export(masked, tree)


def _masked(text: str) -> str:
    """`text` with each escape line that starts a statement, and its continuation lines, commented out."""
    lines = text.splitlines(keepends=True)
    scan = CellScan()
    escaping = False
    for row, line in enumerate(lines, start=1):
        if escaping or (scan.at_statement_start and line.lstrip(" \t").startswith(_ESCAPES)):
            escaping = line.rstrip("\r\n").endswith("\\")  # an escape's backslash continues the escape
            lines[row - 1] = _comment(line)
            continue
        scan.line(line, row)
    return "".join(lines)


def _comment(line: str) -> str:
    """The line as a comment of the same length: `#` over its first non-blank character."""
    start = len(line) - len(line.lstrip(" \t"))
    if start >= len(line.rstrip("\r\n")):
        return line
    return line[:start] + "#" + line[start + 1 :]
