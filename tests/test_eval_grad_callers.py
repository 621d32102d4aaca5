"""GPU405 and the callers of another module: a validation helper that switches its models to eval mode and runs them
over a loader is silent when every call of it in the project is made under `torch.no_grad()` (or from a function
that is itself always called so: `analysis/grad_callers.py`). A helper nothing calls, a caller with autograd on, or a
helper handed on as a value keeps today's finding."""

from __future__ import annotations

import textwrap

from gpulint.analysis.summary import summarize
from tests.projects_helper import lint, lint_written

VALIDATION = """\
    import torch


    def validate(generator, valloader):
        generator.eval()
        total = 0.0
        for mel, audio in valloader:
            mel = mel.cuda()
            fake = generator(mel)
            total += torch.mean(torch.abs(fake - audio.cuda())).item()
        return total / len(valloader)
"""
TRAIN = """\
    import torch
    from validation import validate


    def train(model_g, optim_g, trainloader, valloader, epochs):
        for epoch in range(epochs):
            model_g.train()
            for mel, audio in trainloader:
                loss = torch.mean(torch.abs(model_g(mel.cuda()) - audio.cuda()))
                optim_g.zero_grad()
                loss.backward()
                optim_g.step()
            {call}
"""
UNDER_NO_GRAD = "with torch.no_grad():\n                validate(model_g, valloader)"
PLAIN = "validate(model_g, valloader)"


def _findings(tmp_path, monkeypatch, train=TRAIN, call=UNDER_NO_GRAD, extra=None) -> list[str]:
    files = {"validation.py": VALIDATION, "train.py": train.format(call=call), **(extra or {})}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU405" in f]


def test_a_helper_every_caller_runs_under_no_grad_from_another_module_is_silent(tmp_path, monkeypatch):
    assert _findings(tmp_path, monkeypatch) == []


def test_inference_mode_and_a_no_grad_decorated_caller_count_too(tmp_path, monkeypatch):
    assert _findings(tmp_path, monkeypatch, call="with torch.inference_mode():\n                validate(model_g, valloader)") == []
    decorated = TRAIN + """
    @torch.no_grad()
    def evaluate_all(model_g, valloader):
        return validate(model_g, valloader)
"""
    assert _findings(tmp_path / "decorated", monkeypatch, train=decorated, call="pass") == []


def test_a_caller_that_is_itself_always_called_under_no_grad_counts(tmp_path, monkeypatch):
    chained = TRAIN + """

    def run_validation(model_g, valloader):
        return validate(model_g, valloader)
"""
    call = "with torch.no_grad():\n                run_validation(model_g, valloader)"
    assert _findings(tmp_path, monkeypatch, train=chained, call=call) == []
    # the same chain, with the outer call left with autograd on: the evaluation records a graph
    assert _findings(tmp_path / "plain", monkeypatch, train=chained, call="run_validation(model_g, valloader)") == [
        "validation.py:9 GPU405"
    ]


def test_a_caller_with_autograd_on_keeps_the_finding(tmp_path, monkeypatch):
    assert _findings(tmp_path, monkeypatch, call=PLAIN) == ["validation.py:9 GPU405"]
    (diagnostic,) = [d for d in lint(tmp_path, monkeypatch) if d.code == "GPU405"]
    assert diagnostic.message == "`generator` runs in a loop after `generator.eval()` with autograd on"


def test_one_caller_under_no_grad_and_another_without_keeps_the_finding(tmp_path, monkeypatch):
    other = {"finetune.py": "from validation import validate\n\n\ndef check(model, loader):\n    return validate(model, loader)\n"}
    assert _findings(tmp_path, monkeypatch, extra=other) == ["validation.py:9 GPU405"]


def test_a_public_helper_nothing_in_the_project_calls_keeps_the_finding(tmp_path, monkeypatch):
    assert [f for f in lint_written(tmp_path, {"validation.py": VALIDATION}, monkeypatch) if "GPU405" in f] == [
        "validation.py:9 GPU405"
    ]


def test_a_helper_handed_on_as_a_value_keeps_the_finding(tmp_path, monkeypatch):
    hooks = {"hooks.py": "from validation import validate\n\nCALLBACKS = {'val': validate}\n"}
    assert _findings(tmp_path, monkeypatch, extra=hooks) == ["validation.py:9 GPU405"]


def test_the_summary_records_the_calls_made_with_autograd_decided():
    summary = summarize(textwrap.dedent(TRAIN.format(call=UNDER_NO_GRAD)))
    f = summary.functions["train"]
    decided = [f.calls[i][0] for i in f.grad_decided]
    assert decided == ["validate"]
    assert [c[0] for i, c in enumerate(f.calls) if c[0] == "validate" and i not in f.grad_decided] == []
    plain = summarize(textwrap.dedent(TRAIN.format(call=PLAIN))).functions["train"]
    assert plain.grad_decided == ()
