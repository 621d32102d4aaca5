"""The fix-safety gate: `fix --apply --unsafe-fixes` over real training code must not break it.

    python bench/fix_safety.py REPO_DIR [REPO_DIR ...]            # the product: default rules, prefilter on
    python bench/fix_safety.py --all-rules REPO_DIR ...           # every rule, preview included
    python bench/fix_safety.py --json out.json --markdown out.md REPO_DIR ...
    python bench/fix_safety.py --no-project REPO_DIR ...          # each file alone (no project index)

Each repository is one project: its index (the summaries `gpulint fix` uses for facts across modules) is
built once, as `gpulint fix` would build it with the repository as the root. For every Python file that
compiles: fix it in memory (`gpulint.fixer.fix_source` with its context in the project, unsafe fixes included),
then compare pyflakes' undefined names (`UndefinedName`, `UndefinedLocal`) before and after, compile the
result, and fix it again. A file fails the gate when a fix adds an undefined name, when the fixed file no
longer compiles, or when the second fix changes it again (unstable). Nothing is written to disk. Exit
status: 0 when no file failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import signal
import sys
import time
import warnings
from collections import Counter
from multiprocessing import get_context
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

UNDEFINED = ("UndefinedName", "UndefinedLocal")


def undefined_names(text: str, filename: str) -> Counter:
    """pyflakes' undefined names of a module, counted by (kind, name): positions move when fixes insert lines."""
    from pyflakes import checker

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(text, filename)
    found = checker.Checker(tree, filename=filename)
    return Counter((type(m).__name__, m.message_args[0]) for m in found.messages if type(m).__name__ in UNDEFINED)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout


_SETTINGS = None
_INDEX = None  # the repository's project index, built in the parent and inherited by the forked workers


def _settings(all_rules: bool, root: str):
    from gpulint.config import Settings, with_overrides

    base = Settings(root=Path(root).resolve())
    return with_overrides(base, select=("ALL",), preview=True) if all_rules else base


def _init(settings) -> None:
    global _SETTINGS
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGALRM, _alarm)
    _SETTINGS = settings


