"""`gpulint fix`: a diff by default, atomic writes with --apply, and the verified variant."""

from __future__ import annotations

import difflib
import os
import signal
import sys
import threading
from contextlib import contextmanager
from collections import Counter
from pathlib import Path

import click

from gpulint.config import Settings
from gpulint.diagnostics import Applicability, Diagnostic
from gpulint.fixer import FixOutcome, WriteError, fix_source, write_atomic
from gpulint.cli import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, _emit, _output_format, _report
from gpulint.linter import check_source, display_path, file_error
from gpulint.lines import lines_with_ends
from gpulint.reporters import MACHINE_FORMATS, fix_enumeration, plural as _plural, printable
from gpulint.source import SourceError, SourceText, decode_source, discover, read_source



def _hidden_unsafe(outcome: FixOutcome, settings: Settings) -> int:
    if settings.unsafe_fixes:
        return 0
    return sum(1 for d in outcome.remaining if d.fix is not None and d.fix.applicability == Applicability.UNSAFE)


def _show_fixes(fixed: dict[str, Counter]) -> str:
    return fix_enumeration(fixed, "Fixed {}:", "No errors fixed.")


def _unified_diff(path: str, before: str, after: str) -> str:
    lines = difflib.unified_diff(lines_with_ends(before), lines_with_ends(after), fromfile=path, tofile=path)
    return "".join(_printable_line(line) for line in lines)


def _printable_line(line: str) -> str:
    """A diff line with its content escaped (`printable`) and its own line ending kept (`\\r\\n` files)."""
    body = line.rstrip("\r\n")
    return printable(body) + line[len(body) :]


def _collect(paths: tuple[str, ...], settings: Settings) -> tuple[list[tuple[str, SourceText]], list[Diagnostic]]:
    files, missing = discover(list(paths) or ["."], settings)
    errors = [file_error(p, f"{p}: {reason}") for p, reason in missing]
    sources = []
    for path in files:
        shown = display_path(path)
        try:
            sources.append((shown, read_source(path)))
        except SourceError as error:
            errors.append(file_error(shown, str(error)))
    return sources, errors


def fix_files(paths: tuple[str, ...], settings: Settings) -> tuple[dict[str, tuple[SourceText, FixOutcome]], list[Diagnostic]]:
    sources, errors = _collect(paths, settings)
    outcomes = {shown: (source, fix_source(source.text, shown, settings)) for shown, source in sources}
    return outcomes, errors


def _report_broken(outcomes) -> None:
    for path, (_, outcome) in outcomes.items():
        for d in outcome.broken:
            click.echo(
                printable(
                    f"gpulint: {path}:{d.location.row}:{d.location.column}: the {d.code} fix was dropped because its result "
                    "did not parse; this is a bug in gpulint, please report it"
                ),
                err=True,
            )


