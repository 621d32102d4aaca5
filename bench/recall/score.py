"""Recall and precision of gpulint on a held-out, hand-labelled corpus of public training code.

    python bench/recall/score.py CORPUS --checkout-from MIRROR     # materialise the pinned corpus once
    python bench/recall/score.py CORPUS                                   # run gpulint, match, report
    python bench/recall/score.py CORPUS --pending pending.jsonl           # findings that still need a judgement
    python bench/recall/score.py CORPUS --markdown --sample 100 --seed 13 # tables for docs/precision.md

CORPUS is a folder with one checkout per repository of `corpus.json`, named `owner+name` (the name the `fetch`
tool gives its snapshots). `--checkout-from MIRROR` writes them from `MIRROR/owner+name/repo` git directories at
the pinned commits; a repository missing there is named with the ways to get it, and nothing is guessed.

gpulint runs once per repository on the whole checkout (`check --output-format json --select ALL --preview
--no-cache`, so that project-wide analysis sees every module; `--selection default` runs the rules a user of plain
`gpulint check` gets instead); only findings in the repository's `scope` files are scored. `--manifest` and
`--labels` name another corpus (the second one: `corpus-2026-11b.json`, `labels-2026-11b/`). `--gpulint "CMD ..."`
runs another build (another branch's venv). `--findings FILE` reuses a saved run (`--save-findings FILE` writes one)
instead of running gpulint.

Matching (README.md in this folder has the rationale): a finding matches a label when the path (and notebook
cell) is the same, its code is one of the label's codes, and its line lies within the label's line span widened
by LINE_TOLERANCE lines, at the label's anchor or at one of its `also` anchors (the other place a rule may
report the same instance: a helper's line, the default that supplies a value). Each label takes at most one
finding and each finding at most one label, closest first, clear labels before debatable ones. A label left
unmatched then counts as found when a finding of one of its codes names a line within the label's own span among
its related places (the later reads of a GPU303 run, which the finding's message names): the user is shown that line. Such a
label makes no finding "right"; `--strict-anchors` turns this off (the figures before session 8 were strict).

Findings that match no label, and findings that match a debatable label, are classed by hand in
`judgments.jsonl` (right, wrong or noise); a finding that matches a clear label is right unless a judgement
says otherwise. A re-run only asks about findings it has no judgement for.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
LINE_TOLERANCE = 2
CLASSES = ("right", "wrong", "noise")
# Files a checkout needs: what gpulint reads (sources, notebooks) and the settings it may resolve.
CHECKOUT_SUFFIXES = (".py", ".ipynb", ".toml", ".cfg", ".yaml", ".yml", ".json")
# Project metadata gpulint also reads (torch pins in requirements files, flags a job script or README passes);
# small files only, as a repository's `.txt` may be a dataset.
METADATA_SUFFIXES = (".txt", ".sh", ".md")
METADATA_LIMIT = 256 * 1024
DEFAULT_GPULINT = "python -m gpulint"  # run with sys.executable, so the scorer's own environment's gpulint


@dataclass(frozen=True)
class Anchor:
    path: str
    cell: int | None
    line: int
    end_line: int

    def distance(self, path: str, cell: int | None, line: int) -> int | None:
        """Lines between `line` and this anchor's span, or None when the finding is elsewhere."""
        if path != self.path or cell != self.cell:
            return None
        if self.line <= line <= self.end_line:
            return 0
        gap = self.line - line if line < self.line else line - self.end_line
        return gap if gap <= LINE_TOLERANCE else None


@dataclass
class Label:
    id: str
    repo: str
    code: str
    codes: tuple[str, ...]
    phase: str
    debatable: bool
    needs: tuple[str, ...]
    note: str
    anchors: tuple[Anchor, ...]  # the label's own anchor first, then its `also` anchors

    @property
    def notebook(self) -> bool:
        return self.anchors[0].cell is not None

    @classmethod
    def from_json(cls, row: dict) -> Label:
        own = Anchor(row["path"], row["cell"], row["line"], row["end_line"])
        also = tuple(Anchor(a["path"], a["cell"], a["line"], a["end_line"]) for a in row["also"])
        return cls(
            row["id"], row["repo"], row["code"], tuple(row["codes"]), row["phase"], row["debatable"],
            tuple(row["needs"]), row["note"], (own, *also),
        )


