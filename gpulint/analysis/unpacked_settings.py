"""A section of a YAML settings file unpacked into a call: `Wrapper(cfg["batch_size"], **cfg["dataset"])`.

    def main(config):
        dataset = MolDatasetWrapper(config["batch_size"], **config["dataset"])   # num_workers=4, valid_size=0.1, ...

    if __name__ == "__main__":
        config = yaml.load(open("config_finetune.yaml"), Loader=yaml.FullLoader)
        main(config)

Each entry of the mapping at `dataset:` is a keyword of the call, so what every call in the project passes to the
constructor's `num_workers` (`analysis/call_arguments.py`) is the value written there. The summary records, for a
call whose every `**` unpacks a read of such a config (`unpacked_sections`), the file's path as the code writes it,
the keys of the section, whether the config came through a parameter of a module-level function (then the caller's
module must be a script no other module imports, and every call of that function in the module passes the loaded
config), and the keys the module stores into some mapping (`config["dataset"]["task"] = "classification"`): those
are set at run time, never read from the file. The project reads the file itself (`section_keywords`), with every
file shipped beside it (a user may pass any of them, as `settings_files.shipped_alternatives` says): a key written
with different values there has each of them; a file without the key leaves the parameter at its default.

Anything else (a path built at run time, `config.update(...)`, a key stored under a computed name, `*args`, a
config handed on elsewhere) records nothing: the call's arguments stay unknown, never guessed.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional

UNKNOWN = object()
KEY = "**"  # where `FunctionSummary.literals` of a call holds its unpacked sections (no keyword is spelled so)
_LOADERS = frozenset({"yaml.safe_load", "yaml.load", "yaml.full_load", "omegaconf.OmegaConf.load"})
_MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "merge_with"})


def unpacked_sections(tree: ast.Module, qualify: Callable[[ast.AST], Optional[str]]) -> dict[int, list]:
    """id(call) -> [[written path, [section keys], through a parameter, [keys stored anywhere]], ...] for each call
    of the module whose every `**` unpacks a section of a config loaded from a literal YAML path."""
    loaded = _loaded_names(tree, qualify)
    if not loaded:
        return {}
    stored, mutated = _stores(tree)
    functions = {s.name: s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found: dict[int, list] = {}
    for scope in [tree, *functions.values()]:
        for node in _own_nodes(scope):
            if not isinstance(node, ast.Call) or not any(k.arg is None for k in node.keywords):
                continue
            if any(isinstance(a, ast.Starred) for a in node.args):
                continue
            entries = []
            for keyword in node.keywords:
                if keyword.arg is not None:
                    continue
                entry = _section(keyword.value, scope, tree, functions, loaded, mutated)
                if entry is None:
                    entries = []
                    break
                entries.append([*entry, sorted(stored)])
            if entries:
                found[id(node)] = entries
    return found


def _section(expr: ast.AST, scope: ast.AST, tree: ast.Module, functions: dict, loaded: dict, mutated: set) -> Optional[list]:
    """[written path, keys, through a parameter] of `cfg["dataset"]` (literal keys below a loaded config)."""
    keys: list = []
    while isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str):
        keys.append(expr.slice.value)
        expr = expr.value
    if not keys or not isinstance(expr, ast.Name) or expr.id in mutated:
        return None
    keys.reverse()
    name = expr.id
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        params = [a.arg for a in (*scope.args.posonlyargs, *scope.args.args)]
        if name in params and not _bound_in(scope, name):
            written = _handed_config(tree, scope, params.index(name), name, loaded)
            return [written, keys, True] if written is not None and name not in mutated else None
        if _bound_in(scope, name):
            written = loaded.get((id(scope), name))
            return [written, keys, False] if written is not None else None
    written = loaded.get((id(tree), name))
    return [written, keys, False] if written is not None else None


def _handed_config(tree: ast.Module, func: ast.AST, index: int, param: str, loaded: dict) -> Optional[str]:
    """The YAML path of the config every call of the module-level `func` in its module passes for `param` (a
    module-level name bound once to a load); None when a call passes anything else or the name is handed on."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == func.name and isinstance(node.ctx, ast.Load):
            call = _parent_call(tree, node)
            if call is None:
                return None  # handed on as a value: its callers are out of sight
            given = [k.value for k in call.keywords if k.arg == param]
            if not given and index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
                given = [call.args[index]]
            if not given or not isinstance(given[0], ast.Name) or (id(tree), given[0].id) not in loaded:
                return None
            found.add(loaded[(id(tree), given[0].id)])
    return found.pop() if len(found) == 1 else None


def _parent_call(tree: ast.Module, name: ast.Name) -> Optional[ast.Call]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.func is name:
            return node
    return None


