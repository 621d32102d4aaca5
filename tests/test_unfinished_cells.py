"""Code that is not Python to gpulint's parser, and what the user gets instead of an `invalid-syntax` error.

Notebooks: a code cell that CPython cannot compile (an exercise's blank to fill, `x = # your code here`, an empty
function body) is left out; the other cells are checked and fixed without it, a warning on stderr names the cell
and the error, the exit code is the other cells' (an exercise notebook does not fail CI), and the cell keeps its
bytes. A notebook where no cell compiles is skipped with a warning. The cells after a skipped one never read a
value from before it that it may have changed, and no fix inserts a name only a skipped cell binds.

Python files that CPython compiles but LibCST cannot parse (a tab after spaces in an indent) are skipped with a
warning; a real syntax error stays an `invalid-syntax` finding.
"""

from __future__ import annotations

import json

import pytest

from gpulint import api
from gpulint.diagnostics import Applicability, Diagnostic, Edit, Fix, Location
from gpulint.fix_invariants import enforce
from gpulint.notebook import SKIPPED_CELL_VALUE, Notebook, _bound_names, without_stubs
from gpulint.reporters import ReportContext, render
from tests.conftest import UNPROVEN_COST_TOML, run_gpulint
from tests.test_notebooks import check, concise, fixed, notebook, sources_of

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

SETUP = "import torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'"
BLANK = "model = # YOUR CODE HERE\nbatch_size = 64"
EMPTY_BODY = "def accuracy(logits, labels):\n    # your code here"
TRAIN = """\
loader = DataLoader(range(100), batch_size=batch_size)
print(torch.cuda.memory_cached())
for x in loader:
    x = x.to(device)
"""
EXERCISE = notebook(SETUP, BLANK, EMPTY_BODY, TRAIN)
EXPECTED = [
    "ex.ipynb:cell 4:1:10: GPU101 `DataLoader` has no `num_workers`: batches load in the training process",
    "ex.ipynb:cell 4:1:10: GPU102 `DataLoader` has no `pin_memory` but its batches are copied to the GPU (`x.to(device)` at cell 4, line 4)",
    "ex.ipynb:cell 4:2:7: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`",
]
WARNINGS = [
    "gpulint: warning: ex.ipynb:cell 2:1:9: SyntaxError: invalid syntax (cell skipped; the other cells were checked)",
    "gpulint: warning: ex.ipynb:cell 3:2:21: SyntaxError: expected an indented block after function definition on line 1"
    " (cell skipped; the other cells were checked)",
]


# ---- notebooks: the other cells are checked -----------------------------------------------------------


def test_the_cells_around_an_unfinished_one_are_checked_in_their_own_rows():
    assert concise(EXERCISE, "ex.ipynb") == EXPECTED
    report = check(EXERCISE, "ex.ipynb")
    assert report.skipped_cells == [
        ("ex.ipynb", 2, "cell 2:1:9: SyntaxError: invalid syntax"),
        ("ex.ipynb", 3, "cell 3:2:21: SyntaxError: expected an indented block after function definition on line 1"),
    ]
    assert report.skipped == []