@dataclass
class Finding:
    repo: str
    path: str
    cell: int | None
    line: int
    code: str
    message: str = ""
    severity: str = ""
    related: tuple[tuple[int | None, int], ...] = ()  # (cell, line) of each related place the finding names
    label: Label | None = field(default=None, compare=False)
    covers: list[Label] = field(default_factory=list, compare=False)  # labels found at its related places

    @property
    def key(self) -> str:
        return f"{self.repo}|{self.path}|{'' if self.cell is None else self.cell}|{self.line}|{self.code}"

    def to_json(self, message: bool = True) -> dict:
        """Messages quote the code they point at; saved runs keep places only (see README.md)."""
        row = {"repo": self.repo, "path": self.path, "cell": self.cell, "line": self.line, "code": self.code,
               "severity": self.severity}
        if self.related:
            row["related"] = [list(place) for place in self.related]
        return {**row, "message": self.message} if message else row


# --- corpus -------------------------------------------------------------------------------------------------


def load_corpus(path: Path = HERE / "corpus.json") -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))


def checkout_name(repo: str) -> str:
    return repo.replace("/", "+")


def load_labels(folder: Path = HERE / "labels") -> list[Label]:
    labels = []
    for file in sorted(folder.glob("*.jsonl")):
        rows = file.read_text(encoding="utf-8").splitlines()
        labels += [Label.from_json(json.loads(row)) for row in rows if row]
    return labels


def check_labels(corpus: list[dict], labels: list[Label]) -> None:
    """Every label must point into its repository's scope: a typo would silently lower recall."""
    scopes = {entry["repo"]: set(entry["scope"]) for entry in corpus}
    for label in labels:
        for anchor in label.anchors:
            if anchor.path not in scopes.get(label.repo, ()):
                raise SystemExit(f"label {label.id}: {anchor.path} is not in the scope of {label.repo}")


def git(git_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, check=False)


def how_to_get(entry: dict) -> str:
    return (f"{entry['repo']} @ {entry['commit']}: fetch it with the `fetch` tool (source github:{entry['repo']}), "
            f"or `git clone https://github.com/{entry['repo']} && git -C {entry['repo'].split('/')[1]} checkout "
            f"{entry['commit']}`, then copy the files to CORPUS/{checkout_name(entry['repo'])}")


def checkout(entry: dict, mirror: Path, corpus_root: Path) -> str | None:
    """Write the pinned commit's files into corpus_root/owner+name; returns a problem, or None."""
    base = mirror / checkout_name(entry["repo"]) / "repo"
    git_dir = base / ".git" if (base / ".git").is_dir() else base
    if not git_dir.is_dir():
        return f"no snapshot at {base}. Get {how_to_get(entry)}"
    if git(git_dir, "cat-file", "-e", f"{entry['commit']}^{{commit}}").returncode:
        return f"the snapshot at {base} lacks commit {entry['commit']}. Get {how_to_get(entry)}"
    target = corpus_root / checkout_name(entry["repo"])
    marker = target / ".eval-commit"
    if marker.exists() and marker.read_text().strip() == entry["commit"]:
        return None
    shutil.rmtree(target, ignore_errors=True)  # no file of another commit may linger
    listing = git(git_dir, "ls-tree", "-r", "-z", entry["commit"]).stdout.decode().split("\0")
    missing_scope = []
    for row in filter(None, listing):
        meta, path = row.split("\t", 1)
        if not path.endswith(CHECKOUT_SUFFIXES + METADATA_SUFFIXES):
            continue
        blob = git(git_dir, "cat-file", "blob", meta.split()[2])
        if path.endswith(METADATA_SUFFIXES) and (blob.returncode or len(blob.stdout) > METADATA_LIMIT):
            continue
        if blob.returncode:  # snapshots may leave large blobs out
            if path in entry["scope"]:
                missing_scope.append(path)
            continue
        out = target / path
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(blob.stdout)
    if missing_scope:
        return f"the snapshot at {base} lacks scope files {missing_scope}. Get {how_to_get(entry)}"
    marker.write_text(entry["commit"] + "\n")
    return None


