"""Suppressions that suppress, unused ones reported (GPU001), `flake8 --select GPU` equal to `gpulint check`,
and `--fail-on` deciding which severities fail while every finding is shown."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import UNPROVEN_COST_TOML, REPO, diagnostics, findings, fixed

DEPRECATED = "import torch\n\nx = torch.cuda.memory_cached()"


@pytest.mark.parametrize("comment", ["# noqa", "# NOQA", "#noqa", "# noqa  (the old API on purpose)", "# noqa:E501,GPU402"])
def test_a_blanket_or_matching_noqa_suppresses(comment):
    assert findings(f"{DEPRECATED}  {comment}\n") == []


def test_a_noqa_for_other_codes_does_not_suppress():
    assert findings(f"{DEPRECATED}  # noqa: E501\n") == ["3:5 GPU402"]


def test_add_noqa_then_check_is_clean(gpulint, tmp_path):
    source = f"{DEPRECATED}  # noqa\ny = torch.cuda.max_memory_cached()  # noqa: E501\nz = torch.cuda.memory_cached()\n"
    (tmp_path / "t.py").write_text(source)
    result = gpulint("check", "--no-cache", "--add-noqa", "t.py", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr.decode() == "Added 2 noqa directives.\n"
    assert (tmp_path / "t.py").read_text() == source.replace("# noqa: E501", "# noqa: E501, GPU402").replace(
        "z = torch.cuda.memory_cached()", "z = torch.cuda.memory_cached()  # noqa: GPU402"
    )
    assert gpulint("check", "--no-cache", "t.py", cwd=tmp_path).returncode == 0


# ---- GPU001 unused-noqa -----------------------------------------------------------------------------

UNUSED = """\
import torch

a = torch.cuda.memory_reserved()  # noqa: GPU402
b = torch.cuda.memory_cached()  # noqa: GPU402, GPU303
c = torch.cuda.memory_reserved()  # noqa: GPU999, E501
d = torch.cuda.memory_reserved()  # noqa: GPU402 kept for the 1.x branch
e = 1  # why  # noqa: GPU402
# gpulint: ignore[GPU402]
f = 2
g = torch.cuda.memory_reserved()  # noqa
"""


def test_gpu001_is_off_unless_selected():
    assert findings(UNUSED) == []
    assert findings(UNUSED, select=("GPU",), preview=True) == []
    assert findings(UNUSED, extend_select=("GPU0",)) != []


def test_gpu001_reports_unused_and_unknown_gpulint_codes():
    found = diagnostics(UNUSED, extend_select=("GPU001",))
    assert [(d.location.row, d.location.column, d.message) for d in found] == [
        (3, 35, "Unused suppression (unused: `GPU402`)"),
        (4, 33, "Unused suppression (unused: `GPU303`)"),
        (5, 35, "Unused suppression (unknown: `GPU999`)"),
        (6, 35, "Unused suppression (unused: `GPU402`)"),
        (7, 15, "Unused suppression (unused: `GPU402`)"),
        (8, 1, "Unused suppression (unused: `GPU402`)"),
    ]


def test_gpu001_fix_removes_only_the_unused_codes():
    assert fixed(UNUSED, unsafe=False, extend_select=("GPU001",)) == textwrap.dedent("""\
        import torch

        a = torch.cuda.memory_reserved()
        b = torch.cuda.memory_cached()  # noqa: GPU402
        c = torch.cuda.memory_reserved()  # noqa: E501
        d = torch.cuda.memory_reserved()  # kept for the 1.x branch
        e = 1  # why
        f = 2
        g = torch.cuda.memory_reserved()  # noqa
    """)


def test_gpu001_leaves_codes_of_rules_that_did_not_run():
    assert findings("x = 1  # noqa: GPU101\n", select=("GPU001", "GPU402")) == []
    assert findings("x = 1  # noqa: GPU101\n", select=("GPU001", "GPU101")) == ["1:8 GPU001"]
    source = "x = 1  # noqa: GPU101\n"
    assert findings(source, extend_select=("GPU001",), per_file_ignores=(("train.py", ("GPU101",)),)) == []


def test_gpu001_file_level_directive():
    assert findings("# gpulint: noqa: GPU402\nimport torch\nx = torch.cuda.memory_reserved()\n", extend_select=("GPU001",)) == ["1:1 GPU001"]
    assert findings("# gpulint: noqa: GPU402\nimport torch\nx = torch.cuda.memory_cached()\n", extend_select=("GPU001",)) == []


def test_gpu001_is_not_added_as_a_baseline(gpulint, tmp_path):
    (tmp_path / "t.py").write_text("import torch\nx = torch.cuda.memory_reserved()  # noqa: GPU402\n")
    result = gpulint("check", "--no-cache", "--extend-select", "GPU001", "--add-noqa", "t.py", cwd=tmp_path)
    assert result.stderr.decode() == "Added 0 noqa directives.\n"


# ---- flake8 --select GPU == gpulint check -----------------------------------------------------------

PREVIEW_BAIT = """\
import torch
from torch import nn

