"""The library API: `check_source(text, path, settings) -> list[Diagnostic]`, and files on disk."""

from __future__ import annotations

import ast
import os
import pickle
import sys
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from gpulint.budget import run_within, timeout_message
from gpulint.config import Settings
from gpulint.piecewise import PIECEWISE_ABOVE, Layout, layout, parse_in_pieces
from gpulint.diagnostics import INTERNAL_ERROR, INVALID_SYNTAX, IO_ERROR, PARSER_LIMITATION, Diagnostic, Location, Severity
from gpulint.notebook import Notebook, NotebookError, is_notebook_path, without_stubs
from gpulint.databricks import read_export
from gpulint.recovery import Recovered, recover
from gpulint.source import SourceError, SourceText, libcst_limitation, read_source_bytes
from gpulint.suppression import parse_suppressions

if TYPE_CHECKING:
    import libcst as cst

    from gpulint.analysis import SemanticModel
    from gpulint.analysis.project import ModuleContext
    from gpulint.checks import Rule

# LibCST, the analysis and the rules are imported where a file is checked, not with this module: a warm run
# answers every file from the cache and never needs them (a third of its time was importing them).

# GPULINT_NO_PREFILTER=1 parses every file: for benchmarks (the cost without the prefilter) and for
# checking that the prefilter never hides a finding.
_NO_PREFILTER = os.environ.get("GPULINT_NO_PREFILTER", "") not in ("", "0")

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    source: SourceText | Notebook | None = None  # the text findings point into (a notebook's: its module)
    skipped: str | None = None  # why the file was not checked although it was read (a notebook in R)
    # A notebook's code cells left out because they are not Python (yet): cell number -> why, e.g.
    # "cell 3:2:9: SyntaxError: invalid syntax". The other cells were checked without them.
    skipped_cells: dict[int, str] = field(default_factory=dict)


def display_path(path: Path | str) -> str:
    """Relative to the working directory when below it, as users and ruff expect."""
    text = str(path)
    if text == "-" or text.startswith("<"):
        return text
    absolute = os.path.abspath(text)
    cwd = os.getcwd()
    if absolute == cwd or absolute.startswith(cwd + os.sep):
        return os.path.relpath(absolute, cwd)
    return text


def file_error(path: str, message: str, name: str = IO_ERROR, row: int = 1, column: int = 1) -> Diagnostic:
    return Diagnostic(
        code=None,
        name=name,
        message=message,
        filename=path,
        location=Location(row, column),
        end_location=Location(row, column),
        severity=Severity.ERROR,
    )


_ENABLED: dict[tuple, list[type[Rule]]] = {}


def _enabled_rules(settings: Settings) -> list[type[Rule]]:
    """The rule classes `settings` enables, computed once per selection (not once per file)."""
    from gpulint.checks import all_rules
    from gpulint.checks.base import REGISTRY

    key = (settings.select, settings.extend_select, settings.ignore, settings.preview, len(REGISTRY))
    rules = _ENABLED.get(key)
    if rules is None:
        registry = all_rules()
        rules = _ENABLED[key] = [registry[code] for code in settings.enabled_codes]
    return rules


def rules_for(text: str, path: str, settings: Settings, project: ModuleContext | None = None) -> list[type[Rule]]:
    """The enabled rules that could fire on this text: the `requires` prefilter, no parsing.

    Rules that need GPU context also need the project to say the module is GPU code (`project`), or,
    without a project or for a module it could not parse, the text to hold a word GPU evidence is written with. A rule whose `project_tags`
    the module has (it calls a helper that syncs, ...) is a candidate whatever its text says.
    Each distinct pattern is tested at most once per file, however many rules share it.
    """
    from gpulint.analysis.devices import may_have_own_evidence
    from gpulint.checks import Rule
    from gpulint.checks.base import text_matcher

    default_applies = Rule.applies_to_text.__func__
    ignored = _ignored_for(path, settings, text, project)
    seen: dict[str, bool] = {}
    # a file the project could not parse says only what its text says (and gets its syntax error reported)
    gpu = project.gpu if project is not None and project.parsed else may_have_own_evidence(text)
    tags = project.tags if project is not None else frozenset()
    candidates = []
    for rule in _enabled_rules(settings):
        if rule.code in ignored or (rule.needs_gpu_context and not gpu):
            continue
        if rule.project_tags and tags.intersection(rule.project_tags):
            candidates.append(rule)
            continue
        if rule.applies_to_text.__func__ is not default_applies:  # a rule with its own prefilter logic
            if rule.applies_to_text(text):
                candidates.append(rule)
            continue
        for pattern in rule.text_requirements():
            found = seen.get(pattern)
            if found is None:
                found = seen[pattern] = text_matcher(pattern)(text)
            if not found:
                break
        else:
            candidates.append(rule)
    return candidates


