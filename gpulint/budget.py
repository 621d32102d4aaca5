"""The per-file analysis budget: no file can keep `check` or `fix` busy for longer than `analysis-timeout`.

The budget counts CPU time (user + system, `ITIMER_PROF`), so a loaded machine or a busy CI runner does not
skip files that a quiet one checks. `check` gives it to each file; `fix` to each file's whole fix, re-checks
included. When it runs out, SIGPROF raises `AnalysisTimeout` wherever the analysis is; the file is reported
as not checked and the next one starts. Signals reach only the main thread: in another thread, on a platform
without `setitimer`, or when something else (a profiler) owns SIGPROF, the analysis runs without a limit.
"""

from __future__ import annotations

import signal
import threading
from typing import Callable, TypeVar

T = TypeVar("T")

DEFAULT_SECONDS = 120.0  # 4x the slowest real file we know (torch's common_methods_invocations.py, 1.4 MB: 31 s)

_state = {"active": False, "armed": False}


class AnalysisTimeout(BaseException):
    """The budget ran out. A BaseException, so that a rule's `except Exception` cannot swallow it."""


def timeout_message(seconds: float) -> str:
    return f"analysis took longer than {seconds:g} s of CPU time; skipped (raise `analysis-timeout` to check it)"


def _expire(signum, frame) -> None:
    if _state["armed"]:  # at most once per budget: cleanup code after the first raise is never interrupted
        _state["armed"] = False
        raise AnalysisTimeout


def _can_time() -> bool:
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGPROF) == signal.SIG_DFL
        and signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    )


def run_within(seconds: float | None, work: Callable[[], T], on_timeout: Callable[[], T]) -> T:
    """`work()`, or `on_timeout()` once it has used `seconds` of CPU time (None or 0: no limit).

    Inside another budget, `work()` runs under that one: the outermost caller (a whole `fix` of a file, with
    its re-checks) decides what a timeout means."""
    if not seconds or _state["active"] or not _can_time():
        return work()
    try:
        previous = signal.signal(signal.SIGPROF, _expire)
        _state["active"] = _state["armed"] = True
        try:
            signal.setitimer(signal.ITIMER_PROF, seconds)
            try:
                return work()
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
        finally:
            _state["active"] = _state["armed"] = False
            signal.signal(signal.SIGPROF, previous)
    except AnalysisTimeout:
        return on_timeout()