# --- findings -----------------------------------------------------------------------------------------------


def notebook_place(path: Path, row: int) -> tuple[int | None, int]:
    """(cell, line in cell) of `row` of a notebook's code cells joined one after another, as a linter that
    reports rows of the concatenated source (no `cell` field) would count them; cells are numbered 1.. among
    code cells, as ruff's JSON output numbers them. A file that is no readable notebook keeps its row."""
    try:
        cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c.get("cell_type") == "code"]
    except (ValueError, KeyError, TypeError):  # gpulint reports such a file once, at its first row
        return None, row
    rows = []
    for number, cell in enumerate(cells, 1):
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        rows += [(number, line) for line in range(1, len(source.split("\n")) + 1)]
    return rows[row - 1]


def code_cell_number(path: Path, cell: int) -> int:
    """The labels' number (among code cells) of the cell gpulint numbers among all cells, markdown included
    (docs/notebooks.md, "Positions")."""
    types = [c.get("cell_type") for c in json.loads(path.read_text(encoding="utf-8"))["cells"]]
    if types[cell - 1] != "code":
        raise SystemExit(f"{path}: finding in cell {cell}, which is a {types[cell - 1]} cell")
    return types[:cell].count("code")


def normalise(raw: dict, repo: str, root: Path) -> Finding:
    path = Path(raw["filename"])
    relative = (path if not path.is_absolute() else path.resolve().relative_to(root.resolve())).as_posix()
    cell, line = raw.get("cell"), raw["location"]["row"]
    if cell is None and relative.endswith(".ipynb"):
        cell, line = notebook_place(root / relative, line)
    elif cell is not None:
        cell = code_cell_number(root / relative, cell)
    related = tuple(_place(root / relative, place["cell"], place["location"]["row"])
                    for place in raw.get("related") or ())
    # A file gpulint cannot parse is reported with no code (ruff's JSON); its text formats say invalid-syntax.
    code = raw["code"] or "invalid-syntax"
    return Finding(repo, relative, cell, line, code, raw["message"], raw.get("severity", ""), related)


def _place(path: Path, cell: int | None, line: int) -> tuple[int | None, int]:
    """(cell, line) as the labels count them: code cells only, rows within the cell."""
    if cell is None and path.suffix == ".ipynb":
        return notebook_place(path, line)
    return (None if cell is None else code_cell_number(path, cell)), line


def implemented_rules(command: list[str], selection: str = "all") -> tuple[list[str], list[str]]:
    """The rules the run reports, and the rules gpulint has that the selection leaves off (preview rules under
    the default selection)."""
    result = subprocess.run([*command, "rule", "--all", "--output-format", "json"], capture_output=True, text=True,
                            check=True)
    rules = json.loads(result.stdout)
    off = sorted(rule["code"] for rule in rules if selection == "default" and rule["preview"])
    return sorted(rule["code"] for rule in rules if rule["code"] not in off), off


SELECTIONS = {"all": ["--select", "ALL", "--preview"], "default": []}  # default: what `gpulint check` reports


def run_gpulint(command: list[str], corpus: list[dict], corpus_root: Path, selection: str = "all") -> list[Finding]:
    findings = []
    for entry in corpus:
        root = corpus_root / checkout_name(entry["repo"])
        result = subprocess.run(
            [*command, "check", "--output-format", "json", *SELECTIONS[selection], "--no-cache", "--exit-zero", "."],
            cwd=root, capture_output=True, text=True, check=False,
        )
        if result.returncode:
            raise SystemExit(f"gpulint failed on {entry['repo']} (exit {result.returncode}):\n"
                             f"{result.stderr[-3000:]}")
        findings += [normalise(raw, entry["repo"], root) for raw in json.loads(result.stdout or "[]")]
    return findings


