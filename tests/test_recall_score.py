"""bench/recall/score.py: how findings are matched to hand labels, and one run end to end on a tiny corpus."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

SCORE = REPO / "bench" / "recall" / "score.py"
_spec = importlib.util.spec_from_file_location("recall_score", SCORE)
score = importlib.util.module_from_spec(_spec)
sys.modules["recall_score"] = score  # dataclasses resolve their module by name
_spec.loader.exec_module(score)


def label(id, line, code="GPU303", end_line=None, *, path="train.py", cell=None, codes=None, debatable=False, also=()):
    return score.Label.from_json({
        "id": id, "repo": "o/r", "path": path, "cell": cell, "line": line, "end_line": end_line or line,
        "code": code, "codes": codes or [code], "phase": "train", "debatable": debatable, "needs": [],
        "also": [{"path": p, "cell": None, "line": n, "end_line": n} for p, n in also], "note": "",
    })


def finding(line, code="GPU303", *, path="train.py", cell=None):
    return score.Finding("o/r", path, cell, line, code, "msg")


def matched(labels, findings):
    score.match(labels, findings)
    return [f.label.id if f.label else None for f in findings]


def test_a_finding_matches_within_the_span_widened_by_the_tolerance():
    labels = [label("dl", 10, "GPU101", end_line=14)]
    assert matched(labels, [finding(12, "GPU101")]) == ["dl"]
    assert matched(labels, [finding(16, "GPU101")]) == ["dl"]  # two lines past the call's last line
    assert matched(labels, [finding(17, "GPU101")]) == [None]
    assert matched(labels, [finding(7, "GPU101")]) == [None]


def test_code_path_and_cell_must_agree():
    labels = [label("sync", 5), label("nb", 3, path="a.ipynb", cell=2)]
    assert matched(labels, [finding(5, "GPU304")]) == [None]
    assert matched(labels, [finding(5, path="other.py")]) == [None]
    assert matched(labels, [finding(3, path="a.ipynb", cell=1)]) == [None]
    assert matched(labels, [finding(3, path="a.ipynb", cell=2)]) == ["nb"]


def test_alternative_codes_and_anchors_match():
    labels = [
        label("legacy", 19, "GPU202", codes=["GPU202", "GPU201"]),
        label("helper", 80, also=[("utils.py", 47)]),
    ]
    assert matched(labels, [finding(19, "GPU201"), finding(47, path="utils.py")]) == ["legacy", "helper"]


def test_one_finding_per_label_and_the_closest_wins():
    labels = [label("a", 10), label("b", 12)]
    # 11 is one line from both; 12 sits on b: b takes 12, a takes 11, the duplicate at 12 is left over.
    assert matched(labels, [finding(11), finding(12), finding(12)]) == ["a", "b", None]


def test_a_clear_label_is_preferred_to_a_debatable_one_at_the_same_distance():
    labels = [label("deb", 30, "GPU101", debatable=True), label("clear", 30, "GPU101")]
    assert matched(labels, [finding(30, "GPU101")]) == ["clear"]


def test_a_label_named_among_a_findings_related_places_is_found_but_makes_no_finding_right():
    # a GPU303 run: the finding sits on the first read and names the later read (line 14) and its loop (line 10)
    labels = [label("first", 13), label("later", 14), label("in-loop", 11), label("other-code", 14, "GPU201")]
    run = score.Finding("o/r", "train.py", None, 13, "GPU303", "msg", related=((None, 10), (None, 14)))
    score.match(labels, [run])
    assert (run.label.id, [l.id for l in run.covers]) == ("first", ["later"])  # the loop line is no read
    row = score.tally(labels, [run], {}, ["GPU303", "GPU201"])["GPU303"]
    assert (row.labels, row.found, row.findings, row.classes["right"]) == (3, 2, 1, 1)
    score.match(labels, [run], related=False)
    assert run.covers == []
    assert score.tally(labels, [run], {}, ["GPU303"])["GPU303"].found == 1


def test_related_places_survive_a_saved_run(tmp_path):
    run = score.Finding("o/r", "train.py", None, 13, "GPU303", "msg", related=((None, 14),))
    row = run.to_json(message=False)
    assert row["related"] == [[None, 14]]
    again = score.Finding(**{**row, "related": tuple(map(tuple, row["related"]))})
    assert again.related == ((None, 14),) and again.key == run.key


def test_classes_recall_and_precision():
    labels = [label("clear", 10), label("missed", 20), label("deb", 30, debatable=True)]
    findings = [finding(10), finding(30), finding(40)]
    score.match(labels, findings)
    judgements = {findings[1].key: {"class": "noise"}, findings[2].key: {"class": "wrong"}}
    assert [score.classify(f, judgements) for f in findings] == ["right", "noise", "wrong"]
    assert score.classify(finding(50), judgements) is None  # unlabelled and unjudged
    row = score.tally(labels, findings, judgements, ["GPU303"])["GPU303"]
    assert (row.labels, row.found, row.debatable, row.debatable_found) == (2, 1, 1, 1)
    assert (row.findings, row.matched, row.classes["right"], row.judged) == (3, 2, 1, 3)


def test_missed_labels_are_classed_by_what_they_need():
    labels = [label("todo", 1, "GPU904"), label("nb", 2, path="a.ipynb", cell=1), label("x", 3)]
    labels[2].needs = ("cross-module", "device-param")
    misses = score.miss_classes(labels, [], ["GPU303"])
    assert misses["rule not implemented yet"] == 1
    assert misses["notebook not read"] == 1
    assert misses["missed by an implemented rule"] == 1
    assert misses["  needs cross-module"] == misses["  needs device-param"] == 1


def test_recall_per_needs_tag_counts_each_tag_of_a_clear_label():
    labels = [label("a", 1), label("b", 5), label("c", 9), label("d", 13, debatable=True)]
    labels[0].needs = ("cross-module",)
    labels[1].needs = ("cross-module", "helper-call")
    findings = [finding(1), finding(9)]
    score.match(labels, findings)
    assert score.needs_recall(labels, findings) == [("cross-module", 2, 1), ("helper-call", 1, 0), ("none", 1, 1)]


def test_notebook_rows_count_code_cells_only(tmp_path):
    notebook = tmp_path / "n.ipynb"
    notebook.write_text(json.dumps({"cells": [
        {"cell_type": "markdown", "source": ["# title"]},
        {"cell_type": "code", "source": ["import torch\n", "x = 1"]},
        {"cell_type": "code", "source": "y = 2"},
    ]}))
    assert [score.notebook_place(notebook, row) for row in (1, 2, 3)] == [(1, 1), (1, 2), (2, 1)]


def test_a_notebook_that_is_not_json_keeps_its_row(tmp_path):
    notebook = tmp_path / "broken.ipynb"
    notebook.write_text('{"cells": [')  # vendors ship such files; gpulint reports them once, at row 1
    assert score.notebook_place(notebook, 1) == (None, 1)


def test_a_reported_cell_counting_every_cell_becomes_the_labels_code_cell_number(tmp_path):
    notebook = tmp_path / "n.ipynb"
    notebook.write_text(json.dumps({"cells": [
        {"cell_type": "markdown", "source": "# title"}, {"cell_type": "code", "source": "x = 1"},
        {"cell_type": "markdown", "source": "text"}, {"cell_type": "code", "source": "y = 2"},
    ]}))
    raw = {"filename": "n.ipynb", "cell": 4, "location": {"row": 1, "column": 1}, "code": "GPU303", "message": "m"}
    assert score.normalise(raw, "o/r", tmp_path).cell == 2
    with pytest.raises(SystemExit, match="markdown cell"):
        score.normalise({**raw, "cell": 3}, "o/r", tmp_path)
    assert score.normalise({**raw, "code": None}, "o/r", tmp_path).code == "invalid-syntax"


TRAIN = """\
import torch

