"""Right / wrong / noise shares of ALL of a run's findings, from judgements of every in-scope finding and of a
random sample of the rest (score.py's pending lists): in-scope findings count as judged, the out-of-scope ones by
their sample's shares, weighted by how many there are (docs/precision.md).

    python bench/recall/population.py FINDINGS.json MANIFEST.json JUDGEMENTS.jsonl [--below 900]
"""

import argparse
import collections
import json

CLASSES = ("right", "wrong", "noise")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("findings")
    parser.add_argument("manifest")
    parser.add_argument("judgements")
    parser.add_argument("--below", type=int, default=None, help="only codes below this number (900: the default selection)")
    args = parser.parse_args()
    findings = json.load(open(args.findings))["findings"]
    if args.below is not None:
        # io-error / invalid-syntax reports are no rule's findings: the default selection leaves them out
        findings = [f for f in findings if f["code"][3:].isdigit() and int(f["code"][3:]) < args.below]
    scopes = {entry["repo"]: set(entry["scope"]) for entry in json.load(open(args.manifest))}
    with open(args.judgements) as f:
        classes = {d["key"]: d["class"] for d in map(json.loads, filter(str.strip, f))}
    groups = {"in scope": [], "out of scope": []}
    for finding in findings:
        key = f"{finding['repo']}|{finding['path']}|{finding['cell'] or ''}|{finding['line']}|{finding['code']}"  # score.py's
        groups["in scope" if finding["path"] in scopes.get(finding["repo"], ()) else "out of scope"].append(key)
    total = collections.Counter()
    for name, keys in groups.items():
        judged = collections.Counter(classes[k] for k in keys if k in classes)
        n = sum(judged.values())
        print(f"{name}: {len(keys)} findings, {n} judged: " + ", ".join(f"{c} {judged[c]}" for c in CLASSES))
        for c in CLASSES:
            total[c] += judged[c] / n * len(keys) if n else 0
    count = sum(total.values())
    print(f"estimate over all {len(findings)} findings: " + " / ".join(f"{total[c] / count * 100:.1f} %" for c in CLASSES) + " (right / wrong / noise)")


if __name__ == "__main__":
    main()
