"""Benchmark: checking a Jupyter notebook against checking the same code as a `.py` file.

    python bench/notebook_speed.py [FOLDER...] [--repeat 5] [--out bench/results/notebook_speed.md]

Two sets of files:
  * generated: each training script in `fixtures/` written as a notebook the way people write them: a
    `!pip install` cell and `%matplotlib inline` first, then one code cell per top-level block of the script,
    a markdown cell before each and, after each, a stream output and a plot (16 KB of base64 PNG data); its
    `.py` is the script itself.
  * real: every `.ipynb` under each FOLDER (for example a checkout of a tutorial repository); its `.py` is the
    module gpulint builds from its code cells (the same code on the same rows), so the difference is what
    reading a notebook costs: the JSON, masking IPython syntax, positions.

Each file is checked in this process with `check_document`, what `gpulint check --no-cache` does for one file,
as a notebook and as its `.py` in turn, `--repeat` times; the best time of each counts. The target: checking
notebooks costs at most 1.5x checking their `.py` (the totals). A file's own ratio says little when its code is
tiny and its outputs large (a .py the prefilter skips in microseconds against megabytes of JSON), so the table
gives the median file's ratio and the largest extra time instead. Numbers are recorded (in `--out`), never
asserted in tests.
"""

from __future__ import annotations

import argparse
import ast
import base64
import hashlib
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpulint.config import Settings  # noqa: E402
from gpulint.linter import check_document  # noqa: E402
from gpulint.notebook import Notebook  # noqa: E402
from gpulint.source import SourceText  # noqa: E402

RESULTS = REPO / "bench" / "results" / "notebook_speed.md"
TARGET = 1.5


def _plot(seed: str) -> str:
    data = b"".join(hashlib.sha256(f"{seed}{i}".encode()).digest() for i in range(384))  # 12 KB -> 16 KB base64
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + data).decode()


def _blocks(source: str) -> list[str]:
    """The script cut where its top-level statements start (decorators with their function); simple statements
    that follow one another stay together."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    previous_simple = False
    for node in ast.parse(source).body:
        simple = not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.While, ast.If, ast.With, ast.Try))
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))]) - 1
        if first > starts[-1] and not (simple and previous_simple):
            starts.append(first)
        previous_simple = simple
    bounds = [*starts, len(lines)]
    return ["".join(lines[a:b]).rstrip("\n") for a, b in zip(bounds, bounds[1:]) if "".join(lines[a:b]).strip()]


def as_notebook(name: str, source: str) -> str:
    def code(text: str, count: int, outputs: list) -> dict:
        return {"cell_type": "code", "execution_count": count, "id": f"c{count}", "metadata": {}, "outputs": outputs,
                "source": text.splitlines(keepends=True)}  # fmt: skip

    cells = [code("!pip install -q torchvision\n%matplotlib inline", 1, [])]
    for index, block in enumerate(_blocks(source), 2):
        cells.append({"cell_type": "markdown", "id": f"m{index}", "metadata": {}, "source": [f"## Step {index}\n", "What this cell does."]})
        outputs = [
            {"name": "stdout", "output_type": "stream", "text": ["epoch 0: loss 2.30\n", "epoch 1: loss 1.87\n"]},
            {"data": {"image/png": _plot(f"{name}{index}"), "text/plain": ["<Figure size 640x480 with 1 Axes>"]},
             "metadata": {}, "output_type": "display_data"},  # fmt: skip
        ]
        cells.append(code(block, index, outputs))
    kernel = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}, "language_info": {"name": "python"}}
    return json.dumps({"cells": cells, "metadata": kernel, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def pairs(folders: list[Path]) -> dict[str, list[tuple[str, str, str]]]:
    """(name, notebook JSON, the same code as a .py) per set."""
    generated = [(p.name, as_notebook(p.stem, p.read_text(encoding="utf-8")), p.read_text(encoding="utf-8")) for p in sorted((REPO / "fixtures").glob("*.py"))]
    real = []
    for folder in folders:
        for path in sorted(folder.rglob("*.ipynb")):
            raw = path.read_text(encoding="utf-8")
            real.append((path.relative_to(folder).as_posix(), raw, Notebook.parse(raw).text))
    return {"generated": generated, "real": real}


def timed(text: str, path: str, settings: Settings) -> tuple[float, int]:
    start = time.perf_counter()
    found = len(check_document(path, SourceText(text, "utf-8", False), settings).diagnostics)
    return time.perf_counter() - start, found


def measure(files: list[tuple[str, str, str]], repeat: int) -> dict:
    """The best time of each file as .py and as notebook, the two measured in turn (so load on the machine
    hits both alike)."""
    settings = Settings(root=REPO)
    for _, notebook, python in files[:1]:  # one-time costs (imports, compiled patterns) are no one's
        timed(python, "bench.py", settings)
        timed(notebook, "bench.ipynb", settings)
    rows = []
    for name, notebook, python in files:
        py, nb = [], []
        for _ in range(repeat):
            py.append(timed(python, "bench.py", settings))
            nb.append(timed(notebook, "bench.ipynb", settings))
        rows.append((name, min(t for t, _ in py), min(t for t, _ in nb), py[0][1], nb[0][1], len(notebook.encode())))
    extra = max(rows, key=lambda r: r[2] - r[1])
    return {
        "files": len(rows),
        "py": sum(r[1] for r in rows),
        "nb": sum(r[2] for r in rows),
        "median": statistics.median(r[2] / r[1] for r in rows),
        "extra": (extra[2] - extra[1], extra[0], extra[5]),
        "findings": (sum(r[3] for r in rows), sum(r[4] for r in rows)),
        "bytes": sum(r[5] for r in rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path, help="folders holding real notebooks")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=str(RESULTS), help="where to write the table (- for stdout)")
    args = parser.parse_args()
    rows = []
    for label, files in pairs(args.folders).items():
        if not files:
            continue
        m = measure(files, args.repeat)
        ratio = m["nb"] / m["py"]
        rows.append(
            f"| {label} | {m['files']} | {m['bytes'] / 1e6:.1f} MB | {m['py'] * 1000:.0f} ms | {m['nb'] * 1000:.0f} ms | "
            f"**{m['nb'] / m['py']:.2f}x** | {m['median']:.2f}x | {m['extra'][0] * 1000:.0f} ms ({m['extra'][1]}, "
            f"{m['extra'][2] / 1e6:.1f} MB) | {m['findings'][0]} / {m['findings'][1]} |"
        )
    text = "\n".join(
        [
            "# Checking a notebook against the same code as a .py",
            "",
            f"`python bench/notebook_speed.py {' '.join(str(f) for f in args.folders)} --repeat {args.repeat}`".replace("  ", " "),
            f"(best of {args.repeat} per file, in one process; Python {platform.python_version()}, {platform.system()}, "
            f"{os.cpu_count()} CPUs). Target: a notebook costs at most {TARGET}x its `.py`.",
            "",
            "| set | files | notebook size | as .py | as notebook | notebook / .py | median file | most extra time (file) | findings .py / notebook |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
            "",
        ]
    )
    if args.out == "-":
        print(text, end="")
    else:
        Path(args.out).write_text(text, encoding="utf-8")
        print(text, end="")


if __name__ == "__main__":
    main()
