"""The CLI as users run it: exit codes, summaries, formats, config errors, stdin, discovery."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.conftest import REPO

TRAIN = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")


def main():
    loader = DataLoader(ds, batch_size=64)
    print(torch.cuda.memory_cached())
    return loader
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "clean.py").write_text("import torch\nx = torch.ones(3)\n")
    return tmp_path


def test_readme_first_command_reports_gpu101_on_fixtures_and_exits_1(gpulint):
    result = gpulint("check", "fixtures/")
    assert result.returncode == 1
    out = result.stdout.decode()
    assert "GPU101" in out and "fixtures/train_classifier.py" in out
    assert "Found " in out


def test_clean_run_says_all_checks_passed(gpulint, project):
    result = gpulint("check", "clean.py", cwd=project)
    assert (result.returncode, result.stdout.decode()) == (0, "All checks passed!\n")


def test_concise_output_and_summary(gpulint, project):
    result = gpulint("check", "--output-format", "concise", "train.py", cwd=project)
    assert result.returncode == 1
    assert result.stdout.decode().splitlines() == [
        "train.py:8:14: GPU101 `DataLoader` has no `num_workers`: batches load in the training process",
        "train.py:9:11: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`",
        "Found 2 errors.",
        "[*] 1 fixable with the `gpulint fix --apply` command (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]


def test_full_output_has_source_caret_and_help(gpulint, project):
    out = gpulint("check", "train.py", cwd=project).stdout.decode()
    assert " --> train.py:8:14" in out
    assert "8 |     loader = DataLoader(ds, batch_size=64)" in out
    assert "  |              " + "^" * 29 in out
    assert "help: Set `num_workers` to a worker count" in out
    assert "note: This is an unsafe fix and may change runtime behavior" in out


def test_json_output_is_rufflike(gpulint, project):
    result = gpulint("check", "--output-format", "json", "train.py", cwd=project)
    records = json.loads(result.stdout)
    assert [r["code"] for r in records] == ["GPU101", "GPU402"]
    first = records[0]
    assert first["filename"] == str(project / "train.py")
    assert first["location"] == {"row": 8, "column": 14} and first["end_location"] == {"row": 8, "column": 43}
    assert first["fix"]["applicability"] == "unsafe" and first["name"] == "dataloader-without-workers"
    assert first["noqa_row"] == 8 and first["severity"] == "info"  # feeds no training loop


def test_json_lines_and_env_var_and_output_file(gpulint, project):
    result = gpulint("check", "train.py", cwd=project, env={"GPULINT_OUTPUT_FORMAT": "json-lines"})
    assert [json.loads(line)["code"] for line in result.stdout.decode().splitlines()] == ["GPU101", "GPU402"]
    result = gpulint("check", "--output-format", "json", "-o", "report.json", "train.py", cwd=project)
    assert result.stdout == b"" and len(json.loads((project / "report.json").read_text())) == 2


def test_clean_json_is_an_empty_array(gpulint, project):
    assert gpulint("check", "--output-format", "json", "clean.py", cwd=project).stdout == b"[]\n"


def test_statistics(gpulint, project):
    out = gpulint("check", "--statistics", "train.py", cwd=project).stdout.decode()
    assert out.splitlines() == ["1\tGPU101\t[ ] dataloader-without-workers", "1\tGPU402\t[*] deprecated-memory-api"]


def test_exit_zero_select_ignore(gpulint, project):
    assert gpulint("check", "--exit-zero", "train.py", cwd=project).returncode == 0
    out = gpulint("check", "--select", "GPU4", "--output-format", "concise", "train.py", cwd=project).stdout.decode()
    assert "GPU402" in out and "GPU101" not in out
    out = gpulint("check", "--ignore", "GPU101", "--output-format", "concise", "train.py", cwd=project).stdout.decode()
    assert "GPU402" in out and "GPU101" not in out


def test_unknown_selector_exits_2_with_cause(gpulint, project):
    result = gpulint("check", "--select", "GPU777", "train.py", cwd=project)
    assert result.returncode == 2
    assert result.stderr.decode() == "gpulint failed\n  Cause: Unknown rule selector: `GPU777`\n"


def test_fix_prints_a_diff_and_exits_1_then_apply_writes(gpulint, project):
    result = gpulint("fix", "train.py", cwd=project)
    assert result.returncode == 1
    assert "--- train.py\n+++ train.py\n" in result.stdout.decode()
    assert "-    print(torch.cuda.memory_cached())\n+    print(torch.cuda.memory_reserved())" in result.stdout.decode()
    assert "Would fix 1 error (1 additional fix available with `--unsafe-fixes`)." in result.stderr.decode()
    assert (project / "train.py").read_text() == TRAIN

    result = gpulint("fix", "--apply", "--show-fixes", "train.py", cwd=project)
    assert result.returncode == 1  # the unsafe GPU101 fix was not applied, so a finding remains
    assert "memory_reserved" in (project / "train.py").read_text()
    assert "Fixed 1 error:\n- train.py:\n    1 × GPU402 (deprecated-memory-api)" in result.stderr.decode()
    assert "Found 2 errors (1 fixed, 1 remaining)." in result.stdout.decode()

    result = gpulint("fix", "--apply", "--unsafe-fixes", "train.py", cwd=project)
    assert result.returncode == 0
    assert "num_workers=" in (project / "train.py").read_text()
    assert gpulint("fix", "--apply", "--unsafe-fixes", "train.py", cwd=project).returncode == 0
    assert gpulint("fix", "train.py", cwd=project).returncode == 0


def test_fix_keeps_crlf_bom_encoding_and_mode(gpulint, tmp_path):
    path = tmp_path / "win.py"
    text = "# -*- coding: latin-1 -*-\nimport torch\nx = torch.cuda.memory_cached()  # caf\xe9\n"
    path.write_bytes(text.replace("\n", "\r\n").encode("latin-1"))
    path.chmod(0o751)
    assert gpulint("fix", "--apply", "win.py", cwd=tmp_path).returncode == 0
    assert path.read_bytes() == text.replace("memory_cached", "memory_reserved").replace("\n", "\r\n").encode("latin-1")
    assert path.stat().st_mode & 0o777 == 0o751
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbfimport torch\ntorch.cuda.memory_cached()\n")
    assert gpulint("fix", "--apply", "bom.py", cwd=tmp_path).returncode == 0
    assert bom.read_bytes() == b"\xef\xbb\xbfimport torch\ntorch.cuda.memory_reserved()\n"


def test_stdin_check_and_fix(gpulint, project):
    result = gpulint("check", "--output-format", "concise", "--stdin-filename", "src/t.py", "-", stdin=TRAIN, cwd=project)
    assert result.returncode == 1
    assert result.stdout.decode().startswith("src/t.py:8:14: GPU101")
    result = gpulint("fix", "--stdin-filename", "t.py", "-", stdin=TRAIN, cwd=project)
    assert result.stdout.decode() == TRAIN.replace("memory_cached", "memory_reserved")
    assert result.returncode == 1  # GPU101 remains


def test_add_noqa_writes_a_baseline(gpulint, project):
    result = gpulint("check", "--add-noqa", "train.py", cwd=project)
    assert result.returncode == 0 and "Added 2 noqa directives." in result.stderr.decode()
    text = (project / "train.py").read_text()
    assert "loader = DataLoader(ds, batch_size=64)  # noqa: GPU101\n" in text
    assert "print(torch.cuda.memory_cached())  # noqa: GPU402\n" in text
    assert gpulint("check", "train.py", cwd=project).returncode == 0
    assert gpulint("fix", "--apply", "train.py", cwd=project).returncode == 0
    assert "memory_cached" in (project / "train.py").read_text()  # suppressed lines are never fixed


def test_file_level_noqa(gpulint, project):
    (project / "train.py").write_text("# gpulint: noqa: GPU402\n" + TRAIN)
    out = gpulint("check", "--output-format", "concise", "train.py", cwd=project).stdout.decode()
    assert "GPU101" in out and "GPU402" not in out
    (project / "train.py").write_text("# gpulint: noqa\n" + TRAIN)
    assert gpulint("check", "train.py", cwd=project).returncode == 0


def test_config_per_file_ignores_and_rule_options(gpulint, project):
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [tool.gpulint]
            extend-exclude = ["legacy"]
            [tool.gpulint.per-file-ignores]
            "scripts/*.py" = ["GPU4"]
            [tool.gpulint.rules.dataloader-without-workers]
            workers = "4"
            """
        )
    )
    (project / "scripts").mkdir()
    (project / "scripts" / "t.py").write_text(TRAIN)
    (project / "legacy").mkdir()
    (project / "legacy" / "t.py").write_text(TRAIN)
    out = gpulint("check", "--output-format", "concise", ".", cwd=project).stdout.decode()
    assert "legacy" not in out
    assert "scripts/t.py:8:14: GPU101" in out and "scripts/t.py:9:11: GPU402" not in out
    assert "train.py:9:11: GPU402" in out
    gpulint("fix", "--apply", "--unsafe-fixes", "train.py", cwd=project)
    assert "DataLoader(ds, batch_size=64, num_workers=4)" in (project / "train.py").read_text()


