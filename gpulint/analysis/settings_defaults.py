"""Settings defaults kept in a Python module of the project (yacs): `_C = CN()`, then `_C.DATA.NUM_WORKERS = 8`
at module level in `config.py`, read elsewhere as `config.DATA.NUM_WORKERS` on the object `get_config()` clones.

Pass one records, per module, the defaults it writes on such a node (`defaults`), the dotted settings it writes
anywhere else (`writes`: `config.DATA.NUM_WORKERS = args.workers` in `update_config`), and the dotted settings
it reads (`reads`). The index composes them with the YAML files of the project (any of which
`merge_from_file(args.cfg)` may load): a read has the default's value, together with every other value the
project may give that setting. A setting written with a value that is not a literal, or found in a YAML
file as something other than a plain value, is unknown; rules then decide only on what every candidate says
(`num_workers` is above 0 in all of them), never on a guess.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Any, Iterable, Optional

# yacs' `CfgNode` (often imported as `CN`) and the project subclasses conventionally named after it
_NODE_CLASSES = frozenset({"CN", "CfgNode", "ConfigNode"})
_MARKERS = ("CN(", "CfgNode", "ConfigNode")
_MAX_PATHS = 256  # dotted settings a module's summary keeps, of each kind
_MAX_YAML_FILES = 256
_MAX_YAML_DEPTH = 4  # folders below the project root searched for YAML files
UNKNOWN = "?"  # a value written that is not a literal
# names a settings object goes by (`config`, `cfg`, `train_cfg`, `_C`, `opt`, `hparams`): only their settings are
# read and written here (`x.shape`, `self.model.fc`, `args.lr` are not settings of a defaults module)
_NAMES = r"(?:cfg|conf|config|configs|settings|opts?|options|hparams|hp|_?C)"
CONFIG_NAME = re.compile(rf"(^|_){_NAMES}$", re.IGNORECASE)

# settings read directly on the object (`config.device`); other reads are kept from two keys on
# (`config.DATA.NUM_WORKERS`), so that `opt.lr` does not fill the summary
_DEVICE_KEYS = frozenset({"device", "DEVICE", "gpu", "GPU", "gpus", "GPUS", "use_gpu", "USE_GPU", "cuda", "CUDA"})
# a worker count kept at the top of the node (`_C.WORKERS = 4`, read as `cfg.WORKERS`, 24 in the shipped YAML files)
_WORKER_KEYS = frozenset({"WORKERS", "NUM_WORKERS", "workers", "num_workers"})


def _dotted(node: ast.AST) -> Optional[tuple[str, list[str]]]:
    """("_C", ["DATA", "NUM_WORKERS"]) for `_C.DATA.NUM_WORKERS`."""
    keys: list[str] = []
    while isinstance(node, ast.Attribute):
        keys.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not keys:
        return None
    keys.reverse()
    return node.id, keys


def _literal(node: ast.AST) -> tuple[bool, Any]:
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return (True, value) if isinstance(value, (bool, int, float, str)) or value is None else (False, None)


# `config.DATA.NUM_WORKERS` read, or written (`config.DATA.NUM_WORKERS = args.workers`, `self.cfg.X = 0`; the
# defaults a module writes on its own node at its top level are read from the tree)
_SETTING = re.compile(r"(?:cfg|conf|configs?|settings|opts?|options|hparams|hp|C|CFG|CONF|CONFIG)\.(\w+(?:\.\w+)*)")
_ASSIGNED = re.compile(r"[ \t]*([-+*/%|&]?=)(?!=)[ \t]*(.*)")


def _literal_text(text: str) -> tuple[bool, Any]:
    """The literal a line's right-hand side is (a comment after it allowed)."""
    for candidate in (text, text.split("#", 1)[0]):
        try:
            return _literal(ast.parse(candidate.strip(), mode="eval").body)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            continue
    return False, None


def _is_node_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in _NODE_CLASSES


