"""Suppression comments: `# noqa[: CODES]`, `# gpulint: ignore[CODES]`, file-level `# gpulint: noqa`."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from gpulint.diagnostics import Diagnostic
from gpulint.lines import LINE_BREAK, lines_with_ends

_CODE_LIST = r"[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*"
_NOQA = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?", re.IGNORECASE)
_IGNORE = re.compile(r"#\s*gpulint:\s*ignore\[(?P<codes>[^\]]*)\]", re.IGNORECASE)
_FILE_NOQA = re.compile(rf"^#\s*gpulint:\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?\s*$", re.IGNORECASE)

ALL = None  # a blanket suppression


def _codes(text: str | None) -> frozenset[str] | None:
    if not text:
        return ALL
    return frozenset(c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)


@dataclass(frozen=True)
class Directive:
    """One suppression comment as written: where its codes are, and the rows it covers."""

    row: int
    column: int  # 0-based character column of the directive in the row (`# noqa...`, `# gpulint: ignore[...]`)
    end_column: int
    codes: tuple[str, ...] | None  # as written, in order; None: a blanket suppression
    rows: tuple[int, ...]  # the finding rows it covers (noqa rows); () for a file-level directive
    kind: str  # "noqa", "ignore" or "file"
    own_line: bool


@dataclass
class Suppressions:
    # row -> codes (None: every code) for `# noqa` / `# gpulint: ignore[...]` on that row
    lines: dict[int, frozenset[str] | None] = field(default_factory=dict)
    file_codes: frozenset[str] | None | bool = False  # False: no file-level suppression
    # a row inside a multi-line string, or ending in a backslash -> the row its noqa comment goes on
    continued: dict[int, int] = field(default_factory=dict)
    directives: list[Directive] = field(default_factory=list)

    def _add(self, row: int, codes: frozenset[str] | None) -> None:
        if codes is ALL or (row in self.lines and self.lines[row] is ALL):
            self.lines[row] = ALL
        else:
            self.lines[row] = (self.lines.get(row) or frozenset()) | codes

    def noqa_row(self, row: int) -> int:
        """The row whose `# noqa` covers a finding on `row`: itself, or, where no comment can go, the row
        that ends the multi-line string or backslash continuation it lies in (as ruff does)."""
        return self.continued.get(row, row)

    def suppresses(self, diagnostic: Diagnostic) -> bool:
        code = diagnostic.code
        if code is None:
            return False  # syntax and I/O errors are never suppressed
        if self.file_codes is ALL or (self.file_codes and code in self.file_codes):
            return True
        row = self.noqa_row(diagnostic.location.row)
        if row in self.lines:
            codes = self.lines[row]
            return codes is ALL or code in codes
        return False


@dataclass
class _Scan:
    comments: list[tuple[int, int, str, bool]]  # (row, column, text, own_line), real comments only
    continued: dict[int, int]  # row inside a multi-line token or ending in a backslash -> the row a comment can go on


def _scan(source: str) -> _Scan:
    """Comments and multi-line tokens, by tokenize: `"# noqa"` inside a string is not a comment."""
    comments = []
    continued: dict[int, int] = {}
    previous = None
    line_ends = (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)
    try:
        # Rows end at \r\n, \r or \n, as in LibCST; tokenize reads \n-ended lines (same rows and columns).
        for token in tokenize.generate_tokens(io.StringIO(LINE_BREAK.sub("\n", source)).readline):
            if token.type == tokenize.COMMENT:
                own_line = token.line[: token.start[1]].strip() == ""
                comments.append((token.start[0], token.start[1], token.string, own_line))
            elif token.start[0] < token.end[0] and token.type not in (tokenize.NEWLINE, tokenize.NL):
                for row in range(token.start[0], token.end[0]):
                    continued[row] = token.end[0]  # a multi-line string: its comment goes after it
            if previous is not None and previous.type not in line_ends and token.type not in line_ends:
                for row in range(previous.end[0], token.start[0]):
                    continued[row] = token.start[0]  # a backslash continuation: on to the next line
            previous = token
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # the parser has accepted the file; what was collected so far is still right
    # A token may end on the row where the next multi-line token starts: follow the chain to its end.
    for row, last in continued.items():
        while last in continued:
            last = continued[last]
        continued[row] = last
    return _Scan(comments, continued)


def _written(text: str | None) -> tuple[str, ...] | None:
    if not text:
        return None
    return tuple(c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)


def parse_suppressions(source: str) -> Suppressions:
    scan = _scan(source)
    result = Suppressions(continued=scan.continued)

    def directive(row, column, match, rows, kind, own_line) -> None:
        written = _written(match.group("codes"))
        result.directives.append(Directive(row, column + match.start(), column + match.end(), written, rows, kind, own_line))

    for row, column, text, own_line in scan.comments:
        if own_line:
            match = _FILE_NOQA.match(text)
            if match:
                codes = _codes(match.group("codes"))
                if codes is ALL or result.file_codes is ALL:
                    result.file_codes = ALL
                else:
                    result.file_codes = (result.file_codes or frozenset()) | codes
                directive(row, column, match, (), "file", own_line)
                continue
        match = _IGNORE.search(text)
        if match:
            codes = _codes(match.group("codes"))
            result._add(row, codes)
            if own_line:
                result._add(row + 1, codes)  # an own-line ignore covers the next line
            directive(row, column, match, (row, row + 1) if own_line else (row,), "ignore", own_line)
            continue
        match = _NOQA.search(text)
        if match and not own_line:
            result._add(row, _codes(match.group("codes")))
            directive(row, column, match, (row,), "noqa", own_line)
    return result


def add_noqa(source: str, lines_codes: dict[int, set[str]]) -> tuple[str, int, list[int]]:
    """Append `# noqa: CODES` to each row (merging with an existing noqa comment).

    Returns (text, rows changed, rows where no comment can go: a backslash continuation, or a row inside a
    multi-line string; callers pass noqa rows, `Suppressions.noqa_row`, so the latter do not occur).
    """
    scan = _scan(source)
    comments = {row: (column, text) for row, column, text, _ in scan.comments}
    rows = lines_with_ends(source)
    changed = 0
    skipped: list[int] = []
    for row, codes in sorted(lines_codes.items()):
        if row < 1 or row > len(rows):
            continue
        line = rows[row - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        comment = comments.get(row)
        if comment is None and (body.rstrip().endswith("\\") or row in scan.continued):
            skipped.append(row)  # a comment there would break the file or land inside a string
            continue
        match = _NOQA.search(comment[1]) if comment is not None else None
        if match and match.group("codes") is None:
            continue  # already a blanket noqa
        if match:
            existing = _codes(match.group("codes")) or frozenset()
            merged = existing | codes
            if merged == existing:
                continue
            column = comment[0]
            text = comment[1][: match.start()] + f"# noqa: {', '.join(sorted(merged))}" + comment[1][match.end() :]
            body = body[:column] + text
        else:
            body = body.rstrip() + f"  # noqa: {', '.join(sorted(codes))}"
        rows[row - 1] = body + ending
        changed += 1
    return "".join(rows), changed, skipped
