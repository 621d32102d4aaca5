"""The CLI as ruff users expect it: fix control (`unfixable`, `extend-safe-fixes`, `extend-unsafe-fixes`),
`check --fix`, `--stdin-filename` without `-`, "Would fix" in a dry run, and errors that name each path and
config file once."""

from __future__ import annotations

import json

import pytest

TRAIN = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")


def main():
    loader = DataLoader(ds, batch_size=64)
    print(torch.cuda.memory_cached())
    return loader
"""
RESERVED = TRAIN.replace("memory_cached", "memory_reserved")
GPU402 = "train.py:9:11: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"
GPU402_NO_FIX = GPU402.replace(" [*]", "")


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def _config(project, body: str) -> None:
    (project / "pyproject.toml").write_text("[tool.gpulint]\n" + body)


def _concise(gpulint, project, *args) -> tuple[int, list[str]]:
    result = gpulint("check", "--no-cache", "--output-format", "concise", *args, "train.py", cwd=project)
    return result.returncode, result.stdout.decode().splitlines()


# ---- unfixable / extend-safe-fixes / extend-unsafe-fixes ------------------------------------------------------


def test_unfixable_in_config_reports_the_finding_without_a_fix_and_fix_leaves_it(gpulint, project):
    _config(project, 'unfixable = ["GPU402"]\n')
    code, lines = _concise(gpulint, project)
    assert code == 1 and GPU402_NO_FIX in lines and GPU402 not in lines
    data = json.loads(gpulint("check", "--output-format", "json", "train.py", cwd=project).stdout)
    assert [(d["code"], d["fix"]) for d in data if d["code"] == "GPU402"] == [("GPU402", None)]
    result = gpulint("fix", "--apply", "--unsafe-fixes", "train.py", cwd=project)
    assert result.returncode == 1
    text = (project / "train.py").read_text()
    assert "memory_cached" in text and "num_workers=" in text  # GPU101's fix still applies


def test_unfixable_on_the_command_line_adds_to_the_config(gpulint, project):
    _config(project, 'unfixable = ["GPU101"]\n')
    result = gpulint("fix", "--apply", "--unsafe-fixes", "--unfixable", "GPU4", "train.py", cwd=project)
    assert result.returncode == 1
    assert (project / "train.py").read_text() == TRAIN
    assert result.stdout.decode().endswith("Found 2 errors (0 fixed, 2 remaining).\n")


def test_extend_safe_fixes_applies_an_unsafe_fix_without_unsafe_fixes(gpulint, project):
    _config(project, 'extend-safe-fixes = ["GPU101"]\n')
    code, lines = _concise(gpulint, project)
    assert lines[0].startswith("train.py:8:14: GPU101 [*] ")
    result = gpulint("fix", "--apply", "train.py", cwd=project)
    assert result.returncode == 0, result.stdout
    assert "num_workers=" in (project / "train.py").read_text()
    assert result.stdout.decode() == "Found 2 errors (2 fixed, 0 remaining).\n"


def test_extend_unsafe_fixes_holds_a_safe_fix_back_until_unsafe_fixes(gpulint, project):
    result = gpulint("fix", "--apply", "--extend-unsafe-fixes", "GPU402", "train.py", cwd=project)
    assert result.returncode == 1
    assert (project / "train.py").read_text() == TRAIN
    assert "No more fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option).\n" in result.stdout.decode()
    result = gpulint("fix", "--apply", "--unsafe-fixes", "--extend-unsafe-fixes", "GPU402", "train.py", cwd=project)
    assert result.returncode == 0
    assert "memory_reserved" in (project / "train.py").read_text()


@pytest.mark.parametrize(
    "safe, unsafe, marked",
    [
        ('["GPU4"]', '["GPU402"]', False),  # the more specific selector wins
        ('["GPU402"]', '["GPU"]', True),
        ('["GPU402"]', '["GPU402"]', False),  # equally specific: unsafe wins, as in ruff
        ('["ALL"]', "[]", True),
    ],
)
def test_the_most_specific_selector_decides_a_fixs_safety(gpulint, project, safe, unsafe, marked):
    _config(project, f"extend-safe-fixes = {safe}\nextend-unsafe-fixes = {unsafe}\n")
    _, lines = _concise(gpulint, project)
    assert (GPU402 if marked else GPU402_NO_FIX) in lines


def test_changing_the_fix_settings_is_not_hidden_by_the_cache(gpulint, project):
    assert GPU402 in gpulint("check", "--output-format", "concise", "train.py", cwd=project).stdout.decode()
    _config(project, 'unfixable = ["GPU402"]\n')
    out = gpulint("check", "--output-format", "concise", "train.py", cwd=project).stdout.decode()
    assert GPU402_NO_FIX in out.splitlines()


# ---- check --fix -----------------------------------------------------------------------------------------------


def test_check_fix_is_fix_apply(gpulint, project, tmp_path_factory):
    other = tmp_path_factory.mktemp("other")
    (other / "train.py").write_text(TRAIN)
    via_check = gpulint("check", "--fix", "--show-fixes", "train.py", cwd=project)
    via_fix = gpulint("fix", "--apply", "--show-fixes", "train.py", cwd=other)
    assert (via_check.returncode, via_check.stdout, via_check.stderr) == (via_fix.returncode, via_fix.stdout, via_fix.stderr)
    assert via_check.returncode == 1  # GPU101's unsafe fix was not applied
    assert (project / "train.py").read_text() == RESERVED == (other / "train.py").read_text()
    assert via_check.stderr.decode() == "Fixed 1 error:\n- train.py:\n    1 × GPU402 (deprecated-memory-api)\n"
    assert gpulint("check", "--fix", "--unsafe-fixes", "train.py", cwd=project).returncode == 0


def test_check_fix_on_stdin_prints_the_fixed_source(gpulint, project):
    result = gpulint("check", "--fix", "--stdin-filename", "t.py", "-", stdin=TRAIN, cwd=project)
    assert result.stdout.decode() == RESERVED
    assert result.returncode == 1


def test_check_fix_with_add_noqa_is_a_usage_error(gpulint, project):
    result = gpulint("check", "--fix", "--add-noqa", "train.py", cwd=project)
    assert result.returncode == 2
    assert result.stderr.decode() == (
        "gpulint failed\n  Cause: --add-noqa cannot be used with --fix\n  Try 'gpulint check --help' for help.\n"
    )
    assert (project / "train.py").read_text() == TRAIN


# ---- --stdin-filename without `-` --------------------------------------------------------------------------------


def test_stdin_filename_alone_reads_stdin(gpulint, tmp_path):
    (tmp_path / "clean.py").write_text("x = 1\n")  # not read: the current folder is not walked
    result = gpulint("check", "--output-format", "concise", "--stdin-filename", "src/train.py", stdin=TRAIN, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.decode().splitlines()[:2] == [
        "src/train.py:8:14: GPU101 `DataLoader` has no `num_workers`: batches load in the training process",
        GPU402.replace("train.py", "src/train.py"),
    ]
    assert result.stderr.decode() == ""


def test_stdin_filename_wins_over_a_path_with_a_warning(gpulint, project):
    result = gpulint("check", "--stdin-filename", "s.py", "train.py", stdin="x = 1\n", cwd=project)
    assert (result.returncode, result.stdout.decode()) == (0, "All checks passed!\n")
    assert result.stderr.decode() == "gpulint: warning: ignoring train.py in favor of standard input (--stdin-filename)\n"


def test_fix_with_stdin_filename_alone_prints_the_fixed_source(gpulint, tmp_path):
    result = gpulint("fix", "--stdin-filename", "train.py", stdin=TRAIN, cwd=tmp_path)
    assert result.stdout.decode() == RESERVED
    assert result.returncode == 1  # GPU101 remains


# ---- fix --show-fixes without --apply ---------------------------------------------------------------------------


def test_a_dry_run_says_would_fix(gpulint, project):
    (project / "train.py").write_text(RESERVED.replace("main():\n", "main():\n    torch.cuda.max_memory_cached()\n"))
    result = gpulint("fix", "--show-fixes", "--unsafe-fixes", "train.py", cwd=project)
    assert result.returncode == 1
    assert result.stdout.decode().startswith("--- train.py\n+++ train.py\n")
    assert result.stderr.decode() == "Would fix 2 errors:\n- train.py:\n    1 × GPU101 (dataloader-without-workers)\n    1 × GPU402 (deprecated-memory-api)\n"
    assert "memory_cached" in (project / "train.py").read_text()  # nothing written


def test_a_dry_run_names_the_hidden_unsafe_fixes(gpulint, project):
    result = gpulint("fix", "--show-fixes", "train.py", cwd=project)
    assert result.stderr.decode() == (
        "Would fix 1 error:\n- train.py:\n    1 × GPU402 (deprecated-memory-api)\n"
        "Would fix 1 error (1 additional fix available with `--unsafe-fixes`).\n"
    )
    (project / "train.py").write_text("x = 1\n")
    result = gpulint("fix", "--show-fixes", "train.py", cwd=project)
    assert (result.returncode, result.stderr.decode()) == (0, "No errors would be fixed.\n")


# ---- errors name each path once --------------------------------------------------------------------------------


def test_a_missing_path_is_named_once(gpulint, tmp_path):
    result = gpulint("fix", "nosuch.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.decode() == "No errors would be fixed.\ngpulint: nosuch.py: No such file or directory\n"
    result = gpulint("check", "--output-format", "concise", "nosuch.py", cwd=tmp_path)
    assert result.stdout.decode() == "nosuch.py:1:1: io-error: No such file or directory\nFound 1 error.\n"


@pytest.mark.parametrize(
    "body, cause",
    [
        ('select = ["GPU1", "XYZ1"]\n', "Unknown rule selector: `XYZ1` (`select` in {config})"),
        ('unfixable = ["GPU77"]\n', "Unknown rule selector: `GPU77` (`unfixable` in {config})"),
        ('[tool.gpulint.per-file-ignores]\n"tests/*" = ["GPU10x"]\n', 'Unknown rule selector: `GPU10x` (`per-file-ignores."tests/*"` in {config})'),
        ("[tool.gpulint.rules.GPU1O1]\nworkers = '2'\n", "Unknown rule in `[tool.gpulint.rules.GPU1O1]` ({config})"),
    ],
)
def test_a_selector_typo_in_pyproject_names_the_file(gpulint, project, body, cause):
    _config(project, body)
    (project / "src").mkdir()
    result = gpulint("check", "../train.py", cwd=project / "src")  # the config is found above the working folder
    config = (project / "pyproject.toml").resolve()
    assert result.returncode == 2
    assert result.stderr.decode() == f"gpulint failed\n  Cause: {cause.format(config=config)}\n"


def test_a_selector_typo_on_the_command_line_names_the_flag_value(gpulint, project):
    result = gpulint("check", "--extend-safe-fixes", "GPU77", "train.py", cwd=project)
    assert (result.returncode, result.stderr.decode()) == (2, "gpulint failed\n  Cause: Unknown rule selector: `GPU77`\n")
