"""The command line: parse options, call one library function per command, map results to exit codes."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import click

from gpulint import __version__
from gpulint.config import ConfigError, Settings, check_output_format, load_settings, with_overrides
from gpulint.diagnostics import Diagnostic
from gpulint.profile.cli import profile, profile_options
from gpulint.reporters import FORMATS, MACHINE_FORMATS, printable

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _CodeList(click.ParamType):
    """`--select GPU1,GPU402` and repeated `--select` both work."""

    name = "codes"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        return tuple(part.strip().upper() if part.strip() != "ALL" else "ALL" for part in value.split(",") if part.strip())


def _flatten(values: tuple) -> tuple[str, ...] | None:
    return tuple(code for group in values for code in group) if values else None


def lint_options(command: str):
    """The options `check` and `fix` share (`fix` checks files in one process and never uses the cache)."""
    options = [
        click.option("--select", multiple=True, type=_CodeList(), help="Rule codes or prefixes to enable (e.g. GPU1, ALL)."),
        click.option("--ignore", multiple=True, type=_CodeList(), help="Rule codes or prefixes to disable."),
        click.option("--extend-select", multiple=True, type=_CodeList(), help="Codes to enable on top of the selection."),
        click.option("--preview/--no-preview", default=None, help="Enable preview rules (GPU9xx)."),
        click.option(
            "--output-format",
            type=click.Choice(sorted(FORMATS)),
            envvar="GPULINT_OUTPUT_FORMAT",
            show_envvar=True,
            default=None,
            help="Output format (default: full).",
        ),
        click.option("-o", "--output-file", type=click.Path(dir_okay=False, writable=True), help="Write the report to this file."),
        click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain."),
        click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them."),
        click.option(
            "--show-fixes",
            is_flag=True,
            help="List the fixes applied, per file and rule." if command == "fix" else "List the fixes `fix --apply` would make, per file and rule.",
        ),
        click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Include fixes that may change behaviour."),
        click.option("--config", "config_path", type=click.Path(), help="Read settings from this TOML file."),
        click.option(
            "--no-cache",
            is_flag=True,
            help="Do not read or write the result cache." if command == "check" else "Accepted for symmetry with check; fix never uses the cache.",
        ),
        click.option("--stdin-filename", type=str, help="The path to report for source read from `-`."),
        click.option("--force-exclude", is_flag=True, default=None, help="Apply excludes to paths named on the command line."),
        click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary."),
        click.option(
            "--analysis-timeout",
            type=click.FloatRange(min=0, max=1e9),
            default=None,
            metavar="SECONDS",
            help="CPU seconds one file may take before it is skipped (default: 120; 0: no limit).",
        ),
    ]
    if command == "check":
        options.append(click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes (default: CPUs)."))
        options.append(
            click.option(
                "--cache-dir",
                envvar="GPULINT_CACHE_DIR",
                show_envvar=True,
                type=click.Path(file_okay=False),
                default=None,
                help="Keep the result cache in this folder (anywhere; `cache-dir` in a config file must stay in the project).",
            )
        )

    def decorate(func):
        for option in reversed(options):
            func = option(func)
        return func

    return decorate


def _settings(opts: dict) -> Settings:
    base = load_settings(opts["config_path"])
    return with_overrides(
        base,
        select=_flatten(opts["select"]),
        ignore=_flatten(opts["ignore"]),
        extend_select=_flatten(opts["extend_select"]),
        preview=opts["preview"],
        force_exclude=opts["force_exclude"],
        unsafe_fixes=opts["unsafe_fixes"],
        analysis_timeout=opts["analysis_timeout"],
        user_cache_dir=opts.get("cache_dir"),
    )


def _output_format(opts: dict, settings: Settings) -> str:
    name = opts["output_format"] or settings.output_format or "full"
    check_output_format(name)
    return name


def _emit(text: str, output_file: str | None) -> None:
    if output_file:
        try:
            Path(output_file).write_text(text, encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot write {output_file}: {error.strerror or error}") from None
    elif text:
        click.echo(text, nl=False)


def _read_stdin() -> str:
    data = sys.stdin.buffer.read()
    from gpulint.source import SourceError, decode_source

    try:
        return decode_source(data).text
    except SourceError as error:
        raise ConfigError(f"stdin: {error}") from None


def _stdin_excluded(settings: Settings, filename: str | None) -> bool:
    if not (filename and settings.force_exclude):
        return False
    from gpulint.source import force_excluded

    return force_excluded(Path(filename), settings)


def _report(diagnostics: list[Diagnostic], settings: Settings, opts: dict, sources: dict[str, str] | None = None) -> str:
    from gpulint.reporters import ReportContext, render, render_statistics, summary

    format_name = _output_format(opts, settings)
    context = ReportContext(unsafe_fixes=settings.unsafe_fixes, root=settings.root, sources=sources or {})
    if opts["statistics"]:
        text = render_statistics(diagnostics, settings.unsafe_fixes, format_name == "json")
        return text + ("\n" if text else "")
    text = render(format_name, diagnostics, context)
    if format_name not in MACHINE_FORMATS and not opts["quiet"]:
        text += summary(diagnostics, settings.unsafe_fixes) + "\n"
    return text


def _lint(paths: tuple[str, ...], settings: Settings, opts: dict):
    """FileResults for the paths (or stdin), plus errors for paths that do not exist."""
    from gpulint.linter import FileResult, check_source, file_error, lint_files
    from gpulint.source import discover

    if paths == ("-",):
        name = opts["stdin_filename"] or "-"
        text = _read_stdin()
        if _stdin_excluded(settings, opts["stdin_filename"]):
            return [FileResult(name, [], None)]
        from gpulint.source import SourceText

        return [FileResult(name, check_source(text, name, settings), SourceText(text, "utf-8", False))]
    files, missing = discover(list(paths) or ["."], settings)
    results = [FileResult(p, [file_error(p, f"{p}: {reason}")]) for p, reason in missing]
    return results + lint_files(files, settings, jobs=opts["jobs"], use_cache=not opts["no_cache"])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="gpulint")
def cli() -> None:
    """Find, fix and verify the patterns that leave your GPU idle in PyTorch training code."""


@cli.command()
@lint_options("check")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding (a baseline).")
@click.argument("paths", nargs=-1, type=click.Path())
def check(paths: tuple[str, ...], add_noqa: bool, **opts) -> None:
    """Report findings in PATHS (default: the current folder)."""
    settings = _settings(opts)
    results = _lint(paths, settings, opts)
    diagnostics = sorted((d for r in results for d in r.diagnostics), key=Diagnostic.sort_key)
    if add_noqa:
        sys.exit(_add_noqa(results))
    if opts["show_fixes"]:
        _show_fixable(diagnostics, settings)
    sources = {r.path: r.source.text for r in results if r.source is not None and r.diagnostics}
    _emit(_report(diagnostics, settings, opts, sources), opts["output_file"])
    sys.exit(EXIT_FINDINGS if diagnostics and not opts["exit_zero"] else EXIT_CLEAN)


def _show_fixable(diagnostics: list[Diagnostic], settings: Settings) -> None:
    """`check --show-fixes`: what `fix --apply` would fix, per file and rule (stderr: the report stays pure)."""
    from collections import Counter

    from gpulint.diagnostics import is_applicable
    from gpulint.reporters import fix_enumeration

    fixable: dict[str, Counter] = {}
    for d in diagnostics:
        if d.code is not None and is_applicable(d, settings.unsafe_fixes):
            fixable.setdefault(d.filename, Counter())[d.code] += 1
    click.echo(fix_enumeration(fixable, "Would fix {} with `gpulint fix --apply`:", "No errors would be fixed."), nl=False, err=True)


def _add_noqa(results) -> int:
    from gpulint.fix_command import _signals_deferred

    added = 0
    failed = False
    with _signals_deferred() as stop:
        for result in results:
            if stop.signum is not None:
                name = signal.Signals(stop.signum).name
                click.echo(f"gpulint: interrupted ({name}); the remaining files were left as they were", err=True)
                return 128 + stop.signum
            count = _add_noqa_to(result)
            if count is None:
                failed = True
            else:
                added += count
    click.echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.", err=True)
    return EXIT_FINDINGS if failed else EXIT_CLEAN


def _add_noqa_to(result) -> int | None:
    """The number of rows given a noqa comment, or None when the file could not be written."""
    from gpulint.fixer import WriteError, write_atomic
    from gpulint.suppression import add_noqa

    rows: dict[int, set[str]] = {}
    for d in result.diagnostics:
        if d.code is not None:
            rows.setdefault(d.noqa_row or d.location.row, set()).add(d.code)
    if not rows or result.source is None or result.path == "-":
        return 0
    text, changed, skipped = add_noqa(result.source.text, rows)
    for row in skipped:
        codes = ", ".join(sorted(rows[row]))
        click.echo(printable(f"gpulint: {result.path}:{row}: no noqa added for {codes}: the line continues with a backslash"), err=True)
    if not changed:
        return 0
    try:
        write_atomic(Path(result.path), result.source.encode(text), result.source.encode(result.source.text))
    except (WriteError, UnicodeEncodeError) as error:
        click.echo(printable(f"gpulint: {result.path}: not written: {error}"), err=True)
        return None
    return changed


@cli.command()
@lint_options("fix")
@click.option("--apply", is_flag=True, help="Write the fixes (default: print a diff).")
@click.option("--verify", is_flag=True, help="Profile the command after `--` before and after fixing; keep the fix only if it holds.")
@profile_options
@click.argument("paths", nargs=-1, type=click.Path())
@click.pass_context
def fix(ctx: click.Context, paths: tuple[str, ...], apply: bool, verify: bool, profile_options, **opts) -> None:
    """Fix findings in PATHS: print a diff, or write with --apply.

    With --verify, profile `-- python train.py ...` before and after, and keep the fixes only when the
    fixed script runs and is not slower beyond the noise (PATHS default to the script itself).
    """
    settings = _settings(opts)
    command = (ctx.obj or {}).get("command")
    if verify:
        if not apply:
            raise click.UsageError("--verify needs --apply")
        if not command:
            raise click.UsageError("--verify needs the command to profile after `--`, e.g. -- python train.py")
        from gpulint.fix_command import run_verify_fix

        sys.exit(run_verify_fix(paths, command, settings, opts, profile_options))
    if command:
        raise click.UsageError("a command after `--` is only used with --verify")
    from gpulint.fix_command import run_fix

    sys.exit(run_fix(paths, settings, opts, apply))


@cli.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule(code: str | None, show_all: bool, output_format: str) -> None:
    """Explain a rule (gpulint rule GPU101), or list them all (--all)."""
    import json

    from gpulint.checks import all_rules
    from gpulint.rule_docs import all_records, rule_record

    if show_all:
        records = all_records()
        if output_format == "json":
            click.echo(json.dumps(records, indent=2))
        else:
            click.echo("\n".join(r["explanation"].rstrip() + "\n" for r in records), nl=False)
        return
    if not code:
        raise click.UsageError("give a rule code (e.g. GPU101) or --all")
    rules = all_rules()
    match = next((r for c, r in rules.items() if code.upper() == c or code == r.name), None)
    if match is None:
        raise ConfigError(f"Unknown rule `{code}`")
    record = rule_record(match)
    click.echo(json.dumps(record, indent=2) if output_format == "json" else record["explanation"].rstrip())


cli.add_command(profile)


def _split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """`fix --apply --verify -- python train.py` -> the options, and the command to profile."""
    if "--" in argv and argv and argv[0] == "fix":
        index = argv.index("--")
        return argv[:index], argv[index + 1 :]
    return argv, None


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C: stop cleanly, report, exit 128 + 15."""


