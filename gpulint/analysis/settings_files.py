"""Settings kept in YAML files of the repository: the defaults a training script reads from a config object.

`cfg = yaml.safe_load(open("configs/train.yaml"))`, `cfg = OmegaConf.load("configs/train.yaml")` and Hydra's
`@hydra.main(config_path="configs", config_name="train")` name their file statically; `cfg.data.num_workers`
(or `cfg["data"]["num_workers"]`) then has the value written there, with its line. Hydra's defaults list
(`defaults: [{data: mnist}]`) mounts `configs/data/mnist.yaml` at `data`; the primary file wins over it.
Anything else (a path built at run time, an interpolation `${...}`, a value overridden on the command line
by scripts gpulint does not read) stays unknown, never guessed.

Files are read with PyYAML's safe loader, and only when small: a setting file is data, never code.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from typing import Any, Iterable, Optional

from gpulint.analysis.path_folders import files_near

_MAX_BYTES = 256 * 1024
_MAX_FILES = 64  # YAML files of one Hydra config folder that a module's results depend on
_YAML = (".yaml", ".yml")
NOT_PLAIN = ...  # a YAML value that is not a plain scalar (`gpus: [1]`), as `mapping_keys` gives it


def _compose(path: str) -> Any:
    """The YAML node tree of `path` (None when it is missing, too large or not YAML)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return _composed(path, stat.st_mtime_ns, stat.st_size) if stat.st_size <= _MAX_BYTES else None


@functools.lru_cache(maxsize=64)
def _composed(path: str, mtime: int, size: int) -> Any:
    try:
        import yaml
    except ImportError:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            return yaml.compose(handle, Loader=yaml.SafeLoader)
    except (OSError, UnicodeError, RecursionError, yaml.YAMLError):
        return None


def _scalar(node: Any) -> tuple[bool, Any]:
    import yaml

    if not isinstance(node, yaml.ScalarNode):
        return False, None
    try:
        value = yaml.SafeLoader("").construct_object(node)
    except yaml.YAMLError:  # a tag the safe loader refuses (`!!python/name:...`)
        return False, None
    if isinstance(value, str) and "${" in value:
        return False, None  # an interpolation: resolved at run time
    if isinstance(value, (bool, int, float, str)) or value is None:
        return True, value
    return False, None


def _child(node: Any, key: Any) -> Any:
    import yaml

    if isinstance(node, yaml.MappingNode):
        for name, value in node.value:
            if isinstance(name, yaml.ScalarNode) and name.value == str(key):
                return value
    return None


def lookup(path: str, keys: list) -> Optional[tuple[Any, int]]:
    """(value, 1-based line) of `keys` in the YAML file `path`; None when it is not there as a plain value."""
    node = _compose(path)
    for key in keys:
        node = _child(node, key)
        if node is None:
            return None
    ok, value = _scalar(node)
    return (value, node.start_mark.line + 1) if ok else None


def mapping_keys(path: str, keys: list) -> Optional[dict[str, tuple[Any, int]]]:
    """The entries of the mapping at `keys` in the YAML file `path` (`trainer_params:` -> {"gpus": ([1], 23)}):
    each key with its plain value (`NOT_PLAIN` where it is a list, a mapping or an interpolation) and line; None
    when there is no mapping there."""
    import yaml

    node = _compose(path)
    for key in keys:
        node = _child(node, key)
        if node is None:
            return None
    if not isinstance(node, yaml.MappingNode):
        return None
    found: dict[str, tuple[Any, int]] = {}
    for name, value in node.value:
        if not isinstance(name, yaml.ScalarNode) or name.value == "<<":
            return None  # a merge key or a complex key: what it adds is not read
        ok, plain = _scalar(value)
        found[str(name.value)] = (plain if ok else NOT_PLAIN, value.start_mark.line + 1)
    return found


