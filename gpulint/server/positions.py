"""Positions between gpulint (1-based rows, 1-based character columns) and LSP (0-based lines, columns in the
negotiated encoding's code units: UTF-16 unless the client offers UTF-8 or UTF-32).

Lines end at `\\r\\n`, `\\r` and `\\n` only, as in the LSP specification and in gpulint's rows (`str.splitlines`
also splits at form feeds and `\\u2028`, which Python source may hold in comments and strings).
"""

from __future__ import annotations

from lsprotocol import types

from gpulint.diagnostics import Location
from gpulint.lines import LINE_BREAK, split_lines

_CODECS = {types.PositionEncodingKind.Utf8: "utf-8", types.PositionEncodingKind.Utf16: "utf-16-le"}


class TextIndex:
    """One version of a document's text, for converting positions in both directions."""

    def __init__(self, text: str, encoding: str = types.PositionEncodingKind.Utf16) -> None:
        self.lines = split_lines(text)
        self.ends_with_break = bool(text) and LINE_BREAK.match(text[-1]) is not None
        self.codec = _CODECS.get(encoding)  # None: UTF-32, one unit per character
        self.unit = 2 if self.codec == "utf-16-le" else 1

    def units(self, text: str) -> int:
        if self.codec is None:
            return len(text)
        return len(text.encode(self.codec, "surrogatepass")) // self.unit

    def position(self, location: Location) -> types.Position:
        """The LSP position of a gpulint location; a row past the last line is the end of the document."""
        row = location.row - 1
        if row >= len(self.lines):
            if self.ends_with_break or not self.lines:
                return types.Position(line=len(self.lines), character=0)
            return types.Position(line=len(self.lines) - 1, character=self.units(self.lines[-1]))
        line = self.lines[max(row, 0)]
        return types.Position(line=max(row, 0), character=self.units(line[: max(location.column - 1, 0)]))

    def range(self, start: Location, end: Location) -> types.Range:
        return types.Range(start=self.position(start), end=self.position(end))

    def location(self, position: types.Position) -> Location:
        """The gpulint location of an LSP position (a column inside a character, or past the line, is clamped)."""
        if position.line >= len(self.lines):
            return Location(len(self.lines) + 1, 1)
        line = self.lines[position.line]
        used = 0
        for index, char in enumerate(line):
            if used >= position.character:
                return Location(position.line + 1, index + 1)
            used += self.units(char)
        return Location(position.line + 1, len(line) + 1)
