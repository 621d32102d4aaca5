"""Functions nothing in a script-style project runs: the `get_dataloaders_celeba` of a lecture's helper module
that no notebook of the lecture calls, and the helpers only such functions call.

A module-level function counts only when its module is a helper module (other modules of the project import
it; a script's or a lone file's functions stay reported), the whole project is in sight and nothing can reach
it by name:
- the project ships no packaging metadata (`pyproject.toml`, `setup.py`, `setup.cfg` in the module's folder or
  above it, up to the project root): an installable package's functions are API that users call;
- the module is not a package's `__init__.py`, not a `hubconf.py`, lists no `__all__` naming the function, and
  no module of the project imports `importlib`, `fire`, `hydra`, `click` and the like (functions named by
  strings, config files or the command line);
- every `.py` file and notebook under the project root is in the index (a notebook that is not checked, or an
  excluded folder, may be the caller), and the root is not a folder inside a project (a package, or a folder
  next to Python files, whose scripts may call anything);
- no call of it anywhere in the project, except from other such functions, and it is never handed on as a
  value (`Pool.map(fn, ...)`, `{"cifar": fn}`), nor is its module (`getattr(helpers, name)`,
  `models.__dict__[arch]`).
The module's own analysis adds what it alone sees (decorators: `@register`, `@app.command`; `globals()`):
`analysis/shipped_paths.py`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gpulint.analysis.summary import MODULE_BODY

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

_PACKAGING = ("pyproject.toml", "setup.py", "setup.cfg")
# Libraries that call functions named by a string (a command line, a YAML `_target_`, an imported name).
_CALL_BY_NAME = frozenset({"importlib", "fire", "hydra", "omegaconf", "typer", "click", "jsonargparse"})
_SKIPPED_FOLDERS = frozenset({"__pycache__", "__pypackages__", "node_modules", "site-packages", "venv", "build", "dist"})
_MAX_FILES = 20_000


def uncalled_functions(index: ProjectIndex, record: ModuleRecord) -> list[str]:
    """The module-level functions of `record` that nothing in the project runs (see the module docstring)."""
    dead = _dead_functions(index)
    return sorted(name for owner, name in dead if owner == id(record))


def _dead_functions(index: ProjectIndex) -> set[tuple[int, str]]:
    return index.computed("uncalled", lambda: _find_dead_functions(index))  # type: ignore[no-any-return]


def _find_dead_functions(index: ProjectIndex) -> set[tuple[int, str]]:
    found: set[tuple[int, str]] = set()
    packaged: dict[str, bool] = {}
    candidates = [r for r in index.records.values() if imported_elsewhere(index, r) and _script_module(index, r, packaged)]
    if not candidates or _calls_by_name(index) or not whole_project_indexed(index):
        return found
    reached = _reached_by_name(index)
    if reached is None:
        return found
    whole = {owner for owner, name in reached if name == ""}
    by_id = {id(r): r for r in candidates}
    for record in candidates:
        exports = set(record.summary.exports or ())
        if id(record) in whole:
            continue
        for name in record.summary.functions:
            if name == MODULE_BODY or "." in name or name.startswith("__") or name in exports:
                continue
            if (id(record), name) not in reached:
                found.add((id(record), name))
    changed = True
    while changed:  # a function stays dead only while every call of it lies in a dead function
        changed = False
        for key in list(found):
            for caller, caller_key, _ in index.callers(by_id[key[0]], key[1]):
                if (id(caller), caller_key.split(".", 1)[0]) not in found:
                    found.discard(key)
                    changed = True
                    break
    return found


def _script_module(index: ProjectIndex, record: ModuleRecord, packaged: dict[str, bool]) -> bool:
    """A module of a project that ships no package: nothing outside the project imports it."""
    if record.path.name in ("__init__.py", "hubconf.py") or not record.summary.ok:
        return False
    root = str(index.root)
    if not (record.folder == root or record.folder.startswith(root + os.sep)):
        return False  # a file outside the root brings its package: not all of its project is in sight
    return not _packaged(record.folder, root, packaged)


def _packaged(folder: str, root: str, packaged: dict[str, bool]) -> bool:
    """Packaging metadata in `folder` or a folder above it, up to `root` (answers kept per folder)."""
    if folder not in packaged:
        here = any(os.path.isfile(os.path.join(folder, name)) for name in _PACKAGING)
        above = folder != root and os.path.dirname(folder) != folder
        packaged[folder] = here or (above and _packaged(os.path.dirname(folder), root, packaged))
    return packaged[folder]


def _calls_by_name(index: ProjectIndex) -> bool:
    """Some module imports a library that calls functions by a name written elsewhere."""
    for record in index.records.values():
        for level, module, _ in record.summary.imports.values():
            if not level and module.split(".", 1)[0] in _CALL_BY_NAME:
                return True
    return False


def _reached_by_name(index: ProjectIndex) -> set[tuple[int, str]] | None:
    """(file, function) handed on as a value somewhere, and (file, "") for a module handed on whole; None: any."""
    found: set[tuple[int, str]] = set()
    for record in index.records.values():
        for ref in record.summary.handed:
            if ref == "*":
                return None
            if ref.startswith("."):
                continue
            target = index.symbol(record, ref.removesuffix(".__dict__"))
            if target is None:
                continue
            kind, owner, name = target
            if kind == "module":
                found.add((id(owner), ""))
            else:
                found.add((id(owner), name.split(".", 1)[0]))
    return found


def whole_project_indexed(index: ProjectIndex) -> bool:
    """Every Python file and notebook under the root is in the index (walked once per index), and the root is
    not a folder inside a project (a package, or Python files next to it: gpulint run in `lib/` of a repository
    whose scripts above it may call anything)."""
    root = str(index.root)
    parent = os.path.dirname(root)
    if os.path.isfile(os.path.join(root, "__init__.py")) or _holds_python(parent):
        return False
    known = {str(path) for path in index.records}
    stack = [str(index.root)]
    seen = 0
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            return False
        for entry in entries:
            name = entry.name
            if name.startswith(".") or name in _SKIPPED_FOLDERS:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
            except OSError:
                return False
            if name.endswith((".py", ".ipynb")):
                seen += 1
                if seen > _MAX_FILES or entry.path not in known:
                    return False
    return True


def imported_elsewhere(index: ProjectIndex, record: ModuleRecord) -> bool:
    """Another module of the project imports `record` (`from dataset import Dataset` in train.py): a library
    module, whose `if __name__ == "__main__":` block is a self-test, not what the project runs."""
    return id(record) in index.computed("imported", lambda: _imported_modules(index))


def _imported_modules(index: ProjectIndex) -> set[int]:
    """The ids of the project's modules that another module imports."""
    found: set[int] = set()
    for importer in index.records.values():
        # a module's import of itself (`from weight_drop import WeightDrop` in its own `__main__`) is no user
        found.update(id(source) for source in modules_imported_by(index, importer) if source is not importer)
    return found


def modules_imported_by(index: ProjectIndex, importer: ModuleRecord) -> list[ModuleRecord]:
    """The project's modules `importer` imports (`from .data import make`: data.py, or `data/make.py` if a module)."""
    sources = []
    for level, module, name in importer.summary.imports.values():
        sources.append(index.module(importer, level, module) if module or level else None)
        if name is not None:
            sources.append(index.module(importer, level, f"{module}.{name}" if module else name))
    sources += [index.module(importer, level, module) for level, module in importer.summary.stars]
    return [source for source in sources if source is not None]


def _holds_python(folder: str) -> bool:
    try:
        return any(entry.name.endswith((".py", ".ipynb")) for entry in os.scandir(folder))
    except OSError:
        return True
