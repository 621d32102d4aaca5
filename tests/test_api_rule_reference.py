"""The rule reference: every rule is listed by `gpulint rule --all` and its document states fix and options."""

from __future__ import annotations

import json

import pytest

from gpulint.checks import all_rules
from gpulint.diagnostics import Applicability
from gpulint.rule_docs import docs_dir, sections
from tests.conftest import run_gpulint

RULES = list(all_rules().values())


def test_rule_all_lists_every_rule():
    result = run_gpulint("rule", "--all", "--output-format", "json")
    assert result.returncode == 0, result.stderr.decode()
    records = {r["code"]: r for r in json.loads(result.stdout)}
    assert set(records) == {r.code for r in RULES}
    for rule in RULES:
        assert records[rule.code]["preview"] == rule.preview
        assert records[rule.code]["explanation"].startswith(f"# {rule.name} ({rule.code})")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_document_states_fix_applicability_and_options(rule):
    text = (docs_dir() / f"{rule.code}.md").read_text(encoding="utf-8")
    statement = text.split("\n\n", 2)[1]
    assert statement.startswith("Fix is "), f"{rule.code}.md must say whether a fix is available under its title"
    if rule.fix_applicability is None:
        assert statement.startswith("Fix is not available.")
    else:
        assert "available" in statement and "not available" not in statement
        assert ("(unsafe)" in statement) == (rule.fix_applicability == Applicability.UNSAFE)
        # "always" only where every finding has a fix (`fix_always`)
        assert statement.startswith("Fix is always available") == rule.fix_always
    assert "Options" in sections(text), f"{rule.code}.md must have an Options section (\"None.\" when it has none)"
    if rule.preview:
        assert "preview rule" in statement


def test_json_record_says_sometimes_for_a_safe_rule_that_can_report_without_a_fix():
    records = {r["code"]: r for r in json.loads(run_gpulint("rule", "--all", "--output-format", "json").stdout)}
    assert (records["GPU102"]["fix"], records["GPU102"]["fix_availability"]) == ("Fix is sometimes available (safe).", "Sometimes")
    assert (records["GPU402"]["fix"], records["GPU402"]["fix_availability"]) == ("Fix is always available.", "Always")
    assert (records["GPU101"]["fix"], records["GPU101"]["fix_availability"]) == ("Fix is sometimes available (unsafe).", "Sometimes")