def in_scope(findings: list[Finding], corpus: list[dict]) -> tuple[list[Finding], int]:
    scopes = {entry["repo"]: set(entry["scope"]) for entry in corpus}
    kept = [f for f in findings if f.path in scopes[f.repo]]
    return kept, len(findings) - len(kept)


# --- matching -----------------------------------------------------------------------------------------------


def match(labels: list[Label], findings: list[Finding], related: bool = True) -> None:
    """Pair findings with labels one to one, closest first (clear labels before debatable ones, a label's own
    anchor before its `also` anchors); sets `finding.label`. Then, unless `related` is off, a label still
    unmatched is covered by a finding of one of its codes whose related places include the label's own anchor
    (`finding.covers`)."""
    by_place = defaultdict(list)
    for label in labels:
        for anchor in label.anchors:
            by_place[label.repo, anchor.path, anchor.cell].append(label)
    candidates = []
    for f_index, finding in enumerate(findings):
        finding.label = None
        for label in by_place.get((finding.repo, finding.path, finding.cell), ()):
            if finding.code not in label.codes:
                continue
            gaps = [(anchor.distance(finding.path, finding.cell, finding.line), rank)
                    for rank, anchor in enumerate(label.anchors)]
            gaps = [(gap, min(rank, 1)) for gap, rank in gaps if gap is not None]
            if gaps:
                gap, also = min(gaps)
                candidates.append((gap, label.debatable, also, f_index, label.id, label))
    taken_findings, taken_labels = set(), set()
    for _gap, _debatable, _also, f_index, label_id, label in sorted(candidates, key=lambda c: c[:5]):
        if f_index in taken_findings or label_id in taken_labels:
            continue
        findings[f_index].label = label
        taken_findings.add(f_index)
        taken_labels.add(label_id)
    for finding in findings:
        finding.covers = []
    if not related:
        return
    for label in labels:
        if label.id in taken_labels:
            continue
        own = label.anchors[0]
        for finding in findings:
            # the related place must lie within the label's own span: a loop's line a few rows away is no read
            if finding.repo == label.repo and finding.code in label.codes and any(
                    own.distance(finding.path, cell, line) == 0 for cell, line in finding.related):
                finding.covers.append(label)
                taken_labels.add(label.id)
                break


def found_label_ids(findings: list[Finding]) -> set[str]:
    """Labels a finding matched, or named among its related places."""
    return {f.label.id for f in findings if f.label is not None} | {l.id for f in findings for l in f.covers}


