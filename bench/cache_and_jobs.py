"""Benchmark: the result cache and parallel runs on a generated tree of >= 2,000 Python files.

    python bench/cache_and_jobs.py [--files 2000] [--repeat 3] [--keep DIR]

The tree is generated in a temporary folder (never committed): copies of the training scripts in
`fixtures/` and of the rule documents' examples (torch code that gets parsed and analysed), plus
torch-free modules from the standard library (which the text prefilter skips without parsing), in the
proportion a mixed repository might have. Every run is `python -m gpulint check` in a subprocess, as a
user runs it; all runs must print the same JSON report, or the script fails.

Measured:
  * a first `gpulint check` (cold cache, default jobs) and a second one (warm cache);
  * `--no-cache -j 1` against `--no-cache -j 2` (the best of `--repeat` runs each).

Writes bench/results/cache_and_jobs.md. Numbers are recorded, not asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results" / "cache_and_jobs.md"
TORCH_SHARE = 0.4  # fraction of files that use torch (parsed and analysed)


def torch_sources() -> list[tuple[str, str]]:
    sys.path.insert(0, str(REPO))
    from gpulint.rule_docs import docs_dir, examples

    sources = [(p.stem, p.read_text(encoding="utf-8")) for p in sorted((REPO / "fixtures").glob("*.py"))]
    sources += [(p.stem, p.read_text(encoding="utf-8")) for p in sorted((REPO / "fixtures" / "expected").glob("*.py"))]
    for doc in sorted(docs_dir().glob("GPU*.md")):
        found = examples(doc.read_text(encoding="utf-8"))
        if found is not None:
            sources.append((f"{doc.stem.lower()}_example", found.example))
            if found.use_instead:
                sources.append((f"{doc.stem.lower()}_clean", found.use_instead))
    return sources


def torch_free_sources(limit: int) -> list[tuple[str, str]]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    found = []
    for path in sorted(stdlib.rglob("*.py")):
        if any(part in ("test", "tests", "site-packages", "idlelib", "lib2to3") for part in path.relative_to(stdlib).parts):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "torch" in text or "cuda" in text or len(text) > 200_000:
            continue
        found.append((path.relative_to(stdlib).as_posix().replace("/", "_")[:-3], text))
        if len(found) >= limit:
            break
    return found


def generate(root: Path, total: int) -> dict[str, int]:
    n_torch = int(total * TORCH_SHARE)
    torch = torch_sources()
    free = torch_free_sources(total - n_torch)
    (root / "pyproject.toml").write_text("[tool.gpulint]\n", encoding="utf-8")
    count = {"torch": 0, "torch-free": 0}
    for i in range(n_torch):
        name, text = torch[i % len(torch)]
        folder = root / "train" / f"pkg{i // 100:02}"
        folder.mkdir(parents=True, exist_ok=True)
        # A unique first line: every file has its own content, as in a real repository.
        (folder / f"{name}_{i:04}.py").write_text(f"# variant {i}\n{text}", encoding="utf-8")
        count["torch"] += 1
    i = 0
    while count["torch"] + count["torch-free"] < total:
        name, text = free[i % len(free)]
        folder = root / "lib" / f"pkg{i // 100:02}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}_{i:04}.py").write_text(f"# variant {i}\n{text}", encoding="utf-8")
        count["torch-free"] += 1
        i += 1
    return count


def _burn(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i
    return total


def calibrate(rounds: int = 3) -> tuple[float, float]:
    """What two processes can gain on this machine right now: the same pure-Python work with one process
    and with a pool of two (best of `rounds`). On an idle 2-CPU machine the second is about half the first;
    when other work saturates the CPUs, no program can do better than this ratio."""
    from multiprocessing import get_context

    work = [2_000_000] * 24
    one, two = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        [_burn(n) for n in work]
        one.append(time.perf_counter() - start)
        start = time.perf_counter()
        with get_context("fork" if sys.platform == "linux" else None).Pool(2) as pool:
            pool.map(_burn, work)
        two.append(time.perf_counter() - start)
    return min(one), min(two)


def run(tree: Path, *args: str) -> tuple[float, bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("GPULINT_OUTPUT_FORMAT", None)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "gpulint", "check", "--output-format=json", *args, "."],
        cwd=tree,
        capture_output=True,
        env=env,
    )
    elapsed = time.perf_counter() - start
    if result.returncode not in (0, 1):
        raise SystemExit(f"gpulint failed ({result.returncode}): {result.stderr.decode()}")
    return elapsed, result.stdout


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True).stdout
        return out.stdout.decode().strip() + (" (with uncommitted changes)" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


MARKER = ".gpulint-bench-tree"  # written into every generated tree: only such a folder is ever replaced


def prepare_tree(tree: Path) -> None:
    """Make `tree` an empty folder; an existing non-empty one is only replaced when this script generated it."""
    if tree.exists():
        if not tree.is_dir():
            raise SystemExit(f"--keep {tree}: exists and is not a folder; choose a new path")
        if any(tree.iterdir()) and not (tree / MARKER).is_file():
            raise SystemExit(
                f"--keep {tree}: the folder is not empty and was not generated by this script; "
                "refusing to delete it (choose a new or empty folder)"
            )
        shutil.rmtree(tree)
    tree.mkdir(parents=True)
    (tree / MARKER).write_text("generated by bench/cache_and_jobs.py; deleted and regenerated by --keep\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="generate the tree here and keep it (a new or empty folder, or one it made)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    tree = args.keep or Path(tempfile.mkdtemp(prefix="gpulint-bench-"))
    prepare_tree(tree)  # before the try: a refused --keep DIR must not be touched by the clean-up either
    try:
        counts = generate(tree, args.files)
        print(f"generated {sum(counts.values())} files in {tree}: {counts}", file=sys.stderr)

        run(tree, "--no-cache", "-j", "1")  # warm the OS page cache and Python's bytecode cache
        first, report = run(tree)
        warm_runs = [run(tree) for _ in range(max(3, args.repeat))]
        warm = statistics.median(t for t, _ in warm_runs)
        # Interleaved, so that other work on the machine hits both settings alike.
        serial_runs, parallel_runs = [], []
        for _ in range(args.repeat):
            serial_runs.append(run(tree, "--no-cache", "-j", "1"))
            parallel_runs.append(run(tree, "--no-cache", "-j", "2"))
        reports = {out for _, out in [*warm_runs, *serial_runs, *parallel_runs]} | {report}
        if len(reports) != 1:
            raise SystemExit("the runs printed different reports")
        import json

        findings = len(json.loads(report))
        burn_one, burn_two = calibrate()
        serial = min(t for t, _ in serial_runs)
        parallel = min(t for t, _ in parallel_runs)
        serial_all = ", ".join(f"{t:.1f}" for t, _ in serial_runs)
        parallel_all = ", ".join(f"{t:.1f}" for t, _ in parallel_runs)
    finally:
        if args.keep is None:
            shutil.rmtree(tree, ignore_errors=True)

    sys.path.insert(0, str(REPO))
    from gpulint import __version__
    from gpulint.linter import default_jobs

    lines = [
        "# Cache and parallel runs",
        "",
        "Generated by `python bench/cache_and_jobs.py` (do not edit by hand).",
        "",
        f"- tree: {sum(counts.values())} files ({counts['torch']} using torch: copies of `fixtures/` and of the rule",
        f"  documents' examples; {counts['torch-free']} torch-free standard-library modules), {findings} findings",
        f"- gpulint {__version__}, commit {git_commit()}; Python {platform.python_version()} on {platform.system()} "
        f"{platform.machine()}, {default_jobs()} usable CPUs ({os.cpu_count()} in the machine)",
        f"- load average (1 min) before / after the runs: {load_before:.1f} / "
        f"{os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan'):.1f} (other work on the machine slows"
        " the parallel runs most)",
        "- each time is one `python -m gpulint check --output-format=json .` in a subprocess, start-up included;",
        "  all runs printed the same report",
        "",
        "| run | seconds |",
        "|---|---|",
        f"| first `gpulint check` (cold cache, default `-j {default_jobs()}`) | {first:.2f} |",
        f"| second `gpulint check` (warm cache, median of {len(warm_runs)}) | {warm:.2f} |",
        f"| `--no-cache -j 1` (best of {args.repeat}: {serial_all}) | {serial:.2f} |",
        f"| `--no-cache -j 2` (best of {args.repeat}: {parallel_all}) | {parallel:.2f} |",
        "",
        f"- warm / first: **{warm / first:.1%}** (target: under 10%)",
        f"- `-j 2` / `-j 1`: **{parallel / serial:.2f}x** the time, a {serial / parallel:.2f}x speed-up (target: `-j 2` faster)",
        f"- machine check, measured right after: the same pure-Python work takes {burn_one:.2f} s in one process and "
        f"{burn_two:.2f} s in a pool of two ({burn_one / burn_two:.2f}x speed-up): the most any `-j 2` can gain here now",
        "",
    ]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
