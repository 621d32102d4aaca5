"""gpulint as a library: check and fix Python source, write the fixes, find settings, describe rules.

    from gpulint import api

    settings = api.discover_settings()                        # [tool.gpulint] of the nearest pyproject.toml
    report = api.check(["src/"], settings)                    # paths (files, folders) and/or api.Source objects
    fixes = api.fix([api.Source(text, "train.py")], settings) # what the fixes would change, per file
    api.write_fixes(api.fix(["src/"], settings))              # write them, atomically, file by file

Nothing here prints, exits or installs a signal handler. A front-end (the CLI, an editor) presents the reports
and, to stop a run of writes between two files, passes a `Cancellation` that its signal handler sets.

Every entry point takes a list of inputs and resolves them to documents (path + text) before any analysis, so
new kinds of input (a notebook's cells as one module) and a pass over all documents first (a project index)
fit behind the same signatures.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Union

from gpulint.config import ConfigError, Settings, load_settings, with_overrides
from gpulint.diagnostics import Applicability, Diagnostic, Edit, Fix, Location, Severity, is_applicable, rule_url
from gpulint.linter import FileResult, check_document, check_source, display_path, file_error, lint_files, map_files, parser_limitation
from gpulint.notebook import Notebook, NotebookError, is_notebook_path
from gpulint.source import SourceError, SourceText, decode_source, discover, force_excluded, read_source_bytes

if TYPE_CHECKING:
    from gpulint.analysis.project import ProjectIndex

__all__ = [
    "Applicability", "Cancellation", "ConfigError", "Diagnostic", "Edit", "FileFix", "FileResult", "Fix",
    "FixReport", "Location", "NoqaFile", "NoqaReport", "Notebook", "Report", "RuleInfo", "Settings", "Severity", "Source",
    "SourceError", "Terminated", "add_noqa", "check", "discover_settings", "display_path", "fix", "fix_edits",
    "noqa_edit", "restore_originals", "rule", "rules", "write_fixes",
]  # fmt: skip

INTERRUPTED = "interrupted before it was written"


class Terminated(KeyboardInterrupt):
    """SIGTERM delivered as an exception (the CLI raises it from its handler): stop as for Ctrl-C."""


class Cancellation:
    """A request to stop a run of writes after the file in flight. A front-end sets it from a signal handler
    or another thread; `write_fixes` and `add_noqa` look at it between files."""

    def __init__(self) -> None:
        self.reason: object = None  # what asked to stop (the CLI stores the signal number)

    def cancel(self, reason: object = True) -> None:
        if self.reason is None:
            self.reason = reason

    @property
    def cancelled(self) -> bool:
        return self.reason is not None


@dataclass(frozen=True)
class Source:
    """Python source held in memory (an editor buffer, stdin, generated code), reported under `path`.

    `path` is also what `per-file-ignores` and `--force-exclude` match; `encoding` and `bom` say how
    `FileFix.fixed_bytes` encodes a fix (a file read from disk keeps its PEP 263 encoding and BOM). A `path`
    ending in `.ipynb` makes `text` a Jupyter notebook's JSON.
    """

    text: str
    path: str = "<string>"
    encoding: str = "utf-8"
    bom: bool = False

    @classmethod
    def from_bytes(cls, data: bytes, path: str = "-") -> Source:
        """Decode as Python does (BOM, coding cookie, UTF-8); raises SourceError for binary or undecodable data."""
        decoded = decode_source(data)
        return cls(decoded.text, path, decoded.encoding, decoded.bom)

    def encode(self, text: str) -> bytes:
        """`text` in this source's encoding (with its BOM); raises UnicodeEncodeError when it does not fit."""
        return SourceText(text, self.encoding, self.bom).encode(text)


Inputs = Union[str, os.PathLike, Source, Iterable[Union[str, os.PathLike, Source]]]


