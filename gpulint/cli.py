"""The command line: parse options, call one library function per command, map results to exit codes."""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager

import click

from gpulint import __version__, api
from gpulint import cli_output as output
from gpulint.api import Terminated  # SIGTERM raised in the main thread: handled as Ctrl-C, exit 128 + 15
from gpulint.cli_output import EXIT_ERROR
from gpulint.config import ConfigError, Settings
from gpulint.diagnostics import Severity
from gpulint.profile.cli import profile, profile_options
from gpulint.reporters import FORMATS, printable


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
    """The options `check` and `fix` share (`fix` caches module summaries, never results)."""
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
        click.option(
            "--fail-on",
            type=click.Choice([s.value for s in Severity]),
            default=None,
            help="The lowest severity that makes the run fail (exit 1); lower ones are still shown (default: info).",
        ),
        click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them."),
        click.option(
            "--show-fixes",
            is_flag=True,
            help="List the fixes applied, per file and rule." if command == "fix" else "List the fixes `fix --apply` would make, per file and rule.",
        ),
        click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Include fixes that may change behaviour."),
        click.option("--unfixable", multiple=True, type=_CodeList(), help="Codes whose findings are reported without a fix."),
        click.option("--extend-safe-fixes", multiple=True, type=_CodeList(), help="Codes whose unsafe fixes count as safe."),
        click.option("--extend-unsafe-fixes", multiple=True, type=_CodeList(), help="Codes whose safe fixes count as unsafe."),
        click.option("--config", "config_path", type=click.Path(), help="Read settings from this TOML file."),
        click.option(
            "--no-cache",
            is_flag=True,
            help="Do not read or write the result cache." if command == "check" else "Do not read or write the project's cached module summaries (fix never caches results).",
        ),
        click.option("--stdin-filename", type=str, help="Read the source from stdin and report it under this path."),
        click.option("--force-exclude", is_flag=True, default=None, help="Apply excludes to paths named on the command line."),
        click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary."),
        click.option(
            "--analysis-timeout",
            type=click.FloatRange(min=0, max=1e9),
            default=None,
            metavar="SECONDS",
            help="CPU seconds one file may take before it is skipped (default: 120; 0: no limit).",
        ),
        click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes (default: CPUs)."),
    ]
    if command == "check":
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
    return api.discover_settings(
        config=opts["config_path"],
        select=_flatten(opts["select"]),
        ignore=_flatten(opts["ignore"]),
        extend_select=_flatten(opts["extend_select"]),
        preview=opts["preview"],
        force_exclude=opts["force_exclude"],
        unsafe_fixes=opts["unsafe_fixes"],
        unfixable=_flatten(opts["unfixable"]),
        extend_safe_fixes=_flatten(opts["extend_safe_fixes"]),
        extend_unsafe_fixes=_flatten(opts["extend_unsafe_fixes"]),
        fail_on=Severity(opts["fail_on"]) if opts["fail_on"] else None,
        analysis_timeout=opts["analysis_timeout"],
        user_cache_dir=opts.get("cache_dir"),
    )


def _reads_stdin(paths: tuple[str, ...], opts: dict) -> bool:
    """`-` as the only path, or `--stdin-filename` (then, as in ruff, stdin wins over any path given)."""
    if opts["stdin_filename"] is None:
        return paths == ("-",)
    for path in paths:
        if path != "-":
            click.echo(printable(f"gpulint: warning: ignoring {path} in favor of standard input (--stdin-filename)"), err=True)
    return True


def _read_stdin(name: str) -> api.Source:
    try:
        return api.Source.from_bytes(sys.stdin.buffer.read(), name)
    except api.SourceError as error:
        raise ConfigError(f"stdin: {error}") from None


@contextmanager
def _analysis():
    """Ctrl-C or SIGTERM while files are read and analysed: nothing has been written yet, and the user is told so."""
    try:
        yield
    except KeyboardInterrupt as interrupt:
        _interrupted(interrupt, " during analysis; no file was written")


