"""Diagnostics are plain data: reporters and the fixer see these, never the syntax tree."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Applicability(str, enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, order=True)
class Location:
    """A 1-based row and a 1-based character column."""

    row: int
    column: int


@dataclass(frozen=True)
class Edit:
    """Replace the text between `location` and `end_location` (exclusive) with `content`."""

    location: Location
    end_location: Location
    content: str


@dataclass(frozen=True)
class Fix:
    message: str
    applicability: Applicability
    edits: tuple[Edit, ...]


# Pseudo-rules that are not in the registry: they report that a file could not be checked at all.
INVALID_SYNTAX = "invalid-syntax"
IO_ERROR = "io-error"
INTERNAL_ERROR = "internal-error"  # a rule crashed on the file
# CPython compiles the file but LibCST cannot parse it: the file is skipped with a warning, not reported (the API
# turns it into `FileResult.skipped`; an editor or flake8 sees it as a note that the file was not checked).
PARSER_LIMITATION = "parser-limitation"


@dataclass(frozen=True)
class Diagnostic:
    code: str | None  # None for invalid-syntax / io-error
    name: str
    message: str
    filename: str
    location: Location
    end_location: Location
    severity: Severity = Severity.WARNING
    fix: Fix | None = None
    noqa_row: int | None = None
    # Where a resolved value came from, e.g. "argparse default at train.py:21" (for messages and JSON).
    related: tuple[tuple[str, Location], ...] = field(default=())
    # Why it matters and what to do: `message` says what and where in one short line, this the rest.
    help: str = ""

    @property
    def is_fixable(self) -> bool:
        return self.fix is not None and self.fix.applicability != Applicability.DISPLAY_ONLY

    def sort_key(self) -> tuple:
        return (self.filename, self.location, self.code or "")

    def to_dict(self) -> dict:
        """ruff's JSON shape (see CONVENTIONS.md), with gpulint's severity."""
        fix = None
        if self.fix is not None:
            fix = {
                "applicability": self.fix.applicability.value,
                "message": self.fix.message,
                "edits": [
                    {
                        "content": e.content,
                        "location": {"row": e.location.row, "column": e.location.column},
                        "end_location": {"row": e.end_location.row, "column": e.end_location.column},
                    }
                    for e in self.fix.edits
                ],
            }
        return {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "severity": self.severity.value,
            "filename": self.filename,
            "location": {"row": self.location.row, "column": self.location.column},
            "end_location": {"row": self.end_location.row, "column": self.end_location.column},
            "fix": fix,
            "noqa_row": self.noqa_row,
            "url": rule_url(self.code) if self.code else None,
            "help": self.help or None,
        }

    @classmethod
    def from_dict(cls, data: dict) -> Diagnostic:
        fix = None
        if data.get("fix"):
            f = data["fix"]
            fix = Fix(
                message=f["message"],
                applicability=Applicability(f["applicability"]),
                edits=tuple(
                    Edit(
                        Location(e["location"]["row"], e["location"]["column"]),
                        Location(e["end_location"]["row"], e["end_location"]["column"]),
                        e["content"],
                    )
                    for e in f["edits"]
                ),
            )
        return cls(
            code=data["code"],
            name=data["name"],
            message=data["message"],
            filename=data["filename"],
            location=Location(data["location"]["row"], data["location"]["column"]),
            end_location=Location(data["end_location"]["row"], data["end_location"]["column"]),
            severity=Severity(data["severity"]),
            fix=fix,
            noqa_row=data.get("noqa_row"),
            help=data.get("help") or "",
        )


DOCS_URL = "https://github.com/gpulint/gpulint/blob/main/rules/"


def is_applicable(diagnostic: Diagnostic, unsafe: bool) -> bool:
    """`gpulint fix --apply` (with the given unsafe setting) would apply this finding's fix: `[*]` in reports."""
    fix = diagnostic.fix
    if fix is None:
        return False
    return fix.applicability == Applicability.SAFE or (unsafe and fix.applicability == Applicability.UNSAFE)


_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


def fails(diagnostic: Diagnostic, fail_on: Severity) -> bool:
    """The finding makes `check` exit 1 under `--fail-on`: at or above that severity. Files that could not
    be checked (syntax and I/O errors) always fail."""
    if diagnostic.code is None:
        return True
    return _RANK[Severity(diagnostic.severity)] >= _RANK[fail_on]


def rule_url(code: str) -> str:
    return f"{DOCS_URL}{code}.md"
