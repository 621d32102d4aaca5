"""The CONVENTIONS.md error shape: `gpulint failed` and an indented cause on stderr, never a traceback."""

from __future__ import annotations

import sys
import textwrap


def print_failure(cause: str, details: str | None = None, stream=None) -> None:
    stream = stream or sys.stderr
    stream.write("gpulint failed\n")
    stream.write(f"  Cause: {cause}\n")
    if details:
        for line in textwrap.dedent(details).rstrip("\n").splitlines():
            stream.write(f"    {line}\n")
    stream.flush()
