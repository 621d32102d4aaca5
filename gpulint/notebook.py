"""Jupyter notebooks as Python documents: the code cells, in order, as one module.

`Notebook.parse(text)` reads an nbformat 4 notebook (JSON) and builds `Notebook.text`, the module the analysis
sees: each analysed code cell's source, IPython syntax masked, then a marker line that closes the cell. Masking
keeps every row where it was (one placeholder line per masked line), so a position in the module is a cell
and a row in it (`cell_location`), and a position in the `.ipynb` file (`file_location`) for viewers that open
the JSON. `Notebook.rewrite(module)` turns a changed module back into the notebook: only the `source` of the
cells that changed is replaced in the original JSON text, so outputs, metadata, ids, indentation, key order
and the final newline keep their bytes. The masked lines are put back as they were; a change that touched
one, or moved a cell boundary, is refused (NotebookError).

What is masked, as IPython rewrites it (at the start of a logical line only, never inside a string or
brackets): line magics (`%time f()`, `%matplotlib inline`), shell escapes (`!pip install x`, `!!ls`), help
(`obj?`, `??obj`), auto-call escapes (`/f a`, `,f a b`, `;f a b`), assignments from them (`files = !ls`), and
their backslash continuation lines. A cell whose first line is a cell magic is analysed only when its body is
Python run in the notebook's namespace (`%%time`, `%%timeit`, `%%capture`, ...); `%%bash`, `%%writefile` and
other cell magics, automagic cells (`pip install x` without `%`) and cells in another language are skipped.

A code cell CPython cannot compile on its own (an exercise's `x = # your code here`) is left out (`broken`):
the module holds a stub for it that binds each name it may bind to an unknown value, so that the cells after it
never read a value it may have changed; its source is never written back.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import json
import keyword
import os
import re
import warnings
from dataclasses import dataclass, field, replace
from functools import cached_property
from json.decoder import scanstring
from pathlib import Path

from gpulint.diagnostics import Diagnostic, Location
from gpulint.lines import line_starts, lines_with_ends
from gpulint.source import SourceError, libcst_limitation, tab_after_spaces

SUFFIX = ".ipynb"
NBFORMAT = 4

# Cell magics whose body is Python run in the notebook's own namespace: analysed like any cell.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit"})
# Line magics that run the statement after them (`%time train()`): a script runs the statement itself.
STATEMENT_MAGICS = frozenset({"time", "timeit", "prun"})
# Line magics and cell magics whose effect later cells may depend on: a script without them is not the notebook.
STATEFUL_MAGICS = frozenset({"cd", "pushd", "popd", "env", "set_env", "run", "load", "store", "writefile", "file"})
# IPython's automagics (a line magic written without `%`); a cell starting with one is not Python (as ruff).
AUTOMAGICS = frozenset(
    "alias alias_magic autoawait autocall automagic bookmark cd code_wrap colors conda config debug dhist dirs "
    "doctest_mode edit env gui history killbgscripts load load_ext loadpy logoff logon logstart logstate logstop "
    "lsmagic macro magic mamba matplotlib micromamba notebook page pastebin pdb pdef pdoc pfile pinfo pinfo2 pip "
    "popd pprint precision prun psearch psource pushd pwd pycat pylab quickref recall rehashx reload_ext rerun "
    "reset reset_selective run save sc set_env sx system tb time timeit unalias unload_ext who who_ls whos xdel "
    "xmode".split()
)
_ASSIGNMENT_OPERATORS = frozenset({"=", "+=", "-=", "*=", "/=", "//=", "%=", "**=", "&=", "|=", "^=", ">>=", "<<=", "@="})

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_INDENT = re.compile(r"[ \t]*")
# `files = !ls`, `a, b = %sx cmd`: IPython assigns the output of a shell command or magic.
_ASSIGNED_ESCAPE = re.compile(r"(?P<target>[\w.]+(?:\s*,\s*[\w.]+)*)\s*=\s*[!%]")
_MAGIC_NAME = re.compile(r"%{1,2}(?P<name>\w+)")
# A Python line, as far as masking needs it: strings, comments, brackets (in the order they appear).
_PYTHON_TOKEN = re.compile(r"""(?P<quote>'''|\"\"\"|'|")|(?P<comment>\#)|(?P<open>[(\[{])|(?P<close>[)\]}])""")
_STRING_END = {
    '"""': re.compile(r'(?:[^\\]|\\.)*?"""', re.S),
    "'''": re.compile(r"(?:[^\\]|\\.)*?'''", re.S),
    '"': re.compile(r'(?:[^\\\r\n"]|\\(?:\r\n|[\s\S]))*"'),
    "'": re.compile(r"(?:[^\\\r\n']|\\(?:\r\n|[\s\S]))*'"),
}
# How messages name another place in the module: "(line 12)", "at train.ipynb:12" (outside `code`).
_LINE_REFERENCE = re.compile(r"\bline (\d+)\b")


class NotebookError(SourceError):
    """A notebook gpulint cannot read or write; the message is one line for the user, `location` where in the
    JSON text the problem is (invalid JSON), else its start."""

    def __init__(self, message: str, location: Location = Location(1, 1)) -> None:
        super().__init__(message)
        self.location = location


def is_notebook_path(path: str) -> bool:
    return path.lower().endswith(SUFFIX)


# ---- reading the JSON --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Element:
    start: int  # offset of the string's first character in the JSON text (after the quote)
    end: int  # offset of its closing quote
    text: str  # the decoded string


@dataclass
class Cell:
    """One cell of the notebook, as stored."""

    number: int  # 1-based, counting every cell (markdown too): `cell 3` is the notebook's third cell
    kind: str  # "code", "markdown", "raw"
    source: str  # the cell's text (a list of strings joined)
    as_list: bool  # stored as a list of strings (else as one string)
    metadata: dict = field(default_factory=dict)


def _kind_name(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def _unversioned_layout(data: dict) -> int | None:
    """Some exporters (Meta's Bento) drop the top-level `nbformat` and keep `metadata.orig_nbformat`: a
    `cells` list is nbformat 4's layout (nbformat 3 keeps its cells under `worksheets`)."""
    if isinstance(data.get("cells"), list) and "worksheets" not in data:
        return NBFORMAT
    return None


def _load(raw: str) -> dict:
    """The notebook's JSON, checked to be an nbformat 4 notebook as far as gpulint reads it."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise NotebookError(f"not valid JSON: {error.msg}", Location(error.lineno, error.colno)) from None
    except RecursionError:
        raise NotebookError("not a Jupyter notebook: nested too deeply") from None
    if not isinstance(data, dict):
        raise NotebookError(f"not a Jupyter notebook: the JSON holds {_kind_name(data)}, not an object")
    version = data.get("nbformat", _unversioned_layout(data))
    if not isinstance(version, int) or isinstance(version, bool):
        raise NotebookError("not a Jupyter notebook: no `nbformat` version")
    if version < NBFORMAT:
        raise NotebookError(
            f"nbformat {version} notebooks are not supported; upgrade it to nbformat 4 (open and save it in "
            "Jupyter, or `jupyter nbconvert --to notebook --inplace NOTEBOOK`)"
        )
    if version > NBFORMAT:
        raise NotebookError(f"nbformat {version} is newer than the nbformat 4 gpulint reads")
    if not isinstance(data.get("cells"), list):
        found = f", not {_kind_name(data['cells'])}" if "cells" in data else ""
        raise NotebookError(f"not a Jupyter notebook: `cells` must be a list{found}")
    return data


def _cells(stored: list) -> list[Cell]:
    cells = []
    for number, cell in enumerate(stored, 1):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {number} is {_kind_name(cell)}, not an object")
        kind, source = cell.get("cell_type"), cell.get("source")
        if not isinstance(kind, str):
            raise NotebookError(f"cell {number} has no `cell_type`")
        if "source" not in cell:
            raise NotebookError(f"cell {number} has no `source`")
        as_list = isinstance(source, list)
        strings = source if as_list else [source]
        if not all(isinstance(s, str) for s in strings):
            if kind == "code":  # other cells' text is not read: Jupyter's leniency
                wrong = next(s for s in strings if not isinstance(s, str))
                what = f"a list holding {_kind_name(wrong)}" if as_list else _kind_name(wrong)
                raise NotebookError(f"cell {number}: `source` must be a string or a list of strings, not {what}")
            strings = []
        metadata = cell.get("metadata")
        cells.append(Cell(number, kind, "".join(strings), as_list, metadata if isinstance(metadata, dict) else {}))
    return cells


class _Reader:
    """Walks JSON text already known to be valid, to find where each cell's `source` is stored; values it does
    not need are skipped by the json module's C scanner."""

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self.decoder = json.JSONDecoder()

    def skip(self, pos: int) -> int:
        return _WHITESPACE.match(self.raw, pos).end()

    def string(self, pos: int) -> tuple[str, int]:
        return scanstring(self.raw, pos + 1)

    def members(self, pos: int, read) -> int:
        """The object at `pos`: `read(key, start) -> end` reads each member's value; returns the object's end."""
        pos = self.skip(pos + 1)
        while self.raw[pos] != "}":
            key, pos = self.string(pos)
            pos = self.skip(read(key, self.skip(self.skip(pos) + 1)))
            pos = self.skip(pos + 1) if self.raw[pos] == "," else pos
        return pos + 1

    def items(self, pos: int, read) -> int:
        """The array at `pos`: `read(index, start) -> end` reads each item; returns the array's end."""
        pos = self.skip(pos + 1)
        index = 0
        while self.raw[pos] != "]":
            pos = self.skip(read(index, pos))
            index += 1
            pos = self.skip(pos + 1) if self.raw[pos] == "," else pos
        return pos + 1

    def value_end(self, pos: int) -> int:
        return self.decoder.raw_decode(self.raw, pos)[1]

    def source_positions(self) -> list[tuple[tuple[int, int], tuple[_Element, ...]]]:
        """Per cell, the span of its `source` value and the strings in it."""
        found: list = []

        def source(start: int) -> int:
            if self.raw[start] == '"':
                text, end = self.string(start)
                found[-1] = ((start, end), (_Element(start + 1, end - 1, text),))
                return end
            if self.raw[start] != "[":  # a markdown cell's odd source: nothing gpulint writes
                return self.value_end(start)
            elements: list[_Element] = []

            def line(index: int, at: int) -> int:
                if self.raw[at] != '"':
                    return self.value_end(at)
                text, end = self.string(at)
                elements.append(_Element(at + 1, end - 1, text))
                return end

            end = self.items(start, line)
            found[-1] = ((start, end), tuple(elements))
            return end

        def cell(index: int, start: int) -> int:
            found.append(((start, start), ()))
            return self.members(start, lambda key, at: source(at) if key == "source" else self.value_end(at))

        def top(key: str, at: int) -> int:
            if key == "cells":
                found.clear()  # a repeated key: json.loads keeps the last one
                return self.items(at, cell)
            return self.value_end(at)

        self.members(self.skip(0), top)
        return found


def _language(metadata: dict) -> str | None:
    """The kernel's language (`language_info.name`, else `kernelspec.language`), as ruff reads it."""
    for key, name in (("language_info", "name"), ("kernelspec", "language")):
        table = metadata.get(key)
        if isinstance(table, dict) and isinstance(table.get(name), str):
            return table[name]
    return None


# ---- masking IPython syntax ----------------------------------------------------------------------


ESCAPE, ASSIGNMENT, HELP, CONTINUATION = "escape", "assignment", "help", "continuation"


@dataclass(frozen=True)
class Mask:
    """A line IPython rewrites: its text (without line break) and the Python placeholder the module holds."""

    id: int
    row: int  # in the cell, 1-based
    kind: str  # ESCAPE (`%magic`, `!cmd`, auto-call), ASSIGNMENT (`x = !cmd`), HELP (`obj?`), CONTINUATION
    original: str
    placeholder: str


@dataclass
class CellScan:
    """Where a cell's Python stands at the end of a line: open brackets, an open string, a backslash."""

    brackets: list[tuple[int, int, str]] = field(default_factory=list)  # (row, column, char) still open
    quote: str | None = None
    quote_at: tuple[int, int] = (0, 0)
    continued: bool = False

    @property
    def at_statement_start(self) -> bool:
        return not self.brackets and self.quote is None and not self.continued

    def line(self, text: str, row: int) -> int | None:
        """Advance over one line (with its break); returns where its comment starts (None: no comment)."""
        pos = 0
        if self.quote is not None:
            end = _STRING_END[self.quote].match(text)
            if end is None:
                if len(self.quote) == 1 and not text.rstrip("\r\n").endswith("\\"):
                    self.quote = None  # an unterminated one-line string: Python reports it, the scan moves on
                return None
            self.quote, pos = None, end.end()
        comment = None
        while True:
            token = _PYTHON_TOKEN.search(text, pos)
            if token is None:
                break
            if token.group("quote"):
                quote = token.group("quote")
                end = _STRING_END[quote].match(text, token.end())
                if end is None:
                    if len(quote) == 3 or text.rstrip("\r\n").endswith("\\"):
                        self.quote, self.quote_at = quote, (row, token.start() + 1)
                    return None
                pos = end.end()
                continue
            if token.group("comment"):
                comment = token.start()
                break
            if token.group("open"):
                self.brackets.append((row, token.start() + 1, token.group()))
            elif self.brackets:
                self.brackets.pop()
            pos = token.end()
        code = text[:comment] if comment is not None else text.rstrip("\r\n")
        self.continued = code.endswith("\\")
        return comment

    def error(self) -> tuple[str, int, int] | None:
        """What CPython would say about a cell that ends here: (message, row, column), or None."""
        if self.quote is not None:
            kind = "triple-quoted string literal" if len(self.quote) == 3 else "string literal"
            return f"unterminated {kind} (the cell ends before it closes)", *self.quote_at
        if self.brackets:
            row, column, char = self.brackets[0]
            return f"'{char}' was never closed", row, column
        return None


def cell_magic(text: str) -> str | None:
    """The cell magic on the cell's first non-blank line (`time` for `%%time -n 3`), or None."""
    for line in lines_with_ends(text):
        stripped = line.strip()
        if stripped:
            match = _MAGIC_NAME.match(stripped)
            return match.group("name") if match and stripped.startswith("%%") else None
    return None


def _is_automagic(text: str) -> bool:
    for line in lines_with_ends(text):
        words = line.split()
        if words:
            return words[0] in AUTOMAGICS and (len(words) == 1 or words[1] not in _ASSIGNMENT_OPERATORS)
    return False


def skip_reason(cell: Cell) -> str | None:
    """Why a code cell is not Python the notebook's kernel runs in its namespace, or None when it is."""
    language = cell.metadata.get("vscode", {}).get("languageId") if isinstance(cell.metadata.get("vscode"), dict) else None
    if isinstance(language, str) and language != "python":
        return f"a {language} cell"
    magic = cell_magic(cell.source)
    if magic is not None and magic not in PYTHON_CELL_MAGICS:
        return f"a %%{magic} cell"
    if magic is None and _is_automagic(cell.source):
        return "an automagic command"
    return None


def _help_line(code: str) -> bool:
    """`obj?`, `obj.attr??`, `np.*load*?`: a statement ending in `?` is IPython's help, never Python."""
    return code.rstrip().endswith("?")


def _mask_cell(text: str, marker: str, next_id: int) -> tuple[str, list[Mask], tuple[str, int, int] | None]:
    """The cell's text with IPython syntax replaced (same rows), its masks, and the syntax error of a cell that
    ends inside a string or brackets."""
    lines = lines_with_ends(text)
    scan = CellScan()
    masks: list[Mask] = []
    out: list[str] = []
    continues = False  # the line before was masked and ended with a backslash
    for row, line in enumerate(lines, 1):
        body = line.rstrip("\r\n")
        indent = _INDENT.match(body).group()
        content = body[len(indent) :]
        tag = f"#{marker}{next_id}"
        statement = f"{indent}pass  {tag}" if indent else tag  # a comment cannot be a block's only statement
        if continues:
            kind, placeholder = CONTINUATION, f"{indent}{tag}"
        elif not (scan.at_statement_start and content):
            scan.line(line, row)
            out.append(line)
            continue
        elif content[0] in "!%?/,;":
            kind, placeholder = ESCAPE, statement
        elif (assigned := _ASSIGNED_ESCAPE.match(content)) is not None:
            kind, placeholder = ASSIGNMENT, f"{indent}{assigned.group('target')} = ...  {tag}"
        else:
            before = (list(scan.brackets), scan.quote, scan.quote_at, scan.continued)
            comment = scan.line(line, row)
            if scan.quote is not None or not _help_line(body[:comment] if comment is not None else body):
                out.append(line)
                continue
            scan.brackets, scan.quote, scan.quote_at, scan.continued = before
            kind, placeholder = HELP, statement
        masks.append(Mask(next_id, row, kind, body, placeholder))
        next_id += 1
        out.append(placeholder + line[len(body) :])
        continues = body.endswith("\\")
    error = scan.error()
    if error is None and scan.continued:
        error = ("unexpected EOF: the cell ends with a backslash continuation", len(lines), 1)
    return "".join(out), masks, error


def _dedent(text: str) -> tuple[str, str]:
    """A cell indented as a whole, as IPython runs it: without the first line's leading whitespace, when every
    line with code starts with it (a cell only partly indented stays as written: Python reports it).
    Returns the text and the indentation removed."""
    lines = lines_with_ends(text)
    indent = _INDENT.match(lines[0]).group() if lines else ""
    if not indent or any(line.strip() and not line.startswith(indent) for line in lines):
        return text, ""
    return "".join(line[len(indent) :] if line.startswith(indent) else line for line in lines), indent


# ---- cells that are not Python ----------------------------------------------------------------------

# The value a broken cell's stub binds its names to: a name nothing defines, so nothing is known about them.
SKIPPED_CELL_VALUE = "__gpulint_skipped_cell__"
_STUB_LINE = re.compile(rf"^(?!\d)\w+ = {SKIPPED_CELL_VALUE}$", re.M)
_NAME = re.compile(r"(?!\d)\w+")
_DEFINITION = re.compile(r"(?:async\s+)?(?:def|class)\s+(?P<name>(?!\d)\w+)")
_IMPORT = re.compile(r"import\s+(?P<names>.+)")
_FROM_IMPORT = re.compile(r"from\s+[\w.]+\s+import\s+\(?(?P<names>[^)]*)\)?")
_FOR = re.compile(r"(?:async\s+)?for\s+(?P<targets>.+?)\s+in\b")
_AS = re.compile(r"\bas\s+(?P<name>(?!\d)\w+)")
_STRING = re.compile(r"""[rRbBuUfF]{0,2}(?:'[^'\\]*(?:\\.[^'\\]*)*'|"[^"\\]*(?:\\.[^"\\]*)*")""")


def _python_error(text: str) -> tuple[str, int, int] | None:
    """CPython's syntax error in `text`: (message, row, column), or None when it parses (or is too deep for
    the parser to tell: the linter reports that for the whole file)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # `"\d"` and friends: not a syntax error
            ast.parse(text)
    except SyntaxError as error:
        return str(error.msg), max(error.lineno or 1, 1), max(error.offset or 1, 1)
    except ValueError as error:  # null bytes, before Python 3.12
        return str(error), 1, 1
    except (RecursionError, MemoryError):
        return None
    return None


def _libcst_limitation(text: str) -> str | None:
    """Why LibCST cannot parse a cell CPython compiles (an indent of spaces, then a tab), or None. Only such
    cells are tried: LibCST parses the whole module later, and no other difference is known."""
    if tab_after_spaces(text) is None or _python_error(text) is not None:
        return None
    import libcst as cst

    try:
        cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        return libcst_limitation((error.message or "a parser error").splitlines()[0], text)
    except RecursionError:
        return None
    return None


def _assigned_names(code: str) -> list[str]:
    """The names a line's assignment binds (`a, b = ...`, `x += 1`, `y: int = 0`), read from its text: the
    targets before each `=` outside brackets; attributes and subscripts (`m.fc = ...`) bind nothing."""
    segments = []
    for statement in _STRING.sub('""', code).split(";"):  # `x = 1; y = 2`
        depth, cut = 0, 0
        for i, char in enumerate(statement):
            if char in "([{":
                depth += 1
            elif char in ")]}":
                depth -= 1
            elif char == "=" and depth == 0 and statement[i - 1 : i] not in ("=", "!", "<", ">") and statement[i + 1 : i + 2] != "=":
                segments.append(statement[cut:i])
                cut = i + 1
    names = []
    for segment in segments:
        target = segment.rstrip().rstrip("+-*/%&|^@<>")  # `x +=`
        if ":" in target:  # `y: int =` annotates y; `else: y =` assigns it
            head, tail = target.split(":", 1)
            target = tail if keyword.iskeyword(head.split()[0] if head.split() else "") else head
        for element in target.split(","):
            element = element.strip().lstrip("*([").rstrip(")]").strip()
            if _NAME.fullmatch(element):
                names.append(element)
    return names


def _bound_names(text: str) -> list[str]:
    """The module-level names a cell that does not parse may bind, read from its lines: assignment targets,
    `def`/`class` names, imports, `for` targets and `as` names at the top level or in a top-level block (not
    inside a function or class). A guess: its purpose is to make those names unknown, never to define them."""
    names: list[str] = []
    scan = CellScan()
    bodies: list[int] = []  # indents of the `def`/`class` lines whose bodies we are in
    for row, line in enumerate(lines_with_ends(text), 1):
        starts = scan.at_statement_start
        comment = scan.line(line, row)
        body = line[:comment] if comment is not None else line.rstrip("\r\n")
        content = body.strip()
        if not starts or not content:
            continue
        indent = len(body) - len(body.lstrip())
        while bodies and indent <= bodies[-1]:
            bodies.pop()
        if bodies:
            continue
        if (definition := _DEFINITION.match(content)) is not None:
            names.append(definition.group("name"))
            bodies.append(indent)
            continue
        imported = _FROM_IMPORT.match(content) or _IMPORT.match(content)
        if imported is not None:
            for part in imported.group("names").split(","):
                words = part.split()
                if words and words[0] != "*":
                    names.append(words[-1] if len(words) == 3 and words[1] == "as" else words[0].split(".")[0])
            continue
        if (loop := _FOR.match(content)) is not None:
            names += _NAME.findall(loop.group("targets"))
        if content.startswith(("with ", "async with ", "except ", "except(")):
            names += _AS.findall(content)
            continue
        names += _assigned_names(content)
    # `else: y = 1` reads as a target `else`: only real names make a stub line that parses.
    return [n for n in dict.fromkeys(names) if n.isidentifier() and not keyword.iskeyword(n)]


def _stub(text: str) -> str:
    """What the module holds for a cell that does not parse: each name it may bind, bound to nothing known, so
    that the cells after it never read a value (or a device) from a cell before it that it may have changed."""
    return "".join(f"{name} = {SKIPPED_CELL_VALUE}\n" for name in _bound_names(text))


def without_stubs(module: str) -> str:
    """The module with the stubs' lines left blank (same rows): what the names they bind are without the broken
    cells. A fix must not insert a name only a broken cell binds (`fix_invariants` checks this text)."""
    return _STUB_LINE.sub("", module) if SKIPPED_CELL_VALUE in module else module


@dataclass
class _Region:
    """An analysed code cell in the module: rows [start, start + rows), then its closing marker row."""

    cell: Cell
    start: int
    rows: int
    masked: str
    masks: list[Mask]
    indent: str = ""  # what `_dedent` removed from each line: columns in the cell are that much further right
    broken: bool = False  # not Python: the module holds its stub, not its code (`Notebook.broken` says why)

    @property
    def marker_row(self) -> int:
        return self.start + self.rows


# ---- the notebook ---------------------------------------------------------------------------------


class Notebook:
    """A parsed notebook and the Python module its code cells make (see the module docstring).

    It stands where a file's decoded text stands (`text`, `encoding`, `bom`, `encode`): `text` is the module,
    and `encode(module)` is the notebook's bytes with that module's cells written back.
    """

    encoding = "utf-8"

    def __init__(self, raw: str, bom: bool = False) -> None:
        self.raw = raw
        self.bom = bom
        data = _load(raw)
        self.cells = _cells(data["cells"])
        metadata = data.get("metadata")
        self.metadata = metadata if isinstance(metadata, dict) else {}
        self.language = _language(self.metadata)
        # A character no cell holds marks the module's own lines (cell ends, placeholders).
        self.marker = next(chr(c) for c in range(0xE000, 0xF900) if chr(c) not in raw)

    @classmethod
    def parse(cls, text: str, bom: bool = False) -> Notebook:
        """Read a notebook's JSON text; raises NotebookError with a one-line message for the user."""
        return cls(text, bom)

    @property
    def is_python(self) -> bool:
        return self.language is None or self.language.lower() in ("python", "python3", "ipython", "ipython3")

    @property
    def code(self) -> str:
        """Every code cell's source, unmasked: what a text prefilter may look at before the module is built
        (a word absent here is absent from the module)."""
        return "\n".join(cell.source for cell in self.cells if cell.kind == "code")

    # The module is built on first use: a notebook no rule looks at is never masked.

    @property
    def text(self) -> str:
        return self._module[0]

    @property
    def regions(self) -> list[_Region]:
        return self._module[1]

    @property
    def skipped(self) -> dict[int, str]:
        """Cell number -> why that code cell is not analysed."""
        return self._module[2]

    @property
    def broken(self) -> dict[int, tuple[str, Location]]:
        """Cell number -> why that code cell is left out of the module (CPython's `SyntaxError: ...`, or LibCST's
        limitation on code CPython compiles) and where in the cell: cells that are not Python (yet), an
        exercise's blanks, an unfinished edit."""
        return self._module[3]

    @property
    def no_cell_parses(self) -> bool:
        """Some code cell is not Python, and no other cell is left to analyse."""
        return bool(self.broken) and all(region.broken for region in self.regions)

    def broken_label(self, number: int) -> str:
        """`cell 3:2:5: SyntaxError: invalid syntax`, a broken cell's error as warnings name it."""
        message, location = self.broken[number]
        return f"cell {number}:{location.row}:{location.column}: {message}"

    @cached_property
    def _module(self) -> tuple[str, list[_Region], dict[int, str], dict[int, tuple[str, Location]]]:
        skipped: dict[int, str] = {}
        cells: list[tuple[Cell, str, str, list[Mask]]] = []  # (cell, masked text, indent removed, masks)
        broken: dict[int, tuple[str, Location]] = {}
        next_id = 0
        for cell in self.cells:
            if cell.kind != "code":
                continue
            reason = skip_reason(cell)
            if reason is not None:
                skipped[cell.number] = reason
                continue
            dedented, indent = _dedent(cell.source)
            masked, masks, error = _mask_cell(dedented, self.marker, next_id)
            next_id += len(masks)
            cells.append((cell, masked, indent, masks))
            if error is not None:  # it ends inside brackets or a string: it would swallow the cells after it
                message, error_row, column = error
                broken[cell.number] = ("SyntaxError: " + message, Location(error_row, column + len(indent)))
            elif (limitation := _libcst_limitation(masked)) is not None:
                broken[cell.number] = (limitation, Location(tab_after_spaces(masked) or 1, 1))
        text, regions = self._assemble(cells, broken)
        error = _python_error(text)
        if error is not None:
            # Which cells are not Python: each on its own (the module's error may show only in the next cell,
            # after an empty block); then, for an error only the cells together make, the cell it is in.
            for cell, masked, indent, _ in cells:
                if cell.number not in broken and (own := _python_error(masked)) is not None:
                    broken[cell.number] = ("SyntaxError: " + own[0], Location(own[1], own[2] + len(indent)))
            text, regions = self._assemble(cells, broken)
            while (error := _python_error(text)) is not None:
                region = self._region_at(regions, error[1])
                if region is None or region.broken:
                    break  # the linter reports it as the module's syntax error
                where = Location(error[1] - region.start + 1, error[2] + len(region.indent))
                broken[region.cell.number] = ("SyntaxError: " + error[0], where)
                text, regions = self._assemble(cells, broken)
        ordered = {cell.number: broken[cell.number] for cell, *_ in cells if cell.number in broken}
        return text, regions, skipped, ordered

    def _assemble(self, cells: list[tuple[Cell, str, str, list[Mask]]], broken: dict) -> tuple[str, list[_Region]]:
        """The module of the cells: each cell's masked text and its closing line; a broken cell's text is its
        stub (`_stub`), so that what it would bind is unknown to the cells after it."""
        parts: list[str] = []
        regions: list[_Region] = []
        row = 1
        for cell, masked, indent, masks in cells:
            is_broken = cell.number in broken
            text = _stub(masked) if is_broken else masked
            region = _Region(cell, row, len(lines_with_ends(text)), text, [] if is_broken else masks, indent, is_broken)
            regions.append(region)
            parts.append(text)
            if text and not text.endswith(("\n", "\r")):
                parts.append("\n")
            parts.append(self._closing_line(cell.number))
            row = region.marker_row + 1
        return "".join(parts), regions

    @staticmethod
    def _region_at(regions: list[_Region], row: int) -> _Region | None:
        index = bisect.bisect_right([r.start for r in regions], row) - 1
        return regions[index] if index >= 0 else None

    @cached_property
    def _starts(self) -> list[int]:
        return [r.start for r in self.regions]

    @cached_property
    def _stored(self) -> list[tuple[tuple[int, int], tuple[_Element, ...]]]:
        """Per cell, where its `source` is in the JSON text and its strings (found when writing or pointing
        into the file, never for a check)."""
        return _Reader(self.raw).source_positions()

    def _closing_line(self, number: int) -> str:
        return f"#{self.marker}cell {number}\n"

    # ---- positions ---------------------------------------------------------------------------

    def _region_of(self, row: int) -> _Region | None:
        index = bisect.bisect_right(self._starts, row) - 1
        return self.regions[max(index, 0)] if self.regions else None

    def cell_location(self, location: Location) -> tuple[int, Location]:
        """The cell (its 1-based number in the notebook) and the position in it of a module position.
        The row closing a cell (where an insertion at a cell's end lands) is the cell's end."""
        region = self._region_of(location.row)
        if region is None:
            return 1, location
        if region.broken:  # its stub's rows stand for no row of the cell
            return region.cell.number, Location(1, 1)
        if location.row < region.marker_row:
            row = location.row - region.start + 1
            return region.cell.number, Location(row, location.column + self._shift(region, row))
        source = region.cell.source
        lines = lines_with_ends(source)
        if not lines:
            return region.cell.number, Location(1, 1)
        if source.endswith(("\n", "\r")):
            return region.cell.number, Location(len(lines) + 1, 1)
        return region.cell.number, Location(len(lines), len(lines[-1]) + 1)

    @staticmethod
    def _shift(region: _Region, row: int) -> int:
        """How many columns `_dedent` removed from a row of the cell (none from a blank row without them)."""
        if not region.indent:
            return 0
        lines = lines_with_ends(region.cell.source)
        return len(region.indent) if row > len(lines) or lines[row - 1].startswith(region.indent) else 0

    def localize(self, path: str, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        """The diagnostics with the module rows their messages and fix messages mention (`line 12`, `path:12`)
        as cell rows."""
        file_reference = re.compile(re.escape(path) + r":(\d+)\b")

        def in_cell(match: re.Match) -> str:
            cell, inner = self.cell_location(Location(int(match.group(1)), 1))
            return f"cell {cell}, line {inner.row}" if match.re is _LINE_REFERENCE else f"{path}:cell {cell}:{inner.row}"

        def text(message: str) -> str:
            parts = message.split("`")  # even parts are prose, odd ones quote code
            for i in range(0, len(parts), 2):
                parts[i] = file_reference.sub(in_cell, _LINE_REFERENCE.sub(in_cell, parts[i]))
            return "`".join(parts)

        def localized(d: Diagnostic) -> Diagnostic:
            fix = d.fix and replace(d.fix, message=text(d.fix.message))
            return replace(d, message=text(d.message), help=text(d.help), fix=fix)

        # No finding is reported in a broken cell (its stub is no code of the user's); file-level errors stay.
        return [localized(d) for d in diagnostics if d.code is None or not self._in_broken_cell(d.location.row)]

    def _in_broken_cell(self, row: int) -> bool:
        region = self._region_of(row)
        return region is not None and region.broken and row < region.marker_row

    def label(self, location: Location) -> str:
        """`cell 3:2:5`, the position as ruff prints it for notebooks."""
        cell, inner = self.cell_location(location)
        return f"cell {cell}:{inner.row}:{inner.column}"

    def file_location(self, location: Location) -> Location:
        """The same position in the `.ipynb` file's JSON text (1-based line and character column), inside the
        string that holds that character of the cell's source."""
        number, inner = self.cell_location(location)
        cell = self.cells[number - 1]
        span, elements = self._stored[number - 1]
        starts = line_starts(cell.source)
        offset = min(starts[min(inner.row, len(starts)) - 1] + inner.column - 1, len(cell.source))
        raw_offset = span[0]
        consumed = 0
        for element in elements:
            if offset < consumed + len(element.text) or element is elements[-1]:
                raw_offset = element.start + _raw_length(self.raw[element.start : element.end], offset - consumed)
                break
            consumed += len(element.text)
        line = bisect.bisect_right(self._raw_lines, raw_offset) - 1
        return Location(line + 1, raw_offset - self._raw_lines[line] + 1)

    @cached_property
    def _raw_lines(self) -> list[int]:
        return line_starts(self.raw)

    # ---- writing back -----------------------------------------------------------------------

    def cell_sources(self, module: str) -> dict[int, str]:
        """Each analysed cell's source in `module` (a changed copy of `text`), masked lines put back.
        Raises NotebookError when a cell's closing line or a masked line was changed, moved or removed."""
        pattern = re.compile(rf"^#{self.marker}cell (\d+)\n", re.M)
        pieces = pattern.split(module)
        numbers = [int(n) for n in pieces[1::2]]
        if numbers != [r.cell.number for r in self.regions] or pieces[-1] != "":
            raise NotebookError("a fix moved a cell boundary; the notebook was left as it was")
        sources = {}
        tag = re.compile(rf"#{self.marker}(\d+)$")
        for region, text in zip(self.regions, pieces[0::2]):
            if region.broken:
                if text != region.masked:
                    raise NotebookError(f"a fix changed cell {region.cell.number}, which was not analysed; the notebook was left as it was")
                continue  # written back as it is stored, byte for byte
            masks = {m.id: m for m in region.masks}
            lines = lines_with_ends(text)
            for index, line in enumerate(lines):
                body = line.rstrip("\r\n")
                found = tag.search(body) if self.marker in body else None
                if found is None:
                    continue
                mask = masks.pop(int(found.group(1)), None)
                if mask is None or body != mask.placeholder:
                    raise NotebookError("a fix changed an IPython line; the notebook was left as it was")
                lines[index] = mask.original + line[len(body) :]
            if masks:
                raise NotebookError("a fix removed an IPython line; the notebook was left as it was")
            if region.indent:  # the cell was analysed dedented: written back as indented as it was
                lines = [region.indent + line if line.strip() else line for line in lines]
            text = "".join(lines)
            if not region.cell.source.endswith(("\n", "\r")) and text.endswith(("\n", "\r")):
                text = text[:-2] if text.endswith("\r\n") else text[:-1]  # the line break the module added
            sources[region.cell.number] = text
        return sources

    def rewrite(self, module: str) -> str:
        """The notebook's JSON text with each changed cell's `source` replaced; every other byte kept."""
        changes = []
        for number, text in self.cell_sources(module).items():
            cell = self.cells[number - 1]
            if text != cell.source:
                changes.append((self._stored[number - 1][0], self._source_json(number, text)))
        out = self.raw
        for (start, end), value in sorted(changes, reverse=True):
            out = out[:start] + value + out[end:]
        return out

    def encode(self, module: str) -> bytes:
        """The notebook's bytes with `module`'s cells written back (the original bytes for `text` itself)."""
        data = self.rewrite(module).encode("utf-8")
        return b"\xef\xbb\xbf" + data if self.bom else data

    def _source_json(self, number: int, text: str) -> str:
        ascii_only = self.raw.isascii() and "\\u" in self.raw
        if not self.cells[number - 1].as_list:
            return json.dumps(text, ensure_ascii=ascii_only)
        span, elements = self._stored[number - 1]
        old = [e.text for e in elements]
        new = lines_with_ends(text)
        written: list[str] = []
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                written += [self.raw[e.start - 1 : e.end + 1] for e in elements[i1:i2]]  # the bytes as stored
            else:
                written += [json.dumps(line, ensure_ascii=ascii_only) for line in new[j1:j2]]
        if not written:
            return "[]"
        opening, separator, closing = self._list_layout(number)
        return "[" + opening + separator.join(written) + closing + "]"

    def _list_layout(self, number: int) -> tuple[str, str, str]:
        """How this notebook lays out a list of strings: after `[`, between items, before `]`."""
        lists = [(n, stored) for n, stored in enumerate(self._stored, 1) if self.cells[n - 1].as_list and stored[1]]
        for n, (span, elements) in sorted(lists, key=lambda item: (len(item[1][1]) < 2, item[0] != number)):
            opening = self.raw[span[0] + 1 : elements[0].start - 1]
            closing = self.raw[elements[-1].end + 1 : span[1] - 1]
            if len(elements) > 1:
                return opening, self.raw[elements[0].end + 1 : elements[1].start - 1], closing
            return opening, "," + opening, closing
        # Nothing to copy: nbformat's own layout (indent 1) below the `"source"` key.
        line_start = self.raw.rfind("\n", 0, self._stored[number - 1][0][0]) + 1
        key_indent = _INDENT.match(self.raw, line_start).group()
        return "\n" + key_indent + " ", ",\n" + key_indent + " ", "\n" + key_indent

    # ---- other views --------------------------------------------------------------------------

    def script(self) -> str:
        """The notebook as a Python script, as `jupyter nbconvert --to script` orders it, IPython syntax left out:
        the analysed cells in order; `%time STMT` (and `%timeit`, `%prun`) runs STMT; `%%time` cells run their
        body; other magics, shell escapes and help lines are left out. Raises NotebookError when a left-out line
        changes what later cells see (`%cd`, `%env`, `%run`, `%%writefile`, `x = !cmd`, ...)."""
        for number in self.broken:
            raise NotebookError(f"{self.broken_label(number)}; a script of the other cells is not the notebook")
        for number in self.skipped:
            magic = cell_magic(self.cells[number - 1].source)
            if magic in STATEFUL_MAGICS:
                raise NotebookError(f"cell {number} is a %%{magic} cell, which a script cannot run; {_CONVERT_YOURSELF}")
        out = []
        for region in self.regions:
            lines = lines_with_ends(region.masked)
            for mask in region.masks:
                lines[mask.row - 1] = self._script_line(region.cell.number, mask) + lines[mask.row - 1][len(mask.placeholder) :]
            out.append(f"# %% cell {region.cell.number}\n" + "".join(lines))
            if not out[-1].endswith(("\n", "\r")):
                out.append("\n")
        return "".join(out)

    def _script_line(self, number: int, mask: Mask) -> str:
        """What a script runs for a masked line: the statement of `%time STMT`, else nothing (`pass` in a block)."""
        indent = _INDENT.match(mask.original).group()
        content = mask.original[len(indent) :]
        where = f"cell {number}:{mask.row}"
        if mask.kind == ASSIGNMENT:
            raise NotebookError(f"{where} assigns the output of an IPython command (`{content}`); {_CONVERT_YOURSELF}")
        magic = _MAGIC_NAME.match(content) if mask.kind == ESCAPE else None
        if magic is not None and not content.startswith("%%"):
            name = magic.group("name")
            if name in STATEFUL_MAGICS:
                raise NotebookError(f"{where} `{content}` changes what later cells see; {_CONVERT_YOURSELF}")
            statement = _statement_of(content[magic.end() :]) if name in STATEMENT_MAGICS else ""
            if statement:
                return indent + statement
        return f"{indent}pass" if mask.placeholder.startswith(f"{indent}pass") and indent else indent

    def cell_diff(self, fixed: Notebook, path: str) -> str:
        """A unified diff per changed code cell, headed `path:cell N`."""
        out = []
        for region in self.regions:
            number = region.cell.number
            before, after = region.cell.source, fixed.cells[number - 1].source
            if before == after:
                continue
            label = f"{path}:cell {number}"
            lines = difflib.unified_diff(_diff_lines(before), _diff_lines(after), fromfile=label, tofile=label)
            out.append("".join(lines))
        return "".join(out)


_CONVERT_YOURSELF = "convert the notebook yourself (`jupyter nbconvert --to script`) and profile the script"


def script_of(path: str | os.PathLike) -> str:
    """The notebook at `path` as a script that runs where Jupyter runs it (its folder first on `sys.path` and
    as the working directory, `display` from IPython when installed), for the profiler. Raises NotebookError
    when it cannot be read or run as a script."""
    from gpulint.source import decode_source, read_source_bytes

    text = decode_source(read_source_bytes(Path(path)))
    notebook = Notebook.parse(text.text, text.bom)
    if not notebook.is_python:
        raise NotebookError(f"the notebook's kernel runs {notebook.language}, not Python")
    folder = os.path.dirname(os.path.abspath(path))
    prologue = (
        f"__import__('sys').path.insert(0, {folder!r}); __import__('os').chdir({folder!r})  # as Jupyter runs it\n"
        "try:\n    from IPython.display import display  # a builtin in a notebook\nexcept ImportError:\n    pass\n"
    )
    return prologue + notebook.script()


def write_script(path: str | os.PathLike, folder: str | os.PathLike) -> str:
    """Write `script_of(path)` into `folder` (named after the notebook) and return where."""
    target = Path(folder) / (Path(path).stem + ".py")
    target.write_text(script_of(path), encoding="utf-8")
    return str(target)


def _statement_of(arguments: str) -> str:
    """The statement after `%time`/`%timeit`/`%prun` options (`-n 10 -r 3 f()` -> `f()`)."""
    words = arguments.strip()
    while words.startswith("-"):
        option, _, rest = words.partition(" ")
        words = rest.strip()
        if option[1:] in ("n", "r", "p", "t", "s", "l", "D", "T") and words and not words.startswith("-"):
            _, _, words = words.partition(" ")
            words = words.strip()
    return words


def _diff_lines(text: str) -> list[str]:
    lines = lines_with_ends(text)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"  # a cell's last line has no line break; the diff shows it as a line all the same
    return lines


_ESCAPES = re.compile(r"\\(?:u[0-9a-fA-F]{4}|.)")


def _raw_length(raw: str, characters: int) -> int:
    """How many characters of a JSON string's raw content spell its first `characters` decoded characters."""
    if "\\" not in raw:
        return min(characters, len(raw))
    pos = decoded = 0
    while decoded < characters and pos < len(raw):
        escape = _ESCAPES.match(raw, pos)
        if escape is None:
            pos += 1
        else:
            pos = escape.end()
            code = escape.group()
            if code.startswith("\\u") and 0xD800 <= int(code[2:], 16) < 0xDC00 and raw.startswith("\\u", pos):
                pos += 6  # a surrogate pair spells one character
        decoded += 1
    return pos
