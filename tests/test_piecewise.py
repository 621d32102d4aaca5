"""Large files are parsed in pieces (memory), and the pieces join into exactly the tree LibCST gives."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest

import gpulint.piecewise as piecewise
from gpulint.config import Settings
from gpulint.linter import check_source
from tests.conftest import ALL_LOADERS, ALL_READS, FIXTURES, REPO

# These tests are about which shapes GPU201 recognizes, with sizes out of sight: reported with `unproven-cost`.
pytestmark = pytest.mark.usefixtures("unproven_cost")

TABLE = '''\
"""A generated table, as test suites and kernel tuners keep them."""
import torch

# BEGIN GENERATED DATA
op_db: list = [
    # unary ops
    dict(name="abs", dtypes=(torch.float32,)),
    dict(name="neg", dtypes=(torch.float32, torch.float16)),  # trailing comment
    dict(name="exp", dtypes=()),

    dict(name="log", dtypes=(torch.float64,)),
    dict(name="sin", dtypes=(torch.float32,)),
    dict(name="cos", dtypes=(torch.float32,)),
]
tuned = {
    ("addmm", "A100"): {(16, 16): (1, 2, 3), (32, 32): (4, 5, 6)},
    ("addmm", "H100"): {(16, 16): (1, 2, 3)},
    # END GENERATED DATA
    ("bmm", "A100"): {},
    **extra,
}
other = 1; more = 2


@decorated
def f(x):
    y = x + 1
    # a comment that ends the block
# a comment before the next statement
class C:
    pass
'''


def _samples() -> list[str]:
    texts = [TABLE, TABLE.replace("\n", "\r\n"), TABLE.rstrip("\n"), TABLE.replace("    ", "\t")]
    texts += [path.read_text(encoding="utf-8") for path in sorted(FIXTURES.glob("*.py"))]
    texts += [path.read_text(encoding="utf-8") for path in sorted((REPO / "gpulint" / "analysis").glob("*.py"))[:6]]
    return texts


@pytest.mark.parametrize("text", _samples(), ids=range(len(_samples())))
@pytest.mark.parametrize("piece_bytes", [1, 40, 300])
def test_the_pieces_join_into_the_tree_of_a_whole_parse(monkeypatch, text, piece_bytes):
    monkeypatch.setattr(piecewise, "PIECE_BYTES", piece_bytes)
    pieces = piecewise.layout(text, ast.parse(text))
    joined = piecewise.parse_in_pieces(text, pieces) if pieces else None
    whole = cst.parse_module(text)
    if joined is None:
        assert pieces is None or len(text) < 400  # tiny files are one piece; anything else must join
        return
    assert joined.code == text
    assert joined.deep_equals(whole)
    assert (joined.default_indent, joined.default_newline, joined.encoding) == (whole.default_indent, whole.default_newline, whole.encoding)


def test_a_huge_display_is_cut_between_its_elements(monkeypatch):
    monkeypatch.setattr(piecewise, "PIECE_BYTES", 40)
    pieces = piecewise.layout(TABLE, ast.parse(TABLE))
    assert [cuts[0] for _, cuts in pieces if cuts] == ["[]", "{}"]


def test_findings_do_not_depend_on_how_a_file_is_parsed(monkeypatch):
    source = textwrap.dedent("""\
        import torch
        TABLE = [(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]


        def train(model, loader, optimizer):
            model.cuda()
            for x, y in loader:
                loss = model(x.cuda(), y.cuda())
                loss.backward()
                optimizer.step()
                print(loss.item())
                noise = torch.zeros(x.size(0)).cuda()
        """)
    settings = Settings(root=REPO, rule_options=ALL_READS + ALL_LOADERS)  # (its one read a step shows no cost: `read_cost.py`)
    whole = check_source(source, "train.py", settings)
    monkeypatch.setattr(piecewise, "PIECE_BYTES", 10)
    import gpulint.linter

    monkeypatch.setattr(gpulint.linter, "PIECEWISE_ABOVE", 1)
    assert check_source(source, "train.py", settings) == whole
    assert [d.code for d in whole] == ["GPU303", "GPU201"]
