"""The processes a run started, wherever they went: torchrun starts its ranks with `start_new_session=True`, so
they leave the run's process group; they are still its descendants (Linux /proc; elsewhere nothing is found)."""

from __future__ import annotations

import os
import signal


def _stat(pid: int) -> tuple[int, int, int] | None:
    """(ppid, pgid, start time in clock ticks) from /proc/<pid>/stat, or None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()  # the command name may hold spaces and parentheses
    try:
        return int(fields[1]), int(fields[2]), int(fields[19])
    except (IndexError, ValueError):
        return None


def is_descendant(pid: int, ancestor: int | None, max_depth: int = 64) -> bool:
    """True when `ancestor` is found walking up the parent chain from `pid` (the pid itself excluded)."""
    if ancestor is None:
        return False
    for _ in range(max_depth):
        info = _stat(pid)
        if info is None or info[0] <= 1:
            return False
        if info[0] == ancestor:
            return True
        pid = info[0]
    return False


def descendants(root: int) -> dict[int, tuple[int, int]]:
    """{pid: (pgid, start time)} for every living descendant of `root`."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    parents: dict[int, list[int]] = {}
    info: dict[int, tuple[int, int]] = {}
    for name in names:
        if not name.isdigit():
            continue
        st = _stat(int(name))
        if st is None:
            continue
        parents.setdefault(st[0], []).append(int(name))
        info[int(name)] = (st[1], st[2])
    found: dict[int, tuple[int, int]] = {}
    stack = list(parents.get(root, []))
    while stack:
        pid = stack.pop()
        if pid in found or pid not in info:
            continue
        found[pid] = info[pid]
        stack += parents.get(pid, [])
    return found


def kill_all(procs: dict[int, tuple[int, int]], skip_pgids: set[int]) -> None:
    """SIGKILL the process groups these processes led or joined (other than skip_pgids and our own), then any of
    the processes still alive. A pid is only signalled when its start time still matches (no reused pids)."""
    ours = os.getpgrp()
    for pgid in {g for g, _ in procs.values()} - set(skip_pgids) - {ours}:
        leader = procs.get(pgid)
        st = _stat(pgid)
        if leader is None or (st is not None and st[2] != leader[1]):
            continue  # only groups a descendant of ours created, and not a reused id
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for pid, (_, started) in procs.items():
        st = _stat(pid)
        if st is None or st[2] != started:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
