"""Jupyter notebooks: the code cells, in order, checked and fixed as one module, reported cell by cell.

The fixture notebooks are shaped like the ones users bring: `fixtures/notebooks/colab_classifier.ipynb` (Colab:
two-space JSON, no final newline, shell escapes, `%matplotlib inline`, `obj?` help, a `%%time` training
cell, a `%%bash` cell, outputs with an image) and `fixtures/notebooks/kaggle_tabular.ipynb` (Kaggle: one line
of JSON, every source one string, `files = !ls` and `!nvidia-smi`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import textwrap

import pytest

from gpulint import api
from gpulint.diagnostics import Location
from gpulint.notebook import Notebook, NotebookError
from gpulint.reporters import ReportContext, render
from tests.conftest import UNPROVEN_COST_TOML, FIXTURES, REPO, run_gpulint, settings

NOTEBOOKS = FIXTURES / "notebooks"
COLAB = NOTEBOOKS / "colab_classifier.ipynb"
KAGGLE = NOTEBOOKS / "kaggle_tabular.ipynb"
PYTHON_KERNEL = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}, "language_info": {"name": "python"}}

COLAB_FINDINGS = [
    "colab.ipynb:cell 5:14:16: GPU101 `DataLoader` has no `num_workers`: batches load in the training process",
    "colab.ipynb:cell 5:14:16: GPU102 `DataLoader` has no `pin_memory` but its batches are copied to the GPU"
    " (`images.to(device)` at cell 9, line 4)",
    "colab.ipynb:cell 11:1:10: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`",
]
# No GPU101 on the Kaggle loader: indexing a `TensorDataset` leaves workers nothing to do (analysis/batch_cost.py).
KAGGLE_FINDINGS = [
    "kaggle.ipynb:cell 4:11:10: GPU102 [*] `DataLoader` has no `pin_memory` but its batches are copied to the GPU"
    " (`x.to(device)` at cell 6, line 5)",
    "kaggle.ipynb:cell 6:10:20: GPU303 `loss.item()` waits for the GPU every training step (loop at cell 6, line 4)",
]


def notebook(*cells, metadata=None, nbformat: int = 4) -> str:
    """A notebook's JSON as Jupyter writes it (sorted keys, indent 1, final newline); a cell is its code, or
    (cell_type, source) where source may be a list or a string."""
    written = []
    for index, cell in enumerate(cells):
        kind, source = cell if isinstance(cell, tuple) else ("code", cell)
        if isinstance(source, str) and kind == "code" and not isinstance(cell, tuple):
            source = textwrap.dedent(source).strip("\n").splitlines(keepends=True)
        entry = {"cell_type": kind, "id": f"c{index}", "metadata": {}, "source": source}
        if kind == "code":
            entry.update(execution_count=index + 1, outputs=[])
        written.append(entry)
    data = {"cells": written, "metadata": PYTHON_KERNEL if metadata is None else metadata, "nbformat": nbformat, "nbformat_minor": 5}
    return json.dumps(data, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def check(raw: str, path: str = "nb.ipynb", **overrides) -> api.Report:
    return api.check(api.Source(raw, path), settings(**overrides))


def concise(raw: str, path: str = "nb.ipynb", **overrides) -> list[str]:
    report = check(raw, path, **overrides)
    return render("concise", report.diagnostics, ReportContext(sources=report.sources)).splitlines()


def fixed(raw: str, path: str = "nb.ipynb", unsafe: bool = True) -> api.FileFix:
    (result,) = api.fix(api.Source(raw, path), settings(), unsafe=unsafe).files
    return result


_SOURCE = re.compile(r'"source":\s*(?:"(?:[^"\\]|\\.)*"|\[(?:\s*"(?:[^"\\]|\\.)*"\s*,?)*\s*\])')


def sources_of(raw: str) -> list[str]:
    """Each cell's `source` exactly as written in the JSON text (found without gpulint's reader)."""
    return _SOURCE.findall(raw)


def without_sources(raw: str) -> str:
    return _SOURCE.sub('"source": ...', raw)


# ---- IPython syntax ------------------------------------------------------------------------------

# A deprecated call right after the IPython line: found on the right row, fixed, the IPython line kept.
IPYTHON_LINES = [
    "%matplotlib inline",
    "%time x = sum(range(10))",
    "%timeit -n 3 sum(range(10))",
    "!pip install -q timm",
    "!!ls",
    "files = !ls data/",
    "a, b = %sx echo 1 2",
    "torch.cuda?",
    "torch.cuda.memory_reserved??",
    "?torch",
    "np.*load*?",
    "/print 1 2",
    ",print a b",
    ";print a b",
    "%env CUDA_VISIBLE_DEVICES=0",
]


@pytest.mark.parametrize("line", IPYTHON_LINES)
def test_ipython_lines_are_masked_and_keep_rows(line):
    raw = notebook("import torch", f"{line}\nprint(torch.cuda.memory_cached())")
    assert concise(raw) == [
        "nb.ipynb:cell 2:2:7: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"
    ]
    after = json.loads(fixed(raw).fixed)["cells"][1]["source"]
    assert after == [f"{line}\n", "print(torch.cuda.memory_reserved())"]


def test_masked_forms_inside_blocks_and_continuations():
    raw = notebook(
        """
        import torch
        for step in range(3):
            !echo step
            %time print(torch.cuda.memory_cached())
        !pip install \\
            timm
        print(torch.cuda.memory_cached())
        """
    )
    nb = Notebook.parse(raw)
    assert [(m.row, m.kind) for m in nb.regions[0].masks] == [(3, "escape"), (4, "escape"), (5, "escape"), (6, "continuation")]
    assert concise(raw) == [
        "nb.ipynb:cell 1:7:7: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"
    ]  # the `%time` statement is IPython's: not analysed, never fixed (as ruff)


def test_python_that_looks_like_ipython_is_not_masked():
    raw = notebook(
        '''
        import torch
        HELP = """
        !important: read the docs?
        %d items
        """
        total = (1
                 % 2)
        ok = torch.cuda.is_available()  # really?
        print("why?")
        print(torch.cuda.memory_cached())
        '''
    )
    nb = Notebook.parse(raw)
    assert nb.regions[0].masks == [] and nb.text.startswith(json.loads(raw)["cells"][0]["source"][0])
    assert concise(raw) == [
        "nb.ipynb:cell 1:10:7: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"
    ]


def test_cell_magics_python_bodies_are_checked_other_cells_skipped():
    deprecated = "import torch\nprint(torch.cuda.memory_cached())"
    raw = notebook(
        f"%%time\n{deprecated}",
        f"%%capture out\n{deprecated}",
        f"%%writefile train.py\n{deprecated}",
        "%%bash\nnvidia-smi",
        f"pip install timm\n{deprecated}",  # automagic: not Python
        ("markdown", ["# Notes\n", "print(torch.cuda.memory_cached())"]),
    )
    nb = Notebook.parse(raw)
    assert nb.skipped == {3: "a %%writefile cell", 4: "a %%bash cell", 5: "an automagic command"}
    assert [line.split(": GPU")[0] for line in concise(raw)] == ["nb.ipynb:cell 1:3:7", "nb.ipynb:cell 2:3:7"]


def test_a_cell_in_another_language_is_skipped():
    raw = json.loads(notebook("import torch\nprint(torch.cuda.memory_cached())", "SELECT 1"))
    raw["cells"][0]["metadata"]["vscode"] = {"languageId": "sql"}
    assert concise(json.dumps(raw)) == []


def test_names_flow_between_cells_in_order():
    raw = notebook(
        "import torch\nfrom torch.utils.data import DataLoader\ndevice = 'cuda'",
        "loader = DataLoader(make_dataset(), batch_size=2)",
        "for x in loader:\n    x = x.to(device)",
    )
    assert [line.split(" `")[0] for line in concise(raw)] == ["nb.ipynb:cell 2:1:10: GPU101", "nb.ipynb:cell 2:1:10: GPU102"]


def test_a_cell_that_ends_inside_brackets_is_skipped_without_swallowing_the_next_cells():
    raw = notebook("import torch\nx = torch.zeros((3,", "4)).cuda()", "import torch\nprint(torch.cuda.memory_cached())")
    report = check(raw)
    assert [(path, cell, why) for path, cell, why in report.skipped_cells] == [
        ("nb.ipynb", 1, "cell 1:2:16: SyntaxError: '(' was never closed"),
        ("nb.ipynb", 2, "cell 2:1:2: SyntaxError: unmatched ')'"),
    ]
    assert concise(raw) == ["nb.ipynb:cell 3:2:7: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"]
    assert sources_of(fixed(raw).fixed)[:2] == sources_of(raw)[:2]


def test_a_syntax_error_skips_its_cell_only():
    raw = notebook("import torch\ntorch.cuda.memory_cached()", "%matplotlib inline\nx = = 1")
    assert [line.split(" `")[0] for line in concise(raw)] == ["nb.ipynb:cell 1:2:1: GPU402 [*]"]
    assert check(raw).skipped_cells == [("nb.ipynb", 2, "cell 2:2:5: SyntaxError: invalid syntax")]


# ---- check: positions and every output format -------------------------------------------------------


def test_check_colab_and_kaggle_notebooks(tmp_path):
    shutil.copy(COLAB, tmp_path / "colab.ipynb")
    shutil.copy(KAGGLE, tmp_path / "kaggle.ipynb")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")  # the loop's one read shows no cost
    result = run_gpulint("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.decode().splitlines() == [
        *COLAB_FINDINGS,
        *KAGGLE_FINDINGS,
        "Found 5 errors.",
        "[*] 2 fixable with the `gpulint fix --apply` command (2 hidden fixes can be enabled with the `--unsafe-fixes` option).",
    ]


def test_full_format_quotes_the_cell_line():
    report = check(COLAB.read_text(encoding="utf-8"), "colab.ipynb")
    text = render("full", report.diagnostics[2:], ReportContext(sources=report.sources))
    assert text == textwrap.dedent(
        """\
        GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`
         --> colab.ipynb:cell 11:1:10
          |
        1 | print(f"{torch.cuda.memory_cached() / 2**20:.0f} MiB held by the caching allocator")
          |          ^^^^^^^^^^^^^^^^^^^^^^^^
          |
        help: Replace with `memory_reserved`

        """
    )


def test_grouped_and_pylint_formats_name_the_cell():
    report = check(KAGGLE.read_text(encoding="utf-8"), "kaggle.ipynb")
    context = ReportContext(sources=report.sources)
    assert render("pylint", report.diagnostics, context).splitlines() == [
        "kaggle.ipynb:cell 4:11: [GPU102] " + report.diagnostics[0].message,
        "kaggle.ipynb:cell 6:10: [GPU303] " + report.diagnostics[1].message,
    ]
    grouped = render("grouped", report.diagnostics, context).splitlines()
    assert grouped[:2] == ["kaggle.ipynb:", "  cell 4:11:10 GPU102 [*] " + report.diagnostics[0].message]
    assert grouped[2] == "  cell 6:10:20 GPU303 " + report.diagnostics[1].message


def test_json_carries_the_cell_and_rows_within_it():
    report = check(COLAB.read_text(encoding="utf-8"), "colab.ipynb")
    records = json.loads(render("json", report.diagnostics, ReportContext(sources=report.sources)))
    deprecated = records[2]
    assert (deprecated["cell"], deprecated["location"], deprecated["end_location"], deprecated["noqa_row"]) == (
        11,
        {"row": 1, "column": 10},
        {"row": 1, "column": 34},
        1,
    )
    assert deprecated["fix"]["edits"] == [
        {"content": "reserv", "location": {"row": 1, "column": 28}, "end_location": {"row": 1, "column": 32}}
    ]
    loader = records[0]
    assert (loader["cell"], loader["location"]) == (5, {"row": 14, "column": 16})
    # The fix's `import os` goes after the imports of cell 3: ruff's shape, edits in their own cell's rows.
    assert [e["location"] for e in loader["fix"]["edits"]][-1] == {"row": 3, "column": 49}
    lines = render("json-lines", report.diagnostics, ReportContext(sources=report.sources)).splitlines()
    assert [json.loads(line)["cell"] for line in lines] == [5, 5, 11]
    python = check("import torch\nprint(torch.cuda.memory_cached())\n", "train.py")
    assert json.loads(render("json", python.diagnostics, ReportContext()))[0]["cell"] is None


def test_sarif_points_into_the_notebook_file_and_names_the_cell(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    shutil.copy(COLAB, tmp_path / "colab.ipynb")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    result = run_gpulint("check", "--no-cache", "--output-format", "sarif", "colab.ipynb", cwd=tmp_path)
    log = json.loads(result.stdout)
    schema = json.loads((REPO / "tests" / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
    jsonschema.Draft4Validator(schema).validate(log)
    file_lines = COLAB.read_text(encoding="utf-8").splitlines()
    deprecated = log["runs"][0]["results"][2]
    location = deprecated["locations"][0]
    region = location["physicalLocation"]["region"]
    assert location["physicalLocation"]["artifactLocation"] == {"uri": "colab.ipynb", "uriBaseId": "%SRCROOT%"}
    assert location["properties"] == {"cell": 11, "cellRegion": {"startLine": 1, "startColumn": 10, "endLine": 1, "endColumn": 34}}
    line = file_lines[region["startLine"] - 1]
    assert line[region["startColumn"] - 1 : region["endColumn"] - 1] == "torch.cuda.memory_cached"
    assert "fixes" not in deprecated  # an edit of the JSON text would have to re-escape the code


def test_github_annotations_point_at_the_notebook_file(tmp_path):
    shutil.copy(KAGGLE, tmp_path / "kaggle.ipynb")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    result = run_gpulint("check", "--no-cache", "--output-format", "github", "kaggle.ipynb", cwd=tmp_path)
    first = result.stdout.decode().splitlines()[0]
    path = str(tmp_path / "kaggle.ipynb").replace(":", "%3A")
    assert first.startswith(f"::warning title=gpulint (GPU102),file={path},line=1,col=")
    assert "::kaggle.ipynb:cell 4:11:10: GPU102 `DataLoader` has no `pin_memory`" in first
    assert first.endswith("%0A  help: Set `pin_memory=torch.cuda.is_available()`")
    column = int(re.search(r",col=(\d+),", first).group(1))
    assert KAGGLE.read_text(encoding="utf-8")[column - 1 :].startswith("DataLoader(TensorDataset(")


def test_gitlab_and_junit_positions(tmp_path):
    shutil.copy(COLAB, tmp_path / "colab.ipynb")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    gitlab = json.loads(run_gpulint("check", "--no-cache", "--output-format", "gitlab", "colab.ipynb", cwd=tmp_path).stdout)
    begin = gitlab[2]["location"]["positions"]["begin"]
    assert COLAB.read_text(encoding="utf-8").splitlines()[begin["line"] - 1][begin["column"] - 1 :].startswith("torch.cuda.memory_cached()")
    junit = run_gpulint("check", "--no-cache", "--output-format", "junit", "colab.ipynb", cwd=tmp_path).stdout.decode()
    assert "cell 11, line 1, col 10, GPU402 `torch.cuda.memory_cached` is deprecated" in junit
    assert f'line="{begin["line"]}" column="{begin["column"]}"' in junit


# ---- fix ---------------------------------------------------------------------------------------------


# The notebooks' loaders copy batches whose bytes the code does not show: GPU105 reports those with `unproven-cost`.


def test_fix_shows_a_diff_per_cell(tmp_path):
    shutil.copy(KAGGLE, tmp_path / "kaggle.ipynb")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    result = run_gpulint("fix", "--unsafe-fixes", "kaggle.ipynb", cwd=tmp_path)
    assert result.returncode == 1
    diff = [
        "--- kaggle.ipynb:cell 4",
        "+++ kaggle.ipynb:cell 4",
        "@@ -8,4 +8,4 @@",
        " ",
        " features = torch.randn(8192, 20)",
        " targets = (features.sum(dim=1) > 0).long()",
        "-loader = DataLoader(TensorDataset(features, targets), batch_size=BATCH_SIZE, shuffle=True, num_workers=NUM_WORKERS)",
        "+loader = DataLoader(TensorDataset(features, targets), batch_size=BATCH_SIZE, shuffle=True, num_workers=NUM_WORKERS, pin_memory=torch.cuda.is_available())",
        "--- kaggle.ipynb:cell 6",
        "+++ kaggle.ipynb:cell 6",
        "@@ -2,7 +2,7 @@",
        " for epoch in range(3):",
        "     running = 0.0",
        "     for x, y in loader:",
        "-        x, y = x.to(device), y.to(device)",
        "+        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)",
        "         optimizer.zero_grad()",
        "         loss = loss_fn(model(x), y)",
        "         loss.backward()",
    ]
    assert result.stdout.decode().splitlines() == diff
    assert result.stderr.decode() == "Would fix 3 errors.\n"
    assert (tmp_path / "kaggle.ipynb").read_bytes() == KAGGLE.read_bytes()


@pytest.mark.parametrize("fixture", [COLAB, KAGGLE], ids=["colab", "kaggle"])
def test_fix_apply_changes_only_the_sources_of_fixed_cells(tmp_path, fixture):
    target = tmp_path / fixture.name
    shutil.copy(fixture, target)
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    result = run_gpulint("fix", "--apply", "--unsafe-fixes", fixture.name, cwd=tmp_path)
    assert result.returncode == (0 if fixture is COLAB else 1)  # GPU303 remains in the Kaggle one: no fix
    before, after = fixture.read_text(encoding="utf-8"), target.read_text(encoding="utf-8")
    # Outputs (with the image), execution counts, metadata, ids, indentation, key order, final newline: the same bytes.
    assert without_sources(after) == without_sources(before)
    changed = [i for i, (a, b) in enumerate(zip(sources_of(before), sources_of(after))) if a != b]
    assert changed == ([2, 4, 8, 10] if fixture is COLAB else [3, 5])  # 0-based cell indexes
    for old, new in zip(json.loads(before)["cells"], json.loads(after)["cells"]):
        assert type(old["source"]) is type(new["source"])  # a list stays a list, a string a string
    again = run_gpulint("fix", "--apply", "--unsafe-fixes", fixture.name, cwd=tmp_path)
    assert target.read_text(encoding="utf-8") == after and "(0 fixed," in again.stdout.decode()


def test_fixed_colab_cells(unproven_cost):
    result = fixed(COLAB.read_text(encoding="utf-8"), "colab.ipynb")
    cells = json.loads(result.fixed)["cells"]
    assert cells[2]["source"][3:5] == ["import os\n", "%matplotlib inline\n"]
    assert cells[4]["source"][13] == (
        "train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=min(8, max(1, "
        '(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2) - 1)), '
        "pin_memory=torch.cuda.is_available())\n"
    )  # no `persistent_workers`: the loop runs two epochs, so GPU104 is silent once the workers are there
    assert cells[8]["source"][0] == "%%time\n"
    assert cells[8]["source"][3] == "        images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)\n"
    assert cells[10]["source"] == ['print(f"{torch.cuda.memory_reserved() / 2**20:.0f} MiB held by the caching allocator")']
    assert dict(result.fixes) == {"GPU101": 1, "GPU102": 1, "GPU105": 2, "GPU402": 1}
    assert result.remaining == []


def test_final_newline_and_layout_of_a_jupyter_written_notebook_are_kept():
    raw = notebook("import torch", "print(torch.cuda.memory_cached())")
    after = fixed(raw).fixed
    assert after == raw.replace("memory_cached", "memory_reserved") and after.endswith("}\n")
    compact = json.dumps(json.loads(raw), separators=(",", ":"))  # no final newline
    assert fixed(compact).fixed == compact.replace("memory_cached", "memory_reserved")


def test_a_new_line_in_a_one_line_cell_follows_the_notebooks_layout():
    raw = notebook("import torch\nfrom torch.utils.data import DataLoader", "loader = DataLoader(range(8), batch_size=2)\nfor x in loader:\n    x.cuda()")
    after = fixed(raw).fixed
    assert '   "source": [\n    "import torch\\n",\n    "from torch.utils.data import DataLoader\\n",\n    "import os"\n   ]' in after


def test_a_notebook_without_fixes_is_never_rewritten(tmp_path):
    target = tmp_path / "clean.ipynb"
    target.write_text(notebook("import torch", "print(torch.cuda.memory_reserved())"), encoding="utf-8")
    before = os.stat(target)
    result = run_gpulint("fix", "--apply", "clean.ipynb", cwd=tmp_path)
    after = os.stat(target)
    assert result.returncode == 0 and result.stdout.decode() == "Found 0 errors (0 fixed, 0 remaining).\n"
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_check_fix_writes_the_notebook_too(tmp_path):
    target = tmp_path / "nb.ipynb"
    target.write_text(notebook("import torch", "print(torch.cuda.memory_cached())"), encoding="utf-8")
    assert run_gpulint("check", "--fix", "nb.ipynb", cwd=tmp_path).returncode == 0
    assert json.loads(target.read_text(encoding="utf-8"))["cells"][1]["source"] == ["print(torch.cuda.memory_reserved())"]


def test_a_fix_that_reaches_into_masked_text_is_refused():
    nb = Notebook.parse(notebook("import torch\n!pip install timm", "print(1)"))
    assert nb.cell_sources(nb.text) == {1: "import torch\n!pip install timm", 2: "print(1)"}
    placeholder = nb.regions[0].masks[0].placeholder
    for broken, message in [
        (nb.text.replace(placeholder, "x = 1  " + placeholder), "a fix changed an IPython line"),
        (nb.text.replace(placeholder + "\n", ""), "a fix removed an IPython line"),
        (nb.text.replace(f"#{nb.marker}cell 1\n", ""), "a fix moved a cell boundary"),
    ]:
        with pytest.raises(NotebookError, match=message):
            nb.rewrite(broken)


# ---- GPU101 in a notebook --------------------------------------------------------------------------

LOADER_AT_TOP = """
import torch
from torch.utils.data import DataLoader, Dataset
from torchvision.datasets import ImageFolder

class Squares(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return torch.load("squares/%d.pt" % i)

loader = DataLoader({dataset}, batch_size=8)
for batch in loader:
    batch.cuda()
"""


def test_gpu101_in_a_script_without_a_main_guard_offers_no_fix():
    (d,) = [d for d in check(LOADER_AT_TOP.format(dataset="Squares()"), "train.py").diagnostics if d.code == "GPU101"]
    assert d.help.endswith('; put the script under `if __name__ == "__main__":` before adding workers') and d.fix is None


def test_gpu101_in_a_notebook_says_what_workers_need_and_fixes():
    raw = notebook(LOADER_AT_TOP.format(dataset="Squares()"))
    (d,) = [d for d in check(raw).diagnostics if d.code == "GPU101"]
    assert d.message == "`DataLoader` has no `num_workers`: batches load in the training process"
    assert d.help == (
        "The GPU waits while the training process loads each batch; "
        "workers can use `Squares` (defined in the notebook) only when they start by `fork` (Linux before "
        "Python 3.14): under `spawn` (macOS, Windows) move it into a module and import it"
    )
    assert d.fix is not None and d.fix.applicability.value == "unsafe"
    with_collate = notebook(LOADER_AT_TOP.format(dataset="Squares(), collate_fn=stack").replace("loader =", "def stack(b):\n    return b\n\nloader ="))
    (d,) = [d for d in check(with_collate).diagnostics if d.code == "GPU101"]
    assert "workers can use `Squares` and `stack` (defined in the notebook)" in d.help
    assert d.help.endswith("move them into a module and import them")
    (d,) = [d for d in check(notebook(LOADER_AT_TOP.format(dataset="ImageFolder('images')"))).diagnostics if d.code == "GPU101"]
    assert d.help == (  # nothing of the notebook's to unpickle; GPU102's `pin_memory` advice comes with it (loader_bound.py)
        "The GPU waits while the training process loads each batch; with workers, also set `pin_memory=True` so that "
        "they pin the batches for the GPU copy"
    )
    assert d.fix is not None


# ---- suppression ---------------------------------------------------------------------------------


def test_noqa_and_ignore_comments_inside_cells():
    raw = notebook(
        "import torch\n%matplotlib inline",
        "print(torch.cuda.memory_cached())  # noqa: GPU402",
        "# gpulint: ignore[GPU402]\nprint(torch.cuda.memory_cached())\n# gpulint: ignore[GPU402]",
        "print(torch.cuda.memory_cached())",
    )
    # The own-line ignore closing cell 3 does not reach the first line of cell 4.
    assert [line.split(": GPU")[0] for line in concise(raw)] == ["nb.ipynb:cell 4:1:7"]
    assert concise(raw.replace('"import torch\\n"', '"# gpulint: noqa\\n", "import torch\\n"')) == []


def test_a_notebook_exported_without_its_nbformat_key_is_read_as_nbformat_4():
    # Bento exports keep only metadata.orig_nbformat; the `cells` list is nbformat 4's layout.
    versioned = notebook("import torch", "print(torch.cuda.memory_cached())")
    data = json.loads(versioned)
    del data["nbformat"], data["nbformat_minor"]
    data["metadata"] = {"orig_nbformat": 4}
    raw = json.dumps(data, indent=1) + "\n"
    assert concise(raw) == concise(versioned) != []
    result = fixed(raw)
    assert "nbformat" not in json.loads(result.fixed) and result.fixed != raw
    assert json.loads(result.fixed)["cells"][1]["source"] == json.loads(fixed(versioned).fixed)["cells"][1]["source"]


def test_add_noqa_writes_comments_into_the_cells(tmp_path):
    target = tmp_path / "kaggle.ipynb"
    shutil.copy(KAGGLE, target)
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    result = run_gpulint("check", "--add-noqa", "kaggle.ipynb", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr.decode().endswith("Added 2 noqa directives.\n")
    after = target.read_text(encoding="utf-8")
    assert without_sources(after) == without_sources(KAGGLE.read_text(encoding="utf-8"))
    cells = json.loads(after)["cells"]
    assert cells[3]["source"].splitlines()[-1].endswith("num_workers=NUM_WORKERS)  # noqa: GPU102")
    assert cells[5]["source"].splitlines()[9] == "        running += loss.item()  # noqa: GPU303"
    assert run_gpulint("check", "kaggle.ipynb", cwd=tmp_path).returncode == 0


# ---- bad input -----------------------------------------------------------------------------------

BAD = [
    ('{"cells": [\n  {"cell_type": "code",}\n]}', "bad.ipynb:2:24: io-error: not valid JSON: Expecting property name enclosed in double quotes"),
    ('{"nbformat": 3, "nbformat_minor": 0, "worksheets": []}', "bad.ipynb:1:1: io-error: nbformat 3 notebooks are not supported; upgrade it to nbformat 4 (open and save it in Jupyter, or `jupyter nbconvert --to notebook --inplace NOTEBOOK`)"),
    (notebook("x = 1", nbformat=5), "bad.ipynb:1:1: io-error: nbformat 5 is newer than the nbformat 4 gpulint reads"),
    ("[1, 2]", "bad.ipynb:1:1: io-error: not a Jupyter notebook: the JSON holds a list, not an object"),
    ('{"cells": {}, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}', "bad.ipynb:1:1: io-error: not a Jupyter notebook: `cells` must be a list, not an object"),
    ('{"metadata": {}, "nbformat": 4, "nbformat_minor": 5}', "bad.ipynb:1:1: io-error: not a Jupyter notebook: `cells` must be a list"),
    ('{"metadata": {}}', "bad.ipynb:1:1: io-error: not a Jupyter notebook: no `nbformat` version"),
    ('{"worksheets": [], "cells": [], "metadata": {}}', "bad.ipynb:1:1: io-error: not a Jupyter notebook: no `nbformat` version"),
    ('{"cells": [{"cell_type": "code", "source": 7}], "nbformat": 4}', "bad.ipynb:1:1: io-error: cell 1: `source` must be a string or a list of strings, not a number"),
    ('{"cells": [{"cell_type": "code", "source": null}], "nbformat": 4}', "bad.ipynb:1:1: io-error: cell 1: `source` must be a string or a list of strings, not null"),
    ('{"cells": [{"cell_type": "code", "source": ["x = 1\\n", 2]}], "nbformat": 4}', "bad.ipynb:1:1: io-error: cell 1: `source` must be a string or a list of strings, not a list holding a number"),
    ('{"cells": [{"source": ""}], "nbformat": 4}', "bad.ipynb:1:1: io-error: cell 1 has no `cell_type`"),
    ('{"cells": [{"cell_type": "code"}], "nbformat": 4}', "bad.ipynb:1:1: io-error: cell 1 has no `source`"),
    ('{"cells": ["x = 1"], "nbformat": 4}', "bad.ipynb:1:1: io-error: cell 1 is a string, not an object"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m.split("io-error: ")[1][:40] for _, m in BAD])
def test_bad_notebooks_get_a_clear_message_and_are_never_written(tmp_path, text, message):
    target = tmp_path / "bad.ipynb"
    target.write_text(text, encoding="utf-8")
    result = run_gpulint("check", "--no-cache", "--output-format", "concise", "bad.ipynb", cwd=tmp_path)
    assert (result.returncode, result.stdout.decode().splitlines()[0]) == (1, message)
    result = run_gpulint("fix", "--apply", "--unsafe-fixes", "--output-format", "concise", "bad.ipynb", cwd=tmp_path)
    assert (result.returncode, result.stdout.decode().splitlines()[0]) == (1, message)
    assert target.read_text(encoding="utf-8") == text


def test_undecodable_notebook(tmp_path):
    (tmp_path / "bad.ipynb").write_bytes(b'{"cells": ["caf\xe9"], "nbformat": 4}')
    result = run_gpulint("check", "--no-cache", "--output-format", "concise", "bad.ipynb", cwd=tmp_path)
    assert result.stdout.decode().startswith("bad.ipynb:1:1: io-error: cannot decode as utf-8: invalid byte at offset 15")


def test_lenient_where_jupyter_is():
    # A string source (nbformat allows it), a markdown cell with an odd source, no metadata, a BOM.
    raw = '\ufeff{"cells": [{"cell_type": "markdown", "source": 7}, {"cell_type": "code", "source": "import torch\\nprint(torch.cuda.memory_cached())"}], "nbformat": 4, "nbformat_minor": 0}'
    source = api.Source.from_bytes(raw.encode("utf-8"), "nb.ipynb")
    report = api.check(source, settings())
    assert [d.code for d in report.diagnostics] == ["GPU402"]
    (result,) = api.fix(source, settings()).files
    assert result.fixed_bytes() == raw.replace("memory_cached", "memory_reserved").encode("utf-8")


def test_a_notebook_in_another_language_is_skipped_and_said(tmp_path):
    kernel = {"kernelspec": {"display_name": "R", "language": "R", "name": "ir"}, "language_info": {"name": "R"}}
    (tmp_path / "analysis.ipynb").write_text(notebook("library(torch)\nx <- torch_randn(3)$cuda()", metadata=kernel), encoding="utf-8")
    for command in (["check", "--no-cache"], ["fix", "--apply"]):
        result = run_gpulint(*command, "analysis.ipynb", cwd=tmp_path)
        assert result.returncode == 0
        assert result.stderr.decode().startswith("gpulint: warning: analysis.ipynb: skipped: the notebook's kernel runs R, not Python\n")


# ---- which files, the cache, workers, stdin, the API -------------------------------------------------


def test_folders_are_walked_for_notebooks_and_config_turns_them_off(tmp_path):
    raw = notebook("import torch", "print(torch.cuda.memory_cached())")
    (tmp_path / "nb.ipynb").write_text(raw, encoding="utf-8")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "nb-checkpoint.ipynb").write_text(raw, encoding="utf-8")
    (tmp_path / "tool.pyw").write_text("import torch\nprint(torch.cuda.memory_cached())\n", encoding="utf-8")

    def found(*args: str) -> list[str]:
        result = run_gpulint("check", "--no-cache", "--output-format", "concise", *args, cwd=tmp_path)
        return [line.split(":")[0] for line in result.stdout.decode().splitlines() if ": GPU" in line]

    assert found(".") == ["nb.ipynb"]
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.gpulint]\nextend-exclude = ["*.ipynb"]\n', encoding="utf-8")
    assert found(".") == [] and found("nb.ipynb") == ["nb.ipynb"]  # named on the command line: checked anyway
    assert found("--force-exclude", "nb.ipynb") == []
    pyproject.write_text('[tool.gpulint]\ninclude = ["*.py"]\nextend-include = ["*.pyw"]\n', encoding="utf-8")
    assert found(".") == ["tool.pyw"]


def test_the_cache_answers_for_notebooks(tmp_path):
    target = tmp_path / "nb.ipynb"
    target.write_text(notebook("import torch", "print(torch.cuda.memory_cached())"), encoding="utf-8")
    first = run_gpulint("check", "--output-format", "concise", "nb.ipynb", cwd=tmp_path).stdout
    assert any((tmp_path / ".gpulint_cache").rglob("*.json"))
    assert run_gpulint("check", "--output-format", "concise", "nb.ipynb", cwd=tmp_path).stdout == first
    assert first.decode().startswith("nb.ipynb:cell 2:1:7: GPU402")
    target.write_text(notebook("import torch", "x = 1", "print(torch.cuda.memory_cached())"), encoding="utf-8")
    assert run_gpulint("check", "--output-format", "concise", "nb.ipynb", cwd=tmp_path).stdout.decode().startswith("nb.ipynb:cell 3:1:7")


def test_worker_processes_give_the_same_report(tmp_path):
    for i in range(24):  # enough files for the process pool
        shutil.copy(KAGGLE if i % 2 else COLAB, tmp_path / f"nb{i:02}.ipynb")
        (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")
    serial = run_gpulint("check", "--no-cache", "-j", "1", "--output-format", "json", ".", cwd=tmp_path)
    parallel = run_gpulint("check", "--no-cache", "-j", "2", "--output-format", "json", ".", cwd=tmp_path)
    assert serial.stdout == parallel.stdout and len(json.loads(serial.stdout)) == 60


def test_stdin_notebook_check_and_fix(tmp_path):
    data = KAGGLE.read_bytes()
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")  # the loop's one read shows no cost
    result = run_gpulint("check", "--output-format", "concise", "--stdin-filename", "kaggle.ipynb", cwd=tmp_path, stdin=data)
    assert result.stdout.decode().splitlines()[:2] == KAGGLE_FINDINGS
    result = run_gpulint("fix", "--unsafe-fixes", "--stdin-filename", "kaggle.ipynb", "-", cwd=tmp_path, stdin=data)
    out = json.loads(result.stdout)
    assert "pin_memory=torch.cuda.is_available()" in out["cells"][3]["source"]
    assert result.stderr.decode().splitlines()[0].startswith("kaggle.ipynb:cell 6:10:20: GPU303 `loss.item()`")


def test_library_api_on_a_notebook():
    report = api.check(api.Source(COLAB.read_text(encoding="utf-8"), "colab.ipynb"), settings())
    notebook_view = report.sources["colab.ipynb"]
    assert isinstance(notebook_view, Notebook)
    d = report.diagnostics[2]
    assert notebook_view.cell_location(d.location) == (11, Location(1, 10))
    assert notebook_view.label(d.location) == "cell 11:1:10"
    (result,) = api.fix(api.Source(COLAB.read_text(encoding="utf-8"), "colab.ipynb"), settings()).files
    assert result.diff().startswith("--- colab.ipynb:cell 11\n+++ colab.ipynb:cell 11\n@@ -1 +1 @@\n")
    assert json.loads(result.fixed)["cells"][10]["source"][0].startswith('print(f"{torch.cuda.memory_reserved()')


def test_readme_and_docs_show_real_output():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ gpulint check --output-format concise fixtures/notebooks/\n", 1)[1].split("```", 1)[0]
    assert run_gpulint("check", "--no-cache", "--output-format", "concise", "fixtures/notebooks/").stdout.decode() == block
    docs = (REPO / "docs" / "notebooks.md").read_text(encoding="utf-8")
    block = docs.split("$ gpulint fix fixtures/notebooks/colab_classifier.ipynb\n", 1)[1].split("```", 1)[0]
    assert run_gpulint("fix", "fixtures/notebooks/colab_classifier.ipynb").stdout.decode() == block


@pytest.mark.parametrize("ensure_ascii", [True, False], ids=["escaped", "utf-8"])
def test_file_positions_count_through_json_escapes(ensure_ascii):
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": 1,
              "source": ["import torch\n", 'label = "caf\u00e9 \\"GPU\\"\\t"; print(torch.cuda.memory_cached())']}]  # fmt: skip
    raw = json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1, ensure_ascii=ensure_ascii)
    report = check(raw)
    (d,) = report.diagnostics
    nb = report.sources["nb.ipynb"]
    start, end = nb.file_location(d.location), nb.file_location(d.end_location)
    line = raw.splitlines()[start.row - 1]
    assert line[start.column - 1 : end.column - 1] == "torch.cuda.memory_cached"
    assert nb.cell_location(d.location) == (1, Location(2, 33))
