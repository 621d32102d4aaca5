"""The README's rule table matches the registry."""

from __future__ import annotations

import os

from gpulint.rule_docs import README_TABLE_HEADER, readme_rule_table
from tests.conftest import REPO

def test_rule_table_is_generated_from_the_rule_classes():
    """The table shows each rule's fix tier as `Rule.fix()` enforces it; GPULINT_UPDATE_README=1 rewrites it."""
    path = REPO / "README.md"
    text = path.read_text(encoding="utf-8")
    start = text.index(README_TABLE_HEADER)
    end = text.index("\n\n", start) + 1
    expected = readme_rule_table()
    if os.environ.get("GPULINT_UPDATE_README") and text[start:end] != expected:
        path.write_text(text[:start] + expected + text[end:], encoding="utf-8")
        end = start + len(expected)
        text = path.read_text(encoding="utf-8")
    assert text[start:end] == expected, "run GPULINT_UPDATE_README=1 python -m pytest tests/test_readme.py"


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
