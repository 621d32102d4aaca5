"""Objects a Hydra config builds: `hydra.utils.instantiate(cfg.agent)` is an instance of the class its `_target_` names.

    # cfgs/config.yaml                        # train.py
    agent:                                    @hydra.main(config_path="cfgs", config_name="config")
      _target_: drqv2.DrQV2Agent              def main(cfg):
      lr: ${lr}                                   workspace = Workspace(cfg)

    def make_agent(cfg):                      class Workspace:
        return hydra.utils.instantiate(cfg)       def __init__(self, cfg):
                                                      self.cfg = cfg
                                                      self.agent = make_agent(self.cfg.agent)
                                                  def train(self):
                                                      for step in ...:
                                                          metrics = self.agent.update(batch)   # DrQV2Agent.update

Pass one (`summary.py`, in a module that mentions Hydra) records an `instantiate` call under a reference of its
own (`instantiation`), the `@hydra.main` decorator of a function, and which arguments of each call read a
config parameter (`make_agent(self.cfg.agent)`: `cfg` of `__init__`, at `agent`). The index follows such a
parameter back through every call of its function or class in the project (all of them must hand it the same part of
the same config) to the `@hydra.main` function, then reads `_target_` there in the primary file (or the group
file its defaults list mounts). It names a project class only when no other file of the config folder writes
another `_target_` at that place (a group option may choose another class). Then a method called on the
instance (`self.agent.update(...)`, also through a function whose every `return` gives the instance) is that
class's method, and the facts about per-step methods apply to it (`ProjectIndex.stepped_methods`).

A config built at run time (`OmegaConf.merge`, a command line), a `_target_` outside the project (`torch.optim.Adam`),
one that is an interpolation, or a parameter some call fills otherwise: no class, as before.
"""

from __future__ import annotations

import ast
import os
import re
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from gpulint.analysis import settings_files

if TYPE_CHECKING:
    from gpulint.analysis.project import ProjectIndex, ModuleRecord

INSTANTIATORS = frozenset({"hydra.utils.instantiate"})
MARKER = "§instantiate@"  # no dots: a method of the instance is `<reference>.update`
_MAX_DEPTH = 6


def instantiation(function: str, index: int) -> str:
    """The reference pass one records the `index`-th call of `function` under, when it instantiates a config."""
    return f"{MARKER}{function.replace('.', '/')}@{index}"


def hydra_main(node: ast.AST, qualify: Callable[[ast.AST], Optional[str]]) -> Optional[tuple[str, str]]:
    """(config folder, config_name) of a function decorated `@hydra.main(...)` with both written as literals, or
    Hydra 0.11's `config_path` naming the primary file (`settings_files.hydra_config`)."""
    for decorator in getattr(node, "decorator_list", ()):
        if isinstance(decorator, ast.Call) and qualify(decorator.func) == "hydra.main":
            given = {k.arg: k.value.value if isinstance(k.value, ast.Constant) else ... for k in decorator.keywords}
            return settings_files.hydra_config(given.get("config_path"), given.get("config_name"))
    return None


def resolve(index: ProjectIndex, record: ModuleRecord, head: str, tail: list[str]) -> Optional[tuple[str, ModuleRecord, str]]:
    """What `<instantiation>.method` is: the method of the class the config names. The instantiation alone is
    not a call of the class's `__init__` (its arguments are the config's): None."""
    if not head.startswith(MARKER) or len(tail) != 1:
        return None
    function, _, position = head[len(MARKER) :].rpartition("@")
    if not position.isdigit():
        return None
    return member(index, instantiated_class(index, record, function.replace("/", "."), int(position)), tail[0])


def returned_member(index: ProjectIndex, record: ModuleRecord, function: str, method: str) -> Optional[tuple[str, ModuleRecord, str]]:
    """`make_agent(...).update`: the method of the class every `return` of `function` instantiates."""
    f = record.summary.functions.get(function)
    if f is None or not f.returns:
        return None
    found = set()
    for value in f.returns:
        call = _call_of(f, value)
        if call is None or not call[1][0].startswith(MARKER):
            return None
        found.add(instantiated_class(index, record, function, call[0]))
    if len(found) != 1:
        return None
    return member(index, found.pop(), method)


def _call_of(f: Any, value: Any) -> Optional[tuple[int, tuple]]:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "src" and isinstance(value[1], str) and value[1].startswith("c:"):
        position = value[1][2:]
        if position.isdigit() and int(position) < len(f.calls):
            return int(position), f.calls[int(position)]
    return None


def member(index: ProjectIndex, found: Optional[tuple[ModuleRecord, str]], method: str) -> Optional[tuple[str, ModuleRecord, str]]:
    if found is None:
        return None
    record, name = found
    if method == "__call__":
        return index.called_method(record, name)
    key = f"{name}.{method}"
    return ("function", record, key) if key in record.summary.functions else None


def instantiated_class(index: ProjectIndex, record: ModuleRecord, function: str, position: int) -> Optional[tuple[ModuleRecord, str]]:
    """(module, class) the `position`-th call of `function` instantiates, or None."""
    from gpulint.analysis import settings_files
    from gpulint.analysis.handed_configs import hydra_agreed

    f = record.summary.functions.get(function)
    read = f.configs.get(position, {}).get(0) if f is not None else None
    source = config_source(index, record, function, read[0], tuple(read[1]), 0) if read is not None else None
    if source is None:
        return None
    folder, name, keys = source
    found = settings_files.hydra_lookup(folder, name, [*keys, "_target_"])
    if found is None or not isinstance(found[0], str) or not hydra_agreed(folder, [*keys, "_target_"], found[0]):
        return None
    target = index.qualified_symbol(record, found[0])
    return (target[1], target[2]) if target is not None and target[0] == "class" else None


