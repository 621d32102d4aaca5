"""Property-based fuzzing: gpulint never crashes and a fix never breaks a file.

For every generated program, with every registered rule (`select=ALL`, preview on):
- `check` raises nothing and reports no `internal-error`; every span (finding and fix edit) lies in the file;
- `fix --unsafe-fixes` drops no fix, its output parses and compiles, a second fix changes nothing, and when
  nothing was fixable the output is byte-identical to the input;
- the edit builders rules use (`with_keyword_argument`, `replace_node`, `add_import`) applied to every
  outermost call give code that compiles (`probe_edits`), whatever the layout.

Programs come from hypothesmith (syntactically valid Python, rarely torch code: these run with the rules'
text prefilter bypassed, so every rule's analysis sees them) and from mutations of real training code (the
fixtures, every rule document's examples, small fix targets): renamed imports, extra nesting, comments and
odd whitespace inside calls, `\\r\\n`, tabs, non-ASCII names and strings, decorators, walrus, `match`,
async loops. Those are what exercise the fixes; `test_mutations_produce_findings_and_fixes` checks they do.

Examples are bounded and derandomized here (CI time); `bench/fuzz.py` runs the same properties for longer.
"""

from __future__ import annotations

import io
import random
import re
import tokenize
import warnings
from contextlib import contextmanager
from pathlib import Path

import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gpulint.analysis import SemanticModel
from gpulint.checks.base import Rule
from gpulint.config import Settings, with_overrides
from gpulint.edits import add_import, replace_node, with_keyword_argument
from gpulint.fixer import FixOutcome, apply_edits, fix_source, is_applicable
from gpulint.linter import INTERNAL_ERROR, _recursion_room, check_source, parse

REPO = Path(__file__).resolve().parent.parent
SETTINGS = with_overrides(Settings(root=REPO), select=("ALL",), preview=True)
PATH = "fuzz_train.py"

# ---- the properties ---------------------------------------------------------------------------------


