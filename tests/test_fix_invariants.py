"""The fixer's invariants, for every rule present and future: no inserted name is unbound where it is inserted,
no wait or loop-invariant statement is inserted into a loop, and `fix` applies exactly what `check` reported."""

from __future__ import annotations

import textwrap

import pytest

from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Edit, Fix, Location
from gpulint.fix_invariants import enforce
from tests.conftest import diagnostics, fixed, settings


def insertion(row: int, code: str, applicability: Applicability = Applicability.SAFE) -> Diagnostic:
    """A finding on `row` whose fix inserts the line `code` above it (what a stream rule would build)."""
    at = Location(row, 1)
    return Diagnostic("GPU999", "test", "m", "t.py", at, at, fix=Fix("insert", applicability, (Edit(at, at, code + "\n"),)))


def kept(source: str, row: int, code: str) -> bool:
    [d] = enforce(textwrap.dedent(source), [insertion(row, code)])
    return d.fix is not None


EXECUTOR = """\
import torch


class Executor:
    def distributed(self):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            self.model = self.model.cuda()

    def step(self, x):
        return self.model(x)
"""


def test_a_local_of_another_method_is_not_inserted():
    # Row 11 is `return self.model(x)` in `step`, where `s` does not exist.
    assert not kept(EXECUTOR, 11, "        torch.cuda.current_stream().wait_stream(s)")
    assert kept(EXECUTOR, 8, "        torch.cuda.current_stream().wait_stream(s)")  # in `distributed`, after `s = ...`


def test_the_finding_stays_without_its_fix():
    [d] = enforce(EXECUTOR, [insertion(11, "        torch.cuda.current_stream().wait_stream(s)")])
    assert (d.code, d.message, d.location) == ("GPU999", "m", Location(11, 1)) and d.fix is None


@pytest.mark.parametrize(
    ("source", "row", "code", "ok"),
    [
        # a local bound only further down the function: UnboundLocalError
        ("def f():\n    pass\n    s = 1\n", 2, "    print(s)", False),
        # a module name defined after the function: bound by the time the function runs
        ("def f():\n    pass\nS = 1\n", 2, "    print(S)", True),
        # ... but not for module-level code above the definition
        ("x = 0\nS = 1\n", 1, "print(S)", False),
        # builtins, imports, parameters, closures, `global`
        ("def f(a):\n    pass\n", 2, "    print(len(a))", True),
        ("import torch as th\ndef f():\n    pass\n", 3, "    th.cuda.synchronize()", True),
        ("def f():\n    s = 1\n    def g():\n        pass\n", 4, "        print(s)", True),
        ("def f():\n    global G\n    pass\n", 3, "    print(G)", False),
        # class bodies are not visible from methods
        ("class C:\n    s = 1\n    def m(self):\n        pass\n", 4, "        print(s)", False),
        # comprehension variables stay in the comprehension
        ("xs = [i for i in range(3)]\n", 1, "print(i)", False),
        # a name the file already reads unbound (a star import, a runtime global) is not the fix's doing
        ("from helpers import *\n", 1, "print(anything)", True),
        ("print(injected)\nx = 1\n", 2, "print(injected)", True),
    ],
)
def test_names_are_checked_against_the_scopes(source, row, code, ok):
    assert kept(source, row, code) is ok


LOOP = """\
import torch

s = torch.cuda.Stream()
for x in loader:
    y = x * 2
    z = y + 1
"""


@pytest.mark.parametrize(
    ("code", "ok"),
    [
        ("    torch.cuda.current_stream().wait_stream(s)", False),  # a wait every iteration
        ("    torch.cuda.synchronize()", False),
        ("    scale = torch.ones(3)", False),  # reads nothing the loop changes: belongs before it
        ("    w = y.sum()", True),  # reads `y`, which the loop assigns
        ("    pass", True),  # what deleting a loop body's only statement leaves
    ],
)
def test_statements_inserted_into_a_loop(code, ok):
    assert kept(LOOP, 6, code) is ok


def test_a_wait_before_the_loop_is_kept():
    assert kept(LOOP, 4, "torch.cuda.current_stream().wait_stream(s)")


def test_edits_of_other_fixes_do_not_bind_names_for_this_one():
    source = "def f():\n    pass\n    pass\n"
    binder = insertion(2, "    s = 1")
    user = insertion(3, "    print(s)")
    after = enforce(source, [binder, user])
    assert after[0].fix is not None and after[1].fix is None


@pytest.fixture
def growing_rule():
    """A rule whose fix makes a new finding of itself: it reports the first `pass` of the module and inserts
    `x = 1` above it, after which the next `pass` is the first one (registered for this test only)."""
    import libcst as cst

    import gpulint.linter as linter
    from gpulint.checks.base import REGISTRY
    from gpulint.edits import insert_statement_before

    class GrowingRule(Rule):
        code = "GPU990"
        name = "test-growing"
        summary = "test only"
        fix_applicability = Applicability.SAFE
        needs_gpu_context = False
        requires = ("pass",)

        def check(self):
            for statement in self.model.module.body:
                if isinstance(statement, cst.SimpleStatementLine) and self.model.code(statement).strip() == "pass":
                    edit = insert_statement_before(self.model, statement, "x = 1")
                    yield self.diagnostic(statement, "pass", fix=self.fix("more", [edit], Applicability.SAFE))
                    return

    linter._ENABLED.clear()
    try:
        yield
    finally:
        del REGISTRY["GPU990"]
        linter._ENABLED.clear()


def test_fix_applies_exactly_the_fixes_check_reported(growing_rule):
    from gpulint.fixer import fix_source

    source = "pass\npass\n"
    assert len(diagnostics(source, select=("GPU990",))) == 1
    outcome = fix_source(source, "t.py", settings(select=("GPU990",)), unsafe=False)
    assert outcome.fixed["GPU990"] == 1  # one finding reported, one fix applied
    assert outcome.text == "x = 1\npass\npass\n"


def test_fixed_text_of_a_real_rule_keeps_its_names_bound():
    # GPU302 in a loop: the wait would run every iteration, so the finding has no fix.
    source = textwrap.dedent("""\
        import torch

        side = torch.cuda.Stream()
        for x in loader:
            x = x.cuda()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                y = x * 2
            print(y.sum())
    """)
    [d] = diagnostics(source, select=("GPU302",))
    assert d.fix is None
    assert fixed(source, select=("GPU302",)) == source