def config_source(index: ProjectIndex, record: ModuleRecord, function: str, root: str, keys: tuple, depth: int) -> Optional[tuple[str, str, tuple]]:
    """(Hydra config folder, config name, keys) of the config parameter `root` (`p:cfg`, `i:cfg`) of `function`."""
    from gpulint.analysis import settings_files

    kind, _, param = root.partition(":")
    if depth > _MAX_DEPTH:
        return None
    if kind == "i":  # `self.cfg` in a method: what `__init__` stored from its parameter
        return config_source(index, record, f"{function.split('.')[0]}.__init__", f"p:{param}", keys, depth + 1)
    f = record.summary.functions.get(function)
    if kind != "p" or f is None or param not in (*f.params, *f.kwonly):
        return None
    main = f.configs.get(-1, {}).get(0)
    if main is not None:
        return settings_files.hydra_folder(str(record.path), main[0]), main[1], keys
    if function.count(".") == 1 and function.endswith(".__init__"):
        target, offset = function.split(".")[0], 1  # `Workspace(cfg)` fills `__init__` after `self`
    elif "." not in function:
        target, offset = function, 0
    else:
        return None  # a method: its calls are not all in sight by name
    position = f.params.index(param) - offset if param in f.params else None
    callers = index.callers(record, target)
    found = set()
    for caller, key, number in callers:
        caller_f = caller.summary.functions[key]
        call = caller_f.calls[number]
        reads = caller_f.configs.get(number, {})
        read = reads.get(param) if param in call[3] else reads.get(position) if position is not None and position < len(call[2]) else None
        if read is None or call[6]:
            return None  # some call hands it something else (or through `*args`)
        source = config_source(index, caller, key, read[0], (*read[1], *keys), depth + 1)
        if source is None:
            return None
        found.add(source)
    return found.pop() if len(found) == 1 else None


def _instantiations(index: ProjectIndex) -> dict[tuple[int, str], list[tuple[ModuleRecord, tuple[str, str, tuple]]]]:
    """(module, class) -> (the module that instantiates it, its Hydra config place), for every `instantiate` call of
    the project whose class is known."""
    return index.computed("instantiations", lambda: _find_instantiations(index))


def _find_instantiations(index: ProjectIndex) -> dict[tuple[int, str], list[tuple[ModuleRecord, tuple[str, str, tuple]]]]:
    memo: dict[tuple[int, str], list[tuple[ModuleRecord, tuple[str, str, tuple]]]] = {}
    for record in index.records.values():
        for key, f in record.summary.functions.items():
            for position, call in enumerate(f.calls):
                if not call[0].startswith(MARKER):
                    continue
                found = instantiated_class(index, record, key, position)
                read = f.configs.get(position, {}).get(0)
                source = config_source(index, record, key, read[0], tuple(read[1]), 0) if read is not None else None
                if found is not None and source is not None:
                    memo.setdefault((id(found[0]), found[1]), []).append((record, source))
    return memo


_INTERPOLATION = re.compile(r"^\$\{([A-Za-z_][\w.]*)\}$")


def config_evidence(index: ProjectIndex, record: ModuleRecord) -> Iterator[str]:
    """GPU evidence for a class a Hydra config builds with a CUDA device: a parameter `__init__` uses as a device
    (`.to(device)`) set in the config to `cuda` (or `${device}`, a top-level `device: cuda`), where no other file of
    the config folder writes another value."""
    from gpulint.analysis.handed_configs import hydra_agreed

    for name in record.summary.classes:
        sites = _instantiations(index).get((id(record), name))
        init = record.summary.functions.get(f"{name}.__init__")
        if not sites or init is None:
            continue
        devices = [p for p in init.params if any(e[0] == "device" for e in init.effects.get(f"p:{p}", ()))]
        for _, (folder, config, keys) in sites:
            for param in devices:
                place = _plain_place(folder, config, [*keys, param])
                if place is None:
                    continue
                found = settings_files.hydra_lookup(folder, config, place)
                value = found[0] if found is not None else None
                if isinstance(value, str) and value.split(":")[0] == "cuda" and hydra_agreed(folder, place, value):
                    yield f"a Hydra config builds `{name}` with `{param}` on CUDA ({os.path.basename(found[2])}:{found[1]})"
                    return


def _plain_place(folder: str, config: str, keys: list) -> Optional[list]:
    """`keys`, or the place a `${device}` written there refers to (an absolute interpolation of one setting)."""
    primary = next((p for p in (os.path.join(folder, config + s) for s in (".yaml", ".yml", "")) if os.path.isfile(p)), None)
    raw = settings_files.raw_scalar(primary, keys) if primary is not None else None
    if raw is None:
        return keys
    match = _INTERPOLATION.match(raw)
    if match is None or settings_files.written_beside(folder, primary, keys):
        return None  # another interpolation (a resolver), or another file may write its own value there
    return match.group(1).split(".")