def flat_settings(path: str) -> dict[str, Any]:
    """Every setting of the YAML file `path` by its dotted path (`DATA.NUM_WORKERS` -> 8), `NOT_PLAIN` where the
    value is a list, an interpolation or a tag; a mapping's own path is `NOT_PLAIN` too. Empty when the file is
    missing, too large or not YAML."""
    import yaml

    found: dict[str, Any] = {}

    def walk(node: Any, prefix: str, depth: int) -> None:
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or depth > 8:
                continue
            dotted = f"{prefix}{key.value}"
            if isinstance(value, yaml.MappingNode):
                found[dotted] = NOT_PLAIN
                walk(value, dotted + ".", depth + 1)
            else:
                ok, plain = _scalar(value)
                found[dotted] = plain if ok else NOT_PLAIN

    root = _compose(path)
    if isinstance(root, yaml.MappingNode):
        walk(root, "", 0)
    return found


def has_entry(path: str, keys: list) -> bool:
    """Whether the YAML file `path` writes anything at `keys`, a plain value or not."""
    node = _compose(path)
    for key in keys:
        node = _child(node, key)
        if node is None:
            return False
    return True


def shipped_alternatives(path: str) -> list[str]:
    """The YAML files beside `path` (`configs/vae.yaml` and `configs/*.yaml`): the other settings the repository
    ships for the same script, any of which a user may pass instead of the default one."""
    folder = os.path.dirname(path)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return [path]
    found = [os.path.join(folder, n) for n in names if n.endswith(_YAML)]
    return found[:_MAX_FILES] if path in found[:_MAX_FILES] else [path, *found[: _MAX_FILES - 1]]


def hydra_config(config_path: Any, config_name: Any) -> Optional[tuple[str, str]]:
    """(config folder, primary file's name) of `@hydra.main(config_path=..., config_name=...)` written as literals.
    Hydra 0.11 had no `config_name`: its `config_path` names the primary file itself (`config_path="conf/config.yaml"`,
    still accepted, deprecated, by Hydra 1.0), so the folder is that file's own. None for anything else."""
    if isinstance(config_path, str) and isinstance(config_name, str) and config_path and config_name:
        return config_path, config_name
    if config_name is None and isinstance(config_path, str) and config_path.endswith(_YAML):
        folder, name = os.path.split(config_path)
        return folder or ".", os.path.splitext(name)[0]
    return None


def hydra_lookup(folder: str, name: str, keys: list) -> Optional[tuple[Any, int, str]]:
    """`keys` in Hydra's primary config `folder/name.yaml`, else in the group file its defaults list mounts at
    `keys[0]`: (value, line, file). A group file is read below its group (Hydra 1.1's package `_group_`) and at the
    top (`_global_`: Hydra 0.11 and 1.0 merged an option file at the root, `training/cpc.yaml` writing `training:`
    itself); a `# @package` header says which; without one, only one of the two places may hold the setting
    (the read fails at run time under the other Hydra)."""
    primary = _file_in(folder, name)
    if primary is None or not keys:
        return None
    found = lookup(primary, keys)
    if found is not None:
        return (*found, primary)
    option = _default_option(primary, keys[0])
    if option is None:
        return None
    group = _file_in(os.path.join(folder, str(keys[0])), option)
    if group is None or len(keys) < 2:
        return None
    package = _package(group)
    places = {"_group_": [keys[1:]], "_global_": [keys]}.get(package, [keys[1:], keys] if package is None else [])
    written = [place for place in places if has_entry(group, place)]
    found = lookup(group, written[0]) if len(written) == 1 else None
    return (*found, group) if found is not None else None


def _package(path: str) -> Optional[str]:
    """The package a `# @package <name>` header of a Hydra config file names (None without one)."""
    try:
        with open(path, encoding="utf-8") as handle:
            head = handle.read(2048)
    except (OSError, UnicodeError):
        return None
    for line in head.splitlines():
        match = re.match(r"^\s*#\s*@package\s+(\S+)", line)
        if match:
            return match.group(1)
        if line.strip() and not line.lstrip().startswith("#"):
            break
    return None


