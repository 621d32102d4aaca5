"""The library API: `check_source(text, path, settings) -> list[Diagnostic]`, and files on disk."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.checks import Rule, all_rules
from gpulint.checks.base import REGISTRY, text_matcher
from gpulint.config import Settings
from gpulint.diagnostics import INVALID_SYNTAX, IO_ERROR, Diagnostic, Location, Severity
from gpulint.source import SourceError, SourceText, read_source
from gpulint.suppression import parse_suppressions

INTERNAL_ERROR = "internal-error"
# GPULINT_NO_PREFILTER=1 parses every file: for benchmarks (the cost without the prefilter) and for
# checking that the prefilter never hides a finding.
_NO_PREFILTER = os.environ.get("GPULINT_NO_PREFILTER", "") not in ("", "0")


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    source: SourceText | None = None


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
_DEFAULT_APPLIES = Rule.applies_to_text.__func__


def _enabled_rules(settings: Settings) -> list[type[Rule]]:
    """The rule classes `settings` enables, computed once per selection (not once per file)."""
    key = (settings.select, settings.extend_select, settings.ignore, settings.preview, len(REGISTRY))
    rules = _ENABLED.get(key)
    if rules is None:
        registry = all_rules()
        rules = _ENABLED[key] = [registry[code] for code in settings.enabled_codes]
    return rules


def rules_for(text: str, path: str, settings: Settings) -> list[type[Rule]]:
    """The enabled rules that could fire on this text: the `requires` prefilter, no parsing.

    Each distinct pattern is tested at most once per file, however many rules share it.
    """
    ignored = settings.ignored_for(path) if settings.per_file_ignores else frozenset()
    seen: dict[str, bool] = {}
    candidates = []
    for rule in _enabled_rules(settings):
        if rule.code in ignored:
            continue
        if rule.applies_to_text.__func__ is not _DEFAULT_APPLIES:  # a rule with its own prefilter logic
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


def parse(text: str, path: str) -> cst.Module | Diagnostic:
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        return file_error(path, f"SyntaxError: {error.message}", INVALID_SYNTAX, error.raw_line, error.raw_column + 1)
    except RecursionError:
        return file_error(path, "too deeply nested for the parser; skipped")


def check_source(
    text: str, path: str, settings: Settings, *, prefilter: bool = True, module: cst.Module | None = None
) -> list[Diagnostic]:
    """Diagnostics for one file's text. `prefilter=False` parses every file (to test the prefilter);
    `module` is `text` already parsed (the fixer has it), so it is not parsed again."""
    if prefilter and not _NO_PREFILTER:
        rules = rules_for(text, path, settings)
    else:
        ignored = settings.ignored_for(path) if settings.per_file_ignores else frozenset()
        rules = [rule for rule in _enabled_rules(settings) if rule.code not in ignored]
    if not rules:
        return []
    if module is None:
        module = parse(text, path)
        if isinstance(module, Diagnostic):
            return [module]
    try:
        model = SemanticModel(module, path, text)
    except RecursionError:
        return [file_error(path, "too deeply nested to analyse; skipped")]
    diagnostics: list[Diagnostic] = []
    for rule_class in rules:
        if rule_class.needs_gpu_context and not model.uses_cuda:
            continue
        rule = rule_class(model, settings.options_for(rule_class.code))
        try:
            diagnostics.extend(rule.check())
        except RecursionError:
            diagnostics.append(file_error(path, f"{rule_class.code}: too deeply nested to analyse; skipped"))
        except Exception as error:  # noqa: BLE001 - one broken rule must not stop the others
            diagnostics.append(
                file_error(path, f"{rule_class.code} failed on this file ({type(error).__name__}: {error}); please report it", INTERNAL_ERROR)
            )
    if diagnostics:
        suppressions = parse_suppressions(text)
        diagnostics = [d for d in diagnostics if not suppressions.suppresses(d)]
    return sorted(diagnostics, key=Diagnostic.sort_key)


def lint_file(path: Path, settings: Settings) -> FileResult:
    """Read and check one file; errors become diagnostics, never exceptions."""
    shown = display_path(path)
    try:
        source = read_source(path)
    except SourceError as error:
        return FileResult(shown, [file_error(shown, str(error))])
    return FileResult(shown, check_source(source.text, shown, settings), source)


def lint_files(files: list[Path], settings: Settings, jobs: int | None = None, use_cache: bool = True) -> list[FileResult]:
    """Check many files; results in a deterministic order (by path)."""
    results = [lint_file(path, settings) for path in files]
    return sorted(results, key=lambda r: r.path)
