"""Command-line switches for debugging, profiling, visualisation or test runs, off as shipped: `if args.debug:`
with `parser.add_argument("--debug", action="store_true")`, parsed in this module or in another one
(`args = get_args()`, `from options import parse`).

The line drawn (docs/project-model.md, "Code that never runs as shipped"): a switch is off as shipped when
it is off by default (`store_true` with no default, or `default=False`), its name says it is a diagnostic
or a side run (`_DIAGNOSTIC_WORDS`: `--debug`, `--profile`, `--vis`, `--plot`, `--enable_tensorboard`,
`--test`), `parser.set_defaults(...)` does not turn it on, and no command file near the script (a shell
script, a README or another Markdown / text / YAML file in its folder or the two above) spells the flag.
A switch that selects how the real run goes (`--cuda`, `--amp`, `--fp16`, `--distributed`, `--compile`)
is never off as shipped: the README's command passes it routinely, and gating the whole GPU path behind it
would silence every finding.
"""

from __future__ import annotations

import functools
import os
import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.value_resolution import ARGS_PARAMETER_NAMES, literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Words of an option's name that make it a diagnostic or a side run (split at `_` / `-`).
_DIAGNOSTIC_WORDS = frozenset({
    "debug", "debugging", "dbg", "profile", "profiler", "profiling", "trace", "tracing", "verbose",
    "vis", "visual", "visualize", "visualise", "visualization", "visualisation", "viz", "plot", "plots",
    "tensorboard", "anomaly", "dump", "sanity", "dry", "test", "testing",
})  # fmt: skip
_COMMAND_FILES = (".sh", ".bash", ".md", ".rst", ".txt", ".yaml", ".yml", ".cfg", ".ipynb")
_FOLDERS = 3  # the script's folder and the two above it
_MAX_BYTES = 512 * 1024
_MAX_FILES = 64


def off_as_shipped(model: SemanticModel, attr: cst.Attribute) -> object:
    """False for `args.debug` of a diagnostic switch that is off as shipped (see the module); else None."""
    if not isinstance(attr.value, cst.Name) or not _is_diagnostic(attr.attr.value):
        return None
    name = attr.attr.value
    default = _local_default(model, attr.value, name)
    if default is None:
        default = _imported_default(model, attr.value, name)
    if default is not False or flag_spelled_near(model.path, name):
        return None
    return False


def _is_diagnostic(dest: str) -> bool:
    return any(word in _DIAGNOSTIC_WORDS for word in re.split(r"[_\-]+", dest.lower()))


def _local_default(model: SemanticModel, base: cst.Name, name: str) -> Optional[bool]:
    """The default of `--name` when `base` is the command line this module parses (or a parameter named like
    it, `def main(args)`, in a module that defines the option)."""
    values = model.values
    if base.value not in values.parse_args_names:
        binders = model.bindings_of(base.value, base)
        if not (len(binders) == 1 and isinstance(binders[0], cst.Param) and base.value in ARGS_PARAMETER_NAMES):
            return None
    options = values.argparse_options.get(name, [])
    if len(options) != 1 or any(_sets_default(call, name) for call in model.method_calls("set_defaults")):
        return None
    option = options[0]
    action = option.keyword("action")
    default = option.keyword("default")
    if default is not None:
        ok, value = literal_value(default.value)
        return False if ok and value is False and action is not None and literal_value(action.value) == (True, "store_true") else None
    return False if action is not None and literal_value(action.value) == (True, "store_true") else None


def _sets_default(call: cst.Call, name: str) -> bool:
    return any(arg.star or (arg.keyword is not None and arg.keyword.value == name) for arg in call.args)


def _imported_default(model: SemanticModel, base: cst.Name, name: str) -> Optional[bool]:
    """`args = get_args()` where `get_args` of another module returns the parsed command line: the option's
    default as that module's summary records it (a `store_true` switch: False; `set_defaults` applied)."""
    binders = model.bindings_of(base.value, base)
    if len(binders) != 1 or not isinstance(binders[0], cst.Assign) or not isinstance(binders[0].value, cst.Call):
        return None
    callee = model.callee(binders[0].value)
    returned = callee.returns if callee is not None else None
    if not (isinstance(returned, tuple) and len(returned) == 2 and returned[0] == "args" and isinstance(returned[1], dict)):
        return None
    entry = returned[1].get(name)
    return False if entry is not None and entry[0] is False else None


def flag_spelled_near(module_path: str, name: str) -> bool:
    """`--name` (or `--name` with dashes) in a command file near the script: a run that turns it on."""
    flags = {f"--{name}", f"--{name.replace('_', '-')}"}
    pattern = re.compile("|".join(rf"(?<![\w-]){re.escape(f)}(?![\w-])" for f in sorted(flags)))
    files = command_files(os.path.dirname(os.path.abspath(module_path)))
    return any(pattern.search(text) for text in _command_texts(tuple((p, _stamp(p)) for p in files)))


def _stamp(path: str) -> tuple[int, int]:
    try:
        stat = os.stat(path)
    except OSError:
        return (0, 0)
    return (stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=32)
def _command_texts(files: tuple[tuple[str, tuple[int, int]], ...]) -> tuple[str, ...]:
    texts = []
    for path, _ in files:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                texts.append(handle.read(_MAX_BYTES))
        except OSError:
            continue
    return tuple(texts)


def command_files(folder: str) -> list[str]:
    """Files that may hold the commands a script is run with: shell scripts, READMEs and other Markdown, text
    and YAML files in `folder` and the two above it (at most `_MAX_FILES`)."""
    found: list[str] = []
    for _ in range(_FOLDERS):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            names = []
        found.extend(
            os.path.join(folder, n) for n in names
            if (n.endswith(_COMMAND_FILES) or n in ("Makefile", "Dockerfile")) and os.path.isfile(os.path.join(folder, n))
        )  # fmt: skip
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return found[:_MAX_FILES]
