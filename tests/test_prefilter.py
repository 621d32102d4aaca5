"""The prefilter (each rule's `requires`) keeps LibCST away from files no rule can fire on. It must stay
sharp as rules are added, and it must never hide a finding."""

from __future__ import annotations

import re

import pytest

from gpulint.analysis.devices import GPU_TEXT_MARKERS
from gpulint.analysis.project import ModuleContext
from gpulint.checks import all_rules
from gpulint.checks.base import text_matcher
from gpulint.linter import check_source, rules_for
from gpulint.rule_docs import docs_dir, examples
from tests.conftest import FIXTURES, settings

RULES = list(all_rules().values())
ALL = settings(select=("ALL",), preview=True)

# A model definition with no training and no GPU: what most files of a large code base look like.
NEUTRAL = '''\
"""A model."""
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, width: int = 4) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x))
'''
_PLAIN = NEUTRAL.split("\n", 1)[1]  # without the docstring


def _samples() -> list[tuple[str, str]]:
    """Every fixture script and every code block of every rule document."""
    found = [(path.name, path.read_text(encoding="utf-8")) for path in sorted(FIXTURES.glob("*.py"))]
    for rule in RULES:
        doc = examples((docs_dir() / f"{rule.code}.md").read_text(encoding="utf-8"))
        for kind in ("example", "use_instead", "fixed"):
            code = getattr(doc, kind, None) if doc is not None else None
            if code:
                found.append((f"{rule.code}-{kind}", code))
    return found


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_every_rule_declares_what_its_files_must_contain(rule):
    # A rule without `requires` would make every file of a code base go through LibCST.
    assert rule.requires, f"{rule.code} declares no `requires` patterns: the prefilter would pass every file"
    for pattern in rule.requires:
        re.compile(pattern)
        assert not re.search(pattern, ""), f"{rule.code}: `{pattern}` matches any text"
        # `cuda` alone filters nothing, but next to a specific word (GPU403: `amp`) it narrows it.
        assert not re.fullmatch(r"\W*(torch|import|nn|cuda)?\W*", pattern) or (pattern == "cuda" and len(rule.requires) > 1), (
            f"{rule.code}: `{pattern}` is too broad to filter anything"
        )


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_a_plain_model_file_is_not_parsed_for_the_rule(rule):
    assert rule not in rules_for(_PLAIN, "model.py", ALL), (
        f"{rule.code}: its prefilter passes a plain model file; name something more specific in `requires`"
    )


def test_rules_needing_gpu_context_skip_files_the_project_says_are_not_gpu_code():
    text = "import torch\nfor x in loader:\n    loss = model(x)\n    loss.backward()\n    print(loss.item())\n"
    alone = {r.code for r in rules_for(text, "train.py", ALL)}
    assert "GPU303" not in alone  # no word GPU evidence is written with: nothing to parse for these rules
    with_gpu = {r.code for r in rules_for(text, "train.py", ALL, ModuleContext(gpu=True))}
    without = {r.code for r in rules_for(text, "train.py", ALL, ModuleContext(gpu=False))}
    assert "GPU303" in with_gpu and "GPU303" not in without
    for rule in RULES:
        if rule.needs_gpu_context:
            assert rule.code not in without
    assert all(marker not in text for marker in GPU_TEXT_MARKERS)


def test_a_project_fact_makes_a_rule_a_candidate_whatever_the_text_says():
    # `log(loss)` in a loop: the helper syncs (another module), the text names none of GPU303's words
    text = "for x in loader:\n    loss = model(x)\n    loss.backward()\n    log(loss)\n"
    context = ModuleContext(gpu=True)
    assert "GPU303" not in {r.code for r in rules_for(text, "train.py", ALL, context)}
    context.__dict__["tags"] = frozenset({"helper-syncs"})
    assert "GPU303" in {r.code for r in rules_for(text, "train.py", ALL, context)}


def test_a_file_no_rule_can_fire_on_is_never_parsed(monkeypatch):
    import gpulint.linter

    def no_parse(text, path):
        raise AssertionError("parsed a file that no rule can fire on")

    monkeypatch.setattr(gpulint.linter, "parse", no_parse)
    assert check_source(_PLAIN, "model.py", ALL) == []


@pytest.mark.parametrize("name,code", _samples(), ids=[n for n, _ in _samples()])
def test_the_prefilter_never_hides_a_finding(name, code):
    with_prefilter = check_source(code, "train.py", ALL)
    without = check_source(code, "train.py", ALL, prefilter=False)
    assert with_prefilter == without


def test_text_matcher_is_a_substring_test_for_words_and_a_regex_otherwise():
    assert text_matcher("DataLoader")("x = DataLoader(ds)")
    assert not text_matcher("DataLoader")("x = dataloader(ds)")
    assert text_matcher(r"\.cuda\(")("x.cuda()")
    assert not text_matcher(r"\.cuda\(")("x.cuda")
    assert text_matcher(r"torch.cuda")("torch_cuda")  # `.` keeps its regex meaning


def test_a_rule_that_overrides_applies_to_text_is_asked(monkeypatch):
    rule = all_rules()["GPU402"]
    monkeypatch.setattr(rule, "applies_to_text", classmethod(lambda cls, text: "never-in-text" in text))
    assert rule not in rules_for("torch.cuda.memory_cached()", "x.py", ALL)
    assert rule in rules_for("never-in-text", "x.py", ALL)


def test_gpu403_needs_the_word_amp_not_the_letters():
    # "amp" as letters is in sample, example, clamp, timestamp: it let a third of the torch corpus through.
    rule = all_rules()["GPU403"]
    assert not rule.applies_to_text("x = torch.clamp(example.cuda(), 0, 1)  # sample timestamps")
    for spelled in (
        "torch.cuda.amp.autocast()",
        "from torch.cuda.amp import GradScaler",
        "from torch.cuda import amp",
        "import torch.cuda.amp as mixed",
    ):
        assert rule.applies_to_text(spelled), spelled
        assert check_source(spelled + "\n", "train.py", ALL) == check_source(spelled + "\n", "train.py", ALL, prefilter=False)
