"""Superseded copies kept in a repository (issue 13, thirteenth corpus N12): BiSeNet keeps its original
implementation in `old/` beside the refactored `tools/` that runs. A module in a folder named `old`,
`deprecated` or `obsolete` that nothing outside the folder imports is not reported (`analysis/superseded_code.py`);
the same folder imported by the training script, a file named `old_utils.py`, and `legacy/` / `legacy_models/`
folders stay reported. Minimal projects of our own."""

from __future__ import annotations

from tests.projects_helper import lint_written

TRAIN = """\
    import torch
    from torch.utils.data import DataLoader
    {extra}

    def main(dataset):
        model = torch.nn.Linear(784, 10).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in DataLoader(dataset, batch_size=256, num_workers=4):
            loss = model(x.cuda(non_blocking=True)).sum()  # no sync point before the read (step_syncs)
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(loss.item())
"""
LOADER = 8  # GPU102: the loader without pin_memory whose batches are copied
READ = 13  # GPU303: loss.item() every step


def _codes(findings: list[str], name: str) -> list[str]:
    return sorted(f.split(" ")[1] + "@" + f.split(":")[1].split(" ")[0] for f in findings if f.startswith(name + ":"))


def _project(tmp_path, monkeypatch, **files: str) -> list[str]:
    return lint_written(tmp_path, {name.replace("__", "/") + ".py": text for name, text in files.items()}, monkeypatch)


def test_an_old_copy_nothing_imports_is_not_reported(tmp_path, monkeypatch):
    findings = _project(
        tmp_path, monkeypatch, tools__train=TRAIN.format(extra=""), old__train=TRAIN.format(extra=""),
        old__fp16__train=TRAIN.format(extra="from old.train import main as _"),
    )
    assert _codes(findings, "tools/train.py") == [f"GPU102@{LOADER}", f"GPU303@{READ}"]
    assert _codes(findings, "old/train.py") == []  # imported only from inside old/
    assert _codes(findings, "old/fp16/train.py") == []


def test_deprecated_and_obsolete_folders_are_superseded_too(tmp_path, monkeypatch):
    findings = _project(
        tmp_path, monkeypatch, train=TRAIN.format(extra=""), src__deprecated__train=TRAIN.format(extra=""),
        Obsolete__train=TRAIN.format(extra=""),
    )
    assert _codes(findings, "train.py") == [f"GPU102@{LOADER}", f"GPU303@{READ}"]
    assert _codes(findings, "src/deprecated/train.py") == [] and _codes(findings, "Obsolete/train.py") == []


def test_a_tmp_folder_of_scratch_drafts_is_superseded_unless_imported(tmp_path, monkeypatch):
    findings = _project(
        tmp_path, monkeypatch, chapter12__pong=TRAIN.format(extra=""), chapter12__tmp__pong_draft=TRAIN.format(extra=""),
        tmp__loop=TRAIN.format(extra=""), train=TRAIN.format(extra="from tmp.loop import main as run; run(None)"),
    )
    assert _codes(findings, "chapter12/pong.py") == [f"GPU102@{LOADER}", f"GPU303@{READ}"]
    assert _codes(findings, "chapter12/tmp/pong_draft.py") == []
    assert _codes(findings, "tmp/loop.py") == [f"GPU102@{LOADER}", f"GPU303@{READ}"]  # the training script runs it


def test_an_old_folder_the_training_script_imports_is_reported(tmp_path, monkeypatch):
    findings = _project(
        tmp_path, monkeypatch, train=TRAIN.format(extra="from old.loop import main as run; run(None)"),
        old__loop=TRAIN.format(extra=""), old__helpers=TRAIN.format(extra=""),
    )
    assert _codes(findings, "old/loop.py") == [f"GPU102@{LOADER}", f"GPU303@{READ}"]
    assert _codes(findings, "old/helpers.py") == [f"GPU102@{LOADER}", f"GPU303@{READ}"]  # the folder runs


