"""The flake8 plugin, run for real: `python -m flake8` in a subprocess, exact output and exit codes.

flake8 finds plugins through the installed distribution's entry points (CI: `pip install -e .[dev]`);
the subprocess gets PYTHONPATH=<this checkout>, so the entry point resolves to the code under test.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint.checks import all_rules
from tests.conftest import FIXTURES, REPO, run_gpulint

pytest.importorskip("flake8")

MESSAGE_1 = "`torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"
MESSAGE_2 = "`torch.cuda.max_memory_cached` is deprecated; use `torch.cuda.max_memory_reserved`"
TRAIN = """\
import torch

print(torch.cuda.memory_cached())
print("peak:", torch.cuda.max_memory_cached())
"""


def flake8(*args: str, cwd: Path, stdin: str | None = None) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "flake8", *args],
        cwd=cwd,
        input=stdin.encode() if stdin is not None else None,
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert result.stderr == b"", result.stderr.decode()
    return result.returncode, result.stdout.decode()


@pytest.fixture(scope="module", autouse=True)
def _plugin_installed():
    entry = [e for e in importlib.metadata.entry_points(group="flake8.extension") if e.name == "GPU"]
    if not entry:
        pytest.fail("gpulint is not installed, so flake8 cannot find the GPU plugin: run `pip install -e .[dev]`")


def test_entry_point_is_registered_under_the_GPU_prefix():
    (entry,) = [e for e in importlib.metadata.entry_points(group="flake8.extension") if e.name == "GPU"]
    assert entry.value == "gpulint.flake8_plugin:GpulintChecker"
    assert re.fullmatch(r"[A-Z]{1,3}[0-9]{0,3}", entry.name)  # flake8's VALID_CODE_PREFIX
    assert all(code.startswith(entry.name) for code in all_rules())  # else flake8 hides them by default


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    return tmp_path


def test_findings_exact_with_flake8_columns(project):
    code, out = flake8("train.py", cwd=project)
    assert out == f"train.py:3:7: GPU402 {MESSAGE_1}\ntrain.py:4:16: GPU402 {MESSAGE_2}\n"
    assert code == 1


def test_shown_in_the_plugin_list():
    code, out = flake8("--version", cwd=REPO)
    assert code == 0 and f"gpulint: {__import__('gpulint').__version__}" in out


def test_same_diagnostics_as_gpulint_check_on_the_fixtures(tmp_path):
    for script in sorted(FIXTURES.glob("*.py")):
        shutil.copy(script, tmp_path / script.name)
    code, out = flake8(".", cwd=tmp_path)  # flake8's defaults: every GPU code but the preview GPU9
    check = run_gpulint("check", "--no-cache", "--output-format=concise", "-q", ".", cwd=tmp_path)
    expected = [line.replace(" [*] ", " ") for line in check.stdout.decode().splitlines()]
    assert expected, "the fixtures have findings"
    shown = [line.removeprefix("./") for line in out.splitlines() if re.match(r"\S+:\d+:\d+: GPU", line)]
    assert sorted(shown) == sorted(expected)
    assert code == 1


def test_parallel_flake8_gives_the_same_output(tmp_path):
    for i in range(6):
        (tmp_path / f"t{i}.py").write_text(TRAIN, encoding="utf-8")
    _, serial = flake8("--select=GPU", "-j", "1", ".", cwd=tmp_path)
    _, parallel = flake8("--select=GPU", "-j", "2", ".", cwd=tmp_path)
    assert sorted(serial.splitlines()) == sorted(parallel.splitlines()) and len(serial.splitlines()) == 12


def test_columns_count_characters_not_bytes(tmp_path):
    (tmp_path / "t.py").write_text('import torch\ns = "héllo"; x = torch.cuda.memory_cached()\n', encoding="utf-8")
    _, out = flake8("--select=GPU", "t.py", cwd=tmp_path)
    check = run_gpulint("check", "--no-cache", "--output-format=concise", "-q", "t.py", cwd=tmp_path)
    assert out == f"t.py:2:18: GPU402 {MESSAGE_1}\n"
    assert check.stdout.decode() == f"t.py:2:18: GPU402 [*] {MESSAGE_1}\n"


def test_noqa_with_the_code_suppresses_only_that_code(tmp_path):
    (tmp_path / "t.py").write_text(
        "import torch\n"
        "a = torch.cuda.memory_cached()  # noqa: GPU402\n"
        "b = torch.cuda.memory_cached()  # noqa: GPU101\n"
        "c = torch.cuda.memory_cached()  # noqa\n",
        encoding="utf-8",
    )
    code, out = flake8("--select=GPU", "t.py", cwd=tmp_path)
    assert (code, out) == (1, f"t.py:3:5: GPU402 {MESSAGE_1}\n")


def test_noqa_for_a_dataloader_finding(tmp_path):
    source = (FIXTURES / "train_regression.py").read_text(encoding="utf-8")
    code, out = flake8("--select=GPU101", "-", cwd=tmp_path, stdin=source)
    assert code == 1 and out.startswith("stdin:26:12: GPU101 ")
    row = source.splitlines()[25]
    suppressed = source.replace(row, row + "  # noqa: GPU101")
    assert flake8("--select=GPU101", "-", cwd=tmp_path, stdin=suppressed) == (0, "")


def test_stdin_with_a_display_name(project):
    code, out = flake8("--stdin-display-name=src/train.py", "-", cwd=project, stdin=TRAIN)
    assert (code, out) == (1, f"src/train.py:3:7: GPU402 {MESSAGE_1}\nsrc/train.py:4:16: GPU402 {MESSAGE_2}\n")


def test_stdin_with_a_byte_order_mark(project):
    code, out = flake8("--select=GPU", "-", cwd=project, stdin="\ufeff" + TRAIN)
    assert (code, out) == (1, f"stdin:3:7: GPU402 {MESSAGE_1}\nstdin:4:16: GPU402 {MESSAGE_2}\n")


def test_flake8_selection_applies(project):
    assert flake8("--extend-ignore=GPU402", "train.py", cwd=project) == (0, "")
    assert flake8("--select=GPU1", "train.py", cwd=project) == (0, "")
    code, out = flake8("--select=E,GPU4", "train.py", cwd=project)
    assert code == 1 and out.count("GPU402") == 2


def test_gpulint_options_from_setup_cfg(project):
    (project / "setup.cfg").write_text("[flake8]\ngpulint-ignore = GPU402\n", encoding="utf-8")
    assert flake8("train.py", cwd=project) == (0, "")
    (project / "setup.cfg").write_text("[flake8]\ngpulint-select = GPU1, GPU4\n", encoding="utf-8")
    assert flake8("train.py", cwd=project)[1].count("GPU402") == 2


def test_per_rule_options_from_dot_flake8_are_read_and_validated(project):
    (project / ".flake8").write_text("[flake8]\ngpu101-workers = (\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "train.py"],
        cwd=project,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )
    assert result.returncode == 1
    assert result.stdout.decode().startswith(
        "There was a critical error during execution of Flake8:\ngpulint: Option of GPU101: `workers` is not a Python expression"
    )
    (project / ".flake8").write_text("[flake8]\ngpu101-workers = 4\n", encoding="utf-8")
    assert flake8("train.py", cwd=project)[0] == 1


def test_unknown_gpulint_selector_is_a_clear_error(project):
    (project / "setup.cfg").write_text("[flake8]\ngpulint-select = XYZ1\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "train.py"], cwd=project, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert "gpulint: Unknown rule selector: `XYZ1`" in result.stdout.decode() and result.returncode == 1


def test_pyproject_rule_options_reach_the_plugin(project):
    """flake8 does not read pyproject.toml, but the plugin reads [tool.gpulint] as `gpulint check` does."""
    (project / "pyproject.toml").write_text('[tool.gpulint]\nignore = ["GPU402"]\n', encoding="utf-8")
    assert flake8("train.py", cwd=project) == (0, "")
    assert run_gpulint("check", "--no-cache", "train.py", cwd=project).returncode == 0


def test_syntax_errors_are_left_to_flake8(tmp_path):
    (tmp_path / "t.py").write_text("import torch\nx = torch.cuda.memory_cached(\n", encoding="utf-8")
    code, out = flake8("--select=GPU,E999", "t.py", cwd=tmp_path)
    assert code == 1 and [line.split()[1] for line in out.splitlines()] == ["E999"]


def test_preview_rules_are_hidden_by_default():
    """The plugin asks flake8 to hide GPU9 (as TorchFix does with TOR9) — checked on flake8's real manager."""
    from flake8.options.manager import OptionManager

    from gpulint.flake8_plugin import GpulintChecker

    manager = OptionManager(version="x", plugin_versions="", parents=[], formatter_names=[])
    GpulintChecker.add_options(manager)
    assert manager.extended_default_ignore == ["GPU9"]
    preview = [code for code, rule in all_rules().items() if rule.preview]
    assert all(code.startswith("GPU9") for code in preview)