def discover_settings(start: str | os.PathLike | None = None, *, config: str | os.PathLike | None = None, **overrides) -> Settings:
    """The settings `gpulint` would use: `config` (a TOML file) when given, else `[tool.gpulint]` of the nearest
    pyproject.toml at or above `start` (default: the working directory), else the defaults; then `overrides`, the
    command line's flags by field name (`select=("GPU1",)`, `unsafe_fixes=True`; None means not given; `ignore`
    and `extend_select` add to the configuration's lists). Raises ConfigError naming what is wrong."""
    folder = None
    if start is not None:
        folder = Path(start)
        if folder.is_file():
            folder = folder.parent
    base = load_settings(None if config is None else os.fspath(config), folder)
    return with_overrides(base, **overrides)


@dataclass
class Report:
    """What `check` found: one FileResult per file, sorted by path, and the settings it used."""

    files: list[FileResult]
    settings: Settings

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Every finding, sorted by file, position and code."""
        return sorted((d for f in self.files for d in f.diagnostics), key=Diagnostic.sort_key)

    @property
    def sources(self) -> dict[str, str | Notebook]:
        """The text of each file with findings, by path (reporters quote source lines from it); for a notebook the
        parsed `Notebook`, whose `text` (its cells as one module) the findings' rows count in."""
        return {f.path: _shown(f.source) for f in self.files if f.source is not None and f.diagnostics}

    @property
    def skipped(self) -> list[tuple[str, str]]:
        """(path, why) for each file read but not checked (a notebook whose kernel is not Python, a file only
        CPython's parser reads)."""
        return [(f.path, f.skipped) for f in self.files if f.skipped]

    @property
    def skipped_cells(self) -> list[tuple[str, int, str]]:
        """(path, cell number, why) for each notebook code cell left out because it is not Python (yet): the
        notebook's other cells were checked without it."""
        return [(f.path, number, why) for f in self.files for number, why in f.skipped_cells.items()]

    def fixable(self) -> dict[str, Counter]:
        """Per file, the rule codes (with counts) whose fixes `fix` would apply under these settings."""
        found: dict[str, Counter] = {}
        for d in self.diagnostics:
            if d.code is not None and is_applicable(d, self.settings.unsafe_fixes):
                found.setdefault(d.filename, Counter())[d.code] += 1
        return found


def check(inputs: Inputs, settings: Settings | None = None, *, jobs: int | None = None, cache: bool = True) -> Report:
    """Check files, folders (walked as `gpulint check` walks them) and in-memory sources.

    A path that does not exist, an unreadable or undecodable file and a syntax error are findings of their own
    (`io-error`, `invalid-syntax`), never exceptions. `jobs` worker processes check many files at once (default:
    the CPUs); `cache` answers unchanged files from the result cache (in-memory sources are never cached).
    """
    settings = settings or discover_settings()
    paths, sources = _split(inputs)
    results: list[FileResult] = []
    if paths:
        files, missing = discover(paths, settings)
        results += [FileResult(p, [file_error(p, reason)]) for p, reason in missing]
        results += lint_files(files, settings, jobs=jobs, use_cache=cache)
    for source in sources:
        if not _excluded(source, settings):
            results.append(check_document(source.path, SourceText(source.text, source.encoding, source.bom), settings))
    return Report(sorted(results, key=lambda r: r.path), settings)


def _shown(source: SourceText | Notebook) -> str | Notebook:
    return source if isinstance(source, Notebook) else source.text


