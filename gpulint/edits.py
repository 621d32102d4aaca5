"""Edit builders for fixes: minimal text edits that keep the user's formatting."""

from __future__ import annotations

import sys

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.imports import dotted_name
from gpulint.diagnostics import Edit, Location
from gpulint.lines import LINE_BREAK


def _advance(start: Location, text: str) -> Location:
    """The location just after `text` when it starts at `start`."""
    breaks = list(LINE_BREAK.finditer(text))  # \r\n, \r and \n, as LibCST counts rows
    if not breaks:
        return Location(start.row, start.column + len(text))
    return Location(start.row + len(breaks), len(text) - breaks[-1].end() + 1)


def _minimal_edit(start: Location, old: str, new: str) -> Edit:
    """One edit turning `old` (which starts at `start`) into `new`, keeping their common prefix and suffix."""
    prefix = 0
    limit = min(len(old), len(new))
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    edit_start = _advance(start, old[:prefix])
    edit_end = _advance(edit_start, old[prefix : len(old) - suffix])
    return Edit(edit_start, edit_end, new[prefix : len(new) - suffix])


def replace_node(model: SemanticModel, old: cst.CSTNode, new: cst.CSTNode | str) -> Edit | None:
    """The smallest edit turning `old`'s text into `new`'s, in the file's own layout."""
    span = model.range(old)
    start = Location(span.start.line, span.start.column + 1)
    end = Location(span.end.line, span.end.column + 1)
    written = model.text_between(start, end)
    old_code = model.code(old)
    if isinstance(new, str):
        if written == old_code:
            return _minimal_edit(start, written, new)
        try:
            new = cst.parse_expression(new) if isinstance(old, cst.BaseExpression) else cst.parse_statement(new)
        except cst.ParserSyntaxError:
            return None
    if written == old_code:
        return _minimal_edit(start, written, model.code(new))
    # LibCST renders a nested multi-line node without its block's indentation: regenerate in place, diffing
    # against LibCST's own rendering of the file, which can drop what follows the last line (a CR-only file's final `\r`).
    rendered = model.module.code
    if not model.source.startswith(rendered):
        return None
    return _minimal_edit(Location(1, 1), rendered, model.module.deep_replace(old, new).code)


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
    # The space before `)` (a newline in a vertical layout) moves to the new last argument.
    new_arg = cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=equal,
        comma=trailing or cst.MaybeSentinel.DEFAULT,
        whitespace_after_arg=last.whitespace_after_arg,
    )
    args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(args=[*args, new_arg])


def without_keyword_argument(call: cst.Call, keyword: str) -> cst.Call:
    """`call` without its `keyword=` argument; the argument before it takes over its trailing comma."""
    args = list(call.args)
    index = next((i for i, a in enumerate(args) if a.keyword is not None and a.keyword.value == keyword), None)
    if index is None:
        return call
    removed = args.pop(index)
    if index == len(args) and args:
        args[-1] = args[-1].with_changes(comma=removed.comma, whitespace_after_arg=removed.whitespace_after_arg)
    return call.with_changes(args=args)


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


def leading_imports_end(model: SemanticModel) -> cst.SimpleStatementLine | None:
    """The last statement of the module's leading docstring and imports (None when it starts otherwise)."""
    anchor = None
    for index, stmt in enumerate(model.module.body):
        if not isinstance(stmt, cst.SimpleStatementLine):
            break
        first = stmt.body[0]
        is_docstring = index == 0 and isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString))
        if not (is_docstring or isinstance(first, (cst.Import, cst.ImportFrom))):
            break
        anchor = stmt
    return anchor


def add_statement_after_imports(model: SemanticModel, statement: str, joins=None) -> Edit | None:
    """Insert `statement` after the leading imports, set off by a blank line; None without imports.

    `joins(code)` says whether a statement right after the imports belongs to the same start-up block
    (`torch.backends.cudnn.benchmark = True`): the new one then joins that block instead of opening another.
    """
    anchor = leading_imports_end(model)
    if anchor is None:
        return None
    newline = model.module.default_newline
    separator = newline + newline
    body = list(model.module.body)
    index = body.index(anchor) + 1
    while joins is not None and index < len(body) and isinstance(body[index], cst.SimpleStatementLine):
        if not joins(model.code(body[index].body[0])):
            break
        anchor, separator, index = body[index], newline, index + 1
    end_row = model.range(anchor).end.line
    at = Location(end_row, len(model.lines[end_row - 1]) + 1)
    return Edit(at, at, f"{separator}{statement}")


