"""The model's own tree walk and position pass give exactly what LibCST's visitor and PositionProvider give
(they replace them for speed; a LibCST upgrade that adds node fields must not change what rules see)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from gpulint.analysis import SemanticModel
from gpulint.analysis.model import _TRIVIA, _Positions
from tests.conftest import FIXTURES, REPO

TRICKY = textwrap.dedent(
    '''\
    """Module docstring."""
    # a comment
    from __future__ import annotations
    import torch, os as o
    from torch.utils.data import DataLoader as DL, Dataset

    @decorator(call(x := 1))
    @other
    async def f(a, /, b: int = g(), *args, c=h(), **kw) -> T:
        global q
        async with a as (b, c), d:
            pass
        async for i in aiter():
            yield i
        return [y for y in range(3) if (z := y) if z > 1 for w in y]

    class C(Base, metaclass=M):
        x: int = 1
        def m(self): return lambda p=k(): p(*[2], **{"a": 1})

    try:
        import missing
    except (ImportError, ValueError) as error:
        raise RuntimeError(f"{error!r:>10} {x['k']}") from error
    else:
        pass
    finally:
        del o

    while (n := n - 1) > 0:
        x[1:2, ::3] = a if b else c
        x += 1; y = z = w = ~-x ** 2 @ m
        assert x, "m"
    else:
        pass

    match command:
        case [Point(x=0, y=0), *rest] if rest:
            pass
        case {"k": v, **others} | str() as s:
            pass
        case _:
            pass

    print("a" "b" 'c', b"d", r"\\e", not x, x is not None, x not in y, *a, sep="")
    '''
)


def _sources() -> list[tuple[str, str]]:
    found = [("tricky", TRICKY), ("empty", ""), ("newline", "\n"), ("no-final-newline", "x = 1"), ("crlf", "if x:\r\n    y()\r\n")]
    for path in sorted(FIXTURES.glob("*.py")) + sorted((REPO / "gpulint" / "analysis").glob("*.py")):
        found.append((path.name, path.read_text(encoding="utf-8")))
    return found


class _Reference(cst.CSTVisitor):
    """LibCST's own pre-order walk, recording each non-trivia node and its parent."""

    def __init__(self) -> None:
        self.order: list[cst.CSTNode] = []
        self.parent: dict[cst.CSTNode, cst.CSTNode] = {}
        self.stack: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if not isinstance(node, _TRIVIA):
            if self.stack:
                self.parent[node] = self.stack[-1]
            self.order.append(node)
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


@pytest.mark.parametrize("name,source", _sources(), ids=[n for n, _ in _sources()])
def test_walk_matches_libcst_visitor(name, source):
    module = cst.parse_module(source)
    reference = _Reference()
    module.visit(reference)
    model = SemanticModel(module, name, source)
    # Same parents, and the model's node lists in LibCST's pre-order.
    assert {id(k): id(v) for k, v in model.parent.items()} == {id(k): id(v) for k, v in reference.parent.items()}
    # The parent map is filled in pre-order: analyses iterate it as the nodes in source order.
    assert [id(n) for n in model.parent] == [id(n) for n in reference.order[1:]]
    rank = {id(node): i for i, node in enumerate(reference.order)}
    for nodes in (
        model.calls, model.loops, model.blocks, model.strings, model.formatted_strings, model.attributes, model.import_statements
    ):
        assert [rank[id(n)] for n in nodes] == sorted(rank[id(n)] for n in nodes)
    expected_calls = [n for n in reference.order if isinstance(n, cst.Call)]
    assert [id(n) for n in model.calls] == [id(n) for n in expected_calls]


@pytest.mark.parametrize("name,source", _sources(), ids=[n for n, _ in _sources()])
def test_positions_match_position_provider(name, source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    ours = _Positions(module)
    assert set(ours) == set(expected)
    assert all(ours[node] == expected[node] for node in expected)


@pytest.mark.parametrize("name,source", _sources()[:3], ids=[n for n, _ in _sources()[:3]])
def test_is_inside_and_calls_inside_agree_with_the_ancestors(name, source):
    module = cst.parse_module(source)
    model = SemanticModel(module, name, source)
    containers = [module, *model.parent]
    for container in containers:
        by_ancestors = [c for c in model.calls if c is container or any(a is container for a in model.ancestors(c))]
        assert model.calls_inside(container) == by_ancestors
        for call in model.calls:
            assert model.is_inside(call, container) == (call in by_ancestors)
    assert not model.calls or model._inside_questions > 32  # answers came from the spans too
    outsider = cst.parse_expression("f(x)")
    assert not model.is_inside(outsider, module)
    assert model.calls_inside(outsider) == []


def test_returns_of_a_function_not_of_functions_nested_in_it():
    source = "def f(x):\n    def g():\n        return 1\n    if x:\n        return g\n    return (lambda: 2)\n"
    module = cst.parse_module(source)
    model = SemanticModel(module, "m.py", source)
    [f] = model.functions["f"]
    [g] = model.functions["g"]
    assert [model.code(r) for r in model.returns_of(f)] == ["return g", "return (lambda: 2)"]
    assert [model.code(r) for r in model.returns_of(g)] == ["return 1"]
    assert model.returns_of(f) is model.returns_of(f)  # collected once per model
