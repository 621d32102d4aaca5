"""The pre-commit hooks, run for real with `pre-commit validate-manifest` and `pre-commit try-repo`.

try-repo installs the hook repository into a fresh virtualenv with pip, so the test copies this working
tree (tracked and untracked, not ignored files: what you are about to commit) into a temporary git
repository and commits it there; pre-commit then tests exactly the current code, not the last commit.

pip inside pre-commit's virtualenv needs the build backend (hatchling) and the dependencies (libcst,
click): from the package index, a mirror named in pip's configuration, or an offline wheelhouse given as
GPULINT_TEST_WHEELHOUSE (then `PIP_NO_INDEX=1`). Hence the `network` marker; `-m "not network"` skips it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytest.importorskip("pre_commit")
pytestmark = [pytest.mark.slow, pytest.mark.network]

# One GPU101 finding (unsafe fix only): the check hook fails, the fix hook cannot fix it.
UNFIXABLE = (REPO / "fixtures" / "train_regression.py").read_text(encoding="utf-8")
# Only a safe fix: the fix hook rewrites the file once, then passes.
FIXABLE = "import torch\n\nprint(torch.cuda.memory_cached())\n"


def _git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "gpulint tests",
        "GIT_AUTHOR_EMAIL": "tests@example.invalid",
        "GIT_COMMITTER_NAME": "gpulint tests",
        "GIT_COMMITTER_EMAIL": "tests@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, env=env, check=True)
    return result.stdout.decode()


def _pre_commit(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never", "GIT_CONFIG_GLOBAL": os.devnull}
    env.pop("PYTHONPATH", None)  # the hook must run the gpulint pre-commit installed, not this checkout
    env.pop("GPULINT_OUTPUT_FORMAT", None)
    wheelhouse = os.environ.get("GPULINT_TEST_WHEELHOUSE")
    if wheelhouse:
        env.update({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": wheelhouse, "PIP_CONFIG_FILE": os.devnull})
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args], cwd=cwd, capture_output=True, env=env, timeout=600
    )


def _working_tree_files() -> list[str]:
    """What `git add -A` would commit: tracked files plus untracked ones git does not ignore."""
    out = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=REPO)
    return sorted({p for p in out.split("\0") if p and (REPO / p).is_file()})


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path_factory.mktemp("hookrepo")
    for rel in _working_tree_files():
        target = repo / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    if not (repo / "README.md").exists():
        # pyproject names README.md as the long description; building the wheel needs the file.
        (repo / "README.md").write_text("# gpulint\n", encoding="utf-8")
    _git("init", "-q", cwd=repo)
    _git("add", "-A", cwd=repo)
    _git("commit", "-q", "-m", "working tree under test", cwd=repo)
    return repo


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    """Shared by the tests of this module, so the hook's virtualenv is built once."""
    return tmp_path_factory.mktemp("pre-commit-home")


@pytest.fixture
def consumer(tmp_path: Path) -> Path:
    """A user's repository with a training script staged."""
    (tmp_path / "train.py").write_text(UNFIXABLE, encoding="utf-8")
    (tmp_path / "stats.py").write_text(FIXABLE, encoding="utf-8")
    (tmp_path / "notes.txt").write_text("torch.cuda.memory_cached()\n", encoding="utf-8")
    _git("init", "-q", cwd=tmp_path)
    _git("add", "-A", cwd=tmp_path)
    _git("commit", "-q", "-m", "initial", cwd=tmp_path)
    return tmp_path


def _try_repo(hook_repo: Path, hook: str, *files: str, cwd: Path, home: Path) -> tuple[int, str]:
    result = _pre_commit("try-repo", str(hook_repo), hook, "--files", *files, cwd=cwd, home=home)
    out = result.stdout.decode() + result.stderr.decode()
    if "An unexpected error has occurred" in out and ("No matching distribution" in out or "Could not find a version" in out):
        pytest.skip("pre-commit's virtualenv cannot install gpulint's dependencies here (no index, mirror or wheelhouse)")
    return result.returncode, out


def _hook_section(output: str) -> str:
    """try-repo prints the generated config and install notes first; the hook's report starts at its name."""
    lines = output.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(("gpulint check.", "gpulint fix."))), len(lines))
    return "".join(lines[start:]).strip()


def test_manifest_is_valid():
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(REPO / ".pre-commit-hooks.yaml")], capture_output=True
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


def test_manifest_matches_the_conventions():
    yaml = pytest.importorskip("yaml")
    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    assert hooks["gpulint"]["entry"] == "gpulint check --force-exclude"
    assert hooks["gpulint-fix"]["entry"] == "gpulint fix --apply --force-exclude"
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types_or"] == ["python", "pyi", "jupyter"]
        assert hook["require_serial"] is True
        assert hook["minimum_pre_commit_version"] == "2.9.2"


