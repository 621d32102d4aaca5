"""LibCST parsing of large files in pieces, to bound memory.

While LibCST's native parser works it holds about 500 bytes per byte of source (tokens and its own tree,
freed when it returns), while the Python tree it hands back is about 40 bytes per byte. Parsing a 1.4 MB
file at once therefore peaks near 800 MB; parsing it in pieces of 64 KB peaks at the tree plus one piece.
A module is cut between top-level statements (CPython's `ast` says where they start), and a top-level
statement that is itself huge (a table of thousands of entries: `op_db = [...]`) between the elements of
its list or dict display. The pieces are parsed separately and joined into one `libcst.Module`, which must
print back to exactly the original text; otherwise the caller parses the file whole.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import libcst as cst  # imported where a file is parsed: the sizes above are read by runs that parse nothing

PIECE_BYTES = 64_000  # pieces are about this large (a statement larger than this is one piece, unless cut)
PIECEWISE_ABOVE = 200_000  # files at least this large are parsed in pieces


# Where to cut a file: (first line, the offsets in that piece where a huge display is cut, if any).
Layout = list[tuple[int, Optional[tuple[str, list[int]]]]]


def layout(text: str, tree: ast.Module) -> Optional[Layout]:
    """Where to cut `text` (CPython's tree of it says where statements start), or None when it is one piece.
    Plain data: the caller drops the tree before LibCST parses, which halves the peak again."""
    lines = text.splitlines(keepends=True)
    if not tree.body or "".join(lines) != text:
        return None
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    pieces: list[tuple[int, list[ast.stmt]]] = [(1, [])]  # (first line, statements)
    for previous, stmt in zip([None, *tree.body], tree.body):
        start = _first_line(stmt)
        own_line = previous is None or (previous.end_lineno or 0) < start  # not after `;` on the same line
        first, statements = pieces[-1]
        if own_line and statements and offsets[(stmt.end_lineno or start)] - offsets[first - 1] > PIECE_BYTES:
            pieces.append((start, []))
        pieces[-1][1].append(stmt)
    if len(pieces) == 1:
        return None
    found: Layout = []
    for index, (first, statements) in enumerate(pieces):
        end = pieces[index + 1][0] if index + 1 < len(pieces) else len(lines) + 1
        cuts = None
        if len(statements) == 1 and offsets[end - 1] - offsets[first - 1] > 2 * PIECE_BYTES:
            cuts = _display_cuts("".join(lines[first - 1 : end - 1]), statements[0])
        found.append((first, cuts))
    return found


def _trimmer():
    """glibc's `malloc_trim`: LibCST's parser frees its working memory, but glibc keeps it mapped and, with
    Python objects made in between, does not reuse it for the next piece; trimming returns it. A no-op
    elsewhere."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes = [ctypes.c_size_t]
    return lambda: trim(0)


_trim = None


def trim_heap() -> None:
    global _trim
    if _trim is None:  # ctypes and libc are loaded by the first run that parses a file, not by every run
        _trim = _trimmer()
    _trim()


def parse_in_pieces(text: str, pieces: Layout) -> Optional[cst.Module]:
    """The module `cst.parse_module(text)` gives, built from the pieces of `layout`; None when they do not
    print back to `text` (the caller then parses it whole)."""
    import libcst as cst

    lines = text.splitlines(keepends=True)
    modules: list[cst.Module] = []
    for index, (first, cuts) in enumerate(pieces):
        end = pieces[index + 1][0] if index + 1 < len(pieces) else len(lines) + 1
        piece_text = "".join(lines[first - 1 : end - 1])
        piece = _display_in_pieces(piece_text, *cuts) if cuts is not None else None
        modules.append(piece if piece is not None else cst.parse_module(piece_text))
        trim_heap()
    body: list[cst.BaseStatement] = []
    carried: list[cst.EmptyLine] = []  # blank and comment lines ending a piece: the next statement's
    for index, piece in enumerate(modules):
        leading = [*carried, *piece.header] if index else []
        if piece.body:
            head = piece.body[0].with_changes(leading_lines=[*leading, *piece.body[0].leading_lines]) if leading else piece.body[0]
            body.extend([head, *piece.body[1:]])
            carried = list(piece.footer)
        else:
            carried = [*leading, *piece.footer]
    indent = next((m.default_indent for m in modules if any(isinstance(s, cst.BaseCompoundStatement) for s in m.body)), modules[0].default_indent)
    joined = modules[0].with_changes(body=body, footer=carried, default_indent=indent, has_trailing_newline=modules[-1].has_trailing_newline)
    return joined if joined.code == text else None


def _first_line(stmt: ast.stmt) -> int:
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])