@dataclass
class FileFix:
    """One file's fixes: what `fix` computed and, after `write_fixes`, whether it reached the disk."""

    source: Source  # the text that was fixed: its path, original text and encoding
    fixed: str  # the text with every applicable fix applied (the original when none applied)
    fixes: Counter  # rule code -> findings fixed
    remaining: list[Diagnostic]  # the findings left in `fixed`
    dropped: list[Diagnostic]  # fixes left out because their result did not parse: a bug in gpulint
    file: Path | None = None  # the file it was read from; None for an in-memory Source
    written: bool = False  # `write_fixes` wrote `fixed` to `file`
    write_error: str | None = None  # why `write_fixes` did not write it
    skipped: str | None = None  # why it was not fixed although it was read (a notebook whose kernel is not Python)
    skipped_cells: dict[int, str] = field(default_factory=dict)  # a notebook's cells that are not Python, kept as they are

    @property
    def path(self) -> str:
        return self.source.path

    @property
    def original(self) -> str:
        return self.source.text

    @property
    def changed(self) -> bool:
        return self.fixed != self.source.text

    @property
    def in_effect(self) -> bool:
        """The fixes are what the file now holds: written, or nothing to write."""
        return self.written or not self.changed

    def document(self, fixed: bool | None = None) -> str | Notebook:
        """The fixed text (or the original; default: what the file now holds) as reporters quote it: the text,
        or for a notebook the parsed `Notebook`, whose module the rows of `remaining` count in (when fixed)."""
        text = self.fixed if (self.in_effect if fixed is None else fixed) else self.original
        return Notebook.parse(text, self.source.bom) if is_notebook_path(self.path) else text

    @property
    def edits(self) -> tuple[Edit, ...]:
        """Whole-line edits, in rows of the original, that turn it into `fixed` (for an editor to apply)."""
        import difflib

        from gpulint.lines import lines_with_ends

        before, after = lines_with_ends(self.original), lines_with_ends(self.fixed)
        matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
        return tuple(
            Edit(Location(i1 + 1, 1), Location(i2 + 1, 1), "".join(after[j1:j2]))
            for tag, i1, i2, j1, j2 in matcher.get_opcodes()
            if tag != "equal"
        )

    def diff(self) -> str:
        """A unified diff from the original to the fixed text, as `gpulint fix` prints it ('' when unchanged); for
        a notebook, one diff per changed cell (`nb.ipynb:cell 3`)."""
        import difflib

        from gpulint.lines import lines_with_ends

        if is_notebook_path(self.path):
            return Notebook.parse(self.original).cell_diff(Notebook.parse(self.fixed), self.path) if self.changed else ""

        lines = difflib.unified_diff(lines_with_ends(self.original), lines_with_ends(self.fixed), fromfile=self.path, tofile=self.path)
        return "".join(lines)

    def fixed_bytes(self) -> bytes:
        """`fixed` in the original's encoding (raises UnicodeEncodeError when a fix added what it cannot hold)."""
        return self.source.encode(self.fixed)


@dataclass
class FixReport:
    """What `fix` computed for each file (sorted by path), the inputs it could not read, and its settings
    (`settings.unsafe_fixes` says whether unsafe fixes were applied)."""

    files: list[FileFix]
    errors: list[Diagnostic]  # missing paths, unreadable or undecodable files
    settings: Settings
    cancelled: bool = False  # `write_fixes` stopped before every changed file was written

    @property
    def changed(self) -> list[FileFix]:
        return [f for f in self.files if f.changed]

    @property
    def fixed_count(self) -> int:
        return sum(sum(f.fixes.values()) for f in self.files)

    @property
    def hidden_unsafe(self) -> int:
        """Remaining findings whose (unsafe) fix `unsafe=True` would apply."""
        if self.settings.unsafe_fixes:
            return 0
        return sum(1 for f in self.files for d in f.remaining if d.fix is not None and d.fix.applicability == Applicability.UNSAFE)

    def findings(self) -> list[Diagnostic]:
        """The findings in the files as they now stand, with `errors`: a file's `remaining` when its fixes are in
        effect, else those of its original text (checked again)."""
        found = list(self.errors)
        for f in self.files:
            if f.in_effect:
                found += f.remaining
            else:
                found += check_document(f.path, SourceText(f.original, f.source.encoding, f.source.bom), self.settings).diagnostics
        return sorted(found, key=Diagnostic.sort_key)

    @property
    def skipped(self) -> list[tuple[str, str]]:
        """(path, why) for each file read but not fixed (a notebook whose kernel is not Python, a file only
        CPython's parser reads)."""
        return [(f.path, f.skipped) for f in self.files if f.skipped]

    @property
    def skipped_cells(self) -> list[tuple[str, int, str]]:
        """(path, cell number, why) for each notebook code cell that is not Python: left byte for byte as it was,
        the other cells fixed without it."""
        return [(f.path, number, why) for f in self.files for number, why in f.skipped_cells.items()]