def test_manifest_validation_is_not_vacuous(tmp_path):
    broken = tmp_path / ".pre-commit-hooks.yaml"
    broken.write_text("- id: gpulint\n  name: x\n  language: python\n", encoding="utf-8")  # no entry
    result = subprocess.run([sys.executable, "-m", "pre_commit", "validate-manifest", str(broken)], capture_output=True)
    assert result.returncode == 1 and b"entry" in result.stdout + result.stderr


def test_try_repo_check_hook_fails_on_findings(hook_repo, consumer, tmp_path_factory):
    code, out = _try_repo(hook_repo, "gpulint", "train.py", "notes.txt", cwd=consumer, home=tmp_path_factory.mktemp("home"))
    section = _hook_section(out)
    assert code == 1, out
    assert section.startswith("gpulint check"), out
    assert "Failed\n- hook id: gpulint\n- exit code: 1\n" in section, out
    assert "GPU101 `DataLoader` uses `num_workers=0` (module constant at train.py:7)" in section
    assert " --> train.py:26:12" in section
    assert "notes.txt" not in section  # types_or: python, pyi


def test_try_repo_fix_hook_modifies_then_passes(hook_repo, consumer, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    code, out = _try_repo(hook_repo, "gpulint-fix", "stats.py", cwd=consumer, home=home)
    section = _hook_section(out)
    assert code == 1, out
    assert "Failed\n- hook id: gpulint-fix\n- files were modified by this hook" in section, out
    assert (consumer / "stats.py").read_text(encoding="utf-8") == "import torch\n\nprint(torch.cuda.memory_reserved())\n"
    code, out = _try_repo(hook_repo, "gpulint-fix", "stats.py", cwd=consumer, home=home)
    assert code == 0, out
    assert _hook_section(out).startswith("gpulint fix") and _hook_section(out).endswith("Passed"), out


# try-repo builds a new virtualenv on every call (it uses a throwaway store); the remaining cases use
# `pre-commit run` with a config naming the same hook repository, so they share one virtualenv.


@pytest.fixture
def configured(hook_repo, consumer) -> Path:
    rev = _git("rev-parse", "HEAD", cwd=hook_repo).strip()
    (consumer / ".pre-commit-config.yaml").write_text(
        f"repos:\n-   repo: {hook_repo.as_uri()}\n    rev: {rev}\n    hooks:\n    -   id: gpulint\n    -   id: gpulint-fix\n",
        encoding="utf-8",
    )
    _git("add", ".pre-commit-config.yaml", cwd=consumer)
    return consumer


def _run(hook: str, *files: str, cwd: Path, home: Path) -> tuple[int, str]:
    result = _pre_commit("run", hook, "--files", *files, cwd=cwd, home=home)
    out = result.stdout.decode() + result.stderr.decode()
    if "An unexpected error has occurred" in out and ("No matching distribution" in out or "Could not find a version" in out):
        pytest.skip("pre-commit's virtualenv cannot install gpulint's dependencies here (no index, mirror or wheelhouse)")
    return result.returncode, out


def test_check_hook_passes_on_clean_files(configured, pre_commit_home):
    (configured / "clean.py").write_text("import torch\n\nprint(torch.cuda.memory_reserved())\n", encoding="utf-8")
    _git("add", "clean.py", cwd=configured)
    code, out = _run("gpulint", "clean.py", cwd=configured, home=pre_commit_home)
    assert code == 0, out
    assert _hook_section(out).startswith("gpulint check") and _hook_section(out).endswith("Passed"), out


def test_fix_hook_leaves_unsafe_fixes_and_reports_them(configured, pre_commit_home):
    code, out = _run("gpulint-fix", "train.py", cwd=configured, home=pre_commit_home)
    assert code == 1, out
    assert "- exit code: 1" in out and "files were modified" not in out
    assert "(0 fixed, " in out and "GPU101" in out
    assert (configured / "train.py").read_text(encoding="utf-8") == UNFIXABLE


def test_force_exclude_applies_to_files_pre_commit_passes(configured, pre_commit_home):
    code, out = _run("gpulint", "train.py", cwd=configured, home=pre_commit_home)
    assert code == 1, out
    (configured / "pyproject.toml").write_text('[tool.gpulint]\nextend-exclude = ["train.py"]\n', encoding="utf-8")
    _git("add", "pyproject.toml", cwd=configured)
    code, out = _run("gpulint", "train.py", cwd=configured, home=pre_commit_home)
    assert code == 0, out