def _ignored_for(path: str, settings: Settings, text: str, project: ModuleContext | None = None) -> frozenset[str]:
    """Codes that do not run on `path`: `per-file-ignores`, and in test files the rules that skip tests
    (not in a script that only the default conventions take for a test: `copymem_test.py` that parses its
    command line when it is imported is run, never collected; nor in a module named like one that the project's
    code imports and that holds no test: `analysis/test_named_modules.py`)."""
    ignored = settings.ignored_for(path) if settings.per_file_ignores else frozenset()
    if settings.test_paths and settings.is_test_path(path):
        from gpulint.analysis.test_code import DEFAULT_TEST_PATHS, script_named_like_a_test
        from gpulint.analysis.test_named_modules import library_named_like_a_test
        from gpulint.checks import all_rules

        if settings.test_paths == DEFAULT_TEST_PATHS and (
            script_named_like_a_test(text) or (project is not None and library_named_like_a_test(text, project.imported_by_code))
        ):
            return ignored
        ignored |= {code for code, rule in all_rules().items() if not rule.applies_to_tests}
    return ignored


# libcst's native parser overflows its stack (a segfault, not an exception) on a few thousand nested
# brackets or chained operators, and slows down quadratically long before that. CPython's own parser
# measures nesting safely, so it looks at the file first; anything deeper than this is generated code.
MAX_NESTING = 500
_PYTHON_LIMITS = ("too many nested parentheses", "too many levels of indentation")


def _nesting(tree: ast.AST) -> int:
    """The depth of the syntax tree as libcst builds it (`a and b and c` nests there)."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_NESTING:
            break
        for child in ast.iter_child_nodes(node):
            extra = len(child.values) - 2 if isinstance(child, ast.BoolOp) else 0
            stack.append((child, depth + 1 + max(extra, 0)))
    return deepest


def parse(text: str, path: str) -> cst.Module | Diagnostic:
    tree = python_tree(text, path)
    if isinstance(tree, Diagnostic):
        return tree
    return _libcst_parse(text, path, *_plan(text, tree))


def _plan(text: str, tree: ast.Module | SyntaxError) -> tuple[SyntaxError | None, Layout | None]:
    """What LibCST's parse needs from CPython's tree (its error; where to cut a large file), so that the
    tree itself can go before LibCST parses."""
    if isinstance(tree, SyntaxError):
        return tree, None
    return None, layout(text, tree) if len(text) >= PIECEWISE_ABOVE else None


def python_tree(text: str, path: str) -> ast.Module | SyntaxError | Diagnostic:
    """CPython's tree of `text` (the summary reads it, and it guards LibCST against deep nesting); the
    SyntaxError when only a newer grammar may accept it; a Diagnostic when the file cannot be checked."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # `"\d"` and friends: not ours to report
            tree = ast.parse(text)
    except (RecursionError, MemoryError):
        return file_error(path, "too deeply nested for the parser; skipped")
    except SyntaxError as error:
        if any(limit in str(error.msg) for limit in _PYTHON_LIMITS) or "null bytes" in str(error.msg):
            return _syntax_error(path, error)
        return error  # libcst may still accept a newer syntax than this interpreter's
    except ValueError as error:  # null bytes, before Python 3.12
        return file_error(path, f"SyntaxError: {error}", INVALID_SYNTAX)
    if _nesting(tree) > MAX_NESTING:
        return file_error(path, f"nested more than {MAX_NESTING} levels deep (generated code?); skipped")
    return tree


