"""Every rule has a document in rules/, and the document's examples are executed."""

from __future__ import annotations

import pytest

from gpulint.checks import all_rules
from gpulint.diagnostics import Applicability
from gpulint.fixer import fix_source
from gpulint.linter import check_source
from gpulint.rule_docs import docs_dir, examples, sections
from tests.conftest import settings

RULES = list(all_rules().values())
ALL = settings(select=("ALL",), preview=True)
REQUIRED_SECTIONS = ("What it does", "Why is this bad?", "Example", "Fix safety", "References")


def test_codes_are_unique_and_well_formed():
    codes = [r.code for r in RULES]
    names = [r.name for r in RULES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for rule in RULES:
        assert rule.code[:3] == "GPU" and rule.code[3:].isdigit() and len(rule.code) == 6
        assert rule.name == rule.name.lower() and " " not in rule.name
        assert rule.preview == rule.code.startswith("GPU9")


def test_every_document_belongs_to_a_rule():
    codes = {r.code for r in RULES}
    assert {p.stem for p in docs_dir().glob("*.md")} == codes


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_document_has_the_sections(rule):
    text = (docs_dir() / f"{rule.code}.md").read_text(encoding="utf-8")
    assert text.startswith(f"# {rule.name} ({rule.code})\n")
    parts = sections(text)
    for title in REQUIRED_SECTIONS:
        assert title in parts, f"{rule.code}.md lacks '## {title}'"
    if rule.options:
        assert "Options" in parts
        for option in rule.options:
            assert f"`{option.name}`" in parts["Options"]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_example_triggers_exactly_this_rule(rule):
    docs = examples((docs_dir() / f"{rule.code}.md").read_text(encoding="utf-8"))
    assert docs is not None, "no python example"
    found = check_source(docs.example, "example.py", ALL)
    assert found, f"the example of {rule.code} triggers nothing"
    assert {d.code for d in found} == {rule.code}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_use_instead_is_clean(rule):
    docs = examples((docs_dir() / f"{rule.code}.md").read_text(encoding="utf-8"))
    assert docs.use_instead is not None, "no 'Use instead' example"
    assert check_source(docs.use_instead, "example.py", ALL) == []


@pytest.mark.parametrize("rule", [r for r in RULES if r.fix_applicability is not None], ids=lambda r: r.code)
def test_fixing_the_example_gives_the_documented_code(rule):
    docs = examples((docs_dir() / f"{rule.code}.md").read_text(encoding="utf-8"))
    assert docs.fixed is not None, f"{rule.code} has a fix but its 'Fix safety' section shows no fixed code"
    unsafe = rule.fix_applicability == Applicability.UNSAFE
    outcome = fix_source(docs.example, "example.py", ALL, unsafe=unsafe)
    assert outcome.text == docs.fixed
    assert fix_source(outcome.text, "example.py", ALL, unsafe=unsafe).text == outcome.text
