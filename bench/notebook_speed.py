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
as a notebook and as its `.py` in turn, `--repeat` times; the best time of each counts. The target: a notebook
costs at most 1.5x its `.py`. Numbers are recorded (in `--out`), never asserted in tests.
"""

from __future__ import annotations

import argparse
import ast
import base64
import hashlib
import json
import os
import platform
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


def best(text: str, path: str, settings: Settings, repeat: int) -> tuple[float, int]:
    times, found = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        found = len(check_document(path, SourceText(text, "utf-8", False), settings).diagnostics)
        times.append(time.perf_counter() - start)
    return min(times), found


def measure(files: list[tuple[str, str, str]], repeat: int) -> dict:
    settings = Settings(root=REPO)
    for name, notebook, python in files[:1]:  # one-time costs (imports, compiled patterns) are no one's
        best(python, "bench.py", settings, 1)
        best(notebook, "bench.ipynb", settings, 1)
    total_py = total_nb = 0.0
    worst = (0.0, "")
    findings = [0, 0]
    for name, notebook, python in files:
        py_time, py_found = best(python, "bench.py", settings, repeat)
        nb_time, nb_found = best(notebook, "bench.ipynb", settings, repeat)
        total_py += py_time
        total_nb += nb_time
        findings[0] += py_found
        findings[1] += nb_found
        worst = max(worst, (nb_time / py_time, name))
    return {"files": len(files), "py": total_py, "nb": total_nb, "worst": worst, "findings": findings,
            "bytes": sum(len(nb.encode()) for _, nb, _ in files)}  # fmt: skip


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
            f"**{ratio:.2f}x** | {m['worst'][0]:.2f}x ({m['worst'][1]}) | {m['findings'][0]} / {m['findings'][1]} |"
        )
    text = "\n".join(
        [
            "# Checking a notebook against the same code as a .py",
            "",
            f"`python bench/notebook_speed.py {' '.join(str(f) for f in args.folders)} --repeat {args.repeat}`".replace("  ", " "),
            f"(best of {args.repeat} per file, in one process; Python {platform.python_version()}, {platform.system()}, "
            f"{os.cpu_count()} CPUs). Target: a notebook costs at most {TARGET}x its `.py`.",
            "",
            "| set | files | notebook size | as .py | as notebook | notebook / .py | worst file | findings .py / notebook |",
            "|---|---|---|---|---|---|---|---|",
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