def _libcst_parse(text: str, path: str, python_error: SyntaxError | None, pieces: Layout | None) -> cst.Module | Diagnostic:
    import libcst as cst

    try:
        if pieces is not None:
            module = parse_in_pieces(text, pieces)  # a large file: LibCST's peak memory follows the largest piece
            if module is not None:
                return module
        return cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        if python_error is not None:
            return _syntax_error(path, python_error)  # CPython's location is the precise one
        # CPython compiles it (a tab after spaces in an indent, ...): not the user's error, but nothing to analyse.
        return file_error(path, _parser_limitation(text, error), PARSER_LIMITATION)
    except RecursionError:
        return file_error(path, "too deeply nested for the parser; skipped")


def _parser_limitation(text: str, error: cst.ParserSyntaxError) -> str:
    """Why LibCST cannot read a file CPython compiles, for the warning that the file was not checked."""
    return libcst_limitation((error.message or "a parser error").splitlines()[0], text)


def _reported(path: str, recovered: Recovered) -> Diagnostic:
    """A recovered file's `invalid-syntax` finding: CPython's error, and why the rest of the file was checked."""
    return replace(_syntax_error(path, recovered.error), help=recovered.explanation)


def _syntax_error(path: str, error: SyntaxError) -> Diagnostic:
    row = max(error.lineno or 1, 1)
    column = max(error.offset or 1, 1)
    return file_error(path, f"SyntaxError: {error.msg}", INVALID_SYNTAX, row, column)


# libcst's visitors recurse a few Python frames per tree level: MAX_NESTING levels need about 3,000.
RECURSION_ROOM = 4000


@contextmanager
def _recursion_room():
    """Enough Python recursion for any tree under MAX_NESTING (main thread only: other threads may have small stacks)."""
    previous = sys.getrecursionlimit()
    raise_it = previous < RECURSION_ROOM and threading.current_thread() is threading.main_thread()
    if raise_it:
        sys.setrecursionlimit(RECURSION_ROOM)
    try:
        yield
    finally:
        if raise_it:
            sys.setrecursionlimit(previous)


def check_source(
    text: str,
    path: str,
    settings: Settings,
    *,
    prefilter: bool = True,
    module: cst.Module | None = None,
    project: ModuleContext | None = None,
) -> list[Diagnostic]:
    """Diagnostics for one file's text. `prefilter=False` parses every file (to test the prefilter);
    `module` is `text` already parsed (the fixer has it), so it is not parsed again; `project` is the file's
    context in its project (`gpulint.projects`), without which the file is read alone."""
    if prefilter and not _NO_PREFILTER:
        rules = rules_for(text, path, settings, project)
    else:
        ignored = _ignored_for(path, settings, text, project)
        rules = [rule for rule in _enabled_rules(settings) if rule.code not in ignored]
    if not rules:
        return _old_syntax_error(text, path, settings) if project is not None and project.parsed else []
    with _recursion_room():
        return run_within(
            settings.analysis_timeout,
            lambda: _check_parsed(text, path, settings, rules, module, project),
            lambda: [timed_out(path, settings)],
        )


def _old_syntax_error(text: str, path: str, settings: Settings) -> list[Diagnostic]:
    """The `invalid-syntax` finding of a Python 3.6 file no rule checks now that the project has read it (a
    module it knows runs on the CPU): reported where it was before, when the file's text alone would have had a
    rule check it, as for any file the project cannot parse."""
    if not any(word in text for word in ("async", "await")) or not rules_for(text, path, settings):
        return []
    tree = python_tree(text, path)
    recovered = recover(text, tree) if isinstance(tree, SyntaxError) else None
    return [] if recovered is None else [_reported(path, recovered)]


def timed_out(path: str, settings: Settings) -> Diagnostic:
    """The file's analysis used up `analysis-timeout` (a file that cannot be checked, as an unreadable one)."""
    return file_error(path, timeout_message(settings.analysis_timeout or 0))