@pytest.mark.parametrize(
    "config, cause",
    [
        ("[tool.gpulint]\nselekt = ['GPU']\n", "Unknown key `selekt` in [tool.gpulint]"),
        ("[tool.gpulint]\nselect = ['XYZ1']\n", "Unknown rule selector: `XYZ1`"),
        ("[tool.gpulint.rules.GPU101]\nwokers = '2'\n", "Unknown option `wokers` for GPU101"),
        ("[tool.gpulint.rules.GPU101]\nworkers = 'min(('\n", "`workers` is not a Python expression"),
        ("[tool.gpulint\nselect = \n", "is not valid TOML"),
    ],
)
def test_broken_config_exits_2_naming_the_problem(gpulint, project, config, cause):
    (project / "pyproject.toml").write_text(config)
    result = gpulint("check", "train.py", cwd=project)
    assert result.returncode == 2
    err = result.stderr.decode()
    assert err.startswith("gpulint failed\n  Cause: ") and cause in err
    assert "Traceback" not in err


def test_gitignore_nested_and_force_exclude(gpulint, project):
    (project / ".git").mkdir()
    (project / ".gitignore").write_text("generated/\n")
    (project / "generated").mkdir()
    (project / "generated" / "t.py").write_text(TRAIN)
    (project / "sub").mkdir()
    (project / "sub" / ".gitignore").write_text("skip_*.py\n")
    (project / "sub" / "skip_me.py").write_text(TRAIN)
    (project / "sub" / "keep.py").write_text(TRAIN)
    out = gpulint("check", "--output-format", "concise", ".", cwd=project).stdout.decode()
    assert "generated" not in out and "skip_me" not in out and "sub/keep.py" in out
    # Named explicitly, a gitignored file is still checked (as in ruff).
    assert gpulint("check", "generated/t.py", cwd=project).returncode == 1
    (project / "pyproject.toml").write_text('[tool.gpulint]\nextend-exclude = ["train.py"]\n')
    assert gpulint("check", "--force-exclude", "train.py", cwd=project).returncode == 0
    assert gpulint("check", "train.py", cwd=project).returncode == 1