def _compiles(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<fuzz>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _assert_spans_inside(diagnostics, text: str) -> None:
    lines = text.splitlines(keepends=True) or [""]
    widths = [len(line.rstrip("\r\n")) for line in lines]
    if text.endswith(("\n", "\r")):
        widths.append(0)

    def inside(location) -> bool:
        return 1 <= location.row <= len(widths) and 1 <= location.column <= widths[location.row - 1] + 1

    for d in diagnostics:
        spans = [(d.location, d.end_location)] + [(e.location, e.end_location) for e in (d.fix.edits if d.fix else ())]
        for start, end in spans:
            assert inside(start) and inside(end) and start <= end, f"{d.code or d.name}: span {start}-{end} outside the file"


def check_invariants(text: str, path: str = PATH) -> tuple[list, FixOutcome]:
    """Assert every property on one program; returns the findings and the fix outcome."""
    diagnostics = check_source(text, path, SETTINGS)
    crashes = [d.message for d in diagnostics if d.name == INTERNAL_ERROR]
    assert not crashes, crashes
    _assert_spans_inside(diagnostics, text)
    outcome = fix_source(text, path, SETTINGS, unsafe=True)
    assert not outcome.broken, [f"{d.code} {d.location}" for d in outcome.broken]
    if not any(is_applicable(d, True) for d in diagnostics):
        assert outcome.text == text, "nothing was fixable, yet the text changed"
    elif outcome.text != text:
        cst.parse_module(outcome.text)
        assert _compiles(outcome.text) or not _compiles(text), "the fixed file does not compile"
        again = fix_source(outcome.text, path, SETTINGS, unsafe=True)
        assert again.text == outcome.text, "a second fix changed the file again"
        _assert_spans_inside(again.remaining, outcome.text)
    problems = probe_edits(text, path)
    assert not problems, problems
    return diagnostics, outcome


def probe_edits(text: str, path: str = PATH) -> list[str]:
    """Rewrite every outermost call with the edit builders rules use (`with_keyword_argument` through
    `replace_node`) and add an import (`add_import`): on any layout, the result must parse, compile, and
    differ from the input by exactly those edits. Returns the problems (empty when all is well)."""
    module = parse(text, path)
    if not isinstance(module, cst.Module) or not _compiles(text):
        return []
    with _recursion_room():
        try:
            model = SemanticModel(module, path, text)
            calls = list(model.calls)
            spans = [(c, model.range(c)) for c in calls]
        except RecursionError:
            return []
        edits, taken = [], []
        for call, span in spans:
            start, end = (span.start.line, span.start.column), (span.end.line, span.end.column)
            if any(start < t_end and t_start < end for t_start, t_end in taken):
                continue  # nested in (or around) a call already probed
            edit = replace_node(model, call, with_keyword_argument(call, "gpulint_probe", cst.Integer("0")))
            if edit is not None:
                edits.append(edit)
                taken.append((start, end))
        added = add_import(model, "gpulint_probe_module")
    if added is not None:
        edits.append(added)
    if not edits:
        return []
    result = apply_edits(text, edits)
    probes = len(re.findall(r"gpulint_probe\s*=\s*0", result))  # `k = v` calls get `gpulint_probe = 0`
    if _compiles(result) and probes == len(edits) - (added is not None):
        return []
    problems = []
    for edit in edits:
        alone = apply_edits(text, [edit])
        if not _compiles(alone):
            line = text.splitlines()[edit.location.row - 1] if text.splitlines() else ""
            problems.append(f"edit at {edit.location.row}:{edit.location.column} ({edit.content!r}) breaks: {line.strip()[:80]}")
    return problems or ["the probe edits together do not compile"]


@contextmanager
def every_rule_on_every_file():
    """Bypass the rules' text prefilter, so each rule analyses programs that never mention its keywords."""
    original = Rule.__dict__["applies_to_text"]
    Rule.applies_to_text = classmethod(lambda cls, text: True)
    try:
        yield
    finally:
        Rule.applies_to_text = original


# ---- seeds: real training code -----------------------------------------------------------------------

_FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)

SNIPPETS = [
    # GPU402 fixes: attribute, aliased module, from-import, several per line.
    "import torch\n\nprint(torch.cuda.memory_cached(), torch.cuda.max_memory_cached())\ntorch.cuda.reset_max_memory_cached()\n",
    "import torch.cuda as tc\nfrom torch.cuda import memory_cached\n\nstats = [tc.memory_cached(0), memory_cached()]\n",
    # GPU402 fixes in methods, loops and `with` blocks.
    """import torch


class Monitor:
    def report(self, device):
        with torch.cuda.device(device):
            for _ in range(2):
                print(torch.cuda.memory_cached(device))
        return torch.cuda.max_memory_cached(device)
""",
    # GPU101 fixes: a missing num_workers, a literal 0, a module constant, an argparse default.
    '''import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

WORKERS = 0
parser = argparse.ArgumentParser()
parser.add_argument("--workers", type=int, default=0)


def train(args, dataset, model):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    other = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=0)
    third = DataLoader(dataset, shuffle=True, num_workers=WORKERS)
    fourth = DataLoader(dataset, shuffle=True, num_workers=args.workers)
    for batch, target in loader:
        loss = model(batch.to(device)).sum()
        loss.backward()
    print(torch.cuda.memory_cached())


if __name__ == "__main__":
    train(parser.parse_args(), TensorDataset(torch.rand(8, 2)), torch.nn.Linear(2, 1))
''',
]


def _seeds() -> list[str]:
    seeds = [p.read_text(encoding="utf-8") for p in sorted((REPO / "fixtures").glob("*.py"))]
    for doc in sorted((REPO / "rules").glob("*.md")):  # every rule's Example and Use-instead code
        seeds += [block for block in _FENCE.findall(doc.read_text(encoding="utf-8")) if _compiles(block)]
    return seeds + SNIPPETS