def fix(inputs: Inputs, settings: Settings | None = None, *, unsafe: bool | None = None, jobs: int | None = None, cache: bool = True) -> FixReport:
    """Compute the fixes for files, folders and in-memory sources; nothing is written (see `write_fixes`).

    Safe fixes are applied, and unsafe ones too when `unsafe` (default: `settings.unsafe_fixes`). Fixes are
    applied and the text checked again until nothing changes; a fix whose result would not parse is dropped
    and listed in `FileFix.dropped`. Files are independent: `jobs` worker processes fix many at once. Results
    are never cached; `cache` lets the project's module summaries come from (and go to) the cache.
    """
    settings = settings or discover_settings()
    if unsafe is not None:
        settings = replace(settings, unsafe_fixes=unsafe)
    paths, sources = _split(inputs)
    documents: list[tuple[Source, Path | None]] = []
    errors: list[Diagnostic] = []
    if paths:
        files, missing = discover(paths, settings)
        errors += [file_error(p, reason) for p, reason in missing]
        for path in files:
            shown = display_path(path)
            try:
                documents.append((_readable(Source.from_bytes(read_source_bytes(path), shown)), path))
            except SourceError as error:
                errors.append(_unreadable(shown, error))
    for source in sources:
        if not _excluded(source, settings):
            try:
                documents.append((_readable(source), None))
            except SourceError as error:
                errors.append(_unreadable(source.path, error))
    from gpulint.projects import load_project

    # What `check` knows of the project, `fix` knows: each file is fixed with its context in it.
    on_disk = [file for _, file in documents if file is not None]
    project = load_project(on_disk, settings, use_cache=cache) if on_disk else None
    fixed = map_files(_fix_document, documents, settings, jobs, shared=project)
    return FixReport(sorted(fixed, key=lambda f: f.path), errors, settings)


def _unreadable(path: str, error: SourceError) -> Diagnostic:
    at = error.location if isinstance(error, NotebookError) else Location(1, 1)  # invalid JSON: where
    return file_error(path, str(error), row=at.row, column=at.column)


def _readable(source: Source) -> Source:
    """`source`, once a notebook has been found to be one (raises SourceError naming what is wrong with it)."""
    if is_notebook_path(source.path):
        Notebook.parse(source.text, source.bom)
    return source


def _fix_document(document: tuple[Source, Path | None], settings: Settings, project: ProjectIndex | None = None) -> FileFix:
    """Fix one document; a file on disk with its context in `project`, an in-memory source alone."""
    from gpulint.fixer import fix_source

    source, file = document
    project = project if file is not None else None
    if is_notebook_path(source.path):
        return _fix_notebook(source, file, settings, project)
    outcome = fix_source(source.text, source.path, settings, project=project)
    skipped = parser_limitation(outcome.remaining)
    if skipped is not None:
        return FileFix(source, source.text, Counter(), [], [], file, skipped=skipped)
    return FileFix(source, outcome.text, outcome.fixed, outcome.remaining, outcome.broken, file)


def _fix_notebook(source: Source, file: Path | None, settings: Settings, project: ProjectIndex | None) -> FileFix:
    """Fix a notebook's cells as one module, then write back only the cells that changed."""
    from gpulint.fixer import fix_source

    notebook = Notebook.parse(source.text, source.bom)
    if not notebook.is_python or notebook.no_cell_parses:
        unchecked = check_document(source.path, SourceText(source.text, source.encoding, source.bom), settings)
        return FileFix(source, source.text, Counter(), unchecked.diagnostics, [], file, skipped=unchecked.skipped)
    path = source.path
    # Cells that are not Python are left out of the module (their stubs stand for them) and never written.
    cells = {number: notebook.broken_label(number) for number in notebook.broken}
    outcome = fix_source(notebook.text, path, settings, project=project)
    skipped = parser_limitation(notebook.localize(path, outcome.remaining))
    if skipped is not None:
        return FileFix(source, source.text, Counter(), [], [], file, skipped=skipped)
    broken = notebook.localize(path, outcome.broken)
    if outcome.text == notebook.text:
        return FileFix(source, source.text, outcome.fixed, notebook.localize(path, outcome.remaining), broken, file, skipped_cells=cells)
    try:
        fixed = Notebook.parse(notebook.rewrite(outcome.text), source.bom)
        if fixed.text != outcome.text:
            raise NotebookError("the fixed notebook does not read back as fixed")
    except NotebookError:
        # A fix reached into an IPython line or across cells (a bug in gpulint): the notebook stays as it was.
        from gpulint.projects import context_for

        context = context_for(project, Path(path), notebook.text) if project is not None else None
        remaining = notebook.localize(path, check_source(notebook.text, path, settings, project=context))
        dropped = [d for d in remaining if is_applicable(d, settings.unsafe_fixes)]
        return FileFix(source, source.text, Counter(), remaining, dropped, file, skipped_cells=cells)
    return FileFix(source, fixed.raw, outcome.fixed, fixed.localize(path, outcome.remaining), broken, file, skipped_cells=cells)