def _file_in(folder: str, name: str) -> Optional[str]:
    for suffix in ("", *_YAML):
        path = os.path.join(folder, name + suffix)
        if path.endswith(_YAML) and os.path.isfile(path):
            return path
    return None


def _default_option(primary: str, group: str) -> Optional[str]:
    """The option the defaults list of `primary` chooses for `group` (`- data: mnist`)."""
    import yaml

    defaults = _child(_compose(primary), "defaults")
    if not isinstance(defaults, yaml.SequenceNode):
        return None
    for entry in defaults.value:
        chosen = _child(entry, group)
        if chosen is not None:
            ok, value = _scalar(chosen)
            return value if ok and isinstance(value, str) else None
    return None


def candidate_paths(module_path: str, written: str) -> list[str]:
    """Where a path written in a script may be: next to the script, or in one of its parent folders (scripts
    are run from the repository's root or from their own folder)."""
    folder = os.path.dirname(os.path.abspath(module_path))
    found = []
    for _ in range(4):
        found.append(os.path.normpath(os.path.join(folder, written)))
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return found


def existing(module_path: str, written: str) -> Optional[str]:
    return next((p for p in candidate_paths(module_path, written) if os.path.isfile(p)), None)


def hydra_folder(module_path: str, config_path: str) -> str:
    """Hydra resolves `config_path` against the folder of the script that declares it."""
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(module_path)), config_path))


