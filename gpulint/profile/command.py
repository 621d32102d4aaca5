"""Understand the user's command (`python train.py ARGS`, `python -m pkg.train ARGS`, `train.py ARGS`) and
build the command line that runs it under the profiling bootstrap."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import sys
from dataclasses import dataclass, field

CHILD_BOOTSTRAP = pathlib.Path(__file__).with_name("_child.py")

_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?(\.exe)?$")
_FLAGS_NO_VALUE = {"-u", "-O", "-OO", "-B", "-E", "-s", "-S", "-b", "-bb", "-q", "-v", "-d", "-R"}
_FLAGS_WITH_VALUE = {"-W", "-X"}
_LAUNCHERS = {"torchrun", "accelerate", "deepspeed", "mpirun", "srun"}


class CommandError(Exception):
    """The command cannot be profiled; the message says why, for the user."""


@dataclass
class LaunchPlan:
    interpreter: str  # absolute path of the Python that runs the script
    interpreter_flags: list[str]
    kind: str  # "script" or "module"
    target: str  # absolute script path, or module name
    argv0: str  # sys.argv[0] as the user wrote it
    args: list[str] = field(default_factory=list)
    cwd: str = ""

    def describe(self) -> str:
        head = f"python -m {self.target}" if self.kind == "module" else f"python {self.argv0}"
        return " ".join([head, *self.args])


def _resolve_interpreter(name: str) -> str:
    if os.sep in name or (os.altsep and os.altsep in name):
        path = pathlib.Path(name)
        if path.is_file() and os.access(path, os.X_OK):
            return str(path.absolute())  # not resolve(): a venv python is a symlink that must stay one
        raise CommandError(f"interpreter not found: {name}")
    found = shutil.which(name)
    if not found:
        raise CommandError(f"interpreter {name!r} not found on PATH")
    return found


def plan_command(command: list[str] | tuple[str, ...], cwd: str | os.PathLike | None = None) -> LaunchPlan:
    """Turn the user's command into a LaunchPlan, or raise CommandError with a sentence for the user."""
    command = list(command)
    cwd = str(pathlib.Path(cwd or os.getcwd()).resolve())
    if not command:
        raise CommandError("no command given; usage: gpulint profile -- python train.py [ARGS...]")
    head = command[0]
    base = os.path.basename(head)
    if base in _LAUNCHERS or head.endswith("torch.distributed.run"):
        raise CommandError(
            f"cannot run {base!r} directly; give the plain script and let gpulint launch it, e.g. "
            "`gpulint profile --launcher torchrun --nproc-per-node N -- python train.py ...`"
        )
    if _PYTHON_NAME.match(base) or base.startswith("python"):
        interpreter = _resolve_interpreter(head)
        rest = command[1:]
    elif head.endswith((".py", ".ipynb")) or _looks_like_python_script(head, cwd):
        interpreter = sys.executable  # a bare script path: run it with the Python gpulint runs on
        rest = command
    else:
        raise CommandError(
            f"cannot profile {head!r}: gpulint runs Python training scripts; "
            "write the command as `python SCRIPT [ARGS...]` or `python -m MODULE [ARGS...]`"
        )

    flags: list[str] = []
    i = 0
    while i < len(rest):
        arg = rest[i]
        if arg == "-m":
            if i + 1 >= len(rest):
                raise CommandError("`-m` needs a module name")
            return LaunchPlan(interpreter, flags, "module", rest[i + 1], rest[i + 1], rest[i + 2 :], cwd)
        if arg == "-c":
            raise CommandError("cannot profile `python -c CODE`; put the code in a script file")
        if arg == "-":
            raise CommandError("cannot profile a script read from stdin; give a script file")
        if arg in _FLAGS_NO_VALUE:
            flags.append(arg)
        elif arg in _FLAGS_WITH_VALUE:
            if i + 1 >= len(rest):
                raise CommandError(f"`{arg}` needs a value")
            flags += [arg, rest[i + 1]]
            i += 1
        elif arg[:2] in _FLAGS_WITH_VALUE:
            flags.append(arg)
        elif arg.startswith("-") and arg != "--":
            raise CommandError(f"unsupported Python option {arg!r}; remove it or put it in PYTHONFLAGS")
        else:
            script = pathlib.Path(cwd, arg)
            if not script.exists():
                raise CommandError(f"script not found: {arg}")
            if script.is_dir():
                main = script / "__main__.py"
                if not main.is_file():
                    raise CommandError(f"{arg} is a folder without __main__.py")
                script = main
            if script.suffix.lower() == ".ipynb":  # run as a script of its code cells (gpulint.notebook)
                from gpulint.notebook import NotebookError, script_of

                try:
                    script_of(script)
                except NotebookError as error:
                    raise CommandError(f"cannot run {arg} as a script: {error}") from None
            return LaunchPlan(interpreter, flags, "script", str(script.resolve()), arg, rest[i + 1 :], cwd)
        i += 1
    raise CommandError("no script given after the interpreter; usage: gpulint profile -- python train.py [ARGS...]")


def _looks_like_python_script(path: str, cwd: str) -> bool:
    p = pathlib.Path(cwd, path)
    try:
        with open(p, "rb") as f:
            first = f.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def child_argv(plan: LaunchPlan, launcher: str | None = None, nproc_per_node: int = 1) -> list[str]:
    """The argv that runs the bootstrap, which runs the user's target (under torchrun, the bootstrap runs
    PyTorch's launcher in its own process, and each rank runs the bootstrap again; rank 0 measures)."""
    if launcher is not None and launcher != "torchrun":
        raise CommandError(f"unknown launcher {launcher!r}; the only launcher is torchrun")
    if nproc_per_node < 1:
        raise CommandError("--nproc-per-node must be at least 1")
    return [plan.interpreter, *plan.interpreter_flags, str(CHILD_BOOTSTRAP)]
