"""Edit builders for fixes: minimal text edits that keep the user's formatting."""

from __future__ import annotations

import sys

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.diagnostics import Edit, Location


def _advance(start: Location, text: str) -> Location:
    """The location just after `text` when it starts at `start`."""
    newlines = text.count("\n")
    if newlines == 0:
        return Location(start.row, start.column + len(text))
    return Location(start.row + newlines, len(text) - text.rfind("\n"))


def replace_node(model: SemanticModel, old: cst.CSTNode, new: cst.CSTNode | str) -> Edit | None:
    """The smallest edit turning `old`'s text into `new`'s (common prefix and suffix kept)."""
    old_code = model.code(old)
    new_code = new if isinstance(new, str) else model.code(new)
    span = model.range(old)
    start = Location(span.start.line, span.start.column + 1)
    if _advance(start, old_code) != Location(span.end.line, span.end.column + 1):
        return None  # the node's text does not match its span (owned whitespace): refuse to guess
    prefix = 0
    limit = min(len(old_code), len(new_code))
    while prefix < limit and old_code[prefix] == new_code[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old_code[-1 - suffix] == new_code[-1 - suffix]:
        suffix += 1
    edit_start = _advance(start, old_code[:prefix])
    edit_end = _advance(edit_start, old_code[prefix : len(old_code) - suffix])
    return Edit(edit_start, edit_end, new_code[prefix : len(new_code) - suffix])


def _comma_like(arg: cst.Arg) -> cst.Comma | None:
    return arg.comma if isinstance(arg.comma, cst.Comma) else None


def with_keyword_argument(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """`call` with `keyword=value` appended, in the layout the call already uses."""
    args = list(call.args)
    equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    for arg in args:
        if arg.keyword is not None and isinstance(arg.equal, cst.AssignEqual):
            equal = arg.equal
            break
    if not args:
        return call.with_changes(args=[cst.Arg(value=value, keyword=cst.Name(keyword), equal=equal)])
    last = args[-1]
    if len(args) == 1 and isinstance(last.value, cst.GeneratorExp) and not last.value.lpar:
        # `f(x for x in y)` may not take a second argument until the generator has its own parentheses.
        last = last.with_changes(value=last.value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))
    trailing = _comma_like(last)
    # The separator before the new argument: the one already used between arguments, if any.
    if len(args) >= 2 and _comma_like(args[-2]) is not None:
        separator = _comma_like(args[-2])
    elif trailing is not None and isinstance(trailing.whitespace_after, cst.ParenthesizedWhitespace):
        separator = cst.Comma(whitespace_after=call.whitespace_before_args)
    else:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    new_arg = cst.Arg(value=value, keyword=cst.Name(keyword), equal=equal, comma=trailing or cst.MaybeSentinel.DEFAULT)
    args[-1] = last.with_changes(comma=separator)
    return call.with_changes(args=[*args, new_arg])


def with_keyword_value(call: cst.Call, arg: cst.Arg, value: cst.BaseExpression) -> cst.Call:
    return call.with_changes(args=[a.with_changes(value=value) if a is arg else a for a in call.args])


def import_roots(expression: str) -> list[str]:
    """Standard-library modules an expression refers to (`os` in `len(os.sched_getaffinity(0))`)."""
    try:
        tree = cst.parse_expression(expression)
    except cst.ParserSyntaxError:
        return []
    roots: list[str] = []

    class _Roots(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            base = node.value
            while isinstance(base, cst.Attribute):
                base = base.value
            if isinstance(base, cst.Name) and base.value in sys.stdlib_module_names and base.value not in roots:
                roots.append(base.value)

    tree.visit(_Roots())
    return roots


def add_import(model: SemanticModel, module_name: str) -> Edit | None:
    """Insert `import module_name` after the module's leading imports; None when already imported."""
    if model.imports.is_imported(module_name):
        return None
    newline = model.module.default_newline
    anchor = None
    for index, stmt in enumerate(model.module.body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            break
        first = stmt.body[0]
        is_docstring = index == 0 and isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString))
        if not (is_docstring or isinstance(first, (cst.Import, cst.ImportFrom))):
            break
        anchor = stmt
    if anchor is None:
        # Before the first statement (after any leading comments, which belong to the module header).
        if model.module.body:
            start = model.range(model.module.body[0]).start
            at = Location(start.line, start.column + 1)
        else:
            at = Location(1, 1)
        return Edit(at, at, f"import {module_name}{newline}")
    end_row = model.range(anchor).end.line
    at = Location(end_row, len(model.lines[end_row - 1]) + 1)
    return Edit(at, at, f"{newline}import {module_name}")