def run_fix(paths: tuple[str, ...], settings: Settings, opts: dict, apply: bool) -> int:
    if paths == ("-",):
        return _fix_stdin(settings, opts)
    outcomes, errors = fix_files(paths, settings)
    _report_broken(outcomes)
    fixed = {path: outcome.fixed for path, (_, outcome) in outcomes.items()}
    hidden = sum(_hidden_unsafe(outcome, settings) for _, outcome in outcomes.values())
    changed = {path: (src, out) for path, (src, out) in outcomes.items() if out.text != src.text}
    if not apply:
        _emit("".join(_unified_diff(path, source.text, outcome.text) for path, (source, outcome) in sorted(changed.items())), opts["output_file"])
        total = sum(sum(c.values()) for c in fixed.values())
        extra = f" ({_plural(hidden, 'additional fix')} available with `--unsafe-fixes`)" if hidden else ""
        if opts["show_fixes"]:
            click.echo(_show_fixes(fixed), nl=False, err=True)
        if total:
            click.echo(f"Would fix {_plural(total, 'error')}{extra}.", err=True)
        else:
            click.echo(f"No errors would be fixed{extra}.", err=True)
        # Files that could not be checked (unreadable, not parsing, past the analysis budget) are named, as in --apply.
        unchecked = errors + [d for _, outcome in outcomes.values() for d in outcome.remaining if d.code is None]
        for d in unchecked:
            click.echo(printable(f"gpulint: {d.filename}: {d.message}"), err=True)
        return EXIT_FINDINGS if (changed or unchecked) and not opts["exit_zero"] else EXIT_CLEAN
    written, not_written, signum = _write_all(changed)
    if signum is not None:
        return _report_interrupted(written, not_written, signum)
    unwritten = dict(not_written)
    for path in unwritten:
        fixed[path] = Counter()
    remaining = sorted(
        [d for path, (src, out) in outcomes.items() for d in (check_source(src.text, path, settings) if path in unwritten else out.remaining)]
        + errors,
        key=Diagnostic.sort_key,
    )
    for path, reason in not_written:
        click.echo(printable(f"gpulint: {path}: not written: {reason}"), err=True)
    if opts["show_fixes"]:
        click.echo(_show_fixes(fixed), nl=False, err=True)  # stdout is the report (JSON, SARIF...)
    report = _report(remaining, settings, {**opts, "quiet": True}, {p: s.text if p in unwritten else o.text for p, (s, o) in outcomes.items()})
    total_fixed = sum(sum(c.values()) for c in fixed.values())
    if not opts["quiet"] and not opts["statistics"] and _output_format(opts, settings) not in MACHINE_FORMATS:
        report += f"Found {_plural(total_fixed + len(remaining), 'error')} ({total_fixed} fixed, {len(remaining)} remaining).\n"
        if hidden:
            report += f"No more fixes available ({_plural(hidden, 'hidden fix')} can be enabled with the `--unsafe-fixes` option).\n"
    _emit(report, opts["output_file"])
    if not_written:
        return EXIT_FINDINGS
    return EXIT_FINDINGS if remaining and not opts["exit_zero"] else EXIT_CLEAN


class _Stop:
    """SIGINT/SIGTERM seen while files were being written."""

    def __init__(self) -> None:
        self.signum: int | None = None


@contextmanager
def _signals_deferred():
    """While files are written, SIGINT and SIGTERM finish the current file, then stop; a second one stops at once."""
    stop = _Stop()

    def handler(signum, frame):
        if stop.signum is not None:
            raise KeyboardInterrupt
        stop.signum = signum

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, handler)
    try:
        yield stop
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _write_all(changed: dict) -> tuple[list[str], list[tuple[str, str]], int | None]:
    """Write each fixed file atomically: (written, not written with reasons, the signal that stopped it)."""
    written: list[str] = []
    not_written: list[tuple[str, str]] = []
    with _signals_deferred() as stop:
        for path, (source, outcome) in sorted(changed.items()):
            if stop.signum is not None:
                break
            data = None
            try:
                data = source.encode(outcome.text)
                write_atomic(Path(path), data, source.encode(source.text))
            except (WriteError, UnicodeEncodeError) as error:
                reason = str(error) if isinstance(error, WriteError) else f"the fixed text cannot be encoded as {source.encoding}"
                not_written.append((path, reason))
            except KeyboardInterrupt:
                # A second signal during the write: the rename either happened or it did not.
                if data is not None and _holds(Path(path), data):
                    written.append(path)
                stop.signum = stop.signum or signal.SIGINT
                break
            else:
                written.append(path)
    if stop.signum is not None:
        done = set(written) | {p for p, _ in not_written}
        not_written += [(p, "interrupted before it was written") for p in sorted(changed) if p not in done]
    return written, not_written, stop.signum


def _holds(path: Path, data: bytes) -> bool:
    try:
        return Path(os.path.realpath(path)).read_bytes() == data
    except OSError:
        return False


