"""What the command line shows for the API's reports: findings, fix diffs and summaries, written and unwritten
files. Reports go to stdout (or `-o`), everything else to stderr; each function returns the exit code.
Only `gpulint.cli` imports this module."""

from __future__ import annotations

import signal
import sys
from collections import Counter
from pathlib import Path

import click

from gpulint import api
from gpulint.config import ConfigError, Settings, check_output_format
from gpulint.diagnostics import Diagnostic, Location, fails
from gpulint.reporters import MACHINE_FORMATS, ReportContext, fix_enumeration, plural, printable

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def exit_status(diagnostics: list[Diagnostic], settings: Settings, opts: dict) -> int:
    """1 when a finding at or above `--fail-on` remains (unless `--exit-zero`), else 0."""
    failing = any(fails(d, settings.fail_on) for d in diagnostics)
    return EXIT_FINDINGS if failing and not opts["exit_zero"] else EXIT_CLEAN


def output_format(opts: dict, settings: Settings) -> str:
    name = opts["output_format"] or settings.output_format or "full"
    check_output_format(name)
    return name


def emit(text: str, output_file: str | None) -> None:
    if output_file:
        try:
            Path(output_file).write_text(text, encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot write {output_file}: {error.strerror or error}") from None
    elif text:
        click.echo(text, nl=False)


def _err(line: str) -> None:
    click.echo(printable(line), err=True)  # paths and messages come from the repository being checked


def _printable_diff(diff: str) -> str:
    """A diff with each line's content escaped (`printable`) and its own line ending kept (`\\r\\n` files)."""
    out = []
    for line in diff.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        out.append(printable(body) + line[len(body) :])
    return "".join(out)


def render(diagnostics: list[Diagnostic], settings: Settings, opts: dict, sources: dict | None = None) -> str:
    """The report in the chosen format, with ruff's closing summary for text formats unless `-q`."""
    from gpulint.reporters import render_statistics, summary
    from gpulint.reporters import render as render_format

    format_name = output_format(opts, settings)
    context = ReportContext(unsafe_fixes=settings.unsafe_fixes, root=settings.root, sources=sources or {}, fail_on=settings.fail_on)
    if opts["statistics"]:
        text = render_statistics(diagnostics, settings.unsafe_fixes, format_name == "json")
        return text + ("\n" if text else "")
    text = render_format(format_name, diagnostics, context)
    if format_name not in MACHINE_FORMATS and not opts["quiet"]:
        text += summary(diagnostics, settings.unsafe_fixes, settings.fail_on) + "\n"
    return text


def skipped(report) -> None:
    """Warnings for what was read but not checked: whole files, and notebook cells that are not Python (yet)."""
    for path, reason in report.skipped:
        _err(f"gpulint: warning: {path}: skipped: {reason}")
    for path, _, reason in report.skipped_cells:
        _err(f"gpulint: warning: {path}:{reason} (cell skipped; the other cells were checked)")


def _where(path: str, location: Location, sources: dict) -> str:
    """`path:row:column`, or `path:cell 3:2:5` in a notebook."""
    return f"{path}:{ReportContext(sources=sources).where(path, location)}"


def checked(report: api.Report, opts: dict) -> int:
    """`gpulint check`: the findings (and with `--show-fixes`, on stderr, what `fix --apply` would fix)."""
    skipped(report)
    if opts["show_fixes"]:
        text = fix_enumeration(report.fixable(), "Would fix {} with `gpulint fix --apply`:", "No errors would be fixed.")
        click.echo(text, nl=False, err=True)  # stderr: the report stays pure
    diagnostics = report.diagnostics
    emit(render(diagnostics, report.settings, opts, report.sources), opts["output_file"])
    return exit_status(diagnostics, report.settings, opts)


def noqa_added(report: api.NoqaReport, signum: int | None, sources: dict) -> int:
    """`check --add-noqa`: lines that could not take a comment, files not written, and the count."""
    for entry in report.files:
        for row, codes in entry.skipped.items():
            where = _where(entry.path, Location(row, 1), sources).removesuffix(":1")
            _err(f"gpulint: {where}: no noqa added for {', '.join(codes)}: the line continues with a backslash")
        if entry.write_error is not None:
            _err(f"gpulint: {entry.path}: not written: {entry.write_error}")
    if report.cancelled and signum is not None:
        _err(f"gpulint: interrupted ({signal.Signals(signum).name}); the remaining files were left as they were")
        return 128 + signum
    _err(f"Added {plural(report.added, 'noqa directive')}.")
    return EXIT_FINDINGS if any(entry.write_error for entry in report.files) else EXIT_CLEAN


def dropped_fixes(report: api.FixReport) -> None:
    for f in report.files:
        for d in f.dropped:
            _err(
                f"gpulint: {_where(f.path, d.location, {f.path: f.document(fixed=False)})}: the {d.code} fix was dropped because its "
                "result did not parse; this is a bug in gpulint, please report it"
            )


def _unsafe_hint(hidden: int) -> str:
    return f" ({plural(hidden, 'additional fix')} available with `--unsafe-fixes`)" if hidden else ""


def _fix_counts(files: list[api.FileFix]) -> dict[str, Counter]:
    return {f.path: f.fixes for f in files}


def would_fix(report: api.FixReport, opts: dict) -> int:
    """`gpulint fix` without `--apply`: the diff on stdout, what it would fix on stderr."""
    skipped(report)
    emit("".join(_printable_diff(f.diff()) for f in report.changed), opts["output_file"])
    if opts["show_fixes"]:
        click.echo(fix_enumeration(_fix_counts(report.files), "Would fix {}:", "No errors would be fixed."), nl=False, err=True)
    total = report.fixed_count
    extra = _unsafe_hint(report.hidden_unsafe)
    if extra or not opts["show_fixes"]:  # the listing already gave the count
        _err(f"Would fix {plural(total, 'error')}{extra}." if total else f"No errors would be fixed{extra}.")
    # Files that could not be checked (unreadable, not parsing, past the analysis budget) are named, as with --apply.
    unchecked = report.errors + [d for f in report.files for d in f.remaining if d.code is None]
    for d in unchecked:
        _err(f"gpulint: {d.filename}: {d.message}")
    return EXIT_FINDINGS if (report.changed or unchecked) and not opts["exit_zero"] else EXIT_CLEAN


def fixed(report: api.FixReport, opts: dict) -> int:
    """`gpulint fix --apply` after the writes: files not written, what was fixed, and the findings that remain."""
    skipped(report)
    not_written = [f for f in report.files if f.write_error is not None]
    for f in not_written:
        _err(f"gpulint: {f.path}: not written: {f.write_error}")
    in_effect = [f for f in report.files if f.in_effect]
    if opts["show_fixes"]:
        click.echo(fix_enumeration(_fix_counts(in_effect), "Fixed {}:", "No errors fixed."), nl=False, err=True)  # stdout is the report
    remaining = report.findings()
    sources = {f.path: f.document() for f in report.files}
    text = render(remaining, report.settings, {**opts, "quiet": True}, sources)
    total_fixed = sum(sum(f.fixes.values()) for f in in_effect)
    if not opts["quiet"] and not opts["statistics"] and output_format(opts, report.settings) not in MACHINE_FORMATS:
        text += f"Found {plural(total_fixed + len(remaining), 'error')} ({total_fixed} fixed, {len(remaining)} remaining).\n"
        if report.hidden_unsafe:
            text += f"No more fixes available ({plural(report.hidden_unsafe, 'hidden fix')} can be enabled with the `--unsafe-fixes` option).\n"
    emit(text, opts["output_file"])
    if not_written:
        return EXIT_FINDINGS
    return exit_status(remaining, report.settings, opts)


def interrupted_writes(report: api.FixReport, signum: int) -> int:
    """After SIGINT/SIGTERM among the writes: every file is either fully fixed or untouched; say which were not written."""
    name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT"
    written = sum(1 for f in report.files if f.written)
    not_written = [f for f in report.files if f.write_error is not None]
    _err(f"gpulint: interrupted ({name}): {plural(written, 'file')} fixed and written, {len(not_written)} not written")
    for f in not_written:
        _err(f"gpulint: {f.path}: not written: {f.write_error}")
    return 128 + signum


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def stdin_fixed(data: bytes, name: str, settings: Settings, opts: dict) -> int:
    """`gpulint fix -`: the fixed source on stdout (always something, so editors can pipe), findings on stderr."""
    try:
        source = api.Source.from_bytes(data, name)
    except api.SourceError as error:
        _write_stdout(data)
        _err(f"gpulint: stdin: {error}")
        return EXIT_ERROR
    report = api.fix([source], settings, jobs=1)
    if not report.files:  # --force-exclude and an excluded --stdin-filename
        _write_stdout(data)
        return EXIT_CLEAN
    (result,) = report.files
    try:
        fixed_data = result.fixed_bytes()  # the source's own encoding (coding cookie, BOM), not stdout's
    except UnicodeEncodeError:
        _write_stdout(data)
        _err(f"gpulint: stdin: the fixed text cannot be encoded as {source.encoding}; written unchanged")
        return EXIT_ERROR
    _write_stdout(fixed_data)
    skipped(report)
    sources = {result.path: result.document(fixed=True)}  # what stdout now holds
    for d in result.remaining:
        _err(f"{_where(d.filename, d.location, sources)}: {d.code or d.name} {d.message}")
    count = sum(result.fixes.values())
    _err(f"Found {plural(count + len(result.remaining), 'error')} ({count} fixed, {len(result.remaining)} remaining).")
    return exit_status(result.remaining, settings, opts)