torch.set_float32_matmul_precision("high")

model = torch.nn.Linear(4, 4).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(10):
    with torch.cuda.amp.autocast():
        loss = model(torch.ones(4, 4, device="cuda")).sum()
    loss.backward()
    optimizer.step()
with torch.cuda.amp.autocast():
    print(model(torch.ones(4, 4, device="cuda")))
"""


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_end_to_end_on_a_tiny_pinned_corpus(tmp_path):
    source = tmp_path / "mirror" / "o+r" / "repo"
    source.mkdir(parents=True)
    (source / "train.py").write_text(TRAIN)
    git(source, "init", "-q")
    git(source, "add", "train.py")
    git(source, "commit", "-q", "-m", "c")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True).stdout.strip()
    manifest = tmp_path / "corpus.json"
    manifest.write_text(json.dumps([{"repo": "o/r", "commit": commit, "kind": "synthetic", "scope": ["train.py"]}]))
    labels = tmp_path / "labels"
    labels.mkdir()
    rows = [
        {"id": "o+r:1", "repo": "o/r", "commit": commit, "path": "train.py", "cell": None, "line": 8, "end_line": 8,
         "code": "GPU403", "codes": ["GPU403"], "phase": "train", "debatable": False, "needs": [], "also": [],
         "note": "deprecated autocast"},
        {"id": "o+r:2", "repo": "o/r", "commit": commit, "path": "train.py", "cell": None, "line": 6, "end_line": 6,
         "code": "GPU304", "codes": ["GPU304"], "phase": "train", "debatable": False, "needs": ["cross-module"],
         "also": [], "note": "a label nothing reports"},
    ]
    (labels / "o+r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    judgements, pending = tmp_path / "judgments.jsonl", tmp_path / "pending.jsonl"
    corpus = tmp_path / "corpus"
    command = [sys.executable, str(SCORE), str(corpus), "--checkout-from", str(tmp_path / "mirror"),
               "--manifest", str(manifest), "--labels", str(labels), "--judgements", str(judgements),
               "--pending", str(pending)]

    first = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert first.returncode == 2, first.stderr  # the unlabelled second autocast needs a judgement
    assert (corpus / "o+r" / "train.py").read_text() == TRAIN
    waiting = [json.loads(line) for line in pending.read_text().splitlines()]
    assert ("GPU403", 12) in [(w["code"], w["line"]) for w in waiting]
    gpu403 = next(line for line in first.stdout.splitlines() if line.startswith("GPU403"))
    assert gpu403.split()[1:4] == ["1+0", "1", "1.00"]  # one clear .py label, found
    gpu304 = next(line for line in first.stdout.splitlines() if line.startswith("GPU304"))
    assert gpu304.split()[1:4] == ["1+0", "0", "0.00"]
    assert "missed by an implemented rule 1" in first.stdout and "needs cross-module 1" in first.stdout
    assert "recall per needs tag: cross-module 0/1, none 1/1" in first.stdout

    judgements.write_text("".join(
        json.dumps({"key": w["key"], "class": "right" if w["code"] == "GPU403" else "noise",
                    "note": "outside the loop"})
        + "\n" for w in waiting
    ))
    second = subprocess.run([c for c in command if c != str(pending) and c != "--pending"] + ["--markdown"],
                            capture_output=True, text=True, timeout=300)
    assert second.returncode == 0, second.stderr
    assert "| GPU403 | 1 + 0 | 1 | 1.00 | 1.00 | 0 (0) | 2 | 1 | 2 | 0 | 0 | 1.00 |" in second.stdout
    assert "| cross-module | 1 | 0 | 0.00 |" in second.stdout
    assert "Random sample of" in second.stdout
    assert "| o/r | `train.py:12` | GPU403 | right | outside the loop |" in second.stdout


def test_a_label_outside_the_scope_is_refused(tmp_path):
    manifest = tmp_path / "corpus.json"
    manifest.write_text(json.dumps([{"repo": "o/r", "commit": "0" * 40, "kind": "k", "scope": ["a.py"]}]))
    with pytest.raises(SystemExit, match="not in the scope"):
        score.check_labels(score.load_corpus(manifest), [label("x", 1)])


def test_preview_labels_are_off_by_default_under_the_default_selection():
    labels = [label("fused", 1, "GPU904"), label("todo", 2, "GPU999")]
    misses = score.miss_classes(labels, [], ["GPU303"], off=["GPU904"])
    assert misses["rule off by default (preview)"] == 1
    assert misses["rule not implemented yet"] == 1


def test_the_default_selection_runs_what_plain_check_reports(tmp_path):
    command = [sys.executable, "-m", "gpulint"]
    rules, off = score.implemented_rules(command, "default")
    assert off == ["GPU901", "GPU902", "GPU903", "GPU904"] and "GPU303" in rules and "GPU904" not in rules
    assert score.implemented_rules(command, "all")[1] == []
    (tmp_path / "o+r").mkdir()
    (tmp_path / "o+r" / "train.py").write_text(
        "import torch\nmodel = torch.nn.Linear(4096, 4096).cuda()\nopt = torch.optim.Adam(model.parameters())\n"
        "for _ in range(10000):\n    out = model(torch.ones(64, 4096, device='cuda'))\n    out.sum().backward()\n"
        "    opt.step()\n    for row in range(8):\n        print(out[row, 0].item())\n"
    )
    corpus = [{"repo": "o/r", "commit": "0" * 40, "kind": "k", "scope": ["train.py"]}]
    codes = {f.code for f in score.run_gpulint(command, corpus, tmp_path, "default")}
    assert "GPU303" in codes and not codes & {"GPU901", "GPU902", "GPU904"}
    assert {"GPU303", "GPU901", "GPU904"} <= {f.code for f in score.run_gpulint(command, corpus, tmp_path, "all")}


def test_a_subset_of_the_corpus_is_scored_alone(tmp_path, capsys):
    manifest = tmp_path / "corpus.json"
    manifest.write_text(json.dumps([{"repo": r, "commit": "0" * 40, "kind": "k", "scope": ["train.py"]}
                                    for r in ("o/a", "o/b")]))
    labels = tmp_path / "labels"
    labels.mkdir()
    (labels / "o+a.jsonl").write_text(json.dumps({
        "id": "a:1", "repo": "o/a", "commit": "0" * 40, "path": "train.py", "cell": None, "line": 3, "end_line": 3,
        "code": "GPU303", "codes": ["GPU303"], "phase": "train", "debatable": False, "needs": [], "also": [],
        "note": ""}) + "\n")
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"rules": ["GPU303"], "findings": [
        {"repo": "o/a", "path": "train.py", "cell": None, "line": 3, "code": "GPU303", "severity": "warning"},
        {"repo": "o/b", "path": "other.py", "cell": None, "line": 9, "code": "GPU303", "severity": "warning"}]}))
    common = [str(tmp_path), "--manifest", str(manifest), "--labels", str(labels), "--findings", str(saved),
              "--judgements", str(tmp_path / "none.jsonl")]
    assert score.main([*common, "--repo", "o/a"]) == 0  # o/b's unjudged finding is not drawn
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:4] == ["GPU303", "1+0", "1", "1.00"]
    assert "out-of-scope findings (not scored): 0" in out
    assert score.main(common) == 2  # over both, o/b's finding waits for a judgement
    with pytest.raises(SystemExit, match="not in"):
        score.main([*common, "--repo", "o/c"])


def test_a_checkout_keeps_the_project_metadata_gpulint_reads_but_no_large_text(tmp_path):
    source = tmp_path / "mirror" / "o+r" / "repo"
    (source / "data").mkdir(parents=True)
    (source / "train.py").write_text(TRAIN)
    (source / "requirements.txt").write_text("torch==1.6.0\n")
    (source / "run.sh").write_text("python train.py --debug\n")
    (source / "README.md").write_text("python train.py\n")
    (source / "data" / "corpus.txt").write_text("word " * 60_000)  # 300 KB of data, not metadata
    (source / "model.bin").write_bytes(b"\0" * 10)
    git(source, "init", "-q")
    git(source, "add", ".")
    git(source, "commit", "-q", "-m", "c")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True).stdout.strip()
    entry = {"repo": "o/r", "commit": commit, "kind": "synthetic", "scope": ["train.py"]}

    assert score.checkout(entry, tmp_path / "mirror", tmp_path / "corpus") is None
    written = sorted(p.relative_to(tmp_path / "corpus" / "o+r").as_posix()
                     for p in (tmp_path / "corpus" / "o+r").rglob("*") if p.is_file())
    assert written == [".eval-commit", "README.md", "requirements.txt", "run.sh", "train.py"]
