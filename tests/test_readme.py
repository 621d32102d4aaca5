"""The README's rule table matches the registry."""

from __future__ import annotations

import re

from gpulint.checks import all_rules
from tests.conftest import REPO

FIX = {None: "none", "safe": "safe", "unsafe": "unsafe"}


def test_rule_table_matches_the_registry():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (GPU\d{3}) \| ([a-z0-9-]+) \| (\w+) \|", text, re.MULTILINE)
    expected = [
        (code, rule.name, FIX[rule.fix_applicability.value if rule.fix_applicability else None])
        for code, rule in all_rules().items()
    ]
    assert rows == expected


def test_readme_starts_with_the_two_commands():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert "gpulint check fixtures/" in first_block and "python -m pytest" in first_block
    assert "python -m pytest -q" in (REPO / ".ci" / "run").read_text()


def test_configuration_section_documents_every_key():
    import tomllib

    from gpulint.config import KNOWN_KEYS, settings_from_table

    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Configuration\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```toml\n", 1)[1].split("```", 1)[0]
    table = tomllib.loads(block)["tool"]["gpulint"]
    assert set(table) == KNOWN_KEYS
    settings_from_table(table, REPO)  # the documented example is a valid configuration