def write_fixes(report: FixReport, cancel: Cancellation | None = None) -> FixReport:
    """Write each changed file of `report` in path order, atomically: every file ends fully fixed or untouched.

    A file that cannot be written (changed on disk since it was read, read-only, a full disk, a fix its
    encoding cannot hold) keeps its original and gets `write_error`; the others are still written. When `cancel`
    is set, the file in flight is finished and the rest are left as they were (`report.cancelled`; their
    `write_error` says so). An exception during a write (a second Ctrl-C) leaves the report true to the disk
    before it propagates. In-memory sources are not written. Returns `report`.
    """
    from gpulint import fixer  # looked up at call time: tests stand in for write_atomic

    pending = [f for f in report.files if f.changed and f.file is not None and not f.written]
    try:
        for f in pending:
            if cancel is not None and cancel.cancelled:
                report.cancelled = True
                break
            data = None
            f.write_error = None
            try:
                data = f.fixed_bytes()
                fixer.write_atomic(f.file, data, f.source.encode(f.original))
            except UnicodeEncodeError:
                f.write_error = f"the fixed text cannot be encoded as {f.source.encoding}"
            except fixer.WriteError as error:
                f.write_error = str(error)
            except BaseException:
                # Interrupted during this write: the rename either happened or it did not.
                f.written = data is not None and _holds(f.file, data)
                report.cancelled = True
                raise
            else:
                f.written = True
    finally:
        if report.cancelled:
            for f in pending:
                if not f.written and f.write_error is None:
                    f.write_error = INTERRUPTED
    return report


def restore_originals(report: FixReport) -> list[tuple[FileFix, str]]:
    """Put back the original of every file `write_fixes` wrote; returns the files that could not be restored,
    with the reason (each of those still holds its fixed text)."""
    from gpulint import fixer

    failed = []
    for f in report.files:
        if not f.written or f.file is None:
            continue
        try:
            fixer.write_atomic(f.file, f.source.encode(f.original), f.fixed_bytes())
        except fixer.WriteError as error:
            failed.append((f, str(error)))
        else:
            f.written = False
    return failed


def _holds(path: Path, data: bytes) -> bool:
    try:
        return Path(os.path.realpath(path)).read_bytes() == data
    except OSError:
        return False


@dataclass
class NoqaFile:
    """`add_noqa` on one file."""

    path: str
    added: int = 0  # lines given a `# noqa: CODE` comment
    skipped: dict[int, tuple[str, ...]] = field(default_factory=dict)  # row -> codes: the line ends in a backslash
    write_error: str | None = None  # the file was left as it was, and why


@dataclass
class NoqaReport:
    files: list[NoqaFile]
    cancelled: bool = False  # stopped before every file was done; the rest were left as they were

    @property
    def added(self) -> int:
        return sum(f.added for f in self.files if f.write_error is None)