@contextmanager
def _signals_deferred():
    """While files are written, SIGINT and SIGTERM finish the current file, then stop; a second one stops at once.
    Yields the Cancellation the library looks at between files (its reason: the signal number)."""
    cancel = api.Cancellation()

    def handler(signum, frame):
        if cancel.cancelled:
            raise KeyboardInterrupt
        cancel.cancel(signum)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, handler)
    try:
        yield cancel
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="gpulint")
def cli() -> None:
    """Find, fix and verify the patterns that leave your GPU idle in PyTorch training code."""


@cli.command()
@lint_options("check")
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` to every line with a finding (a baseline).")
@click.option("--fix", "apply_fixes", is_flag=True, help="Write the fixes: the same as `gpulint fix --apply` (ruff's spelling).")
@click.argument("paths", nargs=-1, type=click.Path())
def check(paths: tuple[str, ...], add_noqa: bool, apply_fixes: bool, **opts) -> None:
    """Report findings in PATHS (default: the current folder)."""
    settings = _settings(opts)
    if apply_fixes:
        if add_noqa:
            raise click.UsageError("--add-noqa cannot be used with --fix")
        sys.exit(_fix(paths, settings, opts, apply=True))
    inputs = [_read_stdin(opts["stdin_filename"] or "-")] if _reads_stdin(paths, opts) else list(paths) or ["."]
    with _analysis():
        report = api.check(inputs, settings, jobs=opts["jobs"], cache=not opts["no_cache"])
    if add_noqa:
        with _signals_deferred() as cancel:
            done = api.add_noqa(report, cancel)
        sys.exit(output.noqa_added(done, cancel.reason, report.sources))
    sys.exit(output.checked(report, opts))


@cli.command()
@lint_options("fix")
@click.option("--apply", is_flag=True, help="Write the fixes (default: print a diff).")
@click.option("--verify", is_flag=True, help="Profile the command after `--` before and after fixing; keep the fix only if it holds.")
@click.option("--restore", is_flag=True, help="Put back the originals an interrupted `fix --verify` left fixed, then exit.")
@profile_options
@click.argument("paths", nargs=-1, type=click.Path())
@click.pass_context
def fix(ctx: click.Context, paths: tuple[str, ...], apply: bool, verify: bool, restore: bool, profile_options, **opts) -> None:
    """Fix findings in PATHS: print a diff, or write with --apply.

    With --verify, profile `-- python train.py ...` before and after, and keep the fixes only when the
    fixed script runs and is not slower beyond the noise (PATHS default to the script and the modules of its
    project that it imports).
    """
    from gpulint.profile import journal

    if restore:
        sys.exit(journal.restore(sys.stderr))
    journal.notice(sys.stderr)
    settings = _settings(opts)
    command = (ctx.obj or {}).get("command")
    if verify:
        if not apply:
            raise click.UsageError("--verify needs --apply")
        if not command:
            raise click.UsageError("--verify needs the command to profile after `--`, e.g. -- python train.py")
        sys.exit(run_verify_fix(paths, command, settings, profile_options, jobs=opts["jobs"]))
    if command:
        raise click.UsageError("a command after `--` is only used with --verify")
    sys.exit(_fix(paths, settings, opts, apply))


def _fix(paths: tuple[str, ...], settings: Settings, opts: dict, apply: bool) -> int:
    """`fix` and `check --fix`: a diff, or the fixes written; stdin in, fixed source out."""
    if _reads_stdin(paths, opts):
        return output.stdin_fixed(sys.stdin.buffer.read(), opts["stdin_filename"] or "-", settings, opts)
    with _analysis():
        report = api.fix(list(paths) or ["."], settings, jobs=opts["jobs"], cache=not opts["no_cache"])
    output.dropped_fixes(report)
    if not apply:
        return output.would_fix(report, opts)
    with _signals_deferred() as cancel:
        try:
            api.write_fixes(report, cancel)
        except KeyboardInterrupt:  # a second signal during a write; the report says where it stopped
            cancel.cancel(signal.SIGINT)
    if report.cancelled:
        return output.interrupted_writes(report, cancel.reason)
    return output.fixed(report, opts)


def run_verify_fix(paths: tuple[str, ...], command: list[str], settings: Settings, profile_options, jobs: int | None = None) -> int:
    """Plan the fixes; the profiler writes, verifies and, when they do not hold, restores them."""
    from gpulint.profile.command import CommandError, plan_command
    from gpulint.profile.project import default_fix_paths
    from gpulint.profile.verify import PlannedFix, run_verify

    if not paths:
        try:
            paths = tuple(default_fix_paths(plan_command(command, profile_options.cwd)))
        except CommandError as error:
            click.echo(f"gpulint failed\n  Cause: {printable(str(error))}", err=True)
            return EXIT_ERROR
        if not paths:
            raise click.UsageError("cannot find the file the command runs; name the files to fix")

    def plan_fixes() -> list[PlannedFix]:
        report = api.fix(list(paths), settings, jobs=jobs)
        for d in report.errors:
            click.echo(printable(f"gpulint: {d.filename}: {d.message}"), err=True)
        output.dropped_fixes(report)
        planned = []
        for f in report.changed:
            if f.file is None:
                continue
            try:
                fixed = f.fixed_bytes()
            except UnicodeEncodeError:
                click.echo(printable(f"gpulint: {f.path}: not fixed: the fixed text cannot be encoded as {f.source.encoding}"), err=True)
                continue
            planned.append(PlannedFix(f.file.resolve(), f.source.encode(f.original), fixed, dict(f.fixes)))
        return planned

    return run_verify(list(command), plan_fixes, profile_options)


@cli.command()
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule(code: str | None, show_all: bool, output_format: str) -> None:
    """Explain a rule (gpulint rule GPU101), or list them all (--all)."""
    import json

    if show_all:
        records = [info.to_dict() for info in api.rules()]
        if output_format == "json":
            click.echo(json.dumps(records, indent=2))
        else:
            click.echo("\n".join(r["explanation"].rstrip() + "\n" for r in records), nl=False)
        return
    if not code:
        raise click.UsageError("give a rule code (e.g. GPU101) or --all")
    record = api.rule(code).to_dict()
    click.echo(json.dumps(record, indent=2) if output_format == "json" else record["explanation"].rstrip())


@cli.command()
def server() -> None:
    """Run the language server (LSP over stdin/stdout) for editors; needs `pip install 'gpulint[server]'`."""
    from gpulint.server import serve

    sys.exit(serve())


cli.add_command(profile)


def _split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """`fix --apply --verify -- python train.py` -> the options, and the command to profile."""
    if "--" in argv and argv and argv[0] == "fix":
        index = argv.index("--")
        return argv[:index], argv[index + 1 :]
    return argv, None


def _on_sigterm(signum, frame) -> None:
    raise Terminated


def _interrupted(cause: BaseException | None, detail: str = "") -> None:
    signum = signal.SIGTERM if isinstance(cause, Terminated) else signal.SIGINT
    click.echo(f"gpulint: interrupted ({signum.name}){detail}", err=True)
    _leave_workers_behind(128 + signum)
    sys.exit(128 + signum)


def _leave_workers_behind(code: int) -> None:
    """Stopped while a process pool still runs (nothing is being written: writes handle signals themselves):
    end its workers and exit now. A normal exit joins the pool's manager thread, which can wait forever for
    chunks the interrupted parent no longer collects (seen on CPython 3.11 with -j 2)."""
    import multiprocessing

    workers = multiprocessing.active_children()
    if not workers:
        return
    for worker in workers:
        worker.kill()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


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