def test_names_that_do_not_say_replaced_stay_reported(tmp_path, monkeypatch):
    findings = _project(
        tmp_path, monkeypatch, train=TRAIN.format(extra="from legacy_models.net import main as run; run(None)"),
        old_utils=TRAIN.format(extra=""), legacy__tutorial=TRAIN.format(extra=""),
        legacy_models__net=TRAIN.format(extra=""), retired_benchmarks__ssd__train=TRAIN.format(extra=""),
        holder__train=TRAIN.format(extra=""),
    )
    for name in ("old_utils.py", "legacy/tutorial.py", "legacy_models/net.py", "retired_benchmarks/ssd/train.py"):
        assert _codes(findings, name) == [f"GPU102@{LOADER}", f"GPU303@{READ}"], name


def test_a_project_root_named_old_is_not_superseded(tmp_path, monkeypatch):
    root = tmp_path / "old"
    root.mkdir()
    findings = _project(root, monkeypatch, train=TRAIN.format(extra=""))
    assert _codes(findings, "train.py") == [f"GPU102@{LOADER}", f"GPU303@{READ}"]


# ---- documentation copies (sixteenth corpus: sphinx-gallery copies of example scripts in docs/) ----------------

SCRIPT = '''\
"""
A tutorial
==========
Its text, a text cell of the generated notebook.
"""
import torch
from torch.utils.data import DataLoader

# %%
# Train the model.


def main(dataset):
    model = torch.nn.Linear(784, 10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(dataset, batch_size=256, num_workers=4):
        loss = model(x.cuda(non_blocking=True)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(loss.item())
'''
SCRIPT_LOADER, SCRIPT_READ = 16, 21


def _notebook(script: str) -> str:
    """The notebook sphinx-gallery makes of `script`: its docstring and comment blocks as text cells."""
    import json

    code = script.split('"""\n', 2)[2].replace("# %%\n# Train the model.\n", "")
    first, second = code.split("\n\n\ndef ")
    cells = [{"cell_type": "markdown", "metadata": {}, "source": ["A tutorial"]}]
    cells += [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": [s]} for s in (first, "def " + second)]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def test_a_documentation_copy_of_a_script_is_not_reported(tmp_path, monkeypatch):
    (tmp_path / "docs" / "tutorials").mkdir(parents=True)
    (tmp_path / "docs" / "tutorials" / "tutorial.ipynb").write_text(_notebook(SCRIPT), encoding="utf-8")
    findings = lint_written(tmp_path, {"examples/tutorial.py": SCRIPT, "docs/tutorials/tutorial.py": SCRIPT}, monkeypatch)
    assert _codes(findings, "examples/tutorial.py") == [f"GPU102@{SCRIPT_LOADER}", f"GPU303@{SCRIPT_READ}"]
    assert _codes(findings, "docs/tutorials/tutorial.py") == []  # the same file, built into the documentation
    assert not any(f.startswith("docs/tutorials/tutorial.ipynb") for f in findings)  # its generated notebook


def test_documentation_code_of_its_own_is_reported(tmp_path, monkeypatch):
    edited = SCRIPT.replace("batch_size=256", "batch_size=512")  # not a copy: a tutorial written in docs/
    findings = lint_written(tmp_path, {"examples/tutorial.py": SCRIPT, "docs/tutorials/tutorial.py": edited}, monkeypatch)
    assert _codes(findings, "docs/tutorials/tutorial.py") == [f"GPU102@{SCRIPT_LOADER}", f"GPU303@{SCRIPT_READ}"]
    # two copies outside documentation folders are both the project's code: each is reported
    findings = lint_written(tmp_path / "p2", {"a/tutorial.py": SCRIPT, "b/tutorial.py": SCRIPT}, monkeypatch)
    assert _codes(findings, "a/tutorial.py") == _codes(findings, "b/tutorial.py") == [f"GPU102@{SCRIPT_LOADER}", f"GPU303@{SCRIPT_READ}"]