def check_file(item: tuple[str, float]) -> dict:
    """Fix one file in memory and judge the result."""
    from gpulint.fixer import _compiles as compiles, fix_source
    from gpulint.source import SourceError, read_source

    path, timeout = item
    result: dict = {"path": path, "status": "ok"}
    try:
        text = read_source(Path(path)).text
    except SourceError as error:
        return {**result, "status": "unreadable", "detail": str(error)}
    if not compiles(text):
        return {**result, "status": "skipped", "detail": "does not compile before fixing"}
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        outcome = fix_source(text, path, _SETTINGS, unsafe=True, project=_INDEX)
        if outcome.text == text:
            return {**result, "fixes": {}}
        result["fixes"] = dict(outcome.fixed)
        if outcome.broken:
            return {**result, "status": "broken", "detail": f"fixer dropped a {outcome.broken[0].code} fix whose result did not parse"}
        if not compiles(outcome.text):
            return {**result, "status": "broken", "detail": "the fixed file does not compile"}
        added = undefined_names(outcome.text, path) - undefined_names(text, path)
        if added:
            return {**result, "status": "new-undefined", "detail": ", ".join(f"{kind} {name}" for (kind, name) in added)}
        again = fix_source(outcome.text, path, _SETTINGS, unsafe=True, project=_INDEX)
        if again.text != outcome.text:
            return {**result, "status": "unstable", "detail": f"a second fix applied {dict(again.fixed)}"}
        return result
    except _Timeout:
        return {**result, "status": "timeout", "detail": f"over {timeout:g} s"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def python_files(root: str) -> list[str]:
    files = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        files.extend(os.path.join(directory, n) for n in sorted(names) if n.endswith(".py"))
    return files


def run(roots: list[str], all_rules: bool, jobs: int, timeout: float, project: bool = True) -> dict:
    global _INDEX
    from gpulint.projects import load_project

    start = time.perf_counter()
    per_repo: dict[str, dict] = {}
    failures: list[dict] = []
    for root in roots:
        files = python_files(root)
        settings = _settings(all_rules, root)
        _INDEX = load_project([Path(f) for f in files], settings, use_cache=False) if project else None
        with get_context("fork").Pool(jobs, initializer=_init, initargs=(settings,)) as pool:
            statuses: Counter = Counter()
            fixes: Counter = Counter()
            changed = 0
            for result in pool.imap(check_file, [(f, timeout) for f in files], chunksize=8):
                statuses[result["status"]] += 1
                fixes.update(result.get("fixes", {}))
                changed += bool(result.get("fixes"))
                if result["status"] in ("broken", "new-undefined", "unstable", "timeout"):
                    failures.append({**result, "path": os.path.relpath(result["path"], os.path.dirname(os.path.abspath(root)))})
            per_repo[os.path.basename(os.path.abspath(root))] = {
                "files": len(files),
                "compiling": len(files) - statuses["skipped"] - statuses["unreadable"],
                "files_fixed": changed,
                "fixes": dict(sorted(fixes.items())),
                "statuses": dict(sorted(statuses.items())),
            }
    totals = Counter()
    for repo in per_repo.values():
        totals.update({k: v for k, v in repo.items() if isinstance(v, int)})
        totals.update({f"status {k}": v for k, v in repo["statuses"].items()})
    return {
        "mode": ("every rule, preview included" if all_rules else "product: default rules, prefilter on")
        + ("; each repository one project (its index)" if project else "; each file alone (no project index)"),
        "repositories": per_repo,
        "files": totals["files"],
        "files_compiling": totals["compiling"],
        "files_fixed": totals["files_fixed"],
        "fixes_applied": sum(sum(r["fixes"].values()) for r in per_repo.values()),
        "new_undefined_names": totals["status new-undefined"],
        "broken": totals["status broken"],
        "unstable": totals["status unstable"],
        "timeouts": totals["status timeout"],
        "failures": failures,
        "wall_s": round(time.perf_counter() - start, 1),
        "jobs": jobs,
        "python": sys.version.split()[0],
    }


def markdown(summary: dict) -> str:
    lines = [
        f"Mode: {summary['mode']}; {summary['jobs']} jobs, {summary['wall_s']} s, Python {summary['python']}.",
        "",
        "| repository | files | compiling | files fixed | fixes applied (per rule) | new undefined names | broken | unstable |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, repo in summary["repositories"].items():
        fixes = ", ".join(f"{code} {n}" for code, n in repo["fixes"].items()) or "none"
        st = repo["statuses"]
        lines.append(
            f"| {name} | {repo['files']} | {repo['compiling']} | {repo['files_fixed']} | {sum(repo['fixes'].values())} ({fixes}) "
            f"| {st.get('new-undefined', 0)} | {st.get('broken', 0)} | {st.get('unstable', 0)} |"
        )
    lines.append(
        f"| **total** | {summary['files']} | {summary['files_compiling']} | {summary['files_fixed']} | {summary['fixes_applied']} "
        f"| {summary['new_undefined_names']} | {summary['broken']} | {summary['unstable']} |"
    )
    for failure in summary["failures"]:
        lines.append(f"\n- FAIL {failure['status']}: {failure['path']}: {failure.get('detail', '')}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="+", help="repository folders")
    parser.add_argument("--all-rules", action="store_true", help="every rule, preview included (default: the product's default rules)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per file")
    parser.add_argument("--no-project", action="store_true", help="fix each file alone, without the repository's project index")
    parser.add_argument("--json", dest="json_path", help="write the summary here")
    parser.add_argument("--markdown", dest="markdown_path", help="write the table here")
    args = parser.parse_args(argv)
    summary = run(args.roots, args.all_rules, args.jobs, args.timeout, project=not args.no_project)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(summary, indent=2) + "\n")
    table = markdown(summary)
    if args.markdown_path:
        Path(args.markdown_path).write_text(table)
    print(table, end="")
    failed = summary["new_undefined_names"] + summary["broken"] + summary["unstable"] + summary["timeouts"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
