"""`check --add-noqa` and `# noqa` agree on where a comment goes: real comments only (tokenize), after a
multi-line string or a backslash continuation, and on rows counted as LibCST counts them."""

from __future__ import annotations

import json

from gpulint.lines import lines_with_ends, split_lines
from gpulint.reporters import ReportContext
from gpulint.reporters.common import source_line
from tests.conftest import diagnostics


def add_noqa(gpulint, tmp_path, data: bytes) -> tuple[int, bytes, str]:
    path = tmp_path / "t.py"
    path.write_bytes(data)
    result = gpulint("check", "--add-noqa", "t.py", cwd=tmp_path)
    return result.returncode, path.read_bytes(), result.stderr.decode()


def test_noqa_inside_a_string_literal_is_not_a_comment(gpulint, tmp_path):
    code, after, err = add_noqa(gpulint, tmp_path, b'import torch\nx = torch.cuda.memory_cached(); s = "# noqa: E501"\n')
    assert code == 0 and err == "Added 1 noqa directive.\n"
    assert after == b'import torch\nx = torch.cuda.memory_cached(); s = "# noqa: E501"  # noqa: GPU402\n'
    assert gpulint("check", "t.py", cwd=tmp_path).returncode == 0


def test_a_blanket_noqa_in_a_string_does_not_skip_the_line(gpulint, tmp_path):
    code, after, _ = add_noqa(gpulint, tmp_path, b'import torch\nz = "# noqa"; w = torch.cuda.memory_cached()\n')
    assert after == b'import torch\nz = "# noqa"; w = torch.cuda.memory_cached()  # noqa: GPU402\n'
    assert gpulint("check", "t.py", cwd=tmp_path).returncode == 0


def test_existing_noqa_comment_is_merged(gpulint, tmp_path):
    _, after, _ = add_noqa(gpulint, tmp_path, b"import torch\nx = torch.cuda.memory_cached()  # why  # noqa: E501\n")
    assert after == b"import torch\nx = torch.cuda.memory_cached()  # why  # noqa: E501, GPU402\n"


def test_finding_on_a_line_that_ends_inside_a_triple_quoted_string(gpulint, tmp_path):
    source = b'import torch\nprint(torch.cuda.memory_cached(), """\n# noqa: E501\n""")\n'
    (tmp_path / "t.py").write_bytes(source)
    result = gpulint("check", "--output-format", "json", "t.py", cwd=tmp_path)
    (finding,) = json.loads(result.stdout)
    assert finding["location"]["row"] == 2 and finding["noqa_row"] == 4
    code, after, _ = add_noqa(gpulint, tmp_path, source)
    assert after == b'import torch\nprint(torch.cuda.memory_cached(), """\n# noqa: E501\n""")  # noqa: GPU402\n'
    assert gpulint("check", "t.py", cwd=tmp_path).returncode == 0


def test_noqa_after_a_multi_line_string_suppresses_findings_on_its_first_line():
    source = 'import torch\nprint(torch.cuda.memory_cached(), """\ntext\n""")  # noqa: GPU402\n'
    assert diagnostics(source) == []
    assert len(diagnostics(source.replace("GPU402", "GPU101"))) == 1


def test_finding_on_a_backslash_continued_line(gpulint, tmp_path):
    _, after, _ = add_noqa(gpulint, tmp_path, b"import torch\ny = torch.cuda.memory_cached() + \\\n    1\n")
    assert after == b"import torch\ny = torch.cuda.memory_cached() + \\\n    1  # noqa: GPU402\n"
    assert gpulint("check", "t.py", cwd=tmp_path).returncode == 0


def test_cr_only_line_endings(gpulint, tmp_path):
    code, after, _ = add_noqa(gpulint, tmp_path, b"import torch\r\rx = torch.cuda.memory_cached()\r")
    assert code == 0
    assert after == b"import torch\r\rx = torch.cuda.memory_cached()  # noqa: GPU402\r"
    assert gpulint("check", "t.py", cwd=tmp_path).returncode == 0


# ---- rows: only \r\n, \r and \n end a line ------------------------------------------------------------

FORM_FEED = "import torch\n\x0c\nx = 1  # \x1c \x85 \u2028\ny = torch.cuda.memory_cached()\n"


def test_line_helpers_split_only_at_line_breaks():
    assert split_lines(FORM_FEED) == ["import torch", "\x0c", "x = 1  # \x1c \x85 \u2028", "y = torch.cuda.memory_cached()"]
    assert split_lines("a\r\nb\rc\n") == ["a", "b", "c"] and split_lines("a\nb") == ["a", "b"]
    assert lines_with_ends("a\r\nb\rc") == ["a\r\n", "b\r", "c"]
    assert "".join(lines_with_ends(FORM_FEED)) == FORM_FEED


def test_snippet_and_fingerprint_line_after_a_form_feed(gpulint, tmp_path):
    (tmp_path / "t.py").write_text(FORM_FEED, encoding="utf-8")
    out = gpulint("check", "t.py", cwd=tmp_path).stdout.decode()
    assert "4 | y = torch.cuda.memory_cached()\n" in out
    (d,) = diagnostics(FORM_FEED, path=str(tmp_path / "t.py"))
    assert source_line(d, ReportContext()) == "y = torch.cuda.memory_cached()"


def test_add_noqa_after_a_form_feed_writes_on_the_finding_row(gpulint, tmp_path):
    _, after, _ = add_noqa(gpulint, tmp_path, FORM_FEED.encode())
    assert after == FORM_FEED.replace("memory_cached()", "memory_cached()  # noqa: GPU402").encode()


def test_add_noqa_exits_1_when_a_file_cannot_be_written(gpulint, tmp_path):
    path = tmp_path / "t.py"
    path.write_bytes(b"import torch\nx = torch.cuda.memory_cached()\n")
    path.chmod(0o444)
    result = gpulint("check", "--add-noqa", "t.py", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.decode() == "gpulint: t.py: not written: file is read-only\nAdded 0 noqa directives.\n"
    assert path.read_bytes() == b"import torch\nx = torch.cuda.memory_cached()\n"
