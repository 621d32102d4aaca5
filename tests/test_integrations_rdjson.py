"""`--output-format rdjson` (reviewdog's Diagnostic Format), through the real CLI: the exact document, validated
against reviewdog's published JSON schema (tests/data/reviewdog-rdjson-DiagnosticResult.json: reviewdog/reviewdog
`proto/rdf/jsonschema/DiagnosticResult.json` at commit 34a54e5b85daba36f973c910b1a6df937ebf37bc, MIT), and each
suggestion applied the way reviewdog posts it (whole lines replaced) gives what `gpulint fix` gives."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import REPO, UNPROVEN_COST_TOML, run_gpulint
from tests.sample_training import TRAIN

SCHEMA = json.loads((REPO / "tests" / "data" / "reviewdog-rdjson-DiagnosticResult.json").read_text(encoding="utf-8"))
URL = "https://github.com/gpulint/gpulint/blob/main/rules/"



@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\n" + UNPROVEN_COST_TOML, encoding="utf-8")  # one read a step
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN, encoding="utf-8")
    return tmp_path


def rdjson(project: Path, *args: str) -> dict:
    result = run_gpulint("check", "--no-cache", "--output-format", "rdjson", *args, cwd=project)
    assert result.returncode == 1, result.stderr.decode()
    assert result.stderr == b""
    document = json.loads(result.stdout)
    jsonschema.Draft4Validator(SCHEMA).validate(document)
    return document


def apply_suggestion(text: str, suggestion: dict) -> str:
    """A line-wise suggestion as reviewdog posts it on GitHub: lines start..end (inclusive) become `text`."""
    lines = text.splitlines(keepends=True)
    start, end = suggestion["range"]["start"]["line"], suggestion["range"]["end"]["line"]
    assert set(suggestion["range"]["start"]) == {"line"} and set(suggestion["range"]["end"]) == {"line"}
    replacement = suggestion["text"] + "\n"
    return "".join(lines[: start - 1]) + replacement + "".join(lines[end:])


def test_rdjson_exact_document(project):
    document = rdjson(project, "src")
    assert document["source"] == {"name": "gpulint", "url": "https://github.com/gpulint/gpulint"}
    gpu101, gpu303, gpu402 = document["diagnostics"]
    assert gpu402 == {
        "message": "`torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`",
        "location": {"path": "src/train.py", "range": {"start": {"line": 19, "column": 11}, "end": {"line": 19, "column": 35}}},
        "severity": "WARNING",
        "code": {"value": "GPU402", "url": URL + "GPU402.md"},
        "suggestions": [{"range": {"start": {"line": 19}, "end": {"line": 19}}, "text": "    print(torch.cuda.memory_reserved())"}],
    }
    # Columns count UTF-8 bytes: the four-byte character before `loss.item()` moves it by three.
    assert gpu303["location"]["range"] == {"start": {"line": 18, "column": 28}, "end": {"line": 18, "column": 39}}
    assert gpu303["related_locations"] == [
        {"message": "the training loop", "location": {"path": "src/train.py", "range": {"start": {"line": 14, "column": 5}}}}
    ]
    assert "suggestions" not in gpu303  # no fix
    # GPU101's fix is unsafe: no suggestion unless --unsafe-fixes.
    assert gpu101["related_locations"] == [
        {"message": "the argparse default", "location": {"path": "src/train.py", "range": {"start": {"line": 7, "column": 52}}}}
    ]
    assert "suggestions" not in gpu101


def test_rdjson_suggestions_reproduce_the_fixes(project):
    document = rdjson(project, "--unsafe-fixes", "src")
    gpu101, _, gpu402 = document["diagnostics"]
    # An unsafe fix with two edits (an import after the imports, the argparse default) is one suggestion over
    # the lines between them, so that GitHub can apply it in one step.
    (suggestion,) = gpu101["suggestions"]
    assert suggestion["range"] == {"start": {"line": 4}, "end": {"line": 7}}
    # Suggestions refer to the lines of the pull request's version: applied from the bottom up.
    after_both = apply_suggestion(apply_suggestion(TRAIN, gpu402["suggestions"][0]), suggestion)
    run_gpulint("fix", "--apply", "--unsafe-fixes", "src", cwd=project)
    assert after_both == (project / "src" / "train.py").read_text(encoding="utf-8") != TRAIN


def test_rdjson_for_a_file_that_does_not_parse(project):
    (project / "src" / "train.py").write_text("import torch\ntorch.cuda.synchronize()\nfor x in y\n", encoding="utf-8")
    (diagnostic,) = rdjson(project, "src")["diagnostics"]
    assert diagnostic == {
        "message": "SyntaxError: expected ':'",
        "location": {"path": "src/train.py", "range": {"start": {"line": 3, "column": 11}, "end": {"line": 3, "column": 11}}},
        "severity": "ERROR",
        "code": {"value": "invalid-syntax"},
    }


def test_rdjson_schema_rejects_what_reviewdog_would_reject():
    """The schema is a real check: a severity reviewdog does not know fails validation."""
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft4Validator(SCHEMA).validate({"diagnostics": [{"message": "m", "severity": "NOTE"}]})