def _check_parsed(
    text: str, path: str, settings: Settings, rules: list[type[Rule]], module: cst.Module | None, project: ModuleContext | None
) -> list[Diagnostic]:
    from gpulint.analysis import SemanticModel
    from gpulint.analysis.project import lone_context
    from gpulint.analysis.summary import summarize
    from gpulint.fix_invariants import enforce as enforce_fix_invariants

    recovered = export = None
    if module is None or project is None:
        tree = python_tree(text, path)
        if isinstance(tree, Diagnostic):
            return [tree]
        if isinstance(tree, SyntaxError):
            recovered = recover(text, tree)  # Python 3.6 code: `x.cuda(async=True)`
            if recovered is not None:
                tree = recovered.tree
            else:
                export = read_export(text)  # a Databricks notebook's `!cmd`: valid where it runs
                if isinstance(export, SyntaxError):
                    tree, export = export, None  # broken elsewhere too: report that error, not the `!cmd` line
                elif export is not None:
                    tree = export.tree
        if project is None:
            project = lone_context(summarize(text, tree if isinstance(tree, ast.Module) else None), path)
            if not project.gpu:
                rules = [rule for rule in rules if not rule.needs_gpu_context]
                if not rules:
                    return []
        if module is None:
            parsed = recovered.text if recovered is not None else export.text if export is not None else text  # same rows
            plan = _plan(parsed, tree)
            del tree  # CPython's tree goes before LibCST's is built: one large tree at a time
            module = _libcst_parse(parsed, path, *plan)
            if isinstance(module, Diagnostic):
                return [module]
            if recovered is not None:
                module = recovered.restore(module)  # the user's names again: quotes and positions are theirs
                if module is None:
                    return [_syntax_error(path, recovered.error)]  # never happens: LibCST prints what it parsed
    try:
        model = SemanticModel(module, path, text, project=project)
    except RecursionError:
        return [file_error(path, "too deeply nested to analyse; skipped")]
    diagnostics: list[Diagnostic] = []
    for rule_class in rules:
        if rule_class.needs_gpu_context and not model.uses_cuda or rule_class.reads_findings:
            continue
        if not rule_class.applies_to_tests and model.test_code.whole_module:
            continue
        rule = rule_class(model, settings.options_for(rule_class.code), target_torch=settings.target_torch)
        try:
            found = _where_shipped_code_runs(model, list(rule.check()))
            diagnostics.extend(found if rule_class.applies_to_tests else _outside_tests(model, found))
        except RecursionError:
            diagnostics.append(file_error(path, f"{rule_class.code}: too deeply nested to analyse; skipped"))
        except Exception as error:  # noqa: BLE001 - one broken rule must not stop the others
            diagnostics.append(
                file_error(path, f"{rule_class.code} failed on this file ({_error_text(error)}); please report it", INTERNAL_ERROR)
            )
    readers = [r for r in rules if r.reads_findings]
    if diagnostics or readers:
        suppressions = parse_suppressions(text)
        if readers:
            ignored = _ignored_for(path, settings, text, project)
            if model.test_code.whole_module:
                ignored |= {rule.code for rule in rules if not rule.applies_to_tests}
            enabled = frozenset(settings.enabled_codes) - ignored
            for rule_class in readers:
                rule = rule_class(model, settings.options_for(rule_class.code), target_torch=settings.target_torch)
                diagnostics.extend(rule.check_findings(list(diagnostics), suppressions, enabled))
        diagnostics = [
            replace(d, noqa_row=suppressions.noqa_row(d.location.row)) if d.code is not None else d
            for d in diagnostics
            if not suppressions.suppresses(d)
        ]
        diagnostics = enforce_fix_invariants(without_stubs(text), diagnostics)  # no name only a broken cell binds
        if settings.overrides_fixes:  # unfixable, extend-safe-fixes, extend-unsafe-fixes
            diagnostics = [settings.with_fix_policy(d) for d in diagnostics]
    if recovered is not None:
        # Still a syntax error where the user runs it; no fix, since no fixed text of it could be checked to parse.
        diagnostics = [_reported(path, recovered)] + [replace(d, fix=None) for d in diagnostics]
    elif export is not None:
        # No fix: the fixed text could not be written back around the masked escape lines.
        diagnostics = [replace(d, fix=None) for d in diagnostics]
    return sorted(diagnostics, key=Diagnostic.sort_key)


