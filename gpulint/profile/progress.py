"""One self-overwriting progress line on stderr while runs are in flight (only on a terminal, never in CI)."""

from __future__ import annotations

import sys


class Progress:
    def __init__(self, enabled: bool, stream=None):
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.prefix = ""
        self._width = 0

    def run(self, index: int, total: int, label: str) -> None:
        self.prefix = f"gpulint: run {index} of {total} ({label})"
        self.show("starting")

    def show(self, text: str) -> None:
        if not self.enabled:
            return
        line = f"{self.prefix}: {text}" if self.prefix else text
        pad = max(0, self._width - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self._width = len(line)

    def clear(self) -> None:
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
