"""`gpulint fix` honours the shared output options: --exit-zero, -o, machine formats on stdout."""

from __future__ import annotations

import json

import pytest

TRAIN = """\
import torch

print(torch.cuda.memory_cached())
"""
FIXED = TRAIN.replace("memory_cached", "memory_reserved")
DIFF = """\
--- train.py
+++ train.py
@@ -1,3 +1,3 @@
 import torch
 
-print(torch.cuda.memory_cached())
+print(torch.cuda.memory_reserved())
"""


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


def test_dry_run_exit_zero_exits_0(gpulint, project):
    result = gpulint("fix", "--exit-zero", "train.py", cwd=project)
    assert result.returncode == 0
    assert result.stdout.decode() == DIFF
    assert (project / "train.py").read_text() == TRAIN


def test_dry_run_output_file_gets_the_diff(gpulint, project):
    result = gpulint("fix", "-o", "fix.diff", "train.py", cwd=project)
    assert result.returncode == 1
    assert result.stdout == b""
    assert (project / "fix.diff").read_text() == DIFF
    assert result.stderr.decode() == "Would fix 1 error.\n"


def test_apply_show_fixes_with_json_keeps_stdout_pure_json(gpulint, project):
    (project / "train.py").write_text(
        TRAIN + "from torch.utils.data import DataLoader\n\nloader = DataLoader(ds, batch_size=64)\ndevice = torch.device(\"cuda\")\n"
    )
    result = gpulint("fix", "--apply", "--show-fixes", "--output-format", "json", "train.py", cwd=project)
    assert result.returncode == 1  # the unsafe GPU101 fix was not applied
    assert [d["code"] for d in json.loads(result.stdout.decode())] == ["GPU101"]
    assert result.stderr.decode() == "Fixed 1 error:\n- train.py:\n    1 × GPU402 (deprecated-memory-api)\n"


def test_apply_show_fixes_json_clean_file(gpulint, project):
    result = gpulint("fix", "--apply", "--show-fixes", "--output-format", "json", "train.py", cwd=project)
    assert result.returncode == 0
    assert json.loads(result.stdout.decode()) == []
    assert result.stderr.decode() == "Fixed 1 error:\n- train.py:\n    1 × GPU402 (deprecated-memory-api)\n"
    assert (project / "train.py").read_text() == FIXED


LATIN1 = "# -*- coding: latin-1 -*-\nimport torch\nx = torch.cuda.memory_cached()  # caf\xe9\n"


def test_stdin_fix_keeps_the_coding_cookies_encoding(gpulint, tmp_path):
    result = gpulint("fix", "-", stdin=LATIN1.encode("latin-1"), cwd=tmp_path)
    assert result.stdout == LATIN1.replace("memory_cached", "memory_reserved").encode("latin-1")
    assert result.returncode == 0


def test_stdin_fix_keeps_a_bom(gpulint, tmp_path):
    result = gpulint("fix", "-", stdin=b"\xef\xbb\xbfimport torch\ntorch.cuda.memory_cached()  # \xc3\xa9\n", cwd=tmp_path)
    assert result.stdout == b"\xef\xbb\xbfimport torch\ntorch.cuda.memory_reserved()  # \xc3\xa9\n"


def test_stdin_fix_of_an_excluded_file_echoes_the_bytes(gpulint, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.gpulint]\nextend-exclude = ["legacy/*"]\n')
    data = LATIN1.encode("latin-1")
    result = gpulint("fix", "--force-exclude", "--stdin-filename", "legacy/t.py", "-", stdin=data, cwd=tmp_path)
    assert result.stdout == data
    assert result.returncode == 0


# A multi-line node replaced in an indented block is regenerated through the whole module; LibCST's rendering of a
# CR-only file lacks its final CR, which the fix must not remove.
@pytest.mark.parametrize("newline", ["\r", "\r\n", "\n"])
def test_multi_line_fix_in_a_file_with_any_line_ending(gpulint, tmp_path, newline):
    path = tmp_path / "x.py"
    loop = "import torch\nfor x in loader:\n    model(x).sum().backward()\n"  # GPU202 reports per-step code
    path.write_bytes((loop + "    q = torch.cuda.FloatTensor(\n        3,\n    )\n").replace("\n", newline).encode())
    result = gpulint("fix", "--apply", "x.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert "bug in gpulint" not in result.stderr.decode()
    expected = loop + "    q = torch.empty(3, dtype=torch.float32, device=\"cuda\")\n"
    assert path.read_bytes() == expected.replace("\n", newline).encode()


def test_fix_leaves_a_file_the_user_cannot_write(tmp_path, monkeypatch, capsys):
    """Write bits set, but not for this user (another user's file): not replaced through the folder."""
    import os

    import gpulint.fixer as fixer
    from gpulint.cli import main

    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    real_access = os.access
    monkeypatch.setattr(fixer.os, "access", lambda p, mode, **kw: False if str(p) == str(path) else real_access(p, mode, **kw))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(["fix", "--apply", "--no-cache", "train.py"])
    assert done.value.code == 1
    assert "gpulint: train.py: not written: no permission to write the file\n" in capsys.readouterr().err
    assert path.read_text() == TRAIN


def test_check_show_fixes_lists_what_fix_would_fix_on_stderr(gpulint, project):
    result = gpulint("check", "--show-fixes", "--output-format", "json", "train.py", cwd=project)
    assert result.returncode == 1
    assert [d["code"] for d in json.loads(result.stdout)] == ["GPU402"]
    assert result.stderr.decode() == "Would fix 1 error with `gpulint fix --apply`:\n- train.py:\n    1 × GPU402 (deprecated-memory-api)\n"
    (project / "train.py").write_text(FIXED)
    assert gpulint("check", "--show-fixes", "train.py", cwd=project).stderr.decode() == "No errors would be fixed.\n"