def config_paths(tree: ast.Module, text: str, modules: Iterable[str]) -> dict[str, Any]:
    """{"defaults": {path: [value, line]}, "writes": {path: value or UNKNOWN}, "reads": [path]} of one module
    (empty parts left out); `modules`: the names it imports as modules (`torch`, `np`), never settings."""
    found: dict[str, Any] = {}
    nodes = set()
    if any(marker in text for marker in _MARKERS):
        defaults: dict[str, Any] = {}
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and _is_node_call(stmt.value):
                target = stmt.targets[0]
                if isinstance(target, ast.Name):
                    nodes.add(target.id)
                continue
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
                continue
            dotted = _dotted(stmt.targets[0]) if isinstance(stmt.targets[0], ast.Attribute) else None
            if dotted is None or dotted[0] not in nodes or _is_node_call(stmt.value):
                continue
            path = ".".join(dotted[1])
            ok, value = _literal(stmt.value)
            known = defaults.get(path)
            # written twice (or not as a literal): what the module leaves there is not read here
            defaults[path] = [value, stmt.lineno] if ok and known is None else [UNKNOWN, stmt.lineno]
        if defaults:
            found["defaults"] = dict(list(defaults.items())[:_MAX_PATHS * 4])
    # Text, not the tree: a second walk of every module would cost more than the summary gains (a path in a
    # comment or a string only adds a setting the context carries unused). The pattern starts with the names'
    # last letters, so the scan is a search for a few literals.
    skip = {*modules, *nodes}
    writes: dict[str, Any] = {}
    reads: dict[str, None] = {}
    for match in _SETTING.finditer(text):
        begin = match.start()
        while begin > 0 and (text[begin - 1].isalnum() or text[begin - 1] == "_"):
            begin -= 1
        root, path = text[begin : match.start(1) - 1], match.group(1)
        if root in skip or not CONFIG_NAME.search(root) or len(reads) >= _MAX_PATHS:
            continue
        line_start = text.rfind("\n", 0, begin) + 1
        indent = text[line_start:begin]
        written = _ASSIGNED.match(text, match.end())
        if written is not None and indent.strip() in ("", "self."):
            operator, value = written.groups()
            ok, literal = _literal_text(value) if operator == "=" else (False, None)
            known = writes.get(path, literal if ok else UNKNOWN)
            writes[path] = literal if ok and known == literal else UNKNOWN
        elif text[begin - 1 : begin] != "." and ("." in path or path in _DEVICE_KEYS or path in _WORKER_KEYS):
            reads[path] = None
    if writes:
        found["writes"] = writes
    if reads:
        found["reads"] = list(reads)
    return found


# ---- the index: the values a setting may have --------------------------------------------------------


def project_yaml_files(root: str) -> Optional[list[str]]:
    """YAML files of the project (hidden folders left out, at most `_MAX_YAML_DEPTH` folders deep): the settings
    `merge_from_file(args.cfg)` may load. None when there are more than `_MAX_YAML_FILES`: what they set is then
    not read, and the settings stay unknown."""
    found: list[str] = []
    base = root.rstrip(os.sep).count(os.sep)
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("node_modules", "__pycache__"))
        if top.count(os.sep) - base >= _MAX_YAML_DEPTH:
            dirs[:] = []
        found.extend(os.path.join(top, f) for f in sorted(files) if f.endswith((".yaml", ".yml")))
        if len(found) > _MAX_YAML_FILES:
            return None
    return found


class ProjectSettings:
    """The yacs defaults of a project (its modules' `defaults`), what its code writes to the same settings, and
    its YAML files, composed once per index."""

    def __init__(self, root: str, modules: Iterable[tuple[str, dict[str, Any]]]) -> None:
        self.root = root
        self.defaults: dict[str, list] = {}  # path -> [value, "config.py:12"], value UNKNOWN when modules disagree
        self.writes: dict[str, list] = {}
        for shown, paths in modules:
            for path, (value, line) in paths.get("defaults", {}).items():
                known = self.defaults.get(path)
                self.defaults[path] = [value, f"{shown}:{line}"] if known is None or known[0] == value else [UNKNOWN, known[1]]
            for path, value in paths.get("writes", {}).items():
                self.writes.setdefault(path, []).append(value)
        self._yaml: Optional[list[str]] = None
        self._yaml_settings: Optional[list[dict[str, Any]]] = None

    def yaml_files(self) -> Optional[list[str]]:
        if self._yaml is None:
            self._yaml = project_yaml_files(self.root) if self.defaults else []
        return self._yaml

    def for_reads(self, reads: Iterable[str]) -> dict[str, list]:
        """path -> [default, where, every value the project may give it] for the settings a module reads that
        have a default here (nothing when the project has too many YAML files to read)."""
        from gpulint.analysis import settings_files

        wanted = [p for p in reads if p in self.defaults and self.defaults[p][0] != UNKNOWN]
        if not wanted or self.yaml_files() is None:
            return {}
        if self._yaml_settings is None:
            self._yaml_settings = [settings_files.flat_settings(f) for f in self.yaml_files() or ()]
        found = {}
        for path in wanted:
            value, where = self.defaults[path]
            values = [value, *self.writes.get(path, [])]
            values.extend(UNKNOWN if s[path] is settings_files.NOT_PLAIN else s[path] for s in self._yaml_settings if path in s)
            distinct: list[Any] = []
            for candidate in values:  # the default first; each other value once (`False` and `0` kept apart)
                if not any(type(candidate) is type(d) and candidate == d for d in distinct):
                    distinct.append(candidate)
            found[path] = [value, where, distinct]
        return found
