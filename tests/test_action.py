"""The GitHub Action (`action.yml` + `action/gpulint_action.py`): the metadata validated against the action
schema (tests/data/github-action-schema.json: SchemaStore/schemastore `src/schemas/json/github-action.json` at
commit d9d98e69894ebd7a50965dc58d61951e9d7f23a7, Apache-2.0), and each script step run here as the runner runs
it: the changed files of a pull request in a real (shallow) clone, annotations, SARIF, the step summary, the
suggestions handed to reviewdog, the final status, and the install step."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import REPO

SCHEMA = json.loads((REPO / "tests" / "data" / "github-action-schema.json").read_text(encoding="utf-8"))
ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
SCRIPT = REPO / "action" / "gpulint_action.py"
GPULINT = str(Path(sys.executable).parent / "gpulint")

TRAIN = "import torch\n\nprint(torch.cuda.memory_cached())\n"


def run_step(step: str, cwd: Path, runner: Path, **env: str) -> subprocess.CompletedProcess:
    """One step of the action, with the variables the runner sets (outputs, env and summary files in `runner`)."""
    runner.mkdir(exist_ok=True)
    full = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", str(runner)),
        "RUNNER_TEMP": str(runner),
        "GITHUB_OUTPUT": str(runner / "output"),
        "GITHUB_ENV": str(runner / "env"),
        "GITHUB_STEP_SUMMARY": str(runner / "summary"),
        "GPULINT_BIN": GPULINT,
        **env,
    }
    return subprocess.run([sys.executable, str(SCRIPT), step], cwd=cwd, env=full, capture_output=True, text=True, timeout=300)


def outputs(runner: Path) -> dict[str, str]:
    path = runner / "output"
    return dict(line.split("=", 1) for line in path.read_text().splitlines()) if path.exists() else {}


def git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


# ---- the metadata ------------------------------------------------------------------------------------------


def test_action_yml_is_valid_action_metadata():
    jsonschema.Draft7Validator(SCHEMA).validate(ACTION)
    assert ACTION["runs"]["using"] == "composite"


def test_the_schema_rejects_a_broken_action():
    broken = {**ACTION, "runs": {"using": "composite", "steps": [{"run": "echo hi"}]}}  # a run step needs `shell`
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA).validate(broken)


def test_every_step_uses_declared_inputs_and_outputs_the_script_writes():
    script = SCRIPT.read_text(encoding="utf-8")
    declared = set(ACTION["inputs"])
    used = set()
    for step in ACTION["runs"]["steps"]:
        text = json.dumps(step)
        used |= set(re.findall(r"inputs\.([\w-]+)", text))
        if "run" in step:
            (command,) = re.findall(r'gpulint_action\.py" (\w+)$', step["run"])
            assert f'"{command}":' in script
            for name in step.get("env", {}):
                if name.startswith("INPUT_"):
                    assert f'"{name}"' in script, name  # the script reads every input it is given
    assert used == declared  # no input unused, none undeclared
    written = set(re.findall(r'_set_output\("([\w-]+)"', script))
    referenced = set(re.findall(r"steps\.(?:check|files)\.outputs\.([\w-]+)", json.dumps(ACTION)))
    assert referenced <= written


# ---- files ---------------------------------------------------------------------------------------------------


@pytest.fixture
def pull_request(tmp_path: Path) -> tuple[Path, str]:
    """An upstream repository with a base commit and a pull request's commit, and a shallow clone of the latter
    (as actions/checkout makes it): the base commit is not in the clone."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q")
    for name in ("keep.py", "change.py", "gone.py", "README.md"):
        (upstream / name).write_text(TRAIN if name.endswith(".py") else "docs\n")
    git(upstream, "add", ".")
    git(upstream, "commit", "-qm", "base")
    base = git(upstream, "rev-parse", "HEAD")
    (upstream / "change.py").write_text(TRAIN + "x = 1\n")
    (upstream / "new.py").write_text(TRAIN)
    (upstream / "README.md").write_text("more docs\n")
    (upstream / "gone.py").unlink()
    git(upstream, "add", "-A")
    git(upstream, "commit", "-qm", "pull request")
    git(upstream, "config", "uploadpack.allowAnySHA1InWant", "true")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth=1", upstream.as_uri(), str(clone))
    assert subprocess.run(["git", "cat-file", "-e", f"{base}^{{commit}}"], cwd=clone).returncode != 0
    return clone, base


def test_files_of_a_pull_request_from_a_shallow_clone(pull_request, tmp_path):
    clone, base = pull_request
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"base": {"sha": base}}}))
    runner = tmp_path / "runner"
    result = run_step("files", clone, runner, GITHUB_EVENT_NAME="pull_request", GITHUB_EVENT_PATH=str(event))
    assert result.returncode == 0, result.stderr
    assert outputs(runner)["count"] == "2"
    assert (runner / "gpulint-files.txt").read_text() == "change.py\nnew.py\n"
    assert f"the Python files changed since {base[:12]}: 2 path(s)" in result.stdout


def test_files_given_or_the_whole_repository(tmp_path):
    runner = tmp_path / "runner"
    given = run_step("files", tmp_path, runner, INPUT_PATHS="src  'my scripts/train.py'")
    assert given.returncode == 0
    assert (runner / "gpulint-files.txt").read_text() == "src\nmy scripts/train.py\n"
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"before": "0" * 40}))  # a push that created the branch
    for name in ("push", "workflow_dispatch"):
        (runner / "output").unlink()
        run_step("files", tmp_path, runner, GITHUB_EVENT_NAME=name, GITHUB_EVENT_PATH=str(event))
        assert outputs(runner)["count"] == "1"
        assert (runner / "gpulint-files.txt").read_text() == ".\n"