def digest(module_path: str, references: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Content hashes of the setting files a module's results may depend on (`ModuleSummary.settings`): the
    file of each literal path, every YAML file of each Hydra config folder, the job files that may launch a
    script with command-line flags (`launch_files`). Part of the module's context, so editing a YAML file
    re-checks the scripts that read it."""
    found: dict[str, str] = {}
    for kind, written in references:
        if kind == "file":
            paths = [p for p in candidate_paths(module_path, written) if os.path.isfile(p)][:1]
            paths = shipped_alternatives(paths[0]) if paths else paths  # `**cfg["trainer_params"]` reads them all
        elif kind == "launch":
            from gpulint.analysis.off_options import command_files  # commands that may turn a switch on

            from gpulint.analysis.shipped_commands import command_notebooks  # notebooks that build a job's arguments

            folder = os.path.dirname(os.path.abspath(module_path))
            paths = launch_files(module_path)
            paths += [p for p in [*command_files(folder), *command_notebooks(folder)] if p not in paths]
        else:
            folder = hydra_folder(module_path, os.path.dirname(written) if written.endswith(_YAML) else written)
            paths = []
            for top, dirs, files in os.walk(folder):
                dirs.sort()
                paths.extend(os.path.join(top, f) for f in sorted(files) if f.endswith(_YAML))
                if len(paths) >= _MAX_FILES:
                    break
        for path in paths[:_MAX_FILES]:
            found[path] = _content_hash(path)
    return found


def hashes(paths: Iterable[str]) -> dict[str, str]:
    """Content hashes of `paths` (for a module context's digest)."""
    return {path: _content_hash(path) for path in paths}


def _content_hash(path: str) -> str:
    """The file's content hash; read again only when its size or modification time changed (every script of a
    folder shares the job files above it)."""
    try:
        stat = os.stat(path)
    except OSError:
        return "unreadable"
    return _hashed(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _hashed(path: str, mtime: int, size: int) -> str:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read(_MAX_BYTES + 1)).hexdigest()[:16]
    except OSError:
        return "unreadable"


# ---- job files that launch a script ---------------------------------------------------------------

_INPUT = re.compile(r"^\$\{\{\s*inputs\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}$")


def launch_files(module_path: str) -> list[str]:
    """YAML files that may launch the script (`command: python train.py --epochs ...`): those directly in its
    folder and the two above it, at most `_MAX_FILES`."""
    folder = os.path.dirname(os.path.abspath(module_path))
    return files_near(folder, lambda name: name.endswith(_YAML), _MAX_FILES, inside_repository=False)


def launch_values(module_path: str, flags: Iterable[str], files: Iterable[str]) -> Optional[list[Optional[tuple[Any, int, str]]]]:
    """(value, line, file) that each command of `files` launching `module_path` passes for one of `flags`
    (`--epochs 1`, or `--epochs ${{inputs.epochs}}` with `inputs: {epochs: 1}` beside the command, as Azure ML
    jobs and pipeline steps write them), or None for a command that leaves the flag out (the script's default
    applies there). Empty when no file launches the script; None when one passes a value that is not written
    there (a parent pipeline's input, a shell variable)."""
    wanted = set(flags)
    script = os.path.normcase(os.path.abspath(module_path))
    found: list[Optional[tuple[Any, int, str]]] = []
    for path in files:
        for command, owner in _commands(_compose(path)):
            tokens = str(command.value).split()
            index = _launch_index(tokens, os.path.dirname(path), _child(owner, "code"), script)
            if index is None:
                continue
            value = _flag_value(tokens[index + 1 :], wanted, owner, command, path)
            if value is _UNREADABLE:
                return None
            found.append(value)
    return found


def _commands(node: Any, depth: int = 0) -> Iterable[tuple[Any, Any]]:
    """(`command:` scalar, the mapping that holds it) anywhere in the YAML tree."""
    import yaml

    if depth > 8:
        return
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "command" and isinstance(value, yaml.ScalarNode):
                yield value, node
            else:
                yield from _commands(value, depth + 1)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _commands(item, depth + 1)


_LAUNCHERS = ("python", "torchrun", "accelerate", "deepspeed", "mpirun", "srun")


def _launch_index(tokens: list[str], folder: str, code: Any, script: str) -> Optional[int]:
    """Where `[path/]script.py` is in a command that starts it (`python`, `torchrun --nproc_per_node 2`,
    `accelerate launch`, ...), the path read from the job's `code:` folder."""
    ok, base = _scalar(code) if code is not None else (True, ".")
    if not ok or not isinstance(base, str):
        return None
    index = next((i for i, token in enumerate(tokens) if token.endswith(".py")), None)
    if index is None or not any(os.path.basename(t).startswith(_LAUNCHERS) for t in tokens[:index]):
        return None
    target = os.path.normcase(os.path.abspath(os.path.join(folder, base, tokens[index])))
    return index if target == script else None


_UNREADABLE = ("unreadable", 0, "")


def _flag_value(arguments: list[str], wanted: set[str], owner: Any, command: Any, path: str) -> Optional[tuple[Any, int, str]]:
    import yaml

    for index, token in enumerate(arguments[:-1]):
        if token.split("=", 1)[0] not in wanted:
            continue
        given = token.split("=", 1)[1] if "=" in token else arguments[index + 1]
        reference = _INPUT.match(given)
        if reference is None:
            node = yaml.ScalarNode("tag:yaml.org,2002:str", given, command.start_mark)
            node.tag = yaml.resolver.Resolver().resolve(yaml.ScalarNode, given, (True, False))
            ok, value = _scalar(node)
            return (value, command.start_mark.line + 1, path) if ok else _UNREADABLE
        node = _child(_child(owner, "inputs"), reference.group(1))
        if node is not None and not isinstance(node, yaml.ScalarNode):
            node = _child(node, "default")  # `epochs: {type: integer, default: 1}`
        ok, value = _scalar(node) if node is not None else (False, None)
        return (value, node.start_mark.line + 1, path) if ok else _UNREADABLE
    return None  # the flag is not given: the script's own default applies


def raw_scalar(path: str, keys: list) -> Optional[str]:
    """The text of the plain scalar at `keys` in `path` as written (`${device}` too); None when there is none."""
    import yaml

    node = _compose(path)
    for key in keys:
        node = _child(node, key)
        if node is None:
            return None
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None


def written_beside(folder: str, primary: str, keys: list) -> bool:
    """Whether a YAML file of the Hydra config `folder` other than `primary` writes anything at `keys`."""
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        for name in files:
            path = os.path.join(top, name)
            if name.endswith(_YAML) and path != primary and has_entry(path, keys):
                return True
    return False