def test_preview_rule_shows_only_when_selected(tmp_path):
    from gpulint.rule_docs import document, examples

    preview = [code for code, rule in all_rules().items() if rule.preview and document(code)]
    if not preview:
        pytest.skip("no preview rule in this build")
    code = preview[0]
    (tmp_path / "t.py").write_text(examples(document(code)).example, encoding="utf-8")
    assert code not in flake8("t.py", cwd=tmp_path)[1]
    assert code in flake8("--extend-select=GPU9", "t.py", cwd=tmp_path)[1]


def test_plugin_does_not_parse_files_with_nothing_to_report(monkeypatch):
    """flake8 already gives `lines`; a torch-free file must not reach LibCST at all."""
    import libcst

    from gpulint.flake8_plugin import GpulintChecker

    def no_parse(*args, **kwargs):
        raise AssertionError("parsed a file the prefilter should have skipped")

    monkeypatch.setattr(libcst, "parse_module", no_parse)
    lines = (Path(REPO) / "gpulint" / "config.py").read_text(encoding="utf-8").splitlines(keepends=True)
    assert list(GpulintChecker(None, lines, "config.py").run()) == []
    with pytest.raises(AssertionError):
        list(GpulintChecker(None, TRAIN.splitlines(keepends=True), "t.py").run())


