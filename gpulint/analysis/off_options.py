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

from gpulint.analysis.imported_options import namespace_options
from gpulint.analysis.path_folders import files_near
from gpulint.analysis.value_resolution import ARGS_PARAMETER_NAMES, literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Words of an option's name that make it a diagnostic or a side run (split at `_` / `-`).
_DIAGNOSTIC_WORDS = frozenset({
    "debug", "debugging", "dbg", "profile", "profiler", "profiling", "trace", "tracing", "verbose",
    "vis", "visual", "visualize", "visualise", "visualization", "visualisation", "viz", "plot", "plots",
    "tensorboard", "anomaly", "dump", "sanity", "dry", "test", "testing",
})  # fmt: skip
_COMMAND_FILES = (".sh", ".bash", ".md", ".rst", ".txt", ".yaml", ".yml", ".cfg")
_MAX_BYTES = 512 * 1024
_MAX_FILES = 64


def off_as_shipped(model: SemanticModel, expr: cst.BaseExpression) -> object:
    """False for `args.debug` of a diagnostic switch that is off as shipped (see the module), or for
    `config["debug"]` where the module copies its parsed command line into a dict; else None."""
    if isinstance(expr, cst.Subscript):
        return _copied_switch(model, expr)
    if not isinstance(expr, cst.Attribute) or not isinstance(expr.value, cst.Name) or not _is_diagnostic(expr.attr.value):
        return None
    name = expr.attr.value
    default = _local_default(model, expr.value, name)
    if default is None:
        default = _imported_default(model, expr.value, name)
    if default is not False or flag_spelled_near(model.path, name):
        return None
    return False


def _copied_switch(model: SemanticModel, sub: cst.Subscript) -> object:
    """`config["enable_tensorboard"]` in a module that defines the switch and copies its parsed command line into
    a dict (`for arg in vars(args): config[arg] = getattr(args, arg)`), where the key is written nowhere else
    but in reads (no `config["enable_tensorboard"] = True`, no dict literal that sets it)."""
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return None
    ok, name = literal_value(sub.slice[0].slice.value)
    if not ok or not isinstance(name, str) or not _is_diagnostic(name):
        return None
    values = model.values
    options = values.argparse_options.get(name, [])
    if len(options) != 1 or not _off_by_default(options[0]) or not _copies_namespace(model):
        return None
    if any(_sets_default(call, name) for call in model.method_calls("set_defaults")):
        return None
    for string in _strings(model, name):
        parent = model.parent.get(string)
        if model.parent.get(parent) is options[0].call:
            continue  # the option's own `add_argument("--name", ...)`
        element = model.parent.get(parent) if isinstance(parent, cst.Index) else None  # a SubscriptElement
        subscript = model.parent.get(element) if element is not None else None
        if not isinstance(subscript, cst.Subscript) or _stored(model, subscript):
            return None
    return None if flag_spelled_near(model.path, name) else False


def _off_by_default(option) -> bool:
    """`action="store_true"` with no default, or `default=False`."""
    default = option.keyword("default")
    if default is not None:
        return literal_value(default.value) == (True, False)
    action = option.keyword("action")
    return action is not None and literal_value(action.value) == (True, "store_true")


def _copies_namespace(model: SemanticModel) -> bool:
    """`vars(args)` or `args.__dict__` of the command line the module parses."""
    parsed = model.values.parse_args_names
    for call in model.calls:
        if isinstance(call.func, cst.Name) and call.func.value == "vars" and len(call.args) == 1:
            arg = call.args[0].value
            if isinstance(arg, cst.Name) and arg.value in parsed:
                return True
    return any(a.attr.value == "__dict__" and isinstance(a.value, cst.Name) and a.value.value in parsed for a in model.attributes)


def _strings(model: SemanticModel, name: str) -> list[cst.SimpleString]:
    memo = model.memo("strings")
    if model.module not in memo:
        found: list = []

        class _Strings(cst.CSTVisitor):
            def visit_SimpleString(self, node: cst.SimpleString) -> None:
                found.append(node)

        model.module.visit(_Strings())
        memo[model.module] = found  # type: ignore[assignment]
    wanted = {name, f"--{name}", f"--{name.replace('_', '-')}"}
    return [s for s in memo[model.module] if literal_value(s)[1] in wanted]  # type: ignore[union-attr]


def _stored(model: SemanticModel, subscript: cst.Subscript) -> bool:
    """The subscript is assigned to or deleted (`config["debug"] = True`)."""
    parent = model.parent.get(subscript)
    if isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.Del)):
        return True
    return isinstance(parent, (cst.Element, cst.Tuple, cst.List)) and isinstance(model.parent.get(model.parent.get(parent)), cst.AssignTarget)


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
    return False if _off_by_default(options[0]) else None


def _sets_default(call: cst.Call, name: str) -> bool:
    return any(arg.star or (arg.keyword is not None and arg.keyword.value == name) for arg in call.args)


def _imported_default(model: SemanticModel, base: cst.Name, name: str) -> Optional[bool]:
    """`args = get_args()` where `get_args` of another module returns the parsed command line, or `args =
    parser.parse_args()` of a parser another module defines (`from opts import parser`): the option's default as
    that module's summary records it (a `store_true` switch: False; `set_defaults` applied;
    `analysis/imported_options.py`)."""
    options = namespace_options(model, base)
    entry = options.get(name) if options is not None else None
    return False if entry is not None and entry[0] is False else None


def flag_spelled_near(module_path: str, name: str) -> bool:
    """`--name` (or `--name` with dashes) in a command file near the script: a run that turns it on."""
    flags = {f"--{name}", f"--{name.replace('_', '-')}"}
    pattern = re.compile("|".join(rf"(?<![\w-]){re.escape(f)}(?![\w-])" for f in sorted(flags)))
    files = command_files(os.path.dirname(os.path.abspath(module_path)))
    return any(pattern.search(text) for text in _command_texts(tuple((p, file_stamp(p)) for p in files)))


def file_stamp(path: str) -> tuple[int, int]:
    """What a cached read of `path` is keyed by: its modification time and size ((0, 0) when it cannot be read)."""
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
    and YAML files in `folder` and the two above it, not above the repository's root (a `.git` folder) or the
    folder gpulint runs in (at most `_MAX_FILES`)."""
    return files_near(folder, _is_command_file, _MAX_FILES, inside_repository=True)


def _is_command_file(name: str) -> bool:
    return name.endswith(_COMMAND_FILES) or name in ("Makefile", "Dockerfile")
