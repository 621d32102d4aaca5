"""Short messages with a separate `help` (issue 13 §4): the message says what and where in one short line,
`help` why it costs and what to do; each output format shows the help where it has a place for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpulint import api, rule_docs
from gpulint.diagnostics import Diagnostic
from tests.conftest import FIXTURES, UNPROVEN_COST_TOML, UNPROVEN_READ, diagnostics, run_gpulint
from tests.test_integrations_formats import sarif_validator  # noqa: F401  (a fixture)

# What a one-line message may take: quoted code and paths included (most are far shorter).
MAX_MESSAGE = 130

SYNC = """\
import torch

model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10000):
    loss = model(torch.randn(8, 4, device="cuda")).sum()
    loss.backward()
    opt.step()
    torch.cuda.synchronize()
"""
MESSAGE = "`torch.cuda.synchronize()` blocks the CPU until the GPU is idle, every training step (loop at line 5)"
HELP = (
    "The GPU then waits while the CPU queues the next step; remove it, or use `wait_stream` / events to order "
    "streams and synchronize only where the host reads GPU results"
)


def _every_documented_and_fixture_finding() -> list[Diagnostic]:
    found = []
    for code in sorted(r.code for r in api.rules()):
        markdown = rule_docs.document(code)
        examples = rule_docs.examples(markdown) if markdown else None
        if examples is not None:
            found += diagnostics(examples.example, preview=True)
    found += api.check([FIXTURES], api.discover_settings(str(FIXTURES)), cache=False).diagnostics
    return [d for d in found if d.code]


def test_every_rule_keeps_its_message_short_and_explains_in_help():
    found = _every_documented_and_fixture_finding()
    assert len({d.code for d in found}) >= 25  # not vacuous: nearly every rule fired
    too_long = [(d.code, len(d.message), d.message) for d in found if len(d.message) > MAX_MESSAGE]
    assert too_long == []
    assert all("\n" not in d.message for d in found)
    # Deprecations say all there is in the message; every other rule explains itself in `help`.
    assert sorted({d.code for d in found if not d.help}) == ["GPU402", "GPU403"]


def test_full_output_shows_help_under_the_snippet_and_one_line_formats_do_not(tmp_path):
    (tmp_path / "train.py").write_text(SYNC, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    full = run_gpulint("check", "--no-cache", "train.py", cwd=tmp_path).stdout.decode()
    assert full.startswith(
        f"GPU304 {MESSAGE}\n"
        " --> train.py:9:5\n"
        "  |\n"
        "9 |     torch.cuda.synchronize()\n"
        "  |     ^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "  |\n"
        f"help: {HELP}\n"
    )
    for style in ("concise", "pylint", "grouped"):
        out = run_gpulint("check", "--no-cache", "--output-format", style, "train.py", cwd=tmp_path).stdout.decode()
        assert MESSAGE in out and "help" not in out.lower(), style


def test_json_carries_help_beside_the_unchanged_fields(tmp_path):
    (tmp_path / "train.py").write_text(SYNC + "print(torch.cuda.memory_cached())\n", encoding="utf-8")
    records = json.loads(run_gpulint("check", "--no-cache", "--output-format", "json", "train.py", cwd=tmp_path).stdout)
    assert [(r["code"], r["message"], r["help"]) for r in records] == [
        ("GPU304", MESSAGE, HELP),
        ("GPU402", "`torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`", None),
    ]
    assert list(records[0]) == [
        "code", "name", "message", "severity", "filename", "location", "end_location", "fix", "noqa_row", "url", "help", "cell",
        "related",
    ]  # fmt: skip
    assert "related" not in records[1]  # only a finding with related places (here the loop) has the key
    assert Diagnostic.from_dict(records[0]).help == HELP


def test_sarif_puts_help_in_the_markdown_message_and_stays_valid(tmp_path, sarif_validator):  # noqa: F811
    (tmp_path / "train.py").write_text(SYNC, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    log = json.loads(run_gpulint("check", "--no-cache", "--output-format", "sarif", "train.py", cwd=tmp_path).stdout)
    assert not [e.message for e in sarif_validator.iter_errors(log)]
    (result,) = log["runs"][0]["results"]
    assert result["message"] == {"text": MESSAGE, "markdown": f"{MESSAGE}\n\n{HELP}"}


def test_github_annotation_carries_the_help_line(tmp_path):
    (tmp_path / "train.py").write_text(SYNC, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    out = run_gpulint("check", "--no-cache", "--output-format", "github", "train.py", cwd=tmp_path).stdout.decode()
    assert out.endswith(f"::train.py:9:5: GPU304 {MESSAGE}%0A  help: {HELP}\n")


@pytest.mark.parametrize("code", ["GPU302", "GPU103", "GPU304", "GPU401", "GPU306"])
def test_rule_reference_keeps_the_long_explanation(code):
    out = run_gpulint("rule", code).stdout.decode()
    assert len(out) > 1000 and code in out


def test_notebook_help_names_cell_lines(tmp_path):
    """Line references in the help are rewritten to cell rows, as in the message."""
    raw = (Path(FIXTURES) / "notebooks" / "kaggle_tabular.ipynb").read_text(encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")  # its one read a step shows no cost
    report = api.check(api.Source(raw, "nb.ipynb"), api.discover_settings(str(tmp_path)))
    helps = [d.help for d in report.diagnostics if d.code == "GPU303"]
    assert helps == ["Accumulate on the GPU (`running += loss.detach()`) and convert once every N steps or after the loop" + UNPROVEN_READ]
