"""The rule documents in `rules/CODE.md`: shipped in the wheel, printed by `gpulint rule`, tested."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpulint.checks import Rule, all_rules
from gpulint.diagnostics import Applicability

_FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def docs_dir() -> Path:
    """`gpulint/_rules` inside a wheel; the repository's `rules/` in a checkout or editable install."""
    packaged = Path(__file__).parent / "_rules"
    return packaged if packaged.is_dir() else Path(__file__).parent.parent / "rules"


def document(code: str) -> str | None:
    path = docs_dir() / f"{code}.md"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def sections(markdown: str) -> dict[str, str]:
    """`## Title` -> body."""
    result: dict[str, str] = {}
    current = None
    for line in markdown.splitlines(keepends=True):
        if line.startswith("## "):
            current = line[3:].strip()
            result[current] = ""
        elif current is not None:
            result[current] += line
    return result


@dataclass
class DocExamples:
    example: str
    use_instead: str | None
    fixed: str | None  # the code the fix turns the example into (first block in "Fix safety")


def examples(markdown: str) -> DocExamples | None:
    parts = sections(markdown)
    example_section = parts.get("Example", "")
    blocks = _FENCE.findall(example_section)
    if not blocks:
        return None
    fixed_blocks = _FENCE.findall(parts.get("Fix safety", ""))
    return DocExamples(blocks[0], blocks[1] if len(blocks) > 1 else None, fixed_blocks[0] if fixed_blocks else None)


def fix_availability(rule: type[Rule]) -> str:
    if rule.fix_applicability is None:
        return "None"
    return "Always" if rule.fix_always else "Sometimes"


def fix_statement(rule: type[Rule]) -> str:
    """"Fix is always available." only for rules whose every finding has a fix."""
    if rule.fix_applicability is None:
        return "Fix is not available."
    if rule.fix_applicability == Applicability.DISPLAY_ONLY:
        return "Fix is display-only."
    if rule.fix_applicability == Applicability.UNSAFE:
        return "Fix is sometimes available (unsafe)."
    return "Fix is always available." if rule.fix_always else "Fix is sometimes available (safe)."


def rule_record(rule: type[Rule]) -> dict:
    """ruff's `rule --output-format json` shape."""
    return {
        "code": rule.code,
        "name": rule.name,
        "summary": rule.summary,
        "fix": fix_statement(rule),
        "fix_availability": fix_availability(rule),
        "explanation": document(rule.code) or "",
        "preview": rule.preview,
        "options": {o.name: {"default": o.default, "help": o.help} for o in rule.options},
    }


README_TABLE_HEADER = "| Code | Name | Fix | What it finds |\n|---|---|---|---|\n"


def readme_rule_table() -> str:
    """The README's rule table, from the rule classes: each rule's fix tier as `fix()` enforces it."""
    rows = []
    for rule in all_rules().values():
        summary = rule.summary + (" (preview)" if rule.preview else "")
        rows.append(f"| {rule.code} | {rule.name} | {rule.fix_tier()} | {summary} |\n")
    return README_TABLE_HEADER + "".join(rows)
