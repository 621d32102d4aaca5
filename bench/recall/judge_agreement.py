"""How often two judges who read the same findings independently agree (docs/precision.md, fourteenth corpus):

    python bench/recall/judge_agreement.py JUDGE_A.jsonl JUDGE_B.jsonl PENDING.jsonl

PENDING is score.py's `--pending` file (the findings both judged); the judgement files hold {"key", "class"} lines.
Prints, for every finding and for the default selection (codes below GPU900): each judge's right / wrong / noise
shares, the agreement, Cohen's kappa, the confusion counts and the agreement per rule.
"""

import collections
import json
import sys

CLASSES = ("right", "wrong", "noise")


def judgements(path):
    with open(path) as f:
        return {d["key"]: d["class"] for d in map(json.loads, filter(str.strip, f))}


def report(name, keys, a, b):
    both = [k for k in keys if k in a and k in b]
    print(f"{name}: {len(keys)} findings, judged by both {len(both)}")
    if not both:
        return
    n = len(both)
    counts_a = collections.Counter(a[k] for k in both)
    counts_b = collections.Counter(b[k] for k in both)
    for judge, counts in (("A", counts_a), ("B", counts_b)):
        print(f"  judge {judge}: " + ", ".join(f"{c} {counts[c]} ({counts[c] / n * 100:.1f} %)" for c in CLASSES))
    agree = sum(a[k] == b[k] for k in both)
    expected = sum(counts_a[c] * counts_b[c] for c in CLASSES) / n / n  # agreement by chance, from each judge's shares
    kappa = (agree / n - expected) / (1 - expected) if expected < 1 else 1.0
    print(f"  agreement {agree}/{n} = {agree / n * 100:.1f} %, Cohen's kappa {kappa:.2f}")
    confusion = collections.Counter((a[k], b[k]) for k in both)
    print("  confusion (A/B): " + ", ".join(f"{x}/{y} {v}" for (x, y), v in sorted(confusion.items())))
    per_rule = collections.defaultdict(lambda: [0, 0])
    for k in both:
        rule = per_rule[k.rsplit("|", 1)[1]]
        rule[0] += 1
        rule[1] += a[k] == b[k]
    print("  agreement per rule: " + ", ".join(f"{c} {v[1]}/{v[0]}" for c, v in sorted(per_rule.items())))


def main(path_a, path_b, pending_path):
    a, b = judgements(path_a), judgements(path_b)
    with open(pending_path) as f:
        keys = [json.loads(line)["key"] for line in f if line.strip()]
    report("every finding", keys, a, b)
    report("default selection", [k for k in keys if not _preview(_code(k))], a, b)
    # the speed rules: every default rule but the pure API ones (GPU402 / GPU403) and files gpulint could not read
    speed = [k for k in keys if _code(k).startswith("GPU") and not _preview(_code(k)) and _code(k) not in ("GPU402", "GPU403")]
    report("speed rules", speed, a, b)


def _code(key: str) -> str:
    return key.rsplit("|", 1)[1]  # `GPU303`, or `invalid-syntax` for a file gpulint could not read


def _preview(code: str) -> bool:
    return code.startswith("GPU9")


if __name__ == "__main__":
    main(*sys.argv[1:4])
