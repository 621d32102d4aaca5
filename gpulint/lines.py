"""Line splitting the way Python and LibCST count rows: only `\r\n`, `\r` and `\n` end a line.

`str.splitlines()` also splits on form feed, vertical tab, `\x1c`-`\x1e`, `\x85`, `\u2028` and `\u2029`,
so its rows drift from the rows in diagnostics; every row-indexed view of a source uses these instead.
"""

from __future__ import annotations

import re

LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def split_lines(text: str) -> list[str]:
    """The lines without their endings (like `splitlines()`: no empty last item after a final newline)."""
    lines = LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def lines_with_ends(text: str) -> list[str]:
    """The lines with their endings; joined they give `text` back."""
    return _LINE.findall(text)


def line_starts(text: str) -> list[int]:
    """The offset of each line's first character, plus the end of the text."""
    starts = [0]
    for match in _LINE.finditer(text):
        starts.append(match.end())
    return starts
