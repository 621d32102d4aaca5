"""`fix --verify` without paths: the script and the modules of its own project that it imports."""

import pathlib

from profile_helpers import PY

from gpulint.profile.command import plan_command
from gpulint.profile.project import default_fix_paths, project_root


def write(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_mingpt_like_project_includes_the_trainer_the_script_trains_through(tmp_path, monkeypatch):
    write(
        tmp_path,
        {
            "setup.py": "",
            "mingpt/__init__.py": "",
            "mingpt/model.py": "import torch\n",
            "mingpt/trainer.py": "from torch.utils.data import DataLoader\nfrom mingpt.utils import CfgNode\n",
            "mingpt/utils.py": "import json\n",
            "mingpt/unused.py": "x = 1\n",
            "projects/adder/adder.py": "from mingpt.model import GPT\nfrom mingpt.trainer import Trainer\nimport torch, numpy\n",
            ".venv/lib/python3.11/site-packages/mingpt_fake.py": "",
        },
    )
    monkeypatch.chdir(tmp_path / "projects" / "adder")
    plan = plan_command([PY, "adder.py"])
    assert project_root(pathlib.Path(plan.target).parent) == tmp_path
    found = [pathlib.Path(p).resolve() for p in default_fix_paths(plan)]
    assert sorted(found) == sorted(
        tmp_path / n for n in ("projects/adder/adder.py", "mingpt/__init__.py", "mingpt/model.py", "mingpt/trainer.py", "mingpt/utils.py")
    )


def test_a_src_layout_relative_imports_and_a_module_command(tmp_path, monkeypatch):
    write(
        tmp_path,
        {
            "pyproject.toml": "",
            "src/pkg/__init__.py": "",
            "src/pkg/train.py": "from . import data\nfrom .models import net\n",
            "src/pkg/data.py": "",
            "src/pkg/models/__init__.py": "",
            "src/pkg/models/net.py": "",
            "scripts/run.py": "import pkg.train\n",
        },
    )
    monkeypatch.chdir(tmp_path)
    found = {pathlib.Path(p).resolve() for p in default_fix_paths(plan_command([PY, "scripts/run.py"]))}
    assert found == {tmp_path / n for n in ("scripts/run.py", "src/pkg/__init__.py", "src/pkg/train.py", "src/pkg/data.py", "src/pkg/models/__init__.py", "src/pkg/models/net.py")}
    monkeypatch.chdir(tmp_path / "src")
    found = {pathlib.Path(p).resolve() for p in default_fix_paths(plan_command([PY, "-m", "pkg.train"]))}
    assert tmp_path / "src/pkg/train.py" in found and tmp_path / "src/pkg/models/net.py" in found


def test_a_lone_script_is_its_own_project(tmp_path, monkeypatch):
    write(tmp_path, {"train.py": "import helpers\nimport torch\n", "helpers.py": "", "other.py": ""})
    monkeypatch.chdir(tmp_path)
    assert sorted(default_fix_paths(plan_command([PY, "train.py"]))) == ["helpers.py", "train.py"]