def _where_shipped_code_runs(model: SemanticModel, found: list[Diagnostic]) -> list[Diagnostic]:
    """The findings outside branches that never run with the shipped settings (`if ngpu > 1:` with `ngpu = 0`,
    a training branch every call of a notebook function skips) and outside branches
    that run only without a GPU (the `else:` of `if torch.cuda.is_available():`), outside loops that feed CPU
    batches to a model on the run's device (only a CPU run works: `analysis/cpu_fed_loops.py`), and outside
    superseded copies."""
    if not found:
        return found
    from gpulint.analysis.cpu_fed_loops import cpu_fed_rows
    from gpulint.analysis.gpu_free_branches import gpu_free_rows
    from gpulint.analysis.shipped_paths import unshipped_rows

    spans = unshipped_rows(model) + gpu_free_rows(model) + cpu_fed_rows(model)
    if model.project.superseded:  # an `old/` copy nothing imports: none of it runs (`analysis/superseded_code.py`)
        spans.append((1, len(model.lines)))
    if not spans:
        return found
    return [d for d in found if not any(first <= d.location.row <= last for first, last in spans)]


def _outside_tests(model: SemanticModel, found: list[Diagnostic]) -> list[Diagnostic]:
    """The findings that do not lie in a test class of the module."""
    if not found or not model.test_code.test_classes:
        return found
    rows = model.test_code.rows()
    return [d for d in found if not any(first <= d.location.row <= last for first, last in rows)]


def release_memory() -> None:
    """Return freed memory to the operating system: collect cycles, then trim glibc's heap."""
    import gc

    from gpulint.piecewise import trim_heap

    gc.collect()
    trim_heap()


# Below this many files to check (after the cache), starting worker processes costs more than it saves.
SERIAL_BELOW = 24


def default_jobs() -> int:
    """The CPUs this process may run on (a container's or `taskset`'s limit, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def open_document(path: str, source: SourceText) -> SourceText | Notebook:
    """What the analysis reads from a file's text: the text itself, or for a notebook (`.ipynb`) the parsed
    notebook, whose `text` is the module its code cells make. Raises SourceError for a bad notebook."""
    return Notebook.parse(source.text, source.bom) if is_notebook_path(path) else source


def check_document(path: str, source: SourceText, settings: Settings, project: ModuleContext | None = None) -> FileResult:
    """Check one file's decoded text: Python source, or a notebook's code cells as one module, with its
    context in its project (None: alone)."""
    try:
        document = open_document(path, source)
    except NotebookError as error:
        return FileResult(path, [file_error(path, str(error), row=error.location.row, column=error.location.column)])
    if isinstance(document, Notebook):
        if not document.is_python:
            return FileResult(path, [], None, skipped=f"the notebook's kernel runs {document.language}, not Python")
        if not _NO_PREFILTER and not rules_for(document.code, path, settings, project):
            # What check_source's prefilter says, before the cells are masked (and checked for cells that are
            # not Python: a notebook nothing would be checked in gets no warning about them either).
            return FileResult(path, [])
        if document.no_cell_parses:
            first = next(iter(document.broken))
            return FileResult(path, [], None, skipped=f"no code cell is valid Python ({document.broken_label(first)})")
    diagnostics = check_source(document.text, path, settings, project=project)
    if isinstance(document, Notebook):
        diagnostics = document.localize(path, diagnostics)  # "line 12" of the module is "cell 3, line 2"
    skipped = parser_limitation(diagnostics)
    if skipped is not None:
        return FileResult(path, [], None, skipped=skipped)
    if isinstance(document, Notebook):
        cells = {number: document.broken_label(number) for number in document.broken}
        return FileResult(path, diagnostics, document, skipped_cells=cells)
    return FileResult(path, diagnostics, document)


def parser_limitation(diagnostics: list[Diagnostic]) -> str | None:
    """Why a file is skipped when CPython compiles it but LibCST cannot parse it (`PARSER_LIMITATION`), else None."""
    for d in diagnostics:
        if d.name == PARSER_LIMITATION:
            return d.message
    return None


def _check_bytes(shown: str, data: bytes, settings: Settings, project: ModuleContext | None = None) -> FileResult:
    from gpulint.source import decode_source

    try:
        source = decode_source(data)
    except SourceError as error:
        return FileResult(shown, [file_error(shown, str(error))])
    return check_document(shown, source, settings, project)


_worker_settings: Settings | None = None
_worker_shared: Any = None  # what every item of a `map_files` call needs (fix's project index)


def _init_worker(settings: Settings, parent: int, shared: Any = None) -> None:
    global _worker_settings, _worker_shared
    import signal

    # Ctrl-C is the parent's to handle (it stops the pool); workers must not print tracebacks of their own.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with(parent)
    _worker_settings = settings
    _worker_shared = shared


def _die_with(parent: int) -> None:
    """Make this worker end when gpulint does. A parent killed (`kill -9`, a second SIGTERM while it exits)
    never sends the pool's stop sentinels: its orphaned workers would wait forever, holding stdout open."""
    import signal

    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent was gone before the line above
        os._exit(1)


