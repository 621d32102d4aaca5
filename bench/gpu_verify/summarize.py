"""Tables for bench/results/gpu_verify.md from the files run_all.sh wrote (its res/ folder):
python bench/gpu_verify/summarize.py RES_DIR [RES_DIR ...]  (a later folder's item replaces an earlier one's)."""

import json
import pathlib
import statistics
import sys


def mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def fmt(v, spec=".1f", unit=""):
    return "–" if v is None else f"{v:{spec}}{unit}"


def side(runs, prefix):
    runs = [r for r in runs if r["label"].startswith(prefix) and r.get("status") == "ok"]
    attrs = [r.get("attribution") or {} for r in runs]
    h2d = [a.get("h2d") or {} for a in attrs]
    return {
        "kernel busy %": mean([a.get("kernel_busy_pct") for a in attrs]),
        "exposed data wait %": mean([a.get("data_wait_exposed_pct") for a in attrs]),
        "pageable/step": mean([(h.get("pageable") or {}).get("count_per_step") for h in h2d]),
        "pinned/step": mean([(h.get("pinned") or {}).get("count_per_step") for h in h2d]),
        "syncs/step": mean([a.get("syncs_per_step") for a in attrs]),
        "NVML util %": mean([(r.get("nvml") or {}).get("utilization_gpu_mean_pct") for r in runs]),
    }


def row(name, data):
    c = data["comparison"]
    a, b = side(data["runs"], "A"), side(data["runs"], "B")
    fixes = ", ".join(f"{n}× {code}" for f in data["fixes"] for code, n in f["rules"].items())
    ci = c.get("ci")
    cells = [
        name,
        fixes,
        f"{fmt(c['before'])} → {fmt(c['after'])} {c['unit']}",
        f"{100 * (c['effect'] - 1):+.0f} % ({100 * (ci[0] - 1):+.0f} .. {100 * (ci[1] - 1):+.0f})" if ci else "–",
    ]
    for key in a:
        cells.append(f"{fmt(a[key])} → {fmt(b[key])}")
    cells.append(f"{c['verdict']}; {data['outcome']}")
    return "| " + " | ".join(cells) + " |"


def main():
    items = {}
    for folder in sys.argv[1:]:
        for path in sorted(pathlib.Path(folder).glob("*.verify.json")):
            items[path.name.removesuffix(".verify.json")] = json.loads(path.read_text())
    keys = ["kernel busy %", "exposed data wait %", "pageable/step", "pinned/step", "syncs/step", "NVML util %"]
    print("| script | fixes applied | throughput A → B | change (95 % CI) | " + " | ".join(f"{k} A → B" for k in keys) + " | verdict; outcome |")
    print("|" + "---|" * (len(keys) + 5))
    for name, data in items.items():
        if data.get("comparison"):
            print(row(name, data))


if __name__ == "__main__":
    main()
