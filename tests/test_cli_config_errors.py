"""Broken settings files stop gpulint before it reads or writes anything: exit 2, `gpulint failed` + Cause."""

from __future__ import annotations

import pytest

TRAIN = "import torch\n\nprint(torch.cuda.memory_cached())\n"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


@pytest.mark.parametrize(
    "name, config, cause",
    [
        ("gpulint.toml", "tool = 3\n", "`tool` in gpulint.toml must be a table, got int"),
        ("gpulint.toml", "[tool]\ngpulint = 'x'\n", "[tool.gpulint] in gpulint.toml must be a table, got str"),
        ("pyproject.toml", "tool = [1]\n", "`tool` in pyproject.toml must be a table, got list"),
        ("pyproject.toml", "[tool]\ngpulint = 3\n", "[tool.gpulint] in pyproject.toml must be a table, got int"),
    ],
)
def test_config_option_with_a_non_table_tool_section(gpulint, project, name, config, cause):
    (project / name).write_text(config)
    result = gpulint("check", "--config", name, "train.py", cwd=project)
    assert result.returncode == 2
    assert result.stderr.decode() == f"gpulint failed\n  Cause: {cause}\n"
    assert result.stdout == b""


def test_discovered_pyproject_with_a_non_table_gpulint_section(gpulint, project):
    (project / "pyproject.toml").write_text("[tool]\ngpulint = 3\n")
    result = gpulint("check", "train.py", cwd=project)
    assert result.returncode == 2
    assert result.stderr.decode().startswith("gpulint failed\n  Cause: [tool.gpulint] in ")
    assert result.stderr.decode().endswith("pyproject.toml must be a table, got int\n")


def test_unknown_output_format_in_config_stops_fix_before_it_writes(gpulint, project):
    (project / "pyproject.toml").write_text('[tool.gpulint]\noutput-format = "jsn"\n')
    result = gpulint("fix", "--apply", "train.py", cwd=project)
    assert result.returncode == 2
    err = result.stderr.decode()
    assert err.startswith("gpulint failed\n  Cause: Unknown output format `jsn` (`output-format` in ")
    assert "known formats: concise, full, github" in err
    assert result.stdout == b""
    assert (project / "train.py").read_text() == TRAIN  # nothing written


def test_output_format_from_config_is_used(gpulint, project):
    (project / "pyproject.toml").write_text('[tool.gpulint]\noutput-format = "concise"\n')
    result = gpulint("check", "train.py", cwd=project)
    assert result.returncode == 1
    assert result.stdout.decode().startswith("train.py:3:7: GPU402 ")


@pytest.mark.parametrize(
    "args, cause, hint",
    [
        (("check", "--frobnicate"), "No such option '--frobnicate'.", "gpulint check --help"),
        (("fix", "--verify", "train.py"), "--verify needs --apply", "gpulint fix --help"),
        (("chek",), "No such command 'chek'. Did you mean 'check'?", "gpulint --help"),
        (("check", "-j", "0"), "Invalid value for '-j' / '--jobs': 0 is not in the range x>=1.", "gpulint check --help"),
    ],
)
def test_usage_errors_print_gpulint_failed_with_a_cause(gpulint, project, args, cause, hint):
    result = gpulint(*args, cwd=project)
    assert result.returncode == 2
    assert result.stderr.decode() == f"gpulint failed\n  Cause: {cause}\n  Try '{hint}' for help.\n"
    assert result.stdout == b""