def test_force_exclude_skips_a_named_file_inside_an_excluded_folder(gpulint, project):
    # pre-commit names `legacy/old.py`; a folder pattern must exclude it as a walk would.
    (project / "legacy").mkdir()
    (project / "legacy" / "old.py").write_text(TRAIN)
    (project / "pyproject.toml").write_text('[tool.gpulint]\nextend-exclude = ["legacy"]\n')
    assert gpulint("check", "--force-exclude", "legacy/old.py", cwd=project).returncode == 0
    assert gpulint("check", "--force-exclude", "--stdin-filename", "legacy/old.py", "-", stdin=TRAIN.encode(), cwd=project).returncode == 0
    assert gpulint("check", "legacy/old.py", cwd=project).returncode == 1  # named without --force-exclude: checked
    assert gpulint("check", "--force-exclude", "train.py", cwd=project).returncode == 1  # other files still are


def test_syntax_error_is_reported_and_other_files_still_checked(gpulint, project):
    # Only files that could hold a finding are parsed, so the broken file mentions the loader.
    (project / "broken.py").write_text("import torch  # DataLoader on cuda\ndef f(:\n")
    result = gpulint("check", "--output-format", "concise", ".", cwd=project)
    out = result.stdout.decode()
    assert result.returncode == 1
    assert "broken.py:2:7: invalid-syntax: SyntaxError: invalid syntax" in out
    assert "train.py:8:14: GPU101" in out
    assert (project / "broken.py").read_text().endswith("def f(:\n")


def test_missing_path_and_binary_and_undecodable_files(gpulint, project):
    (project / "bin.py").write_bytes(b"\x00\x01\x02torch")
    (project / "latin.py").write_bytes(b"x = '\xff\xfe'  # torch cuda DataLoader\n")
    result = gpulint("check", "--output-format", "concise", "missing.py", "bin.py", "latin.py", cwd=project)
    out = result.stdout.decode()
    assert result.returncode == 1
    assert "missing.py:1:1: io-error: No such file or directory" in out
    assert "bin.py:1:1: io-error: binary file (contains NUL bytes), not Python source" in out
    assert "latin.py:1:1: io-error: cannot decode as utf-8: invalid byte at offset 5" in out
    assert "Traceback" not in result.stderr.decode()


def test_rule_command(gpulint):
    result = gpulint("rule", "GPU101")
    assert result.returncode == 0 and result.stdout.decode().startswith("# dataloader-without-workers (GPU101)")
    records = json.loads(gpulint("rule", "--all", "--output-format", "json").stdout)
    assert {"code", "name", "summary", "fix", "explanation", "preview"} <= set(records[0])
    assert gpulint("rule", "GPU000").returncode == 2


def test_version_and_module_entry(gpulint):
    from gpulint import __version__

    assert gpulint("--version").stdout.decode().strip().endswith(__version__)


def test_check_does_not_import_torch(project):
    import subprocess
    import sys

    code = "import sys; from gpulint.cli import main\ntry:\n    main(['check', 'train.py'])\nexcept SystemExit:\n    pass\nprint('torch' in sys.modules, file=sys.stderr)"
    result = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, env={"PYTHONPATH": str(REPO)})
    assert result.stderr.decode().strip().endswith("False")


def test_empty_file_and_very_large_file(gpulint, project):
    (project / "empty.py").write_bytes(b"")
    assert gpulint("check", "empty.py", cwd=project).returncode == 0
    big = project / "big.py"
    with open(big, "wb") as handle:
        handle.write(b"import torch  # cuda DataLoader\n")
        handle.write(b"x = 1\n" * (11 * 1024 * 1024 // 6))
    result = gpulint("check", "--output-format", "concise", "big.py", "train.py", cwd=project)
    out = result.stdout.decode()
    assert result.returncode == 1
    assert "big.py:1:1: io-error: file is 11.5 MB, above the 10 MB limit; skipped" in out
    assert "train.py:8:14: GPU101" in out