SEEDS = _seeds()

# ---- mutations: each keeps the program valid Python, or gives it back unchanged ---------------------


def _transform(text: str, transformer: cst.CSTTransformer) -> str:
    return cst.parse_module(text).visit(transformer).code


def rename_imports(text: str, rnd: random.Random) -> str:
    """`import torch` -> `import torch as <alias>`, `from m import X` -> `... as <alias>`, uses renamed."""
    aliases = {}

    class Aliases(cst.CSTTransformer):
        def leave_ImportAlias(self, original, updated):
            if updated.asname is None and isinstance(updated.name, cst.Name) and rnd.random() < 0.7:
                alias = f"{updated.name.value}_{rnd.choice(['x', 'mod', 'T', 'λ'])}"
                aliases[updated.name.value] = alias
                return updated.with_changes(asname=cst.AsName(name=cst.Name(alias)))
            return updated

    module = cst.parse_module(text).visit(Aliases())
    return module.visit(_Renamer(aliases)).code if aliases else text


class _Renamer(cst.CSTTransformer):
    """Rename variables (not attributes, keywords or imported names)."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def leave_Name(self, original, updated):
        return updated.with_changes(value=self.names[updated.value]) if updated.value in self.names else updated

    def leave_Attribute(self, original, updated):
        return updated.with_changes(attr=original.attr)

    def leave_Arg(self, original, updated):
        return updated.with_changes(keyword=original.keyword)

    def leave_ImportAlias(self, original, updated):
        return original

    def leave_ImportFrom(self, original, updated):
        return updated.with_changes(module=original.module)


def nest(text: str, rnd: random.Random) -> str:
    """Wrap the module (after its imports) in `if True:`, `try:`, `for _ in range(1):` or `with`."""
    module = cst.parse_module(text)
    body = list(module.body)
    split = 0
    while split < len(body) and isinstance(body[split], cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) or (isinstance(s, cst.Expr) and isinstance(s.value, cst.SimpleString)) for s in body[split].body
    ):
        split += 1
    if split == len(body):
        return text
    block = cst.IndentedBlock(body=body[split:])
    kind = rnd.choice(["if", "try", "for", "with", "while"])
    if kind == "if":
        wrapper = cst.If(test=cst.Name("True"), body=block)
    elif kind == "try":
        wrapper = cst.Try(body=block, handlers=[cst.ExceptHandler(body=cst.IndentedBlock([cst.SimpleStatementLine([cst.Raise()])]), type=cst.Name("Exception"))])
    elif kind == "for":
        wrapper = cst.For(target=cst.Name("_once"), iter=cst.parse_expression("range(1)"), body=block)
    elif kind == "while":
        block = block.with_changes(body=[*block.body, cst.SimpleStatementLine([cst.Break()])])
        wrapper = cst.While(test=cst.Name("True"), body=block)
    else:
        wrapper = cst.With(items=[cst.WithItem(cst.parse_expression("__import__('contextlib').nullcontext()"))], body=block)
    return module.with_changes(body=[*body[:split], wrapper]).code


_ODD = ["  # a comment, inside the call\n", " \\\n", "\t", "   ", "\n        ", "  # ünïcødé ✓\n    ", "\n\n"]


def comments_in_calls(text: str, rnd: random.Random) -> str:
    """Comments, blank lines, backslashes, tabs and spaces after `(`, `[` and `,` inside brackets."""
    positions = []
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.OP:
                if token.string in "([{":
                    depth += 1
                    positions.append(token.end)
                elif token.string in ")]}":
                    depth -= 1
                elif token.string == "," and depth > 0:
                    positions.append(token.end)
    except (tokenize.TokenError, SyntaxError):
        return text
    lines = text.splitlines(keepends=True)
    chosen = [p for p in positions if rnd.random() < 0.5]
    for row, column in sorted(chosen, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:column] + rnd.choice(_ODD) + line[column:]
    return "".join(lines)


def crlf(text: str, rnd: random.Random) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def tabs(text: str, rnd: random.Random) -> str:
    """Indent with tabs instead of four spaces."""
    out = []
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip(" ")
        spaces = len(line) - len(stripped)
        out.append("\t" * (spaces // 4) + " " * (spaces % 4) + stripped)
    return "".join(out)


_UNICODE_NAMES = ["modèle", "données", "загрузчик", "設備", "λ_rate", "Ωmega", "ñ"]


def non_ascii(text: str, rnd: random.Random) -> str:
    """Non-ASCII variable names, strings and comments (columns count characters, not bytes)."""
    module = cst.parse_module(text)
    targets = set()

    class Targets(cst.CSTVisitor):
        def visit_AssignTarget(self, node):
            if isinstance(node.target, cst.Name):
                targets.add(node.target.value)

    module.visit(Targets())
    names = {name: rnd.choice(_UNICODE_NAMES) + f"_{i}" for i, name in enumerate(sorted(targets)) if rnd.random() < 0.6}
    if names:
        module = module.visit(_Renamer(names))
    lines = module.code.splitlines(keepends=True)
    newline = "\r\n" if "\r\n" in text else "\n"
    for _ in range(rnd.randint(1, 3)):
        at = rnd.randint(0, len(lines))
        if at < len(lines) and (lines[at - 1].rstrip().endswith(("\\", ",", "(", "[", "{")) if at else False):
            continue
        indent = re.match(r"[ \t]*", lines[at] if at < len(lines) else "").group(0)
        lines.insert(at, f"{indent}# commentaire: é ü 模型 🔥{newline}")
    lines.append(f"_s = 'héllo 🔥 ñ \\N{{GREEK SMALL LETTER LAMDA}}'; _t = \"日本語\"{newline}")
    return "".join(lines)


def decorators(text: str, rnd: random.Random) -> str:
    decorator = rnd.choice(["(lambda f: f)", "__import__('functools').lru_cache(maxsize=None)", "staticmethod.__func__ if False else (lambda f: f)"])

    class Decorate(cst.CSTTransformer):
        def leave_FunctionDef(self, original, updated):
            return updated.with_changes(decorators=[cst.Decorator(cst.parse_expression(decorator)), *updated.decorators])

        def leave_ClassDef(self, original, updated):
            return updated.with_changes(decorators=[cst.Decorator(cst.parse_expression("(lambda c: c)")), *updated.decorators])

    return _transform(text, Decorate())


def walrus(text: str, rnd: random.Random) -> str:
    """`x = value` -> `(x := value)` in functions and at module level."""

    class Walrus(cst.CSTTransformer):
        def __init__(self):
            self.in_class = 0

        def visit_ClassDef(self, node):
            self.in_class += 1

        def leave_ClassDef(self, original, updated):
            self.in_class -= 1
            return updated

        def leave_SimpleStatementLine(self, original, updated):
            if self.in_class or len(updated.body) != 1 or rnd.random() < 0.4:
                return updated
            stmt = updated.body[0]
            if isinstance(stmt, cst.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0].target, cst.Name):
                value = stmt.value
                if isinstance(value, (cst.Yield, cst.Await)) or not isinstance(value, cst.BaseExpression):
                    return updated
                named = cst.NamedExpr(target=stmt.targets[0].target, value=value, lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                return updated.with_changes(body=[cst.Expr(named)])
            return updated

    return _transform(text, Walrus())


def match_case(text: str, rnd: random.Random) -> str:
    """Wrap function bodies in `match <subject>: case _:`."""

    class Match(cst.CSTTransformer):
        def leave_FunctionDef(self, original, updated):
            if not isinstance(updated.body, cst.IndentedBlock) or rnd.random() < 0.1:
                return updated
            case = cst.MatchCase(pattern=cst.MatchAs(), body=updated.body)
            subject = cst.parse_expression(rnd.choice(["__name__", "(1, 2)", "[]"]))
            return updated.with_changes(body=cst.IndentedBlock([cst.Match(subject=subject, cases=[case])]))

    return _transform(text, Match())


def async_loops(text: str, rnd: random.Random) -> str:
    """`def` -> `async def`, with its `for` and `with` statements made `async`."""

    class Async(cst.CSTTransformer):
        def __init__(self):
            self.depth = 0

        def visit_FunctionDef(self, node):
            self.depth += 1

        def leave_FunctionDef(self, original, updated):
            self.depth -= 1
            return updated.with_changes(asynchronous=cst.Asynchronous())

        def leave_For(self, original, updated):
            return updated.with_changes(asynchronous=cst.Asynchronous()) if self.depth and rnd.random() < 0.7 else updated

        def leave_With(self, original, updated):
            return updated.with_changes(asynchronous=cst.Asynchronous()) if self.depth and rnd.random() < 0.5 else updated

    return _transform(text, Async())


MUTATIONS = {
    "rename_imports": rename_imports,
    "nest": nest,
    "comments_in_calls": comments_in_calls,
    "crlf": crlf,
    "tabs": tabs,
    "non_ascii": non_ascii,
    "decorators": decorators,
    "walrus": walrus,
    "match_case": match_case,
    "async_loops": async_loops,
}


def mutate(text: str, names: list[str], rnd: random.Random) -> str:
    """Apply the mutations in order; one that would not compile is skipped."""
    for name in names:
        try:
            candidate = MUTATIONS[name](text, rnd)
        except (cst.ParserSyntaxError, tokenize.TokenError, RecursionError):
            continue
        if candidate != text and _compiles(candidate):
            text = candidate
    return text


mutated_programs = st.builds(
    mutate,
    st.sampled_from(SEEDS),
    st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=4),
    st.randoms(use_true_random=False),
)

GPU_CONTEXT = '\nimport torch\n_device = torch.device("cuda")\n'


def with_gpu_context(program: str) -> str:
    """Append a CUDA device, so rules that need GPU context analyse the program too."""
    candidate = program + ("" if program.endswith("\n") else "\n") + GPU_CONTEXT
    return candidate if _compiles(candidate) else program


FUZZ = settings(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    database=None,
)

# ---- the tests ---------------------------------------------------------------------------------------


@settings(FUZZ, max_examples=25)
@given(mutated_programs)
def test_mutated_training_code(program):
    check_invariants(program)


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # hypothesmith compiles its programs
@settings(FUZZ, max_examples=40)
@given(hypothesmith.from_grammar().map(with_gpu_context))
def test_programs_from_the_grammar(program):
    with every_rule_on_every_file():
        check_invariants(program)


@settings(FUZZ, max_examples=10)
@given(hypothesmith.from_node().map(with_gpu_context))
def test_programs_from_libcst_nodes(program):
    with every_rule_on_every_file():
        check_invariants(program)


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutations_produce_findings_and_fixes(name):
    """Each mutation changes real training code, keeps it valid, and the result still gets fixed safely."""
    changed = fixed = 0
    for index, seed in enumerate(SNIPPETS):
        program = mutate(seed, [name], random.Random(index))
        changed += program != seed
        diagnostics, outcome = check_invariants(program)
        fixed += outcome.fixed_count > 0 and bool(diagnostics)
    assert changed >= 2, f"{name} changed {changed} programs"
    assert fixed >= 2, f"{name}: only {fixed} mutated programs were fixed"


def test_the_seeds_themselves_hold_the_properties():
    total_fixed = 0
    for seed in SEEDS:
        _, outcome = check_invariants(seed)
        total_fixed += outcome.fixed_count
    assert total_fixed >= 10  # the snippets alone have 10 fixable findings
