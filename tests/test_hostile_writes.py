"""Nothing the user had is lost or silently changed by a write: stale temp files, owner, group, attributes; and
the soak harness can be stopped."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gpulint import fixer
from gpulint.fixer import write_atomic
from tests.conftest import FIXTURES, REPO, run_gpulint

TRAIN = "import torch\n\nprint(torch.cuda.memory_cached())\n"
FIXED = "import torch\n\nprint(torch.cuda.memory_reserved())\n"


def _age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_fix_removes_the_stale_temp_files_a_killed_run_left_next_to_a_file_it_writes(tmp_path):
    (tmp_path / "t.py").write_text(TRAIN, encoding="utf-8")
    (tmp_path / "other.py").write_text("x = 1\n", encoding="utf-8")
    stale = tmp_path / ".t.py.k2j4_x9a.gpulint-tmp"  # the name `mkstemp` gives, from a `kill -9` long ago
    fresh = tmp_path / ".t.py.q7w8e9r0.gpulint-tmp"  # maybe a concurrent run's, being written right now
    not_written = tmp_path / ".other.py.a1b2c3d4.gpulint-tmp"  # next to a file this run does not write
    not_ours = tmp_path / ".t.py.backup.gpulint-tmp.keep"  # not a name gpulint makes
    for path in (stale, fresh, not_written, not_ours):
        path.write_text("half a file", encoding="utf-8")
    for path in (stale, not_written, not_ours):
        _age(path, 3600)
    result = run_gpulint("fix", "--apply", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "t.py").read_text(encoding="utf-8") == FIXED
    assert not stale.exists()
    assert fresh.exists() and not_written.exists() and not_ours.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give a temp file to another user")
def test_a_stale_temp_file_of_another_user_is_left_alone(tmp_path):
    target = tmp_path / "t.py"
    target.write_text(TRAIN, encoding="utf-8")
    theirs = tmp_path / ".t.py.abcdefgh.gpulint-tmp"
    theirs.write_text("someone else's", encoding="utf-8")
    os.chown(theirs, 65534, 65534)
    _age(theirs, 3600)
    write_atomic(target, FIXED.encode(), TRAIN.encode())
    assert theirs.exists() and target.read_text(encoding="utf-8") == FIXED


def _nobody_can_run_gpulint() -> bool:
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    probe = subprocess.run(_as_nobody("import gpulint.cli"), capture_output=True)
    return probe.returncode == 0


def _as_nobody(code: str) -> list[str]:
    """A Python that the `nobody` user can run (the venv's may sit under root's home), with gpulint and the
    venv's packages on the path."""
    import libcst

    site = str(Path(libcst.__file__).resolve().parent.parent)
    python = next((p for p in ("/usr/bin/python3", sys.executable) if os.access(p, os.X_OK)), sys.executable)
    prelude = f"import sys; sys.path[:0] = [{str(REPO)!r}, {site!r}]; "
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", python, "-c", prelude + code]


def test_fix_by_a_non_root_user_keeps_the_files_owner_and_group():
    if not _nobody_can_run_gpulint():
        pytest.skip("needs root, setpriv, and a Python the nobody user can run")
    # The audit's case: as `nobody`, fixing `nobody:root 0664` left `nobody:nogroup` (the temp file's group).
    folder = Path(tempfile.mkdtemp(prefix="gpulint-owner-"))
    try:
        folder.chmod(0o777)
        group_file = folder / "shared_group.py"  # nobody's file in a group nobody is not in
        other_user = folder / "other_user.py"  # root's file that nobody may write
        for path, owner, mode in ((group_file, (65534, 0), 0o664), (other_user, (0, 0), 0o666)):
            path.write_text(TRAIN, encoding="utf-8")
            os.chown(path, *owner)
            path.chmod(mode)
        before = {p: p.stat() for p in (group_file, other_user)}
        result = subprocess.run(
            _as_nobody(f"from gpulint.cli import main; main(['fix', '--apply', '--no-cache', {str(folder)!r}])"),
            capture_output=True, cwd=folder,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr.decode()
        for path, old in before.items():
            new = path.stat()
            assert path.read_text(encoding="utf-8") == FIXED
            assert (new.st_uid, new.st_gid, new.st_mode) == (old.st_uid, old.st_gid, old.st_mode)
        assert sorted(p.name for p in folder.iterdir()) == ["other_user.py", "shared_group.py"]
    finally:
        shutil.rmtree(folder)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give the file to another user")
def test_when_the_owner_cannot_be_kept_the_bytes_are_written_in_place(tmp_path, monkeypatch):
    target = tmp_path / "t.py"
    target.write_text(TRAIN, encoding="utf-8")
    os.chown(target, 65534, 65534)
    inode = target.stat().st_ino

    def refuse(*args, **kwargs):
        raise PermissionError(1, "Operation not permitted")  # what a non-root user gets for a group it is not in

    monkeypatch.setattr(fixer.os, "chown", refuse)
    write_atomic(target, FIXED.encode(), TRAIN.encode())
    info = target.stat()
    assert target.read_text(encoding="utf-8") == FIXED
    assert (info.st_ino, info.st_uid, info.st_gid) == (inode, 65534, 65534)  # the same file: nothing changed hands
    assert [p.name for p in tmp_path.iterdir()] == ["t.py"]


def test_extended_attributes_are_kept(tmp_path):
    target = tmp_path / "t.py"
    target.write_text(TRAIN, encoding="utf-8")
    try:
        os.setxattr(target, "user.gpulint.test", b"kept")
    except (OSError, AttributeError):
        pytest.skip("no user extended attributes on this file system")
    write_atomic(target, FIXED.encode(), TRAIN.encode())
    assert target.read_text(encoding="utf-8") == FIXED and os.getxattr(target, "user.gpulint.test") == b"kept"


def test_the_soak_stops_its_workers_on_sigint_and_writes_the_partial_summary(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(200):  # far more than two workers finish before the interrupt
        shutil.copyfile(FIXTURES / "train_classifier.py", corpus / f"f{i:03d}.py")
    summary = tmp_path / "soak.json"
    marker = "987.25"  # a timeout value that names this run's workers in the process table
    soak = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "soak.py"), str(corpus), "--jobs", "2", "--chunk", "4", "--timeout", marker, "--json", str(summary)],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        time.sleep(8)
        soak.send_signal(signal.SIGINT)
        out, err = soak.communicate(timeout=120)
    finally:
        soak.kill()
    assert soak.returncode == 130, err
    record = json.loads(summary.read_text(encoding="utf-8"))
    assert record["interrupted"] is True and record["files"] < 200
    assert record["crashes"] == 0  # workers it stopped are not counted as crashed
    assert "(interrupted)" in out and "interrupted: stopped the workers after" in err
    time.sleep(1)
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and marker in _cmdline(p)]


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
