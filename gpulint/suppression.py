"""Suppression comments: `# noqa[: CODES]`, `# gpulint: ignore[CODES]`, file-level `# gpulint: noqa`."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from gpulint.diagnostics import Diagnostic

_CODE_LIST = r"[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*"
_NOQA = re.compile(rf"#\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?", re.IGNORECASE)
_IGNORE = re.compile(r"#\s*gpulint:\s*ignore\[(?P<codes>[^\]]*)\]", re.IGNORECASE)
_FILE_NOQA = re.compile(rf"^#\s*gpulint:\s*noqa(?::\s*(?P<codes>{_CODE_LIST}))?\s*$", re.IGNORECASE)

ALL = None  # a blanket suppression


def _codes(text: str | None) -> frozenset[str] | None:
    if not text:
        return ALL
    return frozenset(c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)


@dataclass
class Suppressions:
    # row -> codes (None: every code) for `# noqa` / `# gpulint: ignore[...]` on that row
    lines: dict[int, frozenset[str] | None] = field(default_factory=dict)
    file_codes: frozenset[str] | None | bool = False  # False: no file-level suppression

    def _add(self, row: int, codes: frozenset[str] | None) -> None:
        if row in self.lines and (self.lines[row] is ALL or codes is ALL):
            self.lines[row] = ALL
        else:
            self.lines[row] = (self.lines.get(row) or frozenset()) | (codes or frozenset())

    def suppresses(self, diagnostic: Diagnostic) -> bool:
        code = diagnostic.code
        if code is None:
            return False  # syntax and I/O errors are never suppressed
        if self.file_codes is ALL or (self.file_codes and code in self.file_codes):
            return True
        row = diagnostic.noqa_row or diagnostic.location.row
        if row in self.lines:
            codes = self.lines[row]
            return codes is ALL or code in codes
        return False


def _comments(source: str) -> list[tuple[int, str, bool]]:
    """(row, text, own_line) for every comment; tokenize, so `"# noqa"` inside a string is not one."""
    found = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                own_line = token.line[: token.start[1]].strip() == ""
                found.append((token.start[0], token.string, own_line))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass  # the parser has accepted the file; comments collected so far are still right
    return found


def parse_suppressions(source: str) -> Suppressions:
    result = Suppressions()
    for row, text, own_line in _comments(source):
        if own_line:
            match = _FILE_NOQA.match(text)
            if match:
                codes = _codes(match.group("codes"))
                if codes is ALL or result.file_codes is ALL:
                    result.file_codes = ALL
                else:
                    result.file_codes = (result.file_codes or frozenset()) | codes
                continue
        match = _IGNORE.search(text)
        if match:
            codes = _codes(match.group("codes"))
            result._add(row, codes)
            if own_line:
                result._add(row + 1, codes)  # an own-line ignore covers the next line
            continue
        match = _NOQA.search(text)
        if match and not own_line:
            result._add(row, _codes(match.group("codes")))
    return result


def add_noqa(source: str, lines_codes: dict[int, set[str]], newline: str = "\n") -> tuple[str, int]:
    """Append `# noqa: CODES` to each row (merging with an existing noqa); returns (text, rows changed)."""
    rows = source.splitlines(keepends=True)
    changed = 0
    for row, codes in sorted(lines_codes.items()):
        if row < 1 or row > len(rows):
            continue
        line = rows[row - 1]
        body = line.rstrip("\r\n")
        ending = line[len(body) :]
        if body.rstrip().endswith("\\"):
            continue  # a comment after a line continuation would break the file
        match = _NOQA.search(body)
        if match and match.group("codes") is None:
            continue  # already a blanket noqa
        if match:
            existing = _codes(match.group("codes")) or frozenset()
            merged = ", ".join(sorted(existing | codes))
            body = body[: match.start()] + f"# noqa: {merged}" + body[match.end() :]
        else:
            body = body.rstrip() + f"  # noqa: {', '.join(sorted(codes))}"
        rows[row - 1] = body + ending
        changed += 1
    return "".join(rows), changed
