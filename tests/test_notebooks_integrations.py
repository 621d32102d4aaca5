"""Notebooks through the real integrations: pre-commit's hooks (`types_or` includes `jupyter`) and the
profiler, which runs a notebook as a script of its code cells (as `jupyter nbconvert --to script` orders it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpulint.notebook import NotebookError, script_of
from tests.conftest import FIXTURES, REPO, run_gpulint
from tests.test_integrations_precommit import _git, _hook_section, _try_repo, hook_repo  # noqa: F401 - a fixture
from tests.test_notebooks import notebook

COLAB = FIXTURES / "notebooks" / "colab_classifier.ipynb"


# ---- pre-commit ----------------------------------------------------------------------------------


@pytest.fixture
def notebook_repo(tmp_path: Path) -> Path:
    shutil.copy(COLAB, tmp_path / "train.ipynb")
    (tmp_path / "stats.ipynb").write_text(notebook("import torch", "print(torch.cuda.memory_cached())"), encoding="utf-8")
    _git("init", "-q", cwd=tmp_path)
    _git("add", "-A", cwd=tmp_path)
    _git("commit", "-q", "-m", "notebooks", cwd=tmp_path)
    return tmp_path


@pytest.mark.slow
@pytest.mark.network
def test_pre_commit_hooks_check_and_fix_notebooks(hook_repo, notebook_repo, tmp_path_factory):  # noqa: F811
    home = tmp_path_factory.mktemp("home")
    code, out = _try_repo(hook_repo, "gpulint", "train.ipynb", cwd=notebook_repo, home=home)
    section = _hook_section(out)
    assert code == 1 and "Failed\n- hook id: gpulint\n- exit code: 1\n" in section, out
    assert " --> train.ipynb:cell 5:14:16" in section and " --> train.ipynb:cell 11:1:10" in section

    before = (notebook_repo / "stats.ipynb").read_text(encoding="utf-8")
    code, out = _try_repo(hook_repo, "gpulint-fix", "stats.ipynb", cwd=notebook_repo, home=home)
    assert code == 1 and "- files were modified by this hook" in _hook_section(out), out
    assert (notebook_repo / "stats.ipynb").read_text(encoding="utf-8") == before.replace("memory_cached", "memory_reserved")
    code, out = _try_repo(hook_repo, "gpulint-fix", "stats.ipynb", cwd=notebook_repo, home=home)
    assert code == 0 and _hook_section(out).endswith("Passed"), out


# ---- the profiler --------------------------------------------------------------------------------


def test_a_notebook_as_a_script():
    script = script_of(COLAB)
    assert script.splitlines()[0] == (
        f"__import__('sys').path.insert(0, {str(COLAB.parent)!r}); __import__('os').chdir({str(COLAB.parent)!r})  # as Jupyter runs it"
    )
    body = script.split("# %% cell 2\n", 1)[1]
    assert body.startswith("\n# %% cell 3\nimport torch\nimport torch.nn as nn\nfrom torch.utils.data import DataLoader, Dataset\n\n\ndevice")
    assert "# %% cell 9\n\nfor epoch in range(2):\n" in body  # the %%time body runs; %%bash (cell 10) is left out
    assert "nvidia-smi" not in body and "NoisyShapes?" not in body
    compile(script, "colab.py", "exec")


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (["%cd data", "x = 1"], "cell 1:1 `%cd data` changes what later cells see"),
        (["%env CUDA_VISIBLE_DEVICES=1"], "cell 1:1 `%env CUDA_VISIBLE_DEVICES=1` changes what later cells see"),
        (["files = !ls"], "cell 1:1 assigns the output of an IPython command (`files = !ls`)"),
        (["%%writefile model.py\nimport torch", "from model import torch"], "cell 1 is a %%writefile cell, which a script cannot run"),
        (["x = (1,"], "cell 1:1:5: SyntaxError: '(' was never closed"),
    ],
)
def test_notebooks_that_are_not_scripts_are_refused(tmp_path, cells, message):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(*cells), encoding="utf-8")
    with pytest.raises(NotebookError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        script_of(path)
    result = run_gpulint("profile", "--", "python", "nb.ipynb", cwd=tmp_path)
    assert result.returncode == 2 and f"Cause: cannot run nb.ipynb as a script: {message}" in result.stderr.decode()


@pytest.mark.slow
def test_profile_runs_the_fixed_notebook(tmp_path):
    pytest.importorskip("torch")
    target = tmp_path / "colab.ipynb"
    shutil.copy(COLAB, target)
    assert run_gpulint("fix", "--apply", "--unsafe-fixes", "colab.ipynb", cwd=tmp_path).returncode == 0
    assert "num_workers=min(8" in "".join(json.loads(target.read_text(encoding="utf-8"))["cells"][4]["source"])
    result = run_gpulint("profile", "--steps", "3", "--warmup", "1", "--repeat", "1", "--json", "out.json", "--", sys.executable, "colab.ipynb", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().startswith("gpulint profile: python colab.ipynb\n")
    run = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))["runs"][0]
    assert (run["status"], run["message"], len(run["steps"])) == ("ok", "measured", 3)


# ---- the benchmark -------------------------------------------------------------------------------


@pytest.mark.slow
def test_notebook_speed_benchmark_runs(tmp_path):
    folder = tmp_path / "real"
    folder.mkdir()
    shutil.copy(COLAB, folder / "colab.ipynb")
    out = tmp_path / "results.md"
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "notebook_speed.py"), str(folder), "--repeat", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = {line.split(" | ")[0]: line for line in out.read_text(encoding="utf-8").splitlines() if line.startswith("| ")}
    assert re.search(r"\| (\d+) / \1 \|$", rows["| generated"])  # the same findings as notebook and as .py
    assert rows["| real"].startswith("| real | 1 | ") and rows["| real"].endswith("| 2 / 2 |")
