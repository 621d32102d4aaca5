"""A tiny progress bar on stderr: only for a terminal, never under CI, gone when the run ends."""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

MIN_FILES = 50  # shorter runs finish before a bar would be worth drawing
REDRAW_SECONDS = 0.1


def wanted(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stderr
    if os.environ.get("CI"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """`Checking  [#######.......]  120/400 files` redrawn in place with `\\r`, then erased."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool | None = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.done = 0
        self.width = width
        self.enabled = (wanted(self.stream) if enabled is None else enabled) and total >= MIN_FILES
        self._last = 0.0
        self._drawn = 0

    def advance(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last >= REDRAW_SECONDS or self.done >= self.total:
            self._last = now
            self._draw()

    def _draw(self) -> None:
        filled = self.width * self.done // max(1, self.total)
        line = f"Checking [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} files"
        self._drawn = len(line)
        try:
            self.stream.write("\r" + line)
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False

    def close(self) -> None:
        if self.enabled and self._drawn:
            try:
                self.stream.write("\r" + " " * self._drawn + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                pass
        self.enabled = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