def with_leading_argument(call: cst.Call, value: cst.BaseExpression) -> cst.Call:
    """`call` with a new first positional argument, separated the way the call separates its arguments."""
    args = list(call.args)
    if not args:
        return call.with_changes(args=[cst.Arg(value=value)])
    first_comma = _comma_like(args[0])
    if first_comma is not None and (len(args) > 1 or isinstance(first_comma.whitespace_after, cst.ParenthesizedWhitespace)):
        separator = first_comma.with_changes(whitespace_before=cst.SimpleWhitespace(""))
    elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
        separator = cst.Comma(whitespace_after=call.whitespace_before_args)
    else:
        separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return call.with_changes(args=[cst.Arg(value=value, comma=separator), *args])


def with_positionals_as_keywords(call: cst.Call, names: tuple[str, ...]) -> cst.Call | None:
    """`f(a, b)` -> `f(names[0]=a, names[1]=b)`; None with `*args` or more positionals than names."""
    equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    for arg in call.args:
        if arg.keyword is not None and isinstance(arg.equal, cst.AssignEqual):
            equal = arg.equal
            break
    args = []
    position = 0
    for arg in call.args:
        if arg.star:
            if arg.star == "*":
                return None
        elif arg.keyword is None:
            if position >= len(names):
                return None
            arg = arg.with_changes(keyword=cst.Name(names[position]), equal=equal)
            position += 1
        args.append(arg)
    return call.with_changes(args=args)


def add_import(model: SemanticModel, module_name: str) -> Edit | None:
    """Insert `import module_name` after the module's leading imports; None when already imported."""
    if model.imports.is_imported(module_name):
        return None
    newline = model.module.default_newline
    anchor = leading_imports_end(model)
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



def add_torch_setting(model: SemanticModel, template: str) -> Edit | None:
    """Insert a process-wide torch setting (`{torch}.backends.cudnn.benchmark = True`) after the leading imports,
    beside the settings already there; None unless `torch` itself is imported in those leading imports."""
    anchor = leading_imports_end(model)
    if anchor is None:
        return None
    body = list(model.module.body)
    torch = None
    for stmt in body[: body.index(anchor) + 1]:
        statement = stmt.body[0]
        if isinstance(statement, cst.Import):
            for alias in statement.names:
                if dotted_name(alias.name) == "torch":
                    torch = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else "torch"
    if torch is None:
        return None  # `torch` is imported later or under another name: the setting could run before it exists

    def joins(code: str) -> bool:
        return code.startswith((f"{torch}.backends.", f"{torch}.set_float32_matmul_precision("))

    return add_statement_after_imports(model, template.format(torch=torch), joins=joins)


# ---- statements: insert a new line, delete one --------------------------------------------------


def _statement_line(model: SemanticModel, node: cst.CSTNode) -> cst.CSTNode | None:
    """The SimpleStatementLine or compound statement `node` is, or is the only small statement of."""
    if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return node
    parent = model.parent.get(node)
    if isinstance(node, cst.BaseSmallStatement) and isinstance(parent, cst.SimpleStatementLine):
        return parent
    return None


def _indentation(model: SemanticModel, statement: cst.CSTNode) -> str | None:
    """The whitespace before a statement that starts its own line; None when it shares its line."""
    start = model.range(statement).start
    prefix = model.lines[start.line - 1][: start.column]
    return prefix if prefix.strip() == "" else None


def _owns_lines(model: SemanticModel, statement: cst.CSTNode) -> bool:
    """The statement starts its line and sits in an indented block or the module (not `if x: stmt`)."""
    parent = model.parent.get(statement)
    return isinstance(parent, (cst.IndentedBlock, cst.Module)) and _indentation(model, statement) is not None


