"""Which files `fix --verify` fixes when no paths are given: the script and the modules of its own project that
it imports, directly or through each other (minGPT's `projects/adder/adder.py` trains through
`mingpt/trainer.py`; a `src/` layout imports its package). Installed libraries are never included.

Imports are read statically (`ast`), resolved the way the script's interpreter would find them first: the
script's folder (`sys.path[0]`), the working folder, the project root and its `src/`.
"""

from __future__ import annotations

import ast
import os
import pathlib

from gpulint.profile.command import LaunchPlan

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
SKIP_PARTS = {"site-packages", "dist-packages", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".nox"}
MAX_FILES = 500


def project_root(start: pathlib.Path) -> pathlib.Path:
    """The nearest folder holding a project marker, from the script's folder up; the script's folder without one."""
    home = pathlib.Path.home()
    for folder in [start, *start.parents]:
        if any((folder / m).exists() for m in ROOT_MARKERS):
            return folder
        if folder == home:
            break
    return start


def _module_file(name: str, roots: list[pathlib.Path]) -> list[pathlib.Path]:
    """The files importing `name` runs: each package's __init__.py on the way, then the module itself."""
    parts = name.split(".")
    for root in roots:
        found = []
        folder = root
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            package = folder / part
            if package.is_dir() and (package / "__init__.py").is_file():
                found.append(package / "__init__.py")
                folder = package
            elif last and (folder / f"{part}.py").is_file():
                found.append(folder / f"{part}.py")
            elif package.is_dir() and not last:
                folder = package  # a namespace package
            else:
                found = []
                break
        if found:
            return found
    return []


def _imports(path: pathlib.Path, roots: list[pathlib.Path]) -> list[pathlib.Path]:
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return []
    found: list[pathlib.Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _module_file(alias.name, roots)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                search = [base]
                module = node.module or ""
            else:
                search = roots
                module = node.module or ""
            if module:
                found += _module_file(module, search)
            for alias in node.names:  # `from pkg import module`
                if alias.name != "*":
                    found += _module_file(f"{module}.{alias.name}" if module else alias.name, search)
    return found


def script_file(plan: LaunchPlan) -> pathlib.Path | None:
    """The file the command runs (`python -m pkg.train` is looked up from the working folder)."""
    if plan.kind == "script":
        return pathlib.Path(plan.target)
    files = _module_file(plan.target, [pathlib.Path(plan.cwd)])
    if not files:
        return None
    last = files[-1]
    main = last.parent / "__main__.py"
    return main if last.name == "__init__.py" and main.is_file() else last


def default_fix_paths(plan: LaunchPlan) -> list[str]:
    """The script and the project modules it imports, transitively; [] when the script cannot be found."""
    script = script_file(plan)
    if script is None:
        return []
    script = script.resolve()
    root = project_root(script.parent)
    roots = []
    for folder in (script.parent, pathlib.Path(plan.cwd), root, root / "src"):
        folder = folder.resolve()
        if folder.is_dir() and folder not in roots:
            roots.append(folder)
    seen = {script}
    queue = [script]
    while queue and len(seen) < MAX_FILES:
        for found in _imports(queue.pop(), roots):
            found = found.resolve()
            if found in seen or not found.is_relative_to(root) or SKIP_PARTS & set(found.relative_to(root).parts):
                continue
            seen.add(found)
            queue.append(found)
    return sorted(os.path.relpath(p) if _below_cwd(p) else str(p) for p in seen)


def _below_cwd(path: pathlib.Path) -> bool:
    return path.is_relative_to(pathlib.Path.cwd().resolve())
