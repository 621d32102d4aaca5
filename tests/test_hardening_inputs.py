"""Hostile inputs through the real CLI: each ends with a clear message and the right exit code, never a
traceback or a crash, and every other file is still checked."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from gpulint.config import Settings
from gpulint.linter import check_source
from tests.conftest import run_gpulint
from tests.test_hardening_support import start_cli

FINDING = "import torch\n\ntorch.cuda.memory_cached()\n"  # GPU402 at 3:1, in every tree: proof it was checked


def _tree(tmp_path: Path, files: dict[str, bytes | str]) -> Path:
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            path.write_text(content, encoding="utf-8")
        else:
            path.write_bytes(content)
    (tmp_path / "ok.py").write_text(FINDING)
    return tmp_path


def _check(tmp_path: Path, *args: str):
    result = run_gpulint("check", "--no-cache", "--output-format", "concise", *(args or (".",)), cwd=tmp_path)
    out, err = result.stdout.decode(), result.stderr.decode()
    assert result.returncode >= 0, f"killed by signal {-result.returncode}: {err}"
    assert "Traceback" not in out + err
    return result.returncode, out, err


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line and not line.startswith(("Found", "[*]", "All checks"))]


# ---- source files that cannot be checked ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        # 5,000 nested brackets: over CPython's own limit of 200 (libcst alone would overflow its stack).
        ("parens.py", "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n", "parens.py:3:205: invalid-syntax: SyntaxError: too many nested parentheses"),
        # 50,000 unary minus: CPython's parser runs out of room; reported, not a segfault.
        ("unary.py", "x = " + "-" * 50000 + "1\n", "unary.py:1:1: io-error: too deeply nested for the parser; skipped"),
        # 10,000 chained `and`: flat for CPython, 10,000 levels deep for libcst.
        ("chain.py", "x = a" + " and a" * 10000 + "\n", "chain.py:1:1: io-error: nested more than 500 levels deep (generated code?); skipped"),
        # 20,000 chained `+`: libcst would need minutes.
        ("sum.py", "x = 1" + "+1" * 20000 + "\n", "sum.py:1:1: io-error: too deeply nested for the parser; skipped"),
    ],
)
def test_deeply_nested_expressions_are_reported_and_the_rest_is_checked(tmp_path, name, source, expected):
    _tree(tmp_path, {name: "import torch\ntorch.cuda.memory_cached()\n" + source})
    code, out, _ = _check(tmp_path)
    assert _lines(out) == sorted([expected, "ok.py:3:1: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"])
    assert code == 1


def test_deep_but_legal_nesting_is_still_checked(tmp_path):
    # 199 nested brackets: the most CPython allows, and the finding after it is found.
    _tree(tmp_path, {"deep.py": "import torch\nx = " + "[" * 199 + "]" * 199 + "\ntorch.cuda.memory_cached()\n"})
    code, out, _ = _check(tmp_path)
    assert "deep.py:3:1: GPU402" in out
    assert code == 1


def test_a_50_mb_file_is_skipped_with_its_size(tmp_path):
    line = b"x = 1  # " + b"y" * 90 + b"\n"
    _tree(tmp_path, {"huge.py": b"import torch\ntorch.cuda.memory_cached()\n" + line * (50 * 1024 * 1024 // len(line))})
    code, out, _ = _check(tmp_path)
    assert "huge.py:1:1: io-error: file is 52.4 MB, above the 10 MB limit; skipped" in out
    assert "ok.py:3:1: GPU402" in out
    assert code == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00" * 4096, "binary file (contains NUL bytes), not Python source"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file (contains NUL bytes), not Python source"),
        (b"import torch\nx = '\xff\xfe'\n", "cannot decode as utf-8: invalid byte at offset 18"),
        (b"import torch\n" * 3 + b"x = '\xe9'\n", "cannot decode as utf-8: invalid byte at offset 44"),
        (b"# -*- coding: klingon -*-\nx = 1\n", "bad encoding declaration: unknown encoding: klingon"),
        (b"\xef\xbb\xbf# -*- coding: latin-1 -*-\nx = 1\n", "bad encoding declaration: a UTF-8 byte-order mark, but a coding cookie that is not UTF-8"),
        (b"# coding: ascii\nx = '\xc3\xa9'\n", "cannot decode as ascii: invalid byte at offset 21"),
    ],
    ids=["nul-bytes", "png", "invalid-utf8", "invalid-utf8-after-line-2", "unknown-cookie", "bom-and-cookie", "cookie-mismatch"],
)
def test_undecodable_and_binary_files(tmp_path, content, message):
    _tree(tmp_path, {"bad.py": content})
    code, out, _ = _check(tmp_path)
    assert _lines(out)[0] == f"bad.py:1:1: io-error: {message}"
    assert "ok.py:3:1: GPU402" in out
    assert code == 1


def test_a_cookie_that_disagrees_with_the_bytes_decodes_as_python_would(tmp_path):
    # UTF-8 bytes under a latin-1 cookie: Python reads mojibake, and so does gpulint; no error, findings found.
    _tree(tmp_path, {"cookie.py": "# -*- coding: latin-1 -*-\nimport torch\nx = 'é'; torch.cuda.memory_cached()\n".encode()})
    code, out, _ = _check(tmp_path)
    # Columns count characters as Python decoded them: `'Ã©'` is 4 characters.
    assert "cookie.py:3:11: GPU402" in out
    assert code == 1


def test_syntax_error_is_reported_with_its_location_and_other_files_are_checked(tmp_path):
    _tree(tmp_path, {"broken.py": "import torch\ndef f(:\n    pass\ntorch.cuda.memory_cached()\n"})
    code, out, _ = _check(tmp_path)
    assert _lines(out) == [
        "broken.py:2:7: invalid-syntax: SyntaxError: invalid syntax",
        "ok.py:3:1: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`",
    ]
    assert code == 1


def test_an_empty_file_is_clean(tmp_path):
    (tmp_path / "empty.py").write_bytes(b"")
    code, out, _ = _check(tmp_path, "empty.py")
    assert out == "All checks passed!\n"
    assert code == 0


def test_a_missing_path_is_reported_and_the_others_are_checked(tmp_path):
    _tree(tmp_path, {})
    code, out, _ = _check(tmp_path, "nope.py", "ok.py")
    assert _lines(out) == [
        "nope.py:1:1: io-error: No such file or directory",
        "ok.py:3:1: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`",
    ]
    assert code == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads chmod 000 files; see the in-process test below")
def test_an_unreadable_file_is_reported(tmp_path):
    _tree(tmp_path, {"secret.py": FINDING})
    (tmp_path / "secret.py").chmod(0)
    try:
        code, out, _ = _check(tmp_path)
    finally:
        (tmp_path / "secret.py").chmod(0o644)
    assert "secret.py:1:1: io-error: Permission denied" in out
    assert "ok.py:3:1: GPU402" in out
    assert code == 1


def test_an_unreadable_file_is_reported_in_process(tmp_path, monkeypatch, capsys):
    from gpulint.cli import main

    _tree(tmp_path, {"secret.py": FINDING})
    real_read_bytes = Path.read_bytes

    def read_bytes(self):
        if self.name == "secret.py":
            raise PermissionError(13, "Permission denied", str(self))
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["check", "--no-cache", "--output-format", "concise", "."])
    out = capsys.readouterr().out
    assert _lines(out) == [
        "ok.py:3:1: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`",
        "secret.py:1:1: io-error: Permission denied",
    ]
    assert exit_info.value.code == 1


def test_a_named_pipe_is_skipped_instead_of_blocking(tmp_path):
    _tree(tmp_path, {})
    os.mkfifo(tmp_path / "pipe.py")
    code, out, _ = _check(tmp_path, "pipe.py", "ok.py")
    assert _lines(out)[1] == "pipe.py:1:1: io-error: not a regular file (a pipe or a device); skipped"
    assert code == 1


# ---- folders and paths ------------------------------------------------------------------------------


def test_directory_symlink_loops_terminate_and_each_file_is_checked_once(tmp_path):
    _tree(tmp_path, {"pkg/mod.py": FINDING})
    (tmp_path / "pkg" / "up").symlink_to("..", target_is_directory=True)
    (tmp_path / "self").symlink_to(".", target_is_directory=True)
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")  # a file symlink loop
    code, out, _ = _check(tmp_path)
    assert _lines(out) == [
        "a.py:1:1: io-error: Too many levels of symbolic links",
        "b.py:1:1: io-error: Too many levels of symbolic links",
        "ok.py:3:1: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`",
        "pkg/mod.py:3:1: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`",
    ]
    assert code == 1


def test_paths_with_spaces_and_unicode(tmp_path):
    name = "my experiments/ünïcødé 模型.py"
    _tree(tmp_path, {name: "import torch\nétat = torch.cuda.memory_cached()\n"})
    code, out, _ = _check(tmp_path, "my experiments")
    assert _lines(out) == [f"{name}:2:8: GPU402 [*] `torch.cuda.memory_cached` is deprecated; use `torch.cuda.memory_reserved`"]
    assert code == 1
    result = run_gpulint("check", "--no-cache", "--output-format", "json", name, cwd=tmp_path)
    assert [Path(d["filename"]).resolve() for d in json.loads(result.stdout)] == [(tmp_path / name).resolve()]
    fixed = run_gpulint("fix", "--apply", "--no-cache", name, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert (tmp_path / name).read_text(encoding="utf-8") == "import torch\nétat = torch.cuda.memory_reserved()\n"


# ---- configuration -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pyproject", "cause"),
    [
        (b"[tool.gpulint\nselect = [", "is not valid TOML: "),
        (b"x = = 1\n", "is not valid TOML: Invalid value (at line 1, column 5)"),
        (b'[tool.gpulint]\nselect = ["\xff"]\n', "is not valid TOML: not UTF-8 (invalid byte at offset 26)"),
        (b'[tool.gpulint]\nselect = ["GPU999"]\n', "Unknown rule selector: `GPU999`"),
        (b'[tool.gpulint]\nextend-select = ["NOPE"]\n', "Unknown rule selector: `NOPE`"),
        (b'[tool.gpulint]\nselect = "GPU101"\n', "`select` must be a list of strings"),
        (b"[tool.gpulint]\nselcet = []\n", "Unknown key `selcet` in [tool.gpulint]"),
        (b"[tool]\ngpulint = 5\n", "[tool.gpulint] in "),
        (b"[tool.gpulint.rules.GPU101]\nworkers = 5\n", "Option `workers` of GPU101: expected str, got int 5"),
    ],
    ids=["unclosed-table", "bad-value", "not-utf8", "unknown-code", "unknown-extend", "not-a-list", "unknown-key", "not-a-table", "bad-option"],
)
def test_configuration_errors_exit_2_with_a_cause(tmp_path, pyproject, cause):
    _tree(tmp_path, {"pyproject.toml": pyproject})
    code, out, err = _check(tmp_path)
    assert code == 2
    assert out == ""
    assert err.startswith("gpulint failed\n  Cause: ")
    assert cause in err
    assert "internal error" not in err


def test_a_pyproject_whose_tool_is_not_a_table_is_not_ours(tmp_path):
    _tree(tmp_path, {"pyproject.toml": "tool = 3\n"})
    code, out, _ = _check(tmp_path)
    assert "ok.py:3:1: GPU402" in out
    assert code == 1


@pytest.mark.parametrize("selector", ["GPU999", "FOO", "gpu1x"])
def test_unknown_codes_on_the_command_line(tmp_path, selector):
    _tree(tmp_path, {})
    code, out, err = _check(tmp_path, "--select", selector, ".")
    assert code == 2
    assert err.startswith("gpulint failed\n  Cause: Unknown rule selector: `")


def test_sigterm_during_check_exits_cleanly(tmp_path):
    for i in range(200):
        (tmp_path / f"m{i}.py").write_text(FINDING + "x = [i for i in range(10)]\n" * 200)
    proc = start_cli(["check", "--no-cache", "."], tmp_path)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 1, 128 + signal.SIGTERM)  # 0/1 only when it finished first
    assert b"Traceback" not in err
    if proc.returncode == 128 + signal.SIGTERM:
        assert err.decode().endswith("gpulint: interrupted (SIGTERM) during analysis; no file was written\n")


# ---- the library API never raises on text ------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["x = 1\x00\n", "\x0c\x0c", "\\\n", "if x:\n\tpass\n        pass\n", "\ufeffimport torch\n", "def f(:\n", "'''", "x = '\\N{foo}'\n", "\r\r\r", "\u2028\n"],
)
def test_check_source_reports_instead_of_raising(text):
    settings = Settings(select=("ALL",), preview=True)
    for diagnostic in check_source(text + "\nimport torch\ntorch.cuda.memory_cached()\n", "t.py", settings):
        assert diagnostic.name != "internal-error"


def test_python_warnings_about_the_checked_code_do_not_leak(tmp_path):
    # `"\d"` makes CPython warn while parsing (SyntaxWarning on 3.12+): not gpulint's to print.
    _tree(tmp_path, {"warn.py": 'import torch\nx = "\\d"\ny = 1()\ntorch.cuda.memory_cached()\n'})
    for command in (("check", "--no-cache", "."), ("fix", "--no-cache", ".")):
        result = run_gpulint(*command, cwd=tmp_path, env={"PYTHONWARNINGS": "default"})
        assert result.returncode == 1
        assert "Warning" not in result.stderr.decode(), result.stderr.decode()


def test_a_rule_that_crashes_reports_one_short_line(monkeypatch):
    """A KeyError keyed by a syntax tree printed the whole tree (hundreds of lines) into the finding."""
    import libcst as cst

    from gpulint.checks.gpu303_host_sync_in_loop import HostSyncInLoop

    def crash(self):
        raise KeyError(cst.parse_module("def step(i):\n    return i\n").body[0])
        yield

    monkeypatch.setattr(HostSyncInLoop, "check", crash)
    source = "import torch\nfor x in loader:\n    print(model(x.cuda()).sum().item())\n"
    [error] = [d for d in check_source(source, "t.py", Settings()) if d.name == "internal-error"]
    assert error.message.startswith("GPU303 failed on this file (KeyError: FunctionDef( name=Name( value='step',")
    assert error.message.endswith("…); please report it") and "\n" not in error.message and len(error.message) < 220