def _run_task(task: Callable[..., R], item: T) -> R:
    """In a worker process: one item, with the settings (and the shared value) the parent resolved."""
    assert _worker_settings is not None
    return task(item, _worker_settings) if _worker_shared is None else task(item, _worker_settings, _worker_shared)


def _check_item(item: tuple[str, bytes, bytes | ModuleContext | None], settings: Settings) -> FileResult:
    """Check one file's bytes with its context in the project (pickled: `lint_files` keeps them so)."""
    context = pickle.loads(item[2]) if isinstance(item[2], bytes) else item[2]
    result = _check_bytes(item[0], item[1], settings, context)
    if len(item[1]) >= LARGE_FILE:
        # A large file's LibCST tree and model are cyclic garbage now (parent links, metadata): left to the
        # collector's own schedule, they stayed alive while the next file was parsed (torch: 338 MB held after
        # common_methods_invocations.py, 385 MB with the file after it). Collected at once, that memory is reused.
        release_memory()
    if not result.diagnostics:
        result.source = None  # nothing will show it; do not keep (or send back) the text
    return result


# A file of this many bytes or more has its garbage collected as soon as it is checked (`_check_item`).
LARGE_FILE = 256 * 1024


def _pool_context():
    import multiprocessing

    # fork starts workers in milliseconds with the rules already imported; elsewhere the platform default.
    if sys.platform == "linux" and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _cacheable(result: FileResult) -> bool:
    """Results that follow from the file's bytes alone; a crashed rule or an unreadable file is retried (and a
    skipped notebook is read again, so that the run says it was skipped)."""
    return result.skipped is None and not result.skipped_cells and all(d.name not in (INTERNAL_ERROR, IO_ERROR) for d in result.diagnostics)