def add_noqa(report: Report, cancel: Cancellation | None = None) -> NoqaReport:
    """Add `# noqa: CODE` to every line of `report` with a finding (a baseline), writing each file atomically.
    With `cancel` set, the file in flight is finished and the rest are left as they were."""
    from gpulint import fixer
    from gpulint.checks import all_rules
    from gpulint.suppression import add_noqa as add_comments

    registry = all_rules()

    done = NoqaReport([])
    for result in report.files:
        if cancel is not None and cancel.cancelled:
            done.cancelled = True
            break
        rows: dict[int, set[str]] = {}
        for d in result.diagnostics:
            if d.code is not None and not registry[d.code].reads_findings:  # a noqa for an unused noqa is no baseline
                rows.setdefault(d.noqa_row or d.location.row, set()).add(d.code)
        if not rows or result.source is None or result.path == "-":
            continue
        text, changed, skipped = add_comments(result.source.text, rows)
        entry = NoqaFile(result.path, changed, {row: tuple(sorted(rows[row])) for row in skipped})
        done.files.append(entry)
        if not changed:
            continue
        try:
            fixer.write_atomic(Path(result.path), result.source.encode(text), result.source.encode(result.source.text))
        except (fixer.WriteError, UnicodeEncodeError) as error:
            entry.write_error = str(error)
    return done


def fix_edits(source: Source, diagnostic: Diagnostic) -> tuple[Edit, ...]:
    """The edits of one finding's fix, for an editor to apply to `source` (the text the finding was reported in):
    () when the finding has no fix, its fix is display-only, or the fix applied alone would leave code that does
    not compile. Whatever its applicability: the caller shows whether it is safe (`diagnostic.fix.applicability`)."""
    from gpulint.fixer import applies_cleanly

    if not diagnostic.is_fixable or not applies_cleanly(source.text, diagnostic.fix.edits):
        return ()
    return diagnostic.fix.edits


def noqa_edit(source: Source, diagnostic: Diagnostic) -> Edit | None:
    """The edit that suppresses one finding with `# noqa: CODE` on its noqa row (merged into the noqa comment the
    line may have): it replaces that line's text, without its line break. None for a finding without a code (a
    syntax error), or when no comment can go there (the line ends in a backslash)."""
    from gpulint.lines import split_lines
    from gpulint.suppression import add_noqa as add_comments

    if diagnostic.code is None:
        return None
    row = diagnostic.noqa_row or diagnostic.location.row
    text, changed, _ = add_comments(source.text, {row: {diagnostic.code}})
    if not changed:
        return None
    before, after = split_lines(source.text)[row - 1], split_lines(text)[row - 1]
    return Edit(Location(row, 1), Location(row, len(before) + 1), after)


@dataclass(frozen=True)
class RuleInfo:
    """A rule's metadata, as `gpulint rule CODE --output-format json` prints it."""

    code: str
    name: str
    summary: str
    fix: str  # "Fix is always available.", "Fix is sometimes available (unsafe).", ...
    fix_availability: str  # "Always", "Sometimes" or "None"
    explanation: str  # the rule's document (Markdown)
    preview: bool
    options: dict  # option name -> {"default": ..., "help": ...}

    @property
    def url(self) -> str:
        return rule_url(self.code)

    def to_dict(self) -> dict:
        return asdict(self)


def rules() -> list[RuleInfo]:
    """Every rule, preview rules included, in code order."""
    from gpulint.checks import all_rules
    from gpulint.rule_docs import rule_record

    return [RuleInfo(**rule_record(r)) for r in all_rules().values()]


def rule(code_or_name: str) -> RuleInfo:
    """One rule by code (`GPU101`, any case) or name (`dataloader-without-workers`); ConfigError when unknown."""
    from gpulint.checks import all_rules
    from gpulint.rule_docs import rule_record

    for code, r in all_rules().items():
        if code_or_name.upper() == code or code_or_name == r.name:
            return RuleInfo(**rule_record(r))
    raise ConfigError(f"Unknown rule `{code_or_name}`")


def _split(inputs: Inputs) -> tuple[list[str], list[Source]]:
    if isinstance(inputs, (str, os.PathLike, Source)):
        inputs = [inputs]
    paths: list[str] = []
    sources: list[Source] = []
    for item in inputs:
        if isinstance(item, Source):
            sources.append(item)
        else:
            paths.append(os.fspath(item))
    return paths, sources


def _excluded(source: Source, settings: Settings) -> bool:
    """`--force-exclude` applies to an in-memory source by its path, as to a file named on the command line."""
    if not settings.force_exclude or source.path == "-" or source.path.startswith("<"):
        return False
    return force_excluded(Path(source.path), settings)