def _loaded_names(tree: ast.Module, qualify) -> dict[tuple[int, str], str]:
    """(id(scope), name) -> the YAML path written, for a name bound exactly once in its scope (the module, or a
    module-level function) to `yaml.safe_load(open("x.yaml"))` / `OmegaConf.load("x.yaml")`, or inside
    `with open("x.yaml") as f:` to `yaml.safe_load(f)`."""
    found: dict[tuple[int, str], str] = {}
    scopes = [tree, *(s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))]
    for scope in scopes:
        counts: dict[str, int] = {}
        for node in _own_nodes(scope):
            for target in _bound_names(node):
                counts[target] = counts.get(target, 0) + 1
        opened = {}  # `with open("x.yaml") as f`
        for node in _own_nodes(scope):
            if isinstance(node, ast.With):
                for item in node.items:
                    path = _open_path(item.context_expr)
                    if path is not None and isinstance(item.optional_vars, ast.Name):
                        opened[item.optional_vars.id] = path
        for node in _own_nodes(scope):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
                continue
            call = node.value
            if not isinstance(call, ast.Call) or qualify(call.func) not in _LOADERS or not call.args:
                continue
            source = call.args[0]
            path = _open_path(source)
            if path is None and isinstance(source, ast.Constant) and isinstance(source.value, str):
                path = source.value if source.value.endswith((".yaml", ".yml")) else None
            if path is None and isinstance(source, ast.Name) and counts.get(source.id) == 1:
                path = opened.get(source.id)
            name = node.targets[0].id
            if path is not None and counts.get(name) == 1:
                found[(id(scope), name)] = path
    return found


def _open_path(node: ast.AST) -> Optional[str]:
    if (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open" and node.args
        and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
        and node.args[0].value.endswith((".yaml", ".yml"))
    ):  # fmt: skip
        return node.args[0].value
    return None


def _own_nodes(scope: ast.AST):
    """The nodes of a scope, not entering nested functions and classes (the module's functions are scopes too)."""
    stack = list(scope.body) if isinstance(scope, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.append(child)


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return list(node.names) * 2  # bound elsewhere too: never once
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.alias):
        return [(node.asname or node.name).split(".")[0]]
    return []


def _bound_in(func: ast.AST, name: str) -> bool:
    return any(name in _bound_names(n) for n in _own_nodes(func))


def _stores(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(the literal keys stored into any subscript of the module: `cfg["dataset"]["task"] = ...`, the names whose
    mappings change otherwise: a computed key, `cfg.update(...)`, `del cfg[...]`, `cfg["dataset"] = {...}`)."""
    stored: set[str] = set()
    mutated: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
            root = _root(node.func.value)
            if root is not None:
                mutated.add(root)
        for target in targets:
            for element in (target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]):
                if not isinstance(element, ast.Subscript):
                    continue
                root = _root(element)
                key = element.slice.value if isinstance(element.slice, ast.Constant) else None
                if isinstance(key, str) and not isinstance(node, ast.Delete):
                    stored.add(key)
                    if isinstance(element.value, ast.Name):
                        mutated.add(element.value.id)  # a whole section replaced (`cfg["dataset"] = {...}`)
                elif root is not None:
                    mutated.add(root)
    return stored, mutated


def _root(node: ast.AST) -> Optional[str]:
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def section_keywords(index: Any, caller: Any, entries: list) -> Optional[tuple[dict[str, Any], set[str]]]:
    """(keyword -> the ways the unpacked sections give it: `["given", value]` once per value the shipped files
    write, `[LEFT_OUT]` where one of them has no such key, `UNKNOWN` where a file has no plain value there or the
    module stores the key; the keys the caller's module stores, which the sections may hold at run time) for a
    call whose sections the summary recorded. None when a file is not found or a section is not a mapping."""
    from gpulint.analysis import settings_files
    from gpulint.analysis.call_arguments import LEFT_OUT
    from gpulint.analysis.uncalled import imported_elsewhere

    found: dict[str, Any] = {}
    stored_keys: set[str] = set()
    for written, keys, through_parameter, stored in entries:
        stored_keys.update(stored)
        if through_parameter and imported_elsewhere(index, caller):
            return None  # a module others import: their calls may hand the function another config
        path = settings_files.existing(str(caller.path), written)
        if path is None:
            return None
        files = [path, *(p for p in settings_files.shipped_alternatives(path) if p != path)]
        sections = []
        for candidate in files:
            entries_here = settings_files.mapping_keys(candidate, list(keys))
            if entries_here is None:
                if candidate == path or settings_files.has_entry(candidate, list(keys)):
                    return None  # the loaded file has no mapping there, or another file has something else
                continue  # a file for another script: not an alternative
            sections.append(entries_here)
        for section in sections:
            for key, (value, _line) in section.items():
                if key in found and found[key] is UNKNOWN:
                    continue
                if key in stored or value is settings_files.NOT_PLAIN:
                    found[key] = UNKNOWN  # type: ignore[assignment]
                    continue
                way = ["given", value]
                if way not in found.setdefault(key, []):
                    found[key].append(way)
        for key in list(found):
            if found[key] is not UNKNOWN and any(key not in s for s in sections) and [LEFT_OUT] not in found[key]:
                found[key].append([LEFT_OUT])
    return found, stored_keys

