"""Configuration objects handed down in a script: which YAML file a `cfg.x` read takes its default from.

    @hydra.main(config_path="cfgs", config_name="config")
    def main(cfg):
        workspace = Workspace(cfg)                     # every call hands it the Hydra config

    class Workspace:
        def __init__(self, cfg):
            self.cfg = cfg
            self.device = torch.device(cfg.device)     # `device: cuda` in cfgs/config.yaml
            loader = make_loader(self.cfg.data)        # `data:` of that file, handed down again

`config_source(model, expr)` names where the settings object at the root of a read comes from, and the keys below
that file's root the read is at:

- the parameter of a function decorated `@hydra.main(config_path=..., config_name=...)` (Hydra's primary file);
- a name bound to `yaml.safe_load(open("x.yaml"))` / `OmegaConf.load("x.yaml")` with a path known statically
  (`ValueResolver._settings_file`), or to a read of such an object (`data_cfg = cfg.data`);
- a parameter of a module-level function or class `__init__` that every call in the module hands such an object
  (or a part of it: `make_loader(cfg.data)`), in a script no other module imports; `self.cfg` where `__init__`
  stores such a parameter once (`shipped_paths.init_parameter_held`).

Anything else (a config built at run time, `OmegaConf.merge`, a parameter some call fills otherwise, a function a
framework or a registry calls) has no source: its settings stay unknown, never guessed.

`hydra_agreed(folder, keys, value)`: a Hydra setting is the primary file's value only when no other file of the
config folder writes another one at that place (a group option chosen on the command line, or one mounted at the
top with `@_global_`, may replace it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_MAX_DEPTH = 4
HYDRA, FILE = "hydra", "file"


@dataclass(frozen=True)
class ConfigSource:
    kind: str  # HYDRA (a config folder and its primary file's name) or FILE (one YAML file)
    where: str  # the Hydra config folder, or the YAML file
    name: str  # Hydra's `config_name` ("" for a file)
    keys: tuple  # where the read is below the file's root (`cfg.data.num_workers` handed as `data`: ("data", "num_workers"))


def config_source(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> Optional[ConfigSource]:
    """Where the settings read `expr` (`cfg.data.num_workers`, `self.cfg["device"]`, a bare `cfg`) comes from."""
    chain = _chain(expr)
    if chain is None or depth > _MAX_DEPTH:
        return None
    root, keys, first = chain
    if root.value == "self" and first is not None:
        from gpulint.analysis.shipped_paths import init_parameter_held  # `self.cfg = cfg` in `__init__`

        param = init_parameter_held(model, first)
        found = _handed_in(model, param, depth) if param is not None else None
        return _below(found, keys[1:])
    binders = model.bindings_of(root.value, root)
    binder = binders[0] if len(binders) == 1 else None
    if isinstance(binder, cst.Param):
        found = _hydra_main(model, binder) or _handed_in(model, binder, depth)
        return _below(found, keys)
    if isinstance(binder, cst.Assign) and len(binder.targets) == 1 and isinstance(binder.targets[0].target, cst.Name):
        path = model.values._settings_file(root)
        if path is not None:
            return ConfigSource(FILE, path, "", tuple(keys))
        if isinstance(binder.value, (cst.Attribute, cst.Subscript)):  # `data_cfg = cfg.data`
            return _below(config_source(model, binder.value, depth + 1), keys)
    return None


def _below(found: Optional[ConfigSource], keys: list) -> Optional[ConfigSource]:
    return ConfigSource(found.kind, found.where, found.name, (*found.keys, *keys)) if found is not None else None


def _chain(expr: cst.BaseExpression) -> Optional[tuple[cst.Name, list, Optional[cst.Attribute]]]:
    """(root name, keys, the attribute right above the root) of `cfg.data["num_workers"]`."""
    from gpulint.analysis.value_resolution import literal_value

    keys: list = []
    node, first = expr, None
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        if isinstance(node, cst.Attribute):
            keys.append(node.attr.value)
        else:
            index = node.slice[0].slice if len(node.slice) == 1 else None
            ok, key = literal_value(index.value) if isinstance(index, cst.Index) else (False, None)
            if not ok or not isinstance(key, (str, int)):
                return None
            keys.append(key)
        first = node if isinstance(node, cst.Attribute) else None
        node = node.value
    if not isinstance(node, cst.Name):
        return None
    keys.reverse()
    return node, keys, first


def _hydra_main(model: SemanticModel, param: cst.Param) -> Optional[ConfigSource]:
    """The Hydra config the function around `param` is decorated to receive."""
    from gpulint.analysis import settings_files
    from gpulint.analysis.value_resolution import literal_value

    func = model.parent.get(model.parent.get(param))
    for decorator in func.decorators if isinstance(func, cst.FunctionDef) else ():
        call = decorator.decorator
        if isinstance(call, cst.Call) and model.call_name(call) == "hydra.main":
            given = {a.keyword.value: literal_value(a.value) for a in call.args if a.keyword is not None}
            given = {k: v[1] if v[0] else ... for k, v in given.items()}  # `...`: written, not a literal
            config = settings_files.hydra_config(given.get("config_path"), given.get("config_name"))
            if config is not None:
                return ConfigSource(HYDRA, settings_files.hydra_folder(model.path, config[0]), config[1], ())
    return None


def _handed_in(model: SemanticModel, param: cst.Param, depth: int) -> Optional[ConfigSource]:
    """The one config source every call in the module hands `param` of a module-level function or class `__init__`."""
    func = model.parent.get(model.parent.get(param))
    if not isinstance(func, cst.FunctionDef) or model.project.imported:
        return None  # a module others import: their calls may hand it anything
    owner = model.parent.get(model.parent.get(func))
    if model.parent.get(func) is model.module:
        name, skip = func.name.value, 0
    elif isinstance(owner, cst.ClassDef) and func.name.value == "__init__" and model.parent.get(owner) is model.module:
        name, skip = owner.name.value, 1  # `Workspace(cfg)` fills `__init__` after `self`
    else:
        return None
    positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)][skip:]
    if func.decorators or param.name.value not in positional or len(model.bindings_of(name, func)) > 1:
        return None
    index = positional.index(param.name.value)
    reads = [r for alias in _names_of(model, name) for r in model.dataflow.reads.get(alias, [])]
    found: set[ConfigSource] = set()
    for read in reads:
        parent = model.parent.get(read)
        if not (isinstance(parent, cst.Call) and parent.func is read):
            return None  # handed on as a value (a callback, a registry): its callers are out of sight
        given = [a.value for a in parent.args if a.keyword is not None and a.keyword.value == param.name.value]
        plain = [a for a in parent.args if a.keyword is None]
        if any(a.star for a in parent.args):
            return None
        if not given and index < len(plain):
            given = [plain[index].value]
        source = config_source(model, given[0], depth + 1) if given else None
        if source is None:
            return None
        found.add(source)
    return found.pop() if len(found) == 1 else None


def _names_of(model: SemanticModel, name: str) -> list[str]:
    """`name`, and the names a script's import of itself binds to it (`from train import Workspace as W`)."""
    memo = model.memo("self imports")
    if model.module not in memo:
        stem = os.path.splitext(os.path.basename(model.path))[0]
        aliases: list[tuple[str, str]] = []
        for node in _import_froms(model.module):
            module = node.module
            if node.relative or module is None or not isinstance(node.names, (list, tuple)):
                continue
            if _dotted(module).rsplit(".", 1)[-1] != stem:
                continue
            for alias in node.names:
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name) and isinstance(alias.name, cst.Name):
                    aliases.append((alias.name.value, alias.asname.name.value))
        memo[model.module] = aliases
    return [name, *(bound for imported, bound in memo[model.module] if imported == name)]


