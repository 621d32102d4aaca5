"""Edit builders on layouts found by the soak and the fuzzers (see docs/reliability.md)."""

from __future__ import annotations

import libcst as cst

from gpulint.edits import with_keyword_argument
from tests.conftest import fixed
from tests.test_fuzz import probe_edits


def _appended(code: str) -> str:
    module = cst.parse_module(code)
    call = module.body[0].body[0].value
    return module.code_for_node(with_keyword_argument(call, "k", cst.Integer("0")))


def test_a_bare_generator_argument_gets_its_own_parentheses():
    # `any(x for x in y, k=0)` is a SyntaxError: found on 49 of 229 sampled torch files by the edit probe.
    assert _appended("any(x for x in y)") == "any((x for x in y), k=0)"
    assert _appended("any((x for x in y))") == "any((x for x in y), k=0)"
    assert _appended("f(a, (x for x in y))") == "f(a, (x for x in y), k=0)"


def test_gpu101_fixes_a_loader_over_a_generator():
    source = """\
        import torch
        from torch.utils.data import DataLoader


        def main():
            device = torch.device("cuda")
            loader = DataLoader(x for x in range(8))
            for batch in loader:
                batch.to(device)


        if __name__ == "__main__":
            main()
    """
    assert "    loader = DataLoader((x for x in range(8)), num_workers=min(8, max(1, (len(os.sched_getaffinity(0))" in fixed(source)


def test_the_probe_accepts_every_layout_of_the_fixtures_and_odd_calls():
    source = (
        "f(x for x in y)\n"
        "g(\n    a,  # comment\n)\n"
        "h(*args, **kwargs)\n"
        "i(a)(b)(c)\n"
        "j(\n    a,\n    b\n)\n"
        "k()\n"
        "@dec(1)\nclass C(Base, metaclass=M):\n    pass\n"
    )
    assert probe_edits(source) == []
