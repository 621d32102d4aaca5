"""The values that the commands a repository ships pass for one command-line option of a script.

A Vertex AI sample's `trainer/task.py` parses `--batch-size` with `default=4`; the notebook beside it that builds
the training job passes `container_args = ["--batch-size", "256", "--epochs", "100"]`. The default is not what the
documented run uses (twenty-second corpus, judged wrong by one judge, noise by the other). A command is any spelling
of the option's flag followed by a value in a command file near the script (`off_options.command_files`: shell
scripts, READMEs and other Markdown, text and YAML files in its folder and the two above it) or in a notebook there
(code and Markdown cells): `--batch-size 256`, `--batch-size=256`, `"--batch-size", "256"` in a list of arguments.

`passed_values(model, expr)`: for `args.batch_size` (`expr`) read from the one `add_argument` of this module that
defines it, each value written after one of its flags (an `int` / `float` where the text is a number, else the
text: `$BS`, `${batch}`); None when the option is not this module's or no command spells a flag of it.
"""

from __future__ import annotations

import functools
import json
import os
import re
from typing import TYPE_CHECKING, Any, Optional

import libcst as cst

from gpulint.analysis.off_options import command_files, file_stamp
from gpulint.analysis.path_folders import files_near

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_MAX_BYTES = 512 * 1024
# After the flag: `=`, or blanks, or the end of one quoted list item and the start of the next (`"--bs", "256"`).
_SEPARATOR = r"""(?:\s*=\s*|['"]?\s*,\s*['"]?|['"]?\s+['"]?)"""
_VALUE = r"""([^\s'",\]\)\\]+)"""


def passed_values(model: SemanticModel, expr: cst.BaseExpression) -> Optional[list[Any]]:
    if not isinstance(expr, cst.Attribute) or not isinstance(expr.value, cst.Name):
        return None
    options = model.values.argparse_options.get(expr.attr.value, [])
    if len(options) != 1:
        return None
    flags = [
        a.value.evaluated_value for a in options[0].call.args
        if a.keyword is None and isinstance(a.value, cst.SimpleString) and isinstance(a.value.evaluated_value, str)
        and a.value.evaluated_value.startswith("--")
    ]  # fmt: skip
    if not flags:
        return None
    pattern = re.compile("|".join(rf"(?<![\w-]){re.escape(f)}(?![\w-]){_SEPARATOR}{_VALUE}" for f in sorted(flags)))
    folder = os.path.dirname(os.path.abspath(model.path))
    files = [*command_files(folder), *command_notebooks(folder)]
    found = [_number(m.group(m.lastindex or 1)) for text in _texts(tuple((p, file_stamp(p)) for p in files)) for m in pattern.finditer(text)]
    return found or None


def command_notebooks(folder: str) -> list[str]:
    """The notebooks in `folder` and the two above it (not above the repository's root, a `.git` folder)."""
    return files_near(folder, lambda name: name.endswith(".ipynb"), 16, inside_repository=True)


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


@functools.lru_cache(maxsize=32)
def _texts(files: tuple[tuple[str, tuple[int, int]], ...]) -> tuple[str, ...]:
    texts = []
    for path, (_, size) in files:
        if size > 4 * _MAX_BYTES and path.endswith(".ipynb"):
            continue  # a notebook kept with its outputs: too large to read for commands
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read(4 * _MAX_BYTES if path.endswith(".ipynb") else _MAX_BYTES)
        except OSError:
            continue
        texts.append(_notebook_sources(text) if path.endswith(".ipynb") else text)
    return tuple(texts)


def _notebook_sources(text: str) -> str:
    """The code and Markdown of a notebook's cells, one after the other (its outputs left out)."""
    try:
        cells = json.loads(text).get("cells", [])
    except (ValueError, AttributeError):
        return ""
    sources = []
    for cell in cells if isinstance(cells, list) else []:
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        sources.append("".join(source) if isinstance(source, list) else str(source))
    return "\n".join(sources)