def _import_froms(module: cst.Module) -> list[cst.ImportFrom]:
    found: list[cst.ImportFrom] = []

    class _Imports(cst.CSTVisitor):
        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            found.append(node)

    module.visit(_Imports())
    return found


def _dotted(node: Any) -> str:
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return node.value if isinstance(node, cst.Name) else ""


def lookup(source: ConfigSource) -> Optional[tuple[Any, int, str]]:
    """(value, line, file) of the source's keys: in Hydra's primary file or the group file its defaults list mounts."""
    from gpulint.analysis import settings_files

    if source.kind == HYDRA:
        return settings_files.hydra_lookup(source.where, source.name, list(source.keys))
    found = settings_files.lookup(source.where, list(source.keys))
    return (*found, source.where) if found is not None else None


def hydra_agreed(folder: str, keys: list, value: Any) -> bool:
    """No YAML file of the Hydra config `folder` writes another value at `keys`: a file of a group folder
    (`data/mnist.yaml`) is read at the keys below its group (`data.num_workers` -> `num_workers`) and at `keys`
    themselves (mounted at the top with `@_global_`)."""
    from gpulint.analysis import settings_files

    files = _folder_files(folder)
    if files is None:
        return False
    for path in files:
        group = os.path.relpath(os.path.dirname(path), folder).split(os.sep) if os.path.dirname(path) != folder else []
        places = [keys]
        if group and [str(k) for k in keys[: len(group)]] == group and len(keys) > len(group):
            places.append(keys[len(group) :])
        for place in places:
            other = settings_files.lookup(path, place)
            if other is not None and (other[0] != value or type(other[0]) is not type(value)):
                return False
            if other is None and settings_files.has_entry(path, place):
                return False  # something that is not a plain value (a list, an interpolation)
    return True


def _folder_files(folder: str) -> Optional[list[str]]:
    """The YAML files of a Hydra config folder, as `settings_files.digest` hashes them; None beyond 64."""
    found: list[str] = []
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        found.extend(os.path.join(top, f) for f in sorted(files) if f.endswith((".yaml", ".yml")))
        if len(found) > 64:
            return None  # more than the digest holds: not all of them are part of the module's context
    return found