# ---- check, suggest, result ---------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text("[tool.gpulint]\n")
    (work / "train.py").write_text(TRAIN)
    (work / "clean.py").write_text("import torch\n")
    runner = tmp_path / "runner"
    runner.mkdir()
    (runner / "gpulint-files.txt").write_text("train.py\nclean.py\n")
    return work, runner


def test_check_annotations_summary_and_outputs(project):
    work, runner = project
    result = run_step("check", work, runner, INPUT_OUTPUT="annotations", INPUT_ARGS="--no-cache")
    assert result.returncode == 0, result.stderr  # findings do not fail this step: `result` decides
    file = work / "train.py"
    assert result.stdout == (
        f"::warning title=gpulint (GPU402),file={file},line=3,col=7,endLine=3,endColumn=31::train.py:3:7: GPU402 "
        "`torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`%0A  help: Replace with `memory_reserved`\n"
    )
    assert outputs(runner) == {"findings": "1", "json-file": str(runner / "gpulint.json")}
    assert [d["code"] for d in json.loads((runner / "gpulint.json").read_text())] == ["GPU402"]
    assert (runner / "summary").read_text() == (
        "### gpulint\n\n```text\ntrain.py:3:7: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use "
        "`torch.cuda.memory_reserved`\nFound 1 error.\n[*] 1 fixable with the `gpulint fix --apply` command.\n```\n"
    )


def test_check_sarif_for_code_scanning(project):
    work, runner = project
    result = run_step("check", work, runner, INPUT_OUTPUT="sarif", INPUT_ARGS="--no-cache --select GPU4")
    assert result.returncode == 0, result.stderr
    assert outputs(runner)["sarif-file"] == str(runner / "gpulint.sarif")
    sarif = json.loads((runner / "gpulint.sarif").read_text())
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["GPU402"]
    assert "train.py:3:7: GPU402" in result.stdout  # the log shows the findings too


def test_check_stops_on_a_usage_error(project):
    work, runner = project
    result = run_step("check", work, runner, INPUT_ARGS="--select NOPE")
    assert result.returncode == 2
    assert "::error title=gpulint::  Cause: Unknown rule selector: `NOPE`" in result.stdout
    assert "findings" not in outputs(runner)


def test_clean_files_pass(project):
    work, runner = project
    (runner / "gpulint-files.txt").write_text("clean.py\n")
    assert run_step("check", work, runner, INPUT_ARGS="--no-cache").returncode == 0
    assert outputs(runner)["findings"] == "0"
    assert (runner / "summary").read_text() == "### gpulint\n\nAll checks passed!\n"


def test_suggest_hands_rdjson_to_reviewdog(project, tmp_path):
    work, runner = project
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "reviewdog"
    fake.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\ncat > {tmp_path / "stdin"}\n')
    fake.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    result = run_step("suggest", work, runner, PATH=path, INPUT_ARGS="--no-cache", INPUT_REVIEWDOG_REPORTER="github-pr-check")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "args").read_text() == "-f=rdjson -name=gpulint -reporter=github-pr-check -filter-mode=added -fail-level=none\n"
    (diagnostic,) = json.loads((tmp_path / "stdin").read_text())["diagnostics"]
    assert diagnostic["suggestions"] == [{"range": {"start": {"line": 3}, "end": {"line": 3}}, "text": "print(torch.cuda.memory_reserved())"}]


@pytest.mark.parametrize(("findings", "fail", "status"), [("2", "", 1), ("2", "false", 0), ("0", "true", 0), ("", "true", 0)])
def test_result_fails_on_findings_unless_told_not_to(tmp_path, findings, fail, status):
    result = run_step("result", tmp_path, tmp_path / "runner", FINDINGS=findings, INPUT_FAIL_ON_FINDINGS=fail)
    assert result.returncode == status


# ---- install ------------------------------------------------------------------------------------------------


def test_requirement_for_the_version_input():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from gpulint_action import requirement
    finally:
        sys.path.remove(str(SCRIPT.parent))
    assert requirement("", "/actions/gpulint") == "/actions/gpulint"
    assert requirement("0.5.0", "/a") == "gpulint==0.5.0"
    assert requirement("1.0rc1", "/a") == "gpulint==1.0rc1"
    assert requirement("latest", "/a") == "gpulint"
    assert requirement("gpulint>=0.5,<0.7", "/a") == "gpulint>=0.5,<0.7"


@pytest.mark.slow
def test_install_puts_gpulint_in_a_virtual_environment(tmp_path):
    """The install step for real: a fresh virtual environment, gpulint installed from a wheel of this repository
    (the `version` input takes any pip requirement), its path handed to the next steps through GITHUB_ENV."""
    pytest.importorskip("hatchling")
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), str(REPO)], check=True)
    (wheel,) = dist.glob("gpulint-*.whl")
    runner = tmp_path / "runner"
    result = run_step("install", tmp_path, runner, INPUT_VERSION=str(wheel), GPULINT_BIN="")
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = (runner / "env").read_text().splitlines()
    name, _, executable = line.partition("=")
    assert (name, executable) == ("GPULINT_BIN", str(runner / "gpulint-venv" / "bin" / "gpulint"))
    version = subprocess.run([executable, "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("gpulint")