def _on_sigterm(signum, frame) -> None:
    raise Terminated


def _interrupted(cause: BaseException | None) -> None:
    signum = signal.SIGTERM if isinstance(cause, Terminated) else signal.SIGINT
    click.echo(f"gpulint: interrupted ({signum.name})", err=True)
    sys.exit(128 + signum)


def _usage_failed(error: click.ClickException) -> None:
    """A usage error (unknown option, bad value, conflicting flags): exit 2 with a Cause, as every exit 2."""
    lines = ["gpulint failed", f"  Cause: {printable(error.format_message())}"]
    ctx = getattr(error, "ctx", None)
    if ctx is not None:
        lines.append(f"  Try '{ctx.command_path} --help' for help.")
    click.echo("\n".join(lines), err=True)
    sys.exit(EXIT_ERROR)


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str]) -> None:
    head, command = _split_command(argv)
    try:
        cli.main(args=head, prog_name="gpulint", standalone_mode=False, obj={"command": command})
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        _usage_failed(error)
    except click.exceptions.Abort as abort:  # click turns KeyboardInterrupt (and so SIGTERM) into Abort
        _interrupted(abort.__cause__)
    except ConfigError as error:
        click.echo(f"gpulint failed\n  Cause: {printable(str(error))}", err=True)
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt as interrupt:
        _interrupted(interrupt)
    except BrokenPipeError:
        sys.exit(EXIT_ERROR)
    except Exception as error:  # noqa: BLE001 - never a traceback for the user
        if os.environ.get("GPULINT_DEBUG"):
            raise
        click.echo(f"gpulint failed\n  Cause: internal error: {type(error).__name__}: {printable(str(error))}", err=True)
        sys.exit(EXIT_ERROR)
