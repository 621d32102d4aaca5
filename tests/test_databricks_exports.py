"""A Databricks notebook exported as source (`# Databricks notebook source`, cells split by `# COMMAND ----------`)
runs its `!cmd` shell escapes where it was written: such a line is no syntax error there. The rest of the file is
checked as Python, nothing is reported as `invalid-syntax`, and no fix is offered in it. A plain script with the
same line, or an export with another syntax error, is still `invalid-syntax` (issue 13, dolly's `train_dolly.py`).
"""

from __future__ import annotations

from gpulint import api
from gpulint.databricks import read_export
from tests.conftest import run_gpulint

EXPORT = """\
# Databricks notebook source
import torch
import torchvision
from torch.utils.data import DataLoader

# COMMAND ----------

!pip install deepspeed \\
    --quiet

# COMMAND ----------

model = torchvision.models.resnet50().cuda()
data = torchvision.datasets.ImageFolder("/dbfs/train", transform=torchvision.transforms.ToTensor())
loader = DataLoader(data, batch_size=64, shuffle=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(10):
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())
"""


def codes(text: str, path: str = "train_dolly.py") -> list[tuple[str, int]]:
    return [(d.code or d.name, d.location.row) for d in api.check(api.Source(text, path)).diagnostics]


def test_an_export_with_a_shell_escape_is_checked_and_not_invalid_syntax():
    assert codes(EXPORT) == [("GPU101", 15), ("GPU303", 24)]  # (GPU101 names `pin_memory` too: loader_bound.py)


def test_an_export_offers_no_fix_and_fix_leaves_it_byte_for_byte(tmp_path):
    assert all(d.fix is None for d in api.check(api.Source(EXPORT, "train_dolly.py")).diagnostics)
    path = tmp_path / "train_dolly.py"
    path.write_bytes(EXPORT.encode())
    result = run_gpulint("fix", "--apply", "--unsafe-fixes", "--no-cache", "train_dolly.py", cwd=tmp_path)
    assert result.returncode == 1
    assert path.read_bytes() == EXPORT.encode()
    assert "0 fixed, 2 remaining" in result.stdout.decode()


def test_the_escape_and_its_continuation_are_masked_in_place():
    export = read_export(EXPORT)
    assert export is not None
    assert export.text.splitlines()[7:9] == ["#pip install deepspeed \\", "    #-quiet"]
    assert len(export.text) == len(EXPORT)


def concise(tmp_path, text: str, name: str) -> list[str]:
    (tmp_path / name).write_text(text, encoding="utf-8")
    result = run_gpulint("check", "--no-cache", "--output-format", "concise", name, cwd=tmp_path)
    return result.stdout.decode().splitlines()[:-1]


def test_a_plain_script_with_a_shell_escape_stays_invalid_syntax(tmp_path):
    script = EXPORT.replace("# Databricks notebook source\n", "# training script\n")
    assert concise(tmp_path, script, "train.py") == ["train.py:8:1: invalid-syntax: SyntaxError: invalid syntax"]


def test_an_export_with_another_syntax_error_is_reported_at_that_error_not_at_the_escape(tmp_path):
    # a missing comma in a notebook that also runs `!wget`: the escape runs on Databricks, the comma is the bug
    broken = EXPORT.replace("opt = torch.optim.SGD(", "opt = = torch.optim.SGD(")
    row = broken.splitlines().index(next(line for line in broken.splitlines() if "= =" in line)) + 1
    error = read_export(broken)
    assert isinstance(error, SyntaxError) and error.lineno == row
    assert concise(tmp_path, broken, "train_dolly.py") == [f"train_dolly.py:{row}:7: invalid-syntax: SyntaxError: invalid syntax"]


def test_a_bang_inside_a_string_or_brackets_is_not_an_escape():
    text = '# Databricks notebook source\nx = """\n!not an escape\n"""\ny = (1,\n!2)\n'
    assert read_export(text) is None  # `!2)` is inside brackets: Python's error, not an escape