device = torch.device("cuda")
model = nn.Conv2d(3, 8, 3).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x in loader:
    loss = model(x.to(device)).sum()
    loss.backward()
    optimizer.step()
    for c in range(8):
        print(loss.item())
"""


def _flake8(tmp_path, *args: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", *args, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    return [line.split(" ", 2)[1] + "@" + line.split(":")[1] for line in result.stdout.splitlines()]


def test_flake8_select_gpu_reports_exactly_what_check_reports(gpulint, tmp_path):
    (tmp_path / "train.py").write_text(PREVIEW_BAIT)
    result = gpulint("check", "--no-cache", "--output-format", "json", "train.py", cwd=tmp_path)
    expected = [f"{d['code']}@{d['location']['row']}" for d in json.loads(result.stdout)]
    assert expected == ["GPU303@12"]
    assert _flake8(tmp_path, "--select", "GPU") == expected
    # asking for preview by name still works
    assert sorted(_flake8(tmp_path, "--select", "GPU9")) == ["GPU901@9", "GPU902@5", "GPU903@5"]


# ---- --fail-on -------------------------------------------------------------------------------------

EVAL_ONLY = """\
import torch

model = torch.nn.Linear(3, 3).cuda()
with torch.no_grad():
    for x in loader:
        print(model(x.cuda()).sum().item())
"""


def test_fail_on_decides_what_fails_and_every_finding_is_shown(gpulint, tmp_path):
    (tmp_path / "t.py").write_text(EVAL_ONLY)
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML)  # its one read a step shows no cost
    default = gpulint("check", "--no-cache", "--output-format", "concise", "t.py", cwd=tmp_path)
    assert default.returncode == 1
    assert default.stdout.decode().startswith("t.py:6:15: GPU303 `model(x.cuda()).sum().item()` waits")
    relaxed = gpulint("check", "--no-cache", "--output-format", "concise", "--fail-on", "warning", "t.py", cwd=tmp_path)
    assert relaxed.returncode == 0
    out = relaxed.stdout.decode()
    assert out.startswith("t.py:6:15: GPU303 (info) `model(x.cuda()).sum().item()` waits")
    assert out.endswith("Found 1 error (1 below --fail-on warning: shown, not failing).\n")
    # machine formats keep the severity as data
    as_json = gpulint("check", "--no-cache", "--output-format", "json", "--fail-on", "warning", "t.py", cwd=tmp_path)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)[0]["severity"] == "info"


def test_fail_on_in_the_configuration(gpulint, tmp_path):
    (tmp_path / "t.py").write_text(EVAL_ONLY)
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nfail-on = "warning"\n' + UNPROVEN_COST_TOML)
    assert gpulint("check", "--no-cache", "t.py", cwd=tmp_path).returncode == 0
    assert gpulint("check", "--no-cache", "--fail-on", "info", "t.py", cwd=tmp_path).returncode == 1
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nfail-on = "warn"\n' + UNPROVEN_COST_TOML)
    bad = gpulint("check", "--no-cache", "t.py", cwd=tmp_path)
    assert bad.returncode == 2
    assert "`fail-on` in " in bad.stderr.decode() and "pyproject.toml must be one of error, warning, info, got 'warn'" in bad.stderr.decode()


def test_fail_on_applies_to_what_fix_leaves(gpulint, tmp_path):
    (tmp_path / "t.py").write_text(EVAL_ONLY)
    result = gpulint("fix", "--apply", "--fail-on", "warning", "t.py", cwd=tmp_path)
    assert result.returncode == 0
    assert (REPO / "README.md").read_text().count("--fail-on") >= 2