def _display_cuts(piece_text: str, stmt: ast.stmt) -> Optional[tuple[str, list[int]]]:
    """For one statement `name = [e1, e2, ...]` / `name: T = {k: v, ...}` with thousands of elements: the
    kind of display and the offsets (in the piece) of the elements where it can be cut."""
    value = getattr(stmt, "value", None) if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr)) else None
    if isinstance(value, ast.List):
        elements, kind = list(value.elts), "[]"
    elif isinstance(value, ast.Dict):
        elements, kind = [k if k is not None else v for k, v in zip(value.keys, value.values)], "{}"
    else:
        return None
    if len(elements) < 4 or value.end_lineno != stmt.end_lineno:
        return None
    line_starts = [0]
    for line in piece_text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))
    first_line = _first_line(stmt)

    def offset(node: ast.AST) -> int:
        row = node.lineno - first_line
        line = piece_text[line_starts[row] : line_starts[row + 1]]
        # `col_offset` counts UTF-8 bytes
        return line_starts[row] + len(line.encode("utf-8")[: node.col_offset].decode("utf-8", "replace"))

    groups: list[int] = [offset(elements[0])]
    for element in elements[1:]:
        start = offset(element)
        if start - groups[-1] > PIECE_BYTES:
            groups.append(start)
    return (kind, groups) if len(groups) > 1 else None


def _display_in_pieces(piece_text: str, kind: str, groups: list[int]) -> Optional[cst.Module]:
    """The piece holding one huge display, parsed a few thousand bytes of elements at a time."""
    import libcst as cst

    open_, close = kind
    try:
        head = cst.parse_module(piece_text[: groups[1]] + close + "\n")
        parts = [_display(head)]
        for start, end in zip(groups[1:-1], groups[2:]):
            parts.append(cst.parse_expression(open_ + piece_text[start:end] + close))
            trim_heap()
        tail = cst.parse_module("_ = " + open_ + piece_text[groups[-1] :])
        parts.append(_display(tail))
    except cst.ParserSyntaxError:
        return None
    if any(not isinstance(p, (cst.List, cst.Dict)) for p in parts) or len(head.body) != 1 or len(tail.body) != 1:
        return None
    last = parts[-1]
    closing = "rbracket" if isinstance(last, cst.List) else "rbrace"
    elements = []
    for part in parts:
        found = list(part.elements)
        comma = found[-1].comma if part is not last and found else None
        if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.SimpleWhitespace) and not comma.whitespace_after.value:
            # before a closing bracket the space after the last comma is the bracket's: give it back to the comma
            found[-1] = found[-1].with_changes(comma=comma.with_changes(whitespace_after=getattr(part, closing).whitespace_before))
        elements.extend(found)
    display = parts[0].with_changes(elements=elements, rpar=last.rpar, **{closing: getattr(last, closing)})
    line = head.body[0]
    statement = line.with_changes(body=[line.body[0].with_changes(value=display)], trailing_whitespace=tail.body[0].trailing_whitespace)
    piece = head.with_changes(body=[statement], footer=tail.footer, has_trailing_newline=tail.has_trailing_newline)
    return piece if piece.code == piece_text else None


def _display(module: cst.Module):
    import libcst as cst

    line = module.body[0] if len(module.body) == 1 else None
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        value = getattr(line.body[0], "value", None)
        if isinstance(value, (cst.List, cst.Dict)):
            return value
    return None
