"""Click glue for `gpulint profile`, and the option decorator that `gpulint fix --verify` reuses.

Only click is imported here; torch and pynvml load inside the run (never when `gpulint check` starts).
"""

from __future__ import annotations

import functools
import pathlib

import click

from gpulint.profile.options import (
    DEFAULT_FIRST_STEP_TIMEOUT_S,
    DEFAULT_STEPS,
    DEFAULT_TIMEOUT_S,
    DEFAULT_WARMUP,
    ProfileOptions,
)

_OPTION_PARAMS = (
    "profile_steps",
    "profile_warmup",
    "profile_repeat",
    "profile_timeout",
    "profile_first_step_timeout",
    "profile_json",
    "profile_html",
    "profile_trace",
    "profile_launcher",
    "profile_nproc_per_node",
    "profile_isolate_runs",
)


def _positive(ctx, param, value):
    if value is not None and value < 1:
        raise click.BadParameter("must be at least 1")
    return value


def profile_options(f):
    """Add the profiling options (--steps --warmup --repeat --timeout --first-step-timeout --json --html --trace
    --launcher --nproc-per-node --isolate-runs) to a click command.

    The decorated function receives one keyword argument `profile_options: ProfileOptions` instead of them.
    """

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        values = {name: kwargs.pop(name) for name in _OPTION_PARAMS}
        kwargs["profile_options"] = options_from_values(values)
        return f(*args, **kwargs)

    decorators = [
        click.option("--steps", "profile_steps", type=int, default=DEFAULT_STEPS, show_default=True, callback=_positive,
                     help="Measured training steps per run."),
        click.option("--warmup", "profile_warmup", type=click.IntRange(min=0), default=DEFAULT_WARMUP, show_default=True,
                     help="Warm-up steps before measuring (extended until step times settle)."),
        click.option("--repeat", "profile_repeat", type=int, default=None, callback=_positive,
                     help="Runs per variant (default: 3; fix --verify alternates A B A B A B)."),
        click.option("--timeout", "profile_timeout", type=click.FloatRange(min=0, min_open=True),
                     default=DEFAULT_TIMEOUT_S, show_default=True,
                     help="Seconds per run; the whole process group is killed after it."),
        click.option("--first-step-timeout", "profile_first_step_timeout", type=click.FloatRange(min=0, min_open=True),
                     default=DEFAULT_FIRST_STEP_TIMEOUT_S, show_default=True,
                     help="Stop a run that shows no training step for this many seconds from its start."),
        click.option("--json", "profile_json", type=click.Path(dir_okay=False, path_type=pathlib.Path), default=None,
                     help="Write every number to this JSON file."),
        click.option("--html", "profile_html", type=click.Path(dir_okay=False, path_type=pathlib.Path), default=None,
                     help="Write a self-contained HTML report (one file, no network) to this path."),
        click.option("--trace", "profile_trace", type=click.Path(file_okay=False, path_type=pathlib.Path), default=None,
                     help="Write the attribution pass's Chrome/Perfetto trace into this folder."),
        click.option("--launcher", "profile_launcher", type=click.Choice(["torchrun"]), default=None,
                     help="Run through PyTorch's launcher (rank 0 measures)."),
        click.option("--nproc-per-node", "profile_nproc_per_node", type=int, default=1, show_default=True,
                     callback=_positive, help="Processes per node for --launcher torchrun."),
        click.option("--isolate-runs", "profile_isolate_runs", is_flag=True, default=False,
                     help="Move the files each run creates in the working folder to .gpulint-runs/, so no run reads "
                     "another's outputs (checkpoints, logs)."),
    ]
    for decorate in reversed(decorators):
        wrapper = decorate(wrapper)
    return wrapper


def options_from_values(values: dict) -> ProfileOptions:
    return ProfileOptions(
        steps=values["profile_steps"],
        warmup=values["profile_warmup"],
        repeat=values["profile_repeat"],
        timeout=values["profile_timeout"],
        first_step_timeout=values["profile_first_step_timeout"],
        json_path=values["profile_json"],
        html_path=values["profile_html"],
        trace_dir=values["profile_trace"],
        launcher=values["profile_launcher"],
        nproc_per_node=values["profile_nproc_per_node"],
        isolate_runs=values["profile_isolate_runs"],
    )


@click.command(
    "profile",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Run a training script for a few steps and report where the time goes.",
)
@profile_options
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED, metavar="-- COMMAND...")
def profile(command: tuple[str, ...], profile_options: ProfileOptions) -> None:
    """Run COMMAND (e.g. `python train.py --epochs 1`) for warm-up + N steps and report step time,
    throughput, data wait, GPU busy time, host-to-device copies and synchronizations.

    Example: gpulint profile --steps 30 -- python train.py --epochs 1
    """
    from gpulint.profile.profile_run import run_profile

    if profile_options.launcher is None and profile_options.nproc_per_node != 1:
        raise click.UsageError("--nproc-per-node needs --launcher torchrun")
    raise SystemExit(run_profile(list(command), profile_options))