def test_check_warns_on_stderr_and_exits_with_the_other_cells_status(tmp_path):
    (tmp_path / "ex.ipynb").write_text(EXERCISE, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")  # GPU102: a dataset of unknown size
    result = run_gpulint("check", "--no-cache", "--output-format", "concise", "ex.ipynb", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.decode().splitlines()[:3] == EXPECTED
    assert result.stderr.decode().splitlines() == WARNINGS
    # The warning is said on every run: a cached answer would not say it.
    again = run_gpulint("check", "--output-format", "concise", "ex.ipynb", cwd=tmp_path)
    assert again.stderr.decode().splitlines() == WARNINGS and again.stdout.decode().splitlines()[:3] == EXPECTED
    # Nothing found in the cells that parse: CI passes, the warning stays.
    (tmp_path / "ex.ipynb").write_text(notebook(SETUP, BLANK, "print(torch.cuda.memory_reserved())"), encoding="utf-8")
    clean = run_gpulint("check", "--no-cache", "ex.ipynb", cwd=tmp_path)
    assert (clean.returncode, clean.stdout.decode()) == (0, "All checks passed!\n")
    assert clean.stderr.decode().splitlines() == [WARNINGS[0]]


def test_json_output_holds_the_other_cells_findings_only(tmp_path):
    (tmp_path / "ex.ipynb").write_text(EXERCISE, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")  # GPU102: a dataset of unknown size
    result = run_gpulint("check", "--no-cache", "--output-format", "json", "ex.ipynb", cwd=tmp_path)
    records = json.loads(result.stdout.decode())  # stdout stays pure JSON; the warnings go to stderr
    assert [(r["code"], r["cell"], r["location"]["row"], r["location"]["column"]) for r in records] == [
        ("GPU101", 4, 1, 10),
        ("GPU102", 4, 1, 10),
        ("GPU402", 4, 2, 7),
    ]
    assert result.stderr.decode().splitlines() == WARNINGS


def test_fix_apply_fixes_the_other_cells_and_keeps_the_unfinished_ones_byte_for_byte(tmp_path):
    path = tmp_path / "ex.ipynb"
    path.write_text(EXERCISE, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")  # GPU102: a dataset of unknown size
    dry = run_gpulint("fix", "ex.ipynb", cwd=tmp_path)
    assert dry.returncode == 1 and dry.stdout.decode().startswith("--- ex.ipynb:cell 4\n+++ ex.ipynb:cell 4\n")
    assert WARNINGS[0] in dry.stderr.decode()
    result = run_gpulint("fix", "--apply", "--output-format", "concise", "ex.ipynb", cwd=tmp_path)
    assert result.returncode == 1  # GPU101/GPU102 remain (unsafe fixes)
    assert result.stderr.decode().splitlines()[:2] == WARNINGS
    after = path.read_text(encoding="utf-8")
    assert after == EXERCISE.replace("memory_cached", "memory_reserved")
    assert sources_of(after)[1:3] == sources_of(EXERCISE)[1:3]
    unsafe = run_gpulint("fix", "--apply", "--unsafe-fixes", "ex.ipynb", cwd=tmp_path)
    assert unsafe.returncode == 0
    fixed_cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    assert "num_workers=" in "".join(fixed_cells[3]["source"])
    assert sources_of(path.read_text(encoding="utf-8"))[1:3] == sources_of(EXERCISE)[1:3]


def test_add_noqa_leaves_the_unfinished_cells_as_they_are(tmp_path):
    path = tmp_path / "ex.ipynb"
    path.write_text(EXERCISE, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")  # GPU102: a dataset of unknown size
    result = run_gpulint("check", "--add-noqa", "ex.ipynb", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr.decode().endswith("Added 2 noqa directives.\n")
    after = path.read_text(encoding="utf-8")
    assert sources_of(after)[:3] == sources_of(EXERCISE)[:3]
    assert "# noqa: GPU101, GPU102" in after and "# noqa: GPU402" in after
    assert run_gpulint("check", "--no-cache", "ex.ipynb", cwd=tmp_path).returncode == 0


def test_an_empty_block_at_a_cells_end_is_its_own_error_not_the_next_cells():
    # Together, CPython reports the missing body at the next cell's first statement.
    raw = notebook("import torch", "for x in range(3):\n    # TODO", "print(torch.cuda.memory_cached())")
    assert [line.split(" `")[0] for line in concise(raw)] == ["nb.ipynb:cell 3:1:7: GPU402 [*]"]
    assert [cell for _, cell, _ in check(raw).skipped_cells] == [2]


def test_a_notebook_where_no_cell_parses_is_skipped_with_a_warning(tmp_path):
    raw = notebook("import torch\nmodel = # your code", "print(torch.cuda.memory_cached()")
    path = tmp_path / "nb.ipynb"
    path.write_text(raw, encoding="utf-8")
    for command in (["check", "--no-cache"], ["fix", "--apply", "--unsafe-fixes"]):
        result = run_gpulint(*command, "nb.ipynb", cwd=tmp_path)
        assert result.returncode == 0
        assert result.stderr.decode().splitlines()[0] == (
            "gpulint: warning: nb.ipynb: skipped: no code cell is valid Python (cell 1:2:9: SyntaxError: invalid syntax)"
        )
    assert path.read_text(encoding="utf-8") == raw


# ---- what the cells after a skipped one may rely on ---------------------------------------------------

CONV_TRAINING = """\
model = torchvision.models.resnet50().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torchvision.datasets.CIFAR10('.', transform=torchvision.transforms.ToTensor())
loader = DataLoader(data, batch_size=BS, num_workers=4, pin_memory=True, persistent_workers=True)
for epoch in range(90):
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
"""
IMPORTS = "import torch\nimport torchvision\nfrom torch.utils.data import DataLoader\nBS = 2"


def test_a_value_an_unfinished_cell_may_change_is_unknown_after_it():
    # Without the skipped cell, BS would read as 2: a GPU103 the notebook, once solved, does not have.
    assert [line.split(" `")[0] for line in concise(notebook(IMPORTS, CONV_TRAINING))] == ["nb.ipynb:cell 2:4:10: GPU103"]
    assert concise(notebook(IMPORTS, "BS = 256\nmodel = # YOUR CODE HERE", CONV_TRAINING)) == []


def test_names_only_an_unfinished_cell_defines_find_nothing():
    raw = notebook("import torch", "device = torch.device('cuda')\nmodel = # YOUR CODE HERE", "for x, y in loader:\n    pos = torch.arange(x.shape[1]).to(device)\n    model(x.to(device) + pos).sum().backward()\n    opt.step()")
    assert concise(raw) == []
    assert [line.split(" `")[0] for line in concise(raw.replace("# YOUR CODE HERE", "None"))] == ["nb.ipynb:cell 3:2:11: GPU201 [*]"]


def test_the_names_an_unfinished_cell_may_bind():
    cell = """\
import numpy as np, os.path
from torch import nn, optim as o
X_train, (y_train, z) = load()  # the data
config['lr'] = 0.1
model.fc = None
lr += 1
n: int = 3
for i, batch in enumerate(loader):
    step = # your code
with open(path) as handle:
    pass
def helper(a=1):
    local = a
class Net(nn.Module):
    layer = 1
result = helper() == 2 and f(k=1)
größe = 3
if result: pass
else: flag = 1
try: value = 1
except: pass
first = 1; second = 2
"""
    assert _bound_names(cell) == [
        "np", "os", "nn", "o", "X_train", "y_train", "z", "lr", "n", "i", "batch", "step", "handle", "helper", "Net", "result", "größe", "flag", "value", "first", "second",
    ]
    # Whatever the cell holds, its stub parses: the module around it stays Python.
    raw = notebook("import torch", cell + "x = # TODO", "print(torch.cuda.memory_cached())")
    assert Notebook.parse(raw).broken and [line.split(" `")[0] for line in concise(raw)] == ["nb.ipynb:cell 3:1:7: GPU402 [*]"]


def test_a_fix_never_inserts_a_name_only_an_unfinished_cell_binds():
    nb = Notebook.parse(notebook("import torch", "device = 'cuda'\nmodel = # TODO", "x = torch.zeros(3)"))
    module = nb.text
    assert f"device = {SKIPPED_CELL_VALUE}\n" in module and f"model = {SKIPPED_CELL_VALUE}\n" in module
    row = module.splitlines().index("x = torch.zeros(3)") + 1
    edit = Edit(Location(row, 18), Location(row, 18), ", device=device")
    finding = Diagnostic("GPU201", "tensor-created-then-moved", "m", "nb.ipynb", Location(row, 5), Location(row, 19), fix=Fix("f", Applicability.SAFE, (edit,)))
    assert enforce(module, [finding])[0].fix is not None  # with the stub, `device` looks bound
    assert enforce(without_stubs(module), [finding])[0].fix is None  # the linter checks fixes without the stubs


# ---- Python files LibCST cannot parse ---------------------------------------------------------------

TAB_AFTER_SPACES = "import torch\n\n\ndef to_float(module):\n    if module:\n        if module.training:\n    \t    module.float()\n    torch.cuda.memory_cached()\n"


def test_a_file_cpython_compiles_but_libcst_cannot_parse_is_skipped_with_a_warning(tmp_path):
    compile(TAB_AFTER_SPACES, "fp16util.py", "exec")
    path = tmp_path / "fp16util.py"
    path.write_text(TAB_AFTER_SPACES, encoding="utf-8")
    warning = (
        "gpulint: warning: fp16util.py: skipped: Python compiles it, but gpulint's parser (LibCST) cannot read it: line 7 is "
        "indented with spaces, then a tab; indent it with spaces only to check it"
    )
    result = run_gpulint("check", "--no-cache", "fp16util.py", cwd=tmp_path)
    assert (result.returncode, result.stdout.decode(), result.stderr.decode().splitlines()) == (0, "All checks passed!\n", [warning])
    result = run_gpulint("fix", "--apply", "fp16util.py", cwd=tmp_path)
    assert result.returncode == 0 and warning in result.stderr.decode().splitlines()
    assert path.read_text(encoding="utf-8") == TAB_AFTER_SPACES
    report = api.check(api.Source(TAB_AFTER_SPACES, "fp16util.py"))
    assert report.diagnostics == [] and report.skipped == [("fp16util.py", warning.split(": skipped: ")[1])]


def test_a_real_syntax_error_is_still_reported(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\nx = = 1\ntorch.cuda.memory_cached()\n", encoding="utf-8")
    result = run_gpulint("check", "--no-cache", "--output-format", "concise", "broken.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.decode().splitlines()[0] == "broken.py:2:5: invalid-syntax: SyntaxError: invalid syntax"
    assert result.stderr.decode() == ""


def test_reporters_render_a_notebook_with_skipped_cells():
    report = check(EXERCISE, "ex.ipynb")
    full = render("full", report.diagnostics, ReportContext(sources=report.sources))
    assert " --> ex.ipynb:cell 4:2:7\n" in full and "print(torch.cuda.memory_cached())" in full


def test_a_notebook_nothing_would_be_checked_in_gets_no_warning(tmp_path):
    # A TensorFlow exercise: no rule applies, so its blanks are none of gpulint's business.
    (tmp_path / "tf.ipynb").write_text(notebook("import tensorflow as tf", "model = # YOUR CODE HERE"), encoding="utf-8")
    result = run_gpulint("check", "--no-cache", "tf.ipynb", cwd=tmp_path)
    assert (result.returncode, result.stdout.decode(), result.stderr.decode()) == (0, "All checks passed!\n", "")


def test_a_notebook_cell_only_cpython_parses_is_left_out_like_a_blank_one():
    tab_cell = "def to_float(module):\n    if module:\n        if module.training:\n    \t    module.float()"
    raw = notebook("import torch", tab_cell, "print(torch.cuda.memory_cached())")
    assert [line.split(" `")[0] for line in concise(raw)] == ["nb.ipynb:cell 3:1:7: GPU402 [*]"]
    assert check(raw).skipped_cells == [
        (
            "nb.ipynb",
            2,
            "cell 2:4:1: Python compiles it, but gpulint's parser (LibCST) cannot read it: line 4 is indented with spaces, "
            "then a tab; indent it with spaces only to check it",
        )
    ]
    result = fixed(raw)
    assert result.fixed == raw.replace("memory_cached", "memory_reserved")
