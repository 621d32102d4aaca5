"""The steps of the gpulint GitHub Action (`action.yml` at the repository root), one subcommand each:

    python3 action/gpulint_action.py install    # a virtual environment with gpulint in it
    python3 action/gpulint_action.py files      # the files to check: `paths`, else what the pull request changed
    python3 action/gpulint_action.py check      # annotations or SARIF, the step summary, the number of findings
    python3 action/gpulint_action.py suggest    # the fixes as review suggestions, through reviewdog
    python3 action/gpulint_action.py result     # fail when findings remain (unless told not to)

Inputs come as `INPUT_*` environment variables (set in `action.yml` from the action's inputs: never pasted into
a shell script), GitHub's own variables (`GITHUB_EVENT_NAME`, `GITHUB_EVENT_PATH`, `GITHUB_OUTPUT`,
`GITHUB_ENV`, `GITHUB_STEP_SUMMARY`, `RUNNER_TEMP`) say where to read and write. Standard library only: it runs
before gpulint is installed, with the runner's `python3`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import venv
from pathlib import Path

SUFFIXES = (".py", ".pyi")
NO_COMMIT = "0" * 40  # `before` of a push that created the branch


def _env(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def _flag(name: str, default: bool) -> bool:
    value = _env(name).lower()
    return default if value == "" else value in ("true", "1", "yes")


def _temp() -> Path:
    return Path(_env("RUNNER_TEMP") or os.environ.get("TMPDIR", "/tmp"))


def _set_output(name: str, value: str) -> None:
    target = _env("GITHUB_OUTPUT")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(f"{name}={value}\n")


def _summary(text: str) -> None:
    target = _env("GITHUB_STEP_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(text)


def _gpulint() -> str:
    """The gpulint the `install` step put in place (GPULINT_BIN), else the one on PATH."""
    return _env("GPULINT_BIN") or "gpulint"


def requirement(version: str, action_path: str) -> str:
    """What pip installs for the `version` input: this action's own copy of gpulint when empty, `gpulint==X` for a
    version number, the newest release for `latest`, anything else as a pip requirement (`gpulint>=0.5`, a path)."""
    if not version:
        return action_path
    if version == "latest":
        return "gpulint"
    if re.fullmatch(r"\d+(\.\d+)*([a-z]+\d+)?", version):
        return f"gpulint=={version}"
    return version


def install() -> int:
    action_path = _env("GITHUB_ACTION_PATH") or str(Path(__file__).resolve().parent.parent)
    target = _temp() / "gpulint-venv"
    venv.create(target, with_pip=True, clear=True)
    python = target / ("Scripts" if os.name == "nt" else "bin") / "python"
    spec = requirement(_env("INPUT_VERSION"), action_path)
    print(f"Installing {spec} into {target}", flush=True)
    result = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", spec])
    if result.returncode != 0:
        print(f"::error title=gpulint::could not install {spec}", flush=True)
        return result.returncode
    executable = python.parent / ("gpulint.exe" if os.name == "nt" else "gpulint")
    env_file = _env("GITHUB_ENV")
    if env_file:
        with open(env_file, "a", encoding="utf-8") as handle:
            handle.write(f"GPULINT_BIN={executable}\n")
    subprocess.run([str(executable), "--version"], check=False)
    return 0


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], capture_output=True, text=True)


def _event() -> dict:
    path = _env("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _base_commit() -> str | None:
    """The commit the changes are compared with: a pull request's base, a push's previous head."""
    event_name, event = _env("GITHUB_EVENT_NAME"), _event()
    if event_name in ("pull_request", "pull_request_target"):
        return ((event.get("pull_request") or {}).get("base") or {}).get("sha")
    if event_name == "push":
        before = event.get("before")
        return before if before and before != NO_COMMIT else None
    return None


def changed_files(base: str) -> list[str] | None:
    """Python files added, copied, modified or renamed since `base` (fetched when the clone is shallow); None when
    git cannot tell."""
    if _git("cat-file", "-e", f"{base}^{{commit}}").returncode != 0:
        _git("fetch", "--no-tags", "--quiet", "--depth=1", "origin", base)
    diff = _git("diff", "--name-only", "--diff-filter=ACMR", "-z", base, "HEAD")
    if diff.returncode != 0:
        return None
    return [name for name in diff.stdout.split("\0") if name.endswith(SUFFIXES) and os.path.isfile(name)]


def files() -> int:
    """Write the paths to check to a file (one per line) and `count` as an output; 0 skips the check."""
    given = shlex.split(_env("INPUT_PATHS"))
    if given:
        paths, why = given, "the paths given"
    else:
        base = _base_commit()
        changed = changed_files(base) if base else None
        if changed is None:
            paths, why = ["."], "the whole repository"
        else:
            paths, why = changed, f"the Python files changed since {base[:12]}"
    listing = _temp() / "gpulint-files.txt"
    listing.write_text("".join(f"{p}\n" for p in paths), encoding="utf-8")
    print(f"gpulint checks {why}: {len(paths)} path(s)", flush=True)
    for path in paths:
        print(f"  {path}")
    _set_output("count", str(len(paths)))
    _set_output("list", str(listing))
    return 0


def _paths() -> list[str]:
    listing = _temp() / "gpulint-files.txt"
    return [line for line in listing.read_text(encoding="utf-8").splitlines() if line]


def _run_check(*extra: str) -> subprocess.CompletedProcess:
    command = [_gpulint(), "check", *shlex.split(_env("INPUT_ARGS")), *extra, "--", *_paths()]
    return subprocess.run(command, capture_output=True, text=True)


def check() -> int:
    """Check the files: findings as JSON (counted), then as annotations or a SARIF file, and a step summary."""
    report = _temp() / "gpulint.json"
    result = _run_check("--output-format", "json", "-o", str(report))
    if result.returncode not in (0, 1):  # a usage or configuration error: say it, and stop
        sys.stderr.write(result.stderr)
        print(f"::error title=gpulint::{result.stderr.strip().splitlines()[-1] if result.stderr.strip() else 'gpulint failed'}")
        return result.returncode
    findings = json.loads(report.read_text(encoding="utf-8"))
    _set_output("findings", str(len(findings)))
    _set_output("json-file", str(report))
    output = _env("INPUT_OUTPUT", "annotations")
    if output == "annotations":
        print(_run_check("--output-format", "github").stdout, end="", flush=True)
    elif output == "sarif":
        sarif = _temp() / "gpulint.sarif"
        _run_check("--output-format", "sarif", "-o", str(sarif))
        _set_output("sarif-file", str(sarif))
    elif output != "none":
        print(f"::error title=gpulint::unknown output `{output}` (annotations, sarif or none)")
        return 2
    concise = _run_check("--output-format", "concise").stdout
    if output != "annotations":
        print(concise, end="", flush=True)
    _summary(f"### gpulint\n\n```text\n{concise}```\n" if findings else "### gpulint\n\nAll checks passed!\n")
    return 0


def suggest() -> int:
    """Post the fixes as review suggestions: `gpulint check --output-format rdjson | reviewdog -f=rdjson`."""
    extra = ["--output-format", "rdjson"] + (["--unsafe-fixes"] if _flag("INPUT_UNSAFE_FIXES", False) else [])
    result = _run_check(*extra)
    if result.returncode not in (0, 1):
        sys.stderr.write(result.stderr)
        return result.returncode
    reporter = _env("INPUT_REVIEWDOG_REPORTER", "github-pr-review")
    command = ["reviewdog", "-f=rdjson", "-name=gpulint", f"-reporter={reporter}", "-filter-mode=added", "-fail-level=none"]
    print("$ " + " ".join(command), flush=True)
    return subprocess.run(command, input=result.stdout, text=True).returncode


def result() -> int:
    findings = int(_env("FINDINGS") or "0")
    if findings and _flag("INPUT_FAIL_ON_FINDINGS", True):
        print(f"gpulint: {findings} finding(s)")
        return 1
    return 0


STEPS = {"install": install, "files": files, "check": check, "suggest": suggest, "result": result}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in STEPS:
        print(f"usage: gpulint_action.py {{{','.join(STEPS)}}}", file=sys.stderr)
        return 2
    return STEPS[argv[0]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
