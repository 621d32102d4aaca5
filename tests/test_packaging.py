"""A wheel built from the repository, installed into a fresh virtual environment, works."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile

import pytest

from tests.conftest import FIXTURES, REPO


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_with_rule_documents(tmp_path):
    pytest.importorskip("hatchling")
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(REPO)],
        check=True,
        capture_output=True,
    )
    [wheel] = dist.glob("gpulint-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "gpulint/_rules/GPU101.md" in names
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"gpulint"}

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)], capture_output=True, text=True)
    assert install.returncode == 0, install.stderr[-2000:]

    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text((FIXTURES / "train_classifier.py").read_text())
    gpulint = env_dir / "bin" / "gpulint"
    result = subprocess.run([str(gpulint), "check", "--output-format", "concise", "train.py"], cwd=work, capture_output=True, text=True)
    assert result.returncode == 1, result.stderr
    assert "train.py:45:20: GPU101" in result.stdout
    doc = subprocess.run([str(gpulint), "rule", "GPU101"], cwd=work, capture_output=True, text=True)
    assert doc.stdout.startswith("# dataloader-without-workers (GPU101)")
    module = subprocess.run([str(python), "-m", "gpulint", "--version"], cwd=work, capture_output=True, text=True)
    assert module.returncode == 0 and "gpulint" in module.stdout
