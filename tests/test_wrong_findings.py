"""Wrong findings of issue 13 (the `wrong-msgs` classes): each shape with its positive and negative test."""

from __future__ import annotations

import json
import textwrap

import pytest

from gpulint.config import Settings
from gpulint.linter import lint_files
from gpulint.reporters import ReportContext, render
from tests.conftest import findings, run_gpulint
from tests.test_notebooks import check, concise, fixed, notebook

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


# ---- notebooks: a cell indented as a whole runs (IPython strips the first line's indentation) ---------

INDENTED_CELL = ("code", ["    import torch\n", "\n", "    print(torch.cuda.memory_cached())\n", "    x = 1"])


def test_an_indented_cell_is_checked_at_its_own_columns():
    raw = notebook(INDENTED_CELL)
    assert concise(raw) == [
        "nb.ipynb:cell 1:3:11: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"
    ]
    report = check(raw)
    (record,) = json.loads(render("json", report.diagnostics, ReportContext(sources=report.sources)))
    assert (record["cell"], record["location"], record["end_location"]) == (1, {"row": 3, "column": 11}, {"row": 3, "column": 35})
    assert record["fix"]["edits"] == [{"content": "reserv", "location": {"row": 3, "column": 29}, "end_location": {"row": 3, "column": 33}}]


def test_fixing_an_indented_cell_keeps_its_indentation_and_every_other_byte(tmp_path):
    raw = notebook(INDENTED_CELL, "print(1)")
    result = fixed(raw)
    assert result.changed
    assert result.document(result.fixed).raw == raw.replace("memory_cached", "memory_reserved")
    path = tmp_path / "nb.ipynb"
    path.write_text(raw, encoding="utf-8")
    assert run_gpulint("fix", "--apply", str(path)).returncode == 0
    assert path.read_text(encoding="utf-8") == raw.replace("memory_cached", "memory_reserved")


def test_a_partly_indented_cell_is_not_python_and_skipped():
    raw = notebook(("code", ["import torch\n", "    print(torch.cuda.memory_cached())\n"]))
    assert concise(raw) == []
    assert check(raw).skipped == [("nb.ipynb", "no code cell is valid Python (cell 1:2:4: SyntaxError: unexpected indent)")]
    raw = notebook(("code", ["    import torch\n", "print(torch.cuda.memory_cached())\n"]))
    assert concise(raw) == [] and check(raw).skipped[0][1].startswith("no code cell is valid Python (cell 1:")
    assert not fixed(raw).changed


# ---- GPU102: the tensor copied to the GPU is rebuilt on the CPU after the loader, not the batch ----------

REBUILT = """\
    import numpy as np
    import torch
    from torch.utils.data import DataLoader

    def train(dataset, model, transform, processor, device):
        loader = DataLoader(dataset, batch_size=32, num_workers=4)
        model.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for batch in loader:
            {copy}
            loss = model(images)
            loss.backward()
            opt.step()

    if __name__ == "__main__":
        train(None, torch.nn.Linear(2, 2), None, None, torch.device("cuda"))
"""


@pytest.mark.parametrize(
    "copy",
    [
        'images = torch.stack([transform(img) for img in batch["image"]]).to(device)',
        'images = processor(images=batch["image"], return_tensors="pt").pixel_values.to(device)',
        'array = np.asarray(batch["image"]); images = torch.tensor(array).to(device)',
        'images = torch.stack([transform(img) for img in batch["image"]]); images = images.to(device)',
    ],
)
def test_a_tensor_rebuilt_on_the_cpu_after_the_loader_is_no_pinning_finding(copy):
    assert findings(REBUILT.replace("{copy}", copy), select=("GPU102",)) == []


@pytest.mark.parametrize(
    "copy",
    [
        "images = batch.image.float().to(device)",
        "images = batch.image; images = images.to(device)",
        'images = batch["image"].to(device)',
    ],
)
def test_a_part_of_the_batch_itself_copied_is_still_reported(copy):
    assert findings(REBUILT.replace("{copy}", copy), select=("GPU102",)) == ["6:14 GPU102"]


# Megatron-LM's ViT evaluation: `for h, w in patch_hw.tolist():` reads the sizes once, before the first iteration of
# that loop; the read runs as often as the code around the loop, not once per iteration of it.
ITERABLE_READ = """
import torch
model = torch.nn.Linear(4, 4).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
{outer}
    x = x.cuda()
    loss = model(x).sum()
    loss.backward()
    opt.step()
for h, w in sizes.cuda().tolist():
    print(h, w)
"""


def test_a_read_in_the_iterable_of_a_loop_runs_once_not_per_iteration():
    assert [f for f in findings(ITERABLE_READ.format(outer="for x in loader:")) if f.endswith("GPU303")] == []


def test_a_read_in_the_iterable_of_an_inner_loop_runs_every_step_of_the_outer_one():
    source = ITERABLE_READ.format(outer="for x in loader:").replace("for h, w in", "    for h, w in").replace("\n    print(h, w)", "\n        print(h, w)")
    assert [f for f in findings(source) if f.endswith("GPU303")] == ["10:17 GPU303"]
