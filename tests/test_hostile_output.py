"""Output cannot be used to inject: file names and quoted source reach text outputs escaped, JUnit stays XML.

A GitHub Actions runner reads a line that starts (after spaces) with `::command` or holds `##[command]` anywhere as a
workflow command (annotations, `add-mask`, `stop-commands`); a terminal acts on escape sequences. Both come from
the checked repository here: a string literal quoted in a message, a comment on a reported line, a file's name.
"""

from __future__ import annotations

import json
import re
import xml.dom.minidom
from pathlib import Path

import pytest

from gpulint.reporters import printable
from tests.conftest import UNPROVEN_COST_TOML, run_gpulint

# A message that quotes this call spans three lines, with an OSC title sequence, a bell and a form feed.
HOSTILE_SOURCE = (
    "import torch\n"
    "from torch.utils.data import DataLoader\n"
    "\n"
    "loader = DataLoader(make_dataset(), batch_size=64)\n"
    "for images in loader:\n"
    '    images = images.cuda(non_blocking=False if """\n'
    "::error file=/etc/passwd,line=1::injected\n"
    '\x1b]0;pwned\x07 <x>&\x0c""" else False)\n'
    "print(torch.cuda.memory_cached())  # \x1b[2K\x1b[1A ##[stop-commands]tok \u202eevil\n"
)
HOSTILE_NAMES = ["a\n::error file=x,line=1::fake.py", "::warning file=y::z.py", "b\x1b]0;pwned\x07.py", " ::notice::c.py"]
TEXT_FORMATS = ["full", "concise", "grouped", "pylint"]
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def assert_inert(output: str) -> None:
    """No line a runner reads as a workflow command, no character a terminal acts on."""
    for line in output.split("\n"):
        assert not line.lstrip().startswith("::"), line
        assert "##[" not in line, line
        assert not RAW_CONTROL.search(line), ascii(line)


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(HOSTILE_SOURCE, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text(UNPROVEN_COST_TOML, encoding="utf-8")  # GPU102 on a dataset of unknown size
    for name in HOSTILE_NAMES:
        (tmp_path / name).write_text(HOSTILE_SOURCE, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("format_name", TEXT_FORMATS)
def test_text_formats_escape_messages_and_file_names(hostile, format_name):
    result = run_gpulint("check", "--no-cache", "--output-format", format_name, ".", cwd=hostile)
    assert result.returncode == 1, result.stderr
    out = result.stdout.decode("utf-8")
    assert_inert(out)
    # The escaped text is shown, so the user still sees what the code holds.
    assert '"""\\n::error file=/etc/passwd,line=1::injected\\n\\x1b]0;pwned\\x07 <x>&\\x0c"""' in out
    assert "a\\n::error file=x,line=1::fake.py" in out
    assert "b\\x1b]0;pwned\\x07.py" in out
    # A name that would start a line with `::` has that colon escaped; `full` shows names after `-->`.
    if format_name == "full":
        assert " --> ::warning file=y::z.py:4:10" in out
    else:
        assert "\\x3a:warning file=y::z.py" in out
    # Every file was checked: 5 files, the same 3 findings each (GPU101, GPU102, GPU402).
    assert out.count("GPU402") == 5 and out.count("GPU102") == 5


def test_full_format_shows_the_source_line_escaped_with_the_caret_under_the_finding(hostile):
    result = run_gpulint("check", "--no-cache", "--select", "GPU402", "--output-format", "full", "train.py", cwd=hostile)
    lines = result.stdout.decode().splitlines()
    source = next(i for i, line in enumerate(lines) if line.startswith("9 | "))
    assert lines[source] == "9 | print(torch.cuda.memory_cached())  # \\x1b[2K\\x1b[1A ##\\x5bstop-commands]tok \\u202eevil"
    assert lines[source + 1] == "  |       " + "^" * len("torch.cuda.memory_cached")
    assert_inert(result.stdout.decode())


def test_fix_diff_escapes_context_and_changed_lines_and_keeps_line_endings(tmp_path):
    # A context line of a multi-line string that starts with `::`, a raw ESC, and `\r\n` line endings.
    source = (
        'import torch\r\nHELP = """\r\n::error file=a,line=1::from a diff context line\r\n\x1b[31m red"""\r\n'
        "print(torch.cuda.memory_cached())\r\n"
    )
    (tmp_path / "t.py").write_bytes(source.encode("utf-8"))
    result = run_gpulint("fix", "t.py", cwd=tmp_path)
    diff = result.stdout.decode("utf-8")
    assert_inert(diff.replace("\r\n", "\n"))
    assert " \\x3a:error file=a,line=1::from a diff context line\r\n" in diff
    assert " \\x1b[31m red\"\"\"\r\n" in diff
    assert "+print(torch.cuda.memory_reserved())\r\n" in diff


def test_stderr_messages_escape_file_names(tmp_path):
    (tmp_path / "c\n::error::x.py").write_bytes(b"x = '\xff'\n")  # not UTF-8: reported on stderr by `fix`
    result = run_gpulint("fix", ".", cwd=tmp_path)
    err = result.stderr.decode("utf-8")
    assert "gpulint: c\\n::error::x.py: cannot decode as utf-8: invalid byte at offset 5" in err
    assert_inert(err)


def test_junit_stays_well_formed_with_characters_xml_cannot_hold(hostile):
    (hostile / "d\x0cff.py").write_text(HOSTILE_SOURCE, encoding="utf-8")
    result = run_gpulint("check", "--no-cache", "--output-format", "junit", ".", cwd=hostile)
    document = xml.dom.minidom.parseString(result.stdout)  # raises on an invalid token
    suites = {s.getAttribute("name") for s in document.getElementsByTagName("testsuite")}
    assert "d\\x0cff.py" in suites
    messages = [f.getAttribute("message") for f in document.getElementsByTagName("failure")]
    assert any('\\x1b]0;pwned\\x07 <x>&\\x0c"""' in m and "\n::error file=/etc/passwd" in m for m in messages)


def test_github_format_keeps_one_command_per_finding(hostile):
    result = run_gpulint("check", "--no-cache", "--output-format", "github", ".", cwd=hostile)
    out = result.stdout.decode("utf-8")
    assert not RAW_CONTROL.search(out)  # the form feed and ESC of the message shown as `\x0c`, `\x1b`
    lines = out.split("\n")[:-1]
    assert len(lines) == 15 and all(line.startswith(("::notice ", "::warning ", "::error ")) for line in lines)
    # Data escapes `%`, CR and LF; properties also `:` and `,` (actions/toolkit's rules).
    assert any("file=" + str(hostile) + "/a%0A%3A%3Aerror file=x%2Cline=1%3A%3Afake.py," in line for line in lines)
    assert any('"""%0A::error file=/etc/passwd,line=1::injected%0A' in line for line in lines)


def test_undecodable_file_names_give_valid_json_reports(tmp_path):
    (tmp_path / "a\udcff.py").write_text("import torch\nprint(torch.cuda.memory_cached())\n", encoding="utf-8")
    for format_name in ("sarif", "gitlab", "json"):
        result = run_gpulint("check", "--no-cache", "--output-format", format_name, ".", cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        report = json.loads(result.stdout.decode("utf-8"))  # valid UTF-8 and valid JSON
        if format_name == "sarif":
            assert report["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "a%FF.py"
        if format_name == "gitlab":
            assert report[0]["location"]["path"] == "a\udcff.py"
    concise = run_gpulint("check", "--no-cache", "--output-format", "concise", ".", cwd=tmp_path).stdout.decode("utf-8")
    assert concise.startswith("a\\udcff.py:2:7: GPU402")


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("a\n::error x::y", "a\\n::error x::y"),
        ("::error x::y", "\\x3a:error x::y"),
        ("  ::warning::z", "  \\x3a:warning::z"),
        ("x ##[stop-commands]t", "x ##\\x5bstop-commands]t"),
        ("\x1b]8;;http://x\x1b\\link", "\\x1b]8;;http://x\\x1b\\link"),
        ("\r\x08\x85\u2028", "\\r\\x08\\x85\\u2028"),
        ("tab\tand C::x and é", "tab\tand C::x and é"),  # nothing a terminal or runner acts on: unchanged
    ],
)
def test_printable(text, shown):
    assert printable(text) == shown
    assert printable(shown) == shown