def load_judgements(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        if row["class"] not in CLASSES:
            raise SystemExit(f"{path}: {row['key']}: class must be one of {CLASSES}, not {row['class']!r}")
    return {row["key"]: row for row in rows}


def classify(finding: Finding, judgements: dict[str, dict]) -> str | None:
    """right / wrong / noise, or None while a finding that needs a judgement has none."""
    if finding.key in judgements:
        return judgements[finding.key]["class"]
    if finding.label is not None and not finding.label.debatable:
        return "right"
    return None


# --- report -------------------------------------------------------------------------------------------------


@dataclass
class Tally:
    labels: int = 0
    found: int = 0
    labels_py: int = 0
    found_py: int = 0
    debatable: int = 0
    debatable_found: int = 0
    findings: int = 0
    matched: int = 0
    classes: Counter = field(default_factory=Counter)

    @property
    def judged(self) -> int:
        return sum(self.classes[c] for c in CLASSES)


def ratio(part: int, whole: int) -> str:
    return f"{part / whole:.2f}" if whole else "–"


def tally(labels: list[Label], findings: list[Finding], judgements: dict[str, dict],
          rules: list[str]) -> dict[str, Tally]:
    """Per rule, "all", and "implemented" (the labels of rules this gpulint has, and every finding)."""
    rows: dict[str, Tally] = defaultdict(Tally)
    found_ids = found_label_ids(findings)
    for label in labels:
        for key in (label.code, "all", *(("implemented",) if label.code in rules else ())):
            row = rows[key]
            if label.debatable:
                row.debatable += 1
                row.debatable_found += label.id in found_ids
                continue
            row.labels += 1
            row.found += label.id in found_ids
            if not label.notebook:
                row.labels_py += 1
                row.found_py += label.id in found_ids
    for finding in findings:
        for key in (finding.code, "all", "implemented"):
            row = rows[key]
            row.findings += 1
            row.matched += finding.label is not None
            row.classes[classify(finding, judgements) or "unjudged"] += 1
    return rows


def miss_classes(labels: list[Label], findings: list[Finding], rules: list[str], off: list[str] = ()) -> Counter:
    """Why the clear labels were missed: a rule gpulint does not have yet, a notebook it did not read, and
    otherwise what the label needs by the `needs` tags given when labelling (a label counts under each of
    its tags; "inline": nothing beyond the statement and its loop)."""
    found_ids = found_label_ids(findings)
    reads_notebooks = any(f.cell is not None for f in findings)
    counts = Counter()
    for label in labels:
        if label.debatable or label.id in found_ids:
            continue
        if label.code in off:
            counts["rule off by default (preview)"] += 1
        elif label.code not in rules:
            counts["rule not implemented yet"] += 1
        elif label.notebook and not reads_notebooks:
            counts["notebook not read"] += 1
        else:
            counts["missed by an implemented rule"] += 1
            counts.update(f"  needs {need}" for need in (set(label.needs) - {"notebook"} or {"inline"}))
    return counts


def needs_recall(labels: list[Label], findings: list[Finding]) -> list[tuple[str, int, int]]:
    """(tag, clear labels, found) per `needs` tag, commonest first; a label counts under each of its tags,
    "none" when it has none (everything is in the statement and its loop)."""
    found_ids = found_label_ids(findings)
    labelled, found = Counter(), Counter()
    for label in labels:
        if label.debatable:
            continue
        for need in label.needs or ("none",):
            labelled[need] += 1
            found[need] += label.id in found_ids
    return [(need, count, found[need]) for need, count in sorted(labelled.items(), key=lambda kv: (-kv[1], kv[0]))]


def miss_order(misses: Counter) -> list[tuple[str, int]]:
    """Top-level reasons first, then the `needs` tags of the labels an implemented rule missed, commonest first."""
    top = [(k, v) for k, v in misses.items() if not k.startswith(" ")]
    tags = sorted(((k, v) for k, v in misses.items() if k.startswith(" ")), key=lambda kv: (-kv[1], kv[0]))
    return sorted(top, key=lambda kv: -kv[1]) + tags


def sample(findings: list[Finding], size: int, seed: int) -> list[Finding]:
    ordered = sorted(findings, key=lambda f: f.key)
    return random.Random(seed).sample(ordered, min(size, len(ordered)))


def corpus_table(corpus: list[dict], labels: list[Label], findings: list[Finding]) -> str:
    lines = ["| repository | commit | what it is | files (.py + notebooks) | clear labels | debatable labels "
             "| findings in scope |", "|---|---|---|---|---|---|---|"]
    for entry in corpus:
        mine = [label for label in labels if label.repo == entry["repo"]]
        notebooks = sum(path.endswith(".ipynb") for path in entry["scope"])
        lines.append(
            f"| [{entry['repo']}](https://github.com/{entry['repo']}/tree/{entry['commit']}) "
            f"| `{entry['commit'][:10]}` "
            f"| {entry['kind']} | {len(entry['scope']) - notebooks} + {notebooks} "
            f"| {sum(not label.debatable for label in mine)} | {sum(label.debatable for label in mine)} "
            f"| {sum(f.repo == entry['repo'] for f in findings)} |"
        )
    return "\n".join(lines) + "\n\n"


def row_order(rows: dict[str, Tally]) -> list[str]:
    return sorted(k for k in rows if k.startswith("GPU")) + ["all", "implemented"]


def markdown(rows: dict[str, Tally], misses: Counter, needs: list[tuple[str, int, int]], sampled: list[Finding],
             judgements: dict[str, dict], out_of_scope: int) -> str:
    lines = [
        "| rule | clear labels (.py + notebooks) | found | recall (.py) | recall (all) | debatable labels (found) "
        "| findings | on a label | right | wrong | noise | precision |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for code in row_order(rows):
        r = rows[code]
        pending = f" (+{r.classes['unjudged']} unjudged)" if r.classes["unjudged"] else ""
        name = code if code.startswith("GPU") else f"**{code} rules**"
        lines.append(
            f"| {name} | {r.labels_py} + {r.labels - r.labels_py} | {r.found} | {ratio(r.found_py, r.labels_py)} "
            f"| {ratio(r.found, r.labels)} | {r.debatable} ({r.debatable_found}) | {r.findings}{pending} | {r.matched} "
            f"| {r.classes['right']} | {r.classes['wrong']} | {r.classes['noise']} "
            f"| {ratio(r.classes['right'], r.judged)} |"
        )
    lines += ["", f"Findings outside the labelled scope files (not scored): {out_of_scope}.", "",
              "| missed clear labels | labels |", "|---|---|"]
    lines += [f"| {'&nbsp;&nbsp;' if reason.startswith(' ') else ''}{reason.strip()} | {count} |"
              for reason, count in miss_order(misses)]
    lines += ["", "| needs | clear labels | found | recall |", "|---|---|---|---|"]
    lines += [f"| {need} | {count} | {found} | {ratio(found, count)} |" for need, count, found in needs]
    if sampled:
        counts = Counter(classify(f, judgements) or "unjudged" for f in sampled)
        lines += ["", f"Random sample of {len(sampled)} findings: "
                  + ", ".join(f"{counts[c]} {c} ({counts[c] / len(sampled):.0%})" for c in (*CLASSES, "unjudged")
                              if counts[c] or c in CLASSES) + ".", "",
                  "| # | repository | place | rule | class | why |", "|---|---|---|---|---|---|"]
        for number, f in enumerate(sampled, 1):
            place = f"{f.path}" + (f" cell {f.cell}" if f.cell else "") + f":{f.line}"
            why = judgements.get(f.key, {}).get("note") or (f.label.note if f.label else "")
            lines.append(f"| {number} | {f.repo} | `{place}` | {f.code} | {classify(f, judgements) or 'unjudged'} "
                         f"| {why.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def text_report(rows: dict[str, Tally], misses: Counter, needs: list[tuple[str, int, int]], out_of_scope: int) -> str:
    lines = [f"{'rule':8} {'py+nb':>7} {'found':>5} {'rec.py':>6} {'rec':>5} {'deb':>4} {'find':>5} {'onlab':>5} "
             f"{'right':>5} {'wrong':>5} {'noise':>5} {'unjud':>5} {'prec':>5}"]
    for code in row_order(rows):
        r = rows[code]
        labelled = f"{r.labels_py}+{r.labels - r.labels_py}"
        lines.append(f"{code[:8]:8} {labelled:>7} {r.found:5} {ratio(r.found_py, r.labels_py):>6} "
                     f"{ratio(r.found, r.labels):>5} "
                     f"{r.debatable:4} {r.findings:5} {r.matched:5} {r.classes['right']:5} {r.classes['wrong']:5} "
                     f"{r.classes['noise']:5} {r.classes['unjudged']:5} {ratio(r.classes['right'], r.judged):>5}")
    lines.append(f"out-of-scope findings (not scored): {out_of_scope}")
    lines.append("missed clear labels: " + ", ".join(f"{k.strip()} {v}" for k, v in miss_order(misses)))
    lines.append("recall per needs tag: " + ", ".join(f"{need} {found}/{count}" for need, count, found in needs))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path, help="folder holding one checkout per repository (owner+name)")
    parser.add_argument("--checkout-from", type=Path, metavar="MIRROR", help="write the checkouts from fetch snapshots")
    parser.add_argument("--gpulint", default=DEFAULT_GPULINT, help="command that runs gpulint (default: this Python's)")
    parser.add_argument("--selection", choices=sorted(SELECTIONS), default="all",
                        help="rules to run: every rule, preview included (per-rule recall), or gpulint's default")
    parser.add_argument("--findings", type=Path, help="score these saved findings instead of running gpulint")
    parser.add_argument("--save-findings", type=Path, help="write the run's findings (all, in and out of scope)")
    parser.add_argument("--judgements", type=Path, default=HERE / "judgments.jsonl")
    parser.add_argument("--manifest", type=Path, default=HERE / "corpus.json", help="the pinned corpus")
    parser.add_argument("--labels", type=Path, default=HERE / "labels", help="folder of labels/*.jsonl")
    parser.add_argument("--repo", action="append", metavar="OWNER/NAME",
                        help="score only these repositories of the corpus (repeat the option); the sample is drawn from them")
    parser.add_argument("--pending", type=Path, help="write the findings that need a judgement, ready to fill in")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables (for docs/precision.md)")
    parser.add_argument("--sample", type=int, default=100, help="size of the random sample read one by one")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--strict-anchors", action="store_true",
                        help="count a label found only at a finding's own line, not at the related places it names")
    args = parser.parse_args(argv)

    corpus, labels = load_corpus(args.manifest), load_labels(args.labels)
    check_labels(corpus, labels)
    if args.repo:
        unknown = set(args.repo) - {entry["repo"] for entry in corpus}
        if unknown:
            raise SystemExit(f"not in {args.manifest}: {', '.join(sorted(unknown))}")
        corpus = [entry for entry in corpus if entry["repo"] in args.repo]
        labels = [label for label in labels if label.repo in args.repo]
    if args.checkout_from:
        problems = [p for entry in corpus if (p := checkout(entry, args.checkout_from, args.corpus))]
        if problems:
            raise SystemExit("\n".join(problems))
    missing = [entry for entry in corpus if not (args.corpus / checkout_name(entry["repo"])).is_dir()]
    if missing and not args.findings:
        raise SystemExit("missing checkouts (run with --checkout-from MIRROR):\n" + "\n".join(map(how_to_get, missing)))

    if args.findings:
        saved = json.loads(args.findings.read_text(encoding="utf-8"))
        rules, off = saved["rules"], saved.get("off_rules", [])
        findings = [Finding(**{**row, "related": tuple(map(tuple, row.get("related", ())))})
                    for row in saved["findings"]]
    else:
        command = [sys.executable, "-m", "gpulint"] if args.gpulint == DEFAULT_GPULINT else shlex.split(args.gpulint)
        (rules, off), findings = (implemented_rules(command, args.selection),
                                  run_gpulint(command, corpus, args.corpus, args.selection))
    if args.save_findings:
        head = subprocess.run(["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=False).stdout
        # the command without this machine's folders: the build is named by the commit
        shown = " ".join(part.rsplit("/", 1)[-1] for part in shlex.split(args.gpulint))
        saved = {"gpulint": shown, "checkout_commit": head.strip(), "selection": args.selection, "rules": rules,
                 "off_rules": off,
                 "findings": [f.to_json(message=False) for f in findings]}
        args.save_findings.write_text(json.dumps(saved, indent=0) + "\n", encoding="utf-8")
    findings = [f for f in findings if not args.repo or f.repo in args.repo]
    scored, out_of_scope = in_scope(findings, corpus)
    match(labels, scored, related=not args.strict_anchors)
    judgements = load_judgements(args.judgements)
    rows, misses = tally(labels, scored, judgements, rules), miss_classes(labels, scored, rules, off)
    needs = needs_recall(labels, scored)
    # The sample is drawn from everything a user of gpulint would see on these repositories, scope or not.
    sampled = sample(findings, args.sample, args.seed)
    print(corpus_table(corpus, labels, scored) + markdown(rows, misses, needs, sampled, judgements, out_of_scope)
          if args.markdown else text_report(rows, misses, needs, out_of_scope), end="")

    scored_ids = {id(f) for f in scored}
    pending = [f for f in scored + [f for f in sampled if id(f) not in scored_ids] if classify(f, judgements) is None]
    if args.pending:
        with args.pending.open("w", encoding="utf-8") as handle:
            for f in pending:
                near = f.label.id if f.label else None
                handle.write(json.dumps({"key": f.key, "class": "", "note": "", "label": near, **f.to_json()}) + "\n")
    if pending:
        print(f"{len(pending)} findings need a judgement (--pending FILE lists them; add them to {args.judgements})",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
