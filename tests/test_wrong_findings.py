"""Wrong findings of issue 13 (the `wrong-msgs` classes): each shape with its positive and negative test."""

from __future__ import annotations

import textwrap
from pathlib import Path

from gpulint.config import Settings
from gpulint.linter import lint_files
from tests.conftest import findings

# ---- GPU101: a collate function that moves batches to the device, chosen among several ----------------

CHOSEN_COLLATE = """\
    import functools
    import torch
    from torch.utils.data import DataLoader

    def to_device_collate(batch, device):
        return [torch.as_tensor(x).to(device) for x in batch]

    def plain_collate(batch):
        return batch

    def main(dataset, mode, device):
        {choice}
        loader = DataLoader(dataset, batch_size=64, collate_fn=collate)
        model = torch.nn.Linear(4, 4).cuda()
        for batch in loader:
            model(batch[0]).sum().backward()

    if __name__ == "__main__":
        main(None, "gpu", torch.device("cuda"))
"""

IF_ELIF_ELSE = """\
if mode == "gpu":
    collate = functools.partial(to_device_collate, device=device)
elif mode == "plain":
    collate = plain_collate
else:
    collate = None"""


def _with_choice(choice: str) -> str:
    return textwrap.dedent(CHOSEN_COLLATE).replace("    {choice}\n", textwrap.indent(choice, "    ") + "\n")


def _loader_findings(choice: str) -> list[str]:
    source = _with_choice(choice)
    assert "invalid-syntax" not in str(findings(source))
    return [f for f in findings(source) if f.split()[1] in ("GPU101", "GPU102")]


def test_collate_chosen_in_if_elif_else_that_may_move_keeps_workers_at_zero():
    assert _loader_findings(IF_ELIF_ELSE) == []


def test_collate_chosen_in_a_conditional_expression_that_may_move():
    choice = 'collate = functools.partial(to_device_collate, device=device) if mode == "gpu" else plain_collate'
    assert _loader_findings(choice) == []


def test_collate_chosen_among_branches_none_of_which_moves_is_reported():
    choice = IF_ELIF_ELSE.replace("functools.partial(to_device_collate, device=device)", "plain_collate")
    assert _loader_findings(choice) == ["18:14 GPU101", "18:14 GPU102"]


def test_collate_that_moves_defined_in_another_module(tmp_path, monkeypatch):
    (tmp_path / "collate.py").write_text(
        "import torch\n\ndef project_collate(batch, device):\n    return torch.stack(batch).to(device)\n", encoding="utf-8"
    )
    train = _with_choice(IF_ELIF_ELSE).replace("to_device_collate, device", "project_collate, device")
    (tmp_path / "train.py").write_text("from collate import project_collate\n" + train, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    results = lint_files([tmp_path / "collate.py", tmp_path / "train.py"], Settings(root=tmp_path), jobs=1, use_cache=False)
    assert [d.code or d.name for r in results for d in r.diagnostics] == []