def map_files(task: Callable[..., R], items: list[T], settings: Settings, jobs: int | None = None, shared: Any = None) -> list[R]:
    """`task(item, settings)` for each item (`task(item, settings, shared)` when `shared` is given), results in
    the items' order: in a process pool when there are many (each worker gets the settings and `shared` once),
    serially when there are few. `task` must be a module-level function (workers find it by name)."""
    from gpulint.progress import Progress

    jobs = jobs or default_jobs()
    done: list[R] = []
    with Progress(len(items)) as progress:
        if jobs > 1 and len(items) >= SERIAL_BELOW:
            from concurrent.futures import ProcessPoolExecutor
            from functools import partial

            workers = min(jobs, len(items))
            chunk = max(1, min(4, len(items) // (workers * 8)))
            pool = ProcessPoolExecutor(workers, mp_context=_pool_context(), initializer=_init_worker, initargs=(settings, os.getpid(), shared))
            try:
                for result in pool.map(partial(_run_task, task), items, chunksize=chunk):
                    done.append(result)
                    progress.advance()
            except BaseException:
                # Ctrl-C (or a crash): drop the items not started; the few chunks already handed to workers
                # (at most workers + 1, of <= 4 items each) finish first. Killing workers instead races with
                # the executor's own bookkeeping (a hang at exit on CPython 3.11).
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown()
        else:
            for item in items:
                done.append(task(item, settings) if shared is None else task(item, settings, shared))
                progress.advance()
    return done


def lint_files(files: list[Path], settings: Settings, jobs: int | None = None, use_cache: bool = True) -> list[FileResult]:
    """Check many files; results in a deterministic order (by path), the same for any `jobs`.

    Two passes: every module of the files' project is summarised (`gpulint.projects`, cached by content),
    then each file is checked with its context in that project. Unchanged files whose context is unchanged
    are answered from the cache (keyed by gpulint's code, the settings, each file's bytes and the digest of
    its context); the rest are checked in a process pool when there are many, serially when there are few.
    """
    from gpulint.cache import Cache, content_hash
    from gpulint.projects import Project
    from gpulint.source import decode_source

    cache = Cache(settings) if use_cache else None
    results: list[FileResult] = []
    readable: list[tuple[Path, str, bytes]] = []
    for path in files:
        shown = display_path(path)
        try:
            readable.append((Path(os.path.abspath(path)), shown, read_source_bytes(path)))
        except SourceError as error:
            results.append(FileResult(shown, [file_error(shown, str(error))]))
    project = Project([p for p, _, _ in readable], settings, use_cache, {p: data for p, _, data in readable})
    # the project hashed the bytes already (and a warm run needs nothing else from it)
    pending: list[tuple[Path, str, bytes, str | None]] = []  # digest None: its context is not known yet
    for path, shown, data in readable:
        known = project.known_context_digest(path) if cache is not None else ""
        digest = f"{project.hashes.get(path) or content_hash(data)}:{known}" if known else known
        if digest:
            cached = cache.get(path, shown, digest)
            if cached is not None:
                # The text is kept only where there is something to show (snippets, --add-noqa).
                results.append(FileResult(shown, cached, open_document(shown, decode_source(data)) if cached else None))
                continue
        pending.append((path, shown, data, digest))
    # Only the contexts are needed from here on, each until its file is checked. As objects they hold far more
    # than they say (torch's 2,285: 170 MB, against 8 MB pickled), so they are kept pickled, as a process pool
    # would send them anyway; the index goes before the files are parsed (and before workers start, so that
    # they do not inherit it).
    contexts = project.pickled_contexts([path for path, *_ in pending])
    built = "index" in project.__dict__
    todo: list[tuple[Path, str, bytes, str, bytes]] = []
    for (path, shown, data, digest), (context_digest, context) in zip(pending, contexts):
        if digest is None:
            digest = f"{project.hashes.get(path) or content_hash(data)}:{context_digest}"
            cached = cache.get(path, shown, digest)
            if cached is not None:
                results.append(FileResult(shown, cached, open_document(shown, decode_source(data)) if cached else None))
                continue
        todo.append((path, shown, data, digest, context))
    del project, pending, contexts
    if built:
        release_memory()
    # The largest files first: a file's LibCST tree and model take ~180 times its size (torch's 1.3 MB
    # common_methods_invocations.py: 240 MB), so the largest is checked while the least is held, not on top
    # of the results (and the freed trees' scattered memory) of every file before it; in a pool, the long
    # files start first. The results are sorted by path below: the order is not seen.
    todo.sort(key=lambda item: -len(item[2]))
    checked = map_files(_check_item, [(shown, data, context) for _, shown, data, _, context in todo], settings, jobs)

    if cache is not None:
        for (path, shown, _, digest, _), result in zip(todo, checked):
            if _cacheable(result):
                cache.put(path, shown, digest, result.diagnostics)
        cache.save()
    results.extend(checked)
    return sorted(results, key=lambda r: r.path)


def _error_text(error: BaseException, limit: int = 160) -> str:
    """`KeyError: ...` on one short line: an error holding a syntax tree printed it whole (hundreds of lines)."""
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