def insert_statement_before(model: SemanticModel, statement: cst.CSTNode, code: str) -> Edit | None:
    """A new line `code` just above `statement` (after any comment lines above it), at its indentation."""
    statement = _statement_line(model, statement)
    if statement is None or not _owns_lines(model, statement):
        return None
    indent = _indentation(model, statement)
    row = model.range(statement).start.line
    return Edit(Location(row, 1), Location(row, 1), f"{indent}{code}{model.module.default_newline}")


def insert_statement_after(model: SemanticModel, statement: cst.CSTNode, code: str) -> Edit | None:
    """A new line `code` just below `statement` (below a whole block for a compound statement), at its
    indentation."""
    statement = _statement_line(model, statement)
    if statement is None or not _owns_lines(model, statement):
        return None
    indent = _indentation(model, statement)
    newline = model.module.default_newline
    end_row = model.range(statement).end.line
    if end_row < len(model.lines):
        return Edit(Location(end_row + 1, 1), Location(end_row + 1, 1), f"{indent}{code}{newline}")
    at = Location(end_row, len(model.lines[end_row - 1]) + 1)
    return Edit(at, at, f"{newline}{indent}{code}")


def delete_statement(model: SemanticModel, node: cst.CSTNode) -> Edit | None:
    """Remove a statement (with its line and trailing comment); `pass` when it was its block's only one."""
    small = node if isinstance(node, cst.BaseSmallStatement) else None
    if isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1:
        small = node.body[0]
    if small is None:
        return None
    parent = model.parent.get(small)
    if isinstance(parent, cst.SimpleStatementSuite) or (isinstance(parent, cst.SimpleStatementLine) and len(parent.body) > 1):
        # `if x: a(); b()` or `a(); b()`: remove just this small statement (and its separator).
        siblings = list(parent.body)
        if len(siblings) == 1:
            return replace_node(model, small, "pass")
        index = next(i for i, s in enumerate(siblings) if s is small)
        span = model.range(small)
        if index + 1 < len(siblings):
            end = model.range(siblings[index + 1]).start
        else:
            start = model.range(siblings[index - 1]).end
            return Edit(Location(start.line, start.column + 1), Location(span.end.line, span.end.column + 1), "")
        return Edit(Location(span.start.line, span.start.column + 1), Location(end.line, end.column + 1), "")
    line = parent
    block = model.parent.get(line)
    if not isinstance(line, cst.SimpleStatementLine) or not _owns_lines(model, line):
        return None
    if isinstance(block, cst.IndentedBlock) and len(block.body) == 1:
        return replace_node(model, small, "pass")
    span = model.range(line)
    if span.end.line < len(model.lines):
        return Edit(Location(span.start.line, 1), Location(span.end.line + 1, 1), "")
    # The last line of a file without a final newline: take the newline before it instead.
    if span.start.line == 1:
        return Edit(Location(1, 1), Location(span.end.line, len(model.lines[-1]) + 1), "")
    return Edit(
        Location(span.start.line - 1, len(model.lines[span.start.line - 2]) + 1),
        Location(span.end.line, len(model.lines[span.end.line - 1]) + 1),
        "",
    )


def statement_code(model: SemanticModel, node: cst.CSTNode) -> str | None:
    """The text of a one-small-statement line, without its comment (what a hoist moves)."""
    if isinstance(node, cst.SimpleStatementLine):
        if len(node.body) != 1:
            return None
        node = node.body[0]
    return model.code(node).strip() if isinstance(node, cst.BaseSmallStatement) else None


def module_alias(model: SemanticModel, module_name: str) -> tuple[str, Edit | None]:
    """The local name to write `module_name` as (`th` after `import torch as th`), and the import edit
    needed when the module is not imported as a whole."""
    for local, qualified in model.imports.bindings.items():
        if qualified == module_name:
            return local, None
    return module_name, add_import(model, module_name)


def device_argument(device: cst.BaseExpression | None) -> cst.BaseExpression:
    """The `device=` value equivalent to `.cuda(device)`: `"cuda"` for `.cuda()`, `"cuda:1"` for `.cuda(1)`."""
    if device is None:
        return cst.SimpleString('"cuda"')
    if isinstance(device, cst.Integer):
        return cst.SimpleString(f'"cuda:{device.evaluated_value}"')
    return device