def _report_interrupted(written: list[str], not_written: list[tuple[str, str]], signum: int) -> int:
    """After SIGINT/SIGTERM: every file is either fully fixed or untouched; say which were not written."""
    name = "SIGTERM" if signum == signal.SIGTERM else "SIGINT"
    click.echo(f"gpulint: interrupted ({name}): {_plural(len(written), 'file')} fixed and written, {len(not_written)} not written", err=True)
    for path, reason in not_written:
        click.echo(printable(f"gpulint: {path}: not written: {reason}"), err=True)
    return 128 + signum


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def _fix_stdin(settings: Settings, opts: dict) -> int:
    """Fixed source to stdout (always, so editors can pipe), findings left to stderr."""
    from gpulint.cli import _stdin_excluded

    data = sys.stdin.buffer.read()
    try:
        source = decode_source(data)
    except SourceError as error:
        _write_stdout(data)
        click.echo(f"gpulint: stdin: {error}", err=True)
        return EXIT_ERROR
    name = opts["stdin_filename"] or "-"
    if _stdin_excluded(settings, opts["stdin_filename"]):
        _write_stdout(data)
        return EXIT_CLEAN
    outcome = fix_source(source.text, name, settings)
    try:
        fixed = source.encode(outcome.text)  # the source's own encoding (coding cookie, BOM), not stdout's
    except UnicodeEncodeError:
        _write_stdout(data)
        click.echo(f"gpulint: stdin: the fixed text cannot be encoded as {source.encoding}; written unchanged", err=True)
        return EXIT_ERROR
    _write_stdout(fixed)
    for d in outcome.remaining:
        click.echo(printable(f"{d.filename}:{d.location.row}:{d.location.column}: {d.code or d.name} {d.message}"), err=True)
    click.echo(f"Found {_plural(outcome.fixed_count + len(outcome.remaining), 'error')} ({outcome.fixed_count} fixed, {len(outcome.remaining)} remaining).", err=True)
    return EXIT_FINDINGS if outcome.remaining and not opts["exit_zero"] else EXIT_CLEAN


def run_verify_fix(paths: tuple[str, ...], command: list[str], settings: Settings, opts: dict, profile_options) -> int:
    """Profile the original, apply the fixes, profile the result; the profiler restores files that lose."""
    from gpulint.profile.command import CommandError, plan_command
    from gpulint.profile.verify import run_verify

    if not paths:
        try:
            plan = plan_command(command, profile_options.cwd)
        except CommandError as error:
            click.echo(f"gpulint failed\n  Cause: {printable(str(error))}", err=True)
            return EXIT_ERROR
        if plan.kind != "script":
            raise click.UsageError("name the files to fix when the command runs a module (-m)")
        paths = (plan.target,)

    def apply_fixes() -> dict[Path, bytes]:
        outcomes, errors = fix_files(paths, settings)
        for d in errors:
            click.echo(printable(f"gpulint: {d.filename}: {d.message}"), err=True)
        _report_broken(outcomes)
        originals: dict[Path, bytes] = {}
        written: dict[Path, bytes] = {}  # the fixed bytes on disk now, for a restore if we are stopped here
        try:
            for path, (source, outcome) in sorted(outcomes.items()):
                if outcome.text == source.text:
                    continue
                original = source.encode(source.text)
                try:
                    data = source.encode(outcome.text)
                    write_atomic(Path(path), data, original)
                except (WriteError, UnicodeEncodeError) as error:
                    # As `fix --apply` does: this file stays as it was, the others are still fixed and verified.
                    reason = str(error) if isinstance(error, WriteError) else f"the fixed text cannot be encoded as {source.encoding}"
                    click.echo(printable(f"gpulint: {path}: not written: {reason}"), err=True)
                    continue
                originals[Path(path).resolve()] = original
                written[Path(path).resolve()] = data
                fixed = ", ".join(f"{n} × {code}" for code, n in sorted(outcome.fixed.items()))
                click.echo(printable(f"gpulint: fixed {path}: {fixed}"), err=True)
        except BaseException:
            # Stopped half-way (an interrupt, a bug): the verification will not run, so no file may stay fixed.
            for path, original in originals.items():
                try:
                    write_atomic(path, original, written[path])
                except WriteError as error:
                    click.echo(printable(f"gpulint: {display_path(path)}: could not restore the original: {error}"), err=True)
            raise
        return originals

    return run_verify(list(command), apply_fixes, profile_options)