def test_plugin_yields_zero_based_columns_and_the_code_first():
    from gpulint.flake8_plugin import GpulintChecker

    results = list(GpulintChecker(None, TRAIN.splitlines(keepends=True), "t.py").run())
    assert [(row, col, text) for row, col, text, _ in results] == [(3, 6, f"GPU402 {MESSAGE_1}"), (4, 15, f"GPU402 {MESSAGE_2}")]


def test_gpulint_config_in_setup_cfg_is_relative_to_that_file(tmp_path):
    project = tmp_path / "project"
    (project / "tools").mkdir(parents=True)
    (project / "train.py").write_text(TRAIN, encoding="utf-8")
    (project / "tools" / "gpulint.toml").write_text('[tool.gpulint]\nignore = ["GPU402"]\n', encoding="utf-8")
    (project / "setup.cfg").write_text("[flake8]\ngpulint-config = tools/gpulint.toml\n", encoding="utf-8")
    assert flake8("train.py", cwd=project) == (0, "")
    assert flake8("--config", str(project / "setup.cfg"), str(project / "train.py"), cwd=tmp_path) == (0, "")


def test_the_documented_flake8_config_works_as_written(project):
    """docs/integrations.md's `[flake8]` example, copied into setup.cfg, runs (no inline `;` comments)."""
    text = (REPO / "docs" / "integrations.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```ini\n(\s*\[flake8\]\n.*?)```", text, re.S)
    config = "\n".join(line.strip() for line in block.splitlines()) + "\n"
    (project / "tools").mkdir()
    (project / "tools" / "gpulint.toml").write_text("", encoding="utf-8")
    (project / "setup.cfg").write_text(config, encoding="utf-8")
    assert flake8("train.py", cwd=project) == (0, "")  # gpulint-ignore = GPU402 silences both findings
    (project / "setup.cfg").write_text(config.replace("gpulint-ignore = GPU402\n", ""), encoding="utf-8")
    code, out = flake8("train.py", cwd=project)
    assert code == 1 and out.count("GPU402") == 2
