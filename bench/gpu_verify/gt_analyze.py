"""Independent reading of a torch.profiler Chrome trace (not gpulint's parser): kernel-busy share of the
steps' window (first and last ProfilerStep dropped), host-to-device copies per step by kind.
Usage: python gt_analyze.py TRACE.json [TRACE.json ...]  -> one JSON line per trace."""

import gzip
import json
import re
import sys


def spans(events, pred):
    return sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("ph") == "X" and pred(e))


def union_length(intervals, lo, hi):
    total, cur_lo, cur_hi = 0.0, None, None
    for a, b in intervals:
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            continue
        if cur_hi is None or a > cur_hi:
            if cur_hi is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = a, b
        else:
            cur_hi = max(cur_hi, b)
    if cur_hi is not None:
        total += cur_hi - cur_lo
    return total


def analyse(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    steps = spans(events, lambda e: e.get("cat") == "user_annotation"
                  and re.match(r"ProfilerStep#\d+$", str(e.get("name", ""))))
    steps = steps[1:-1]
    if not steps:
        return {"trace": path, "error": "fewer than 3 profiler steps"}
    lo, hi = steps[0][0], steps[-1][1]
    kernels = spans(events, lambda e: e.get("cat") in ("kernel", "Kernel"))
    copies = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("Memcpy HtoD")
              and lo <= e["ts"] < hi]
    kinds = {}
    for e in copies:
        kind = re.search(r"\((\w+) -> Device\)", e["name"])
        kinds[kind.group(1) if kind else e["name"]] = kinds.get(kind.group(1) if kind else e["name"], 0) + 1
    return {
        "trace": path,
        "steps": len(steps),
        "window_ms": (hi - lo) / 1000,
        "step_ms_mean": (hi - lo) / 1000 / len(steps),
        "kernel_busy_pct": 100 * union_length(kernels, lo, hi) / (hi - lo),
        "h2d_per_step": {k: v / len(steps) for k, v in sorted(kinds.items())},
    }


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(json.dumps(analyse(p)))
