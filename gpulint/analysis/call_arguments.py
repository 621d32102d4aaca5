"""What every call in the project passes to a parameter: `ComputeLoss(model)` at each of its constructions
leaves `autobalance=False` as it is, so `if self.autobalance:` never runs as the project ships.

The project index composes this fact for the functions and classes a module defines (`agreed_arguments`) and
hands it to the module's analysis in its `ModuleContext.arguments`; `shipped_paths` decides branches with it.
A parameter counts only when other modules of the project call the function (or build the class), every call
is in sight (no `*args` / `**kwargs` at a call, the name never handed on as a value: `partial(Loss, ...)`, a
registry dict, a subclass) and each call writes a literal for it or leaves it out. Anything else leaves the
parameter open, as does a function only its own module calls (an importable module's API, as before).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpulint.analysis.summary import MODULE_BODY
from gpulint.analysis.unpacked_settings import KEY as UNPACKED
from gpulint.analysis.unpacked_settings import UNKNOWN as _UNKNOWN_SECTION
from gpulint.analysis.unpacked_settings import section_keywords

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

LEFT_OUT = "left out"  # the call leaves the parameter at its default
_UNKNOWN = object()


def agreed_arguments(index: ProjectIndex, record: ModuleRecord) -> dict[str, list]:
    """`{"ComputeLoss.autobalance": [["left out"]], "evaluate.criterion": [["left out"]], "run.debug": [["given",
    False], ["left out"]]}`: for each parameter of the module's functions and classes (`__init__`) that every
    call in the project fills in sight, the ways they fill it."""
    summary = record.summary
    handed = _handed(index)
    if handed is None:
        return _stored_entries(index, record)  # no parameter is agreed, but outside stores are still known
    found: dict[str, list] = {}
    targets = [(name, name, True) for name in summary.classes] + [
        (name, name, False) for name in summary.functions if name != MODULE_BODY and "." not in name
    ]
    for name, shown, is_class in targets:
        if (id(record), name) in handed:
            continue
        f = summary.functions.get(f"{name}.__init__" if is_class else name)
        if f is None:
            continue
        positional = list(f.params[1:] if is_class else f.params)
        callers = index.callers(record, name)
        if all(caller is record for caller, _, _ in callers):
            continue  # nothing else in the project calls it: API of an importable module, any value may come
        ways: dict[str, list] = {p: [] for p in [*positional, *f.kwonly]}
        for caller, key, position in callers:
            call_summary = caller.summary.functions[key]
            call = call_summary.calls[position]
            literals = call_summary.literals.get(position, {})
            sections = None
            if len(call) > 6 and call[6]:
                # `Wrapper(**cfg["dataset"])` of a YAML file the project ships: its entries are the keywords
                sections = section_keywords(index, caller, literals[UNPACKED]) if UNPACKED in literals else None
                if sections is None:
                    ways = {}  # `f(*args, **kwargs)`: what lands where is not known
                    break
            for param in list(ways):
                way = _way(param, positional, call, literals)
                if sections is not None and way == [LEFT_OUT]:  # not written at the call: from the sections, if any
                    unpacked, stored = sections
                    given = unpacked.get(param, _UNKNOWN_SECTION if param in stored else [way])
                    if given is not _UNKNOWN_SECTION:
                        ways[param].extend(one for one in given if one not in ways[param])
                        continue
                    way = _UNKNOWN
                if way is _UNKNOWN:
                    del ways[param]
                elif way not in ways[param]:
                    ways[param].append(way)
        for param, seen in ways.items():
            found[f"{shown}.{param}"] = seen
    return {**found, **_stored_entries(index, record)}


def _stored_entries(index: ProjectIndex, record: ModuleRecord) -> dict[str, list]:
    """`{"*.autobalance": [["stored"]]}` for each attribute of the module's classes the project may assign from
    outside its class (`self.attribute` may change there)."""
    summary = record.summary
    stored = _stored_outside(index)
    found: dict[str, list] = {}
    for name, info in summary.classes.items():
        init = summary.functions.get(f"{name}.__init__")
        for attribute in {*info.attributes, *(init.params if init else ()), *(init.kwonly if init else ())}:
            if attribute in stored or "*" in stored:
                found[f"*.{attribute}"] = [["stored"]]  # `self.attribute` may be changed from outside its class
    return found


def _way(param: str, positional: list[str], call: tuple, literals: dict) -> Any:
    at = positional.index(param) if param in positional else None
    if at is not None and at < len(call[2]):
        return ["given", literals[at]] if at in literals else _UNKNOWN
    if param in call[3]:
        return ["given", literals[param]] if param in literals else _UNKNOWN
    return [LEFT_OUT]


def _stored_outside(index: ProjectIndex) -> set[str]:
    """Attribute names the project assigns on objects other than `self` (`loss.autobalance = True`)."""
    return index.computed("stored outside", lambda: {
        r[1:] for record in index.records.values() for r in record.summary.handed if r.startswith(".")
    })


def _handed(index: ProjectIndex) -> set[tuple[int, str]] | None:
    """(file, name) of the project's functions and classes handed on as values somewhere; None: not known."""
    return index.computed("handed", lambda: _find_handed(index))


def _find_handed(index: ProjectIndex) -> set[tuple[int, str]] | None:
    found: set[tuple[int, str]] | None = set()
    for record in index.records.values():
        if "*" in record.summary.handed:
            found = None
            break
        for ref in record.summary.handed:
            if ref.startswith("."):
                continue
            target = index.symbol(record, ref)
            if target is not None and target[0] in ("function", "class"):
                found.add((id(target[1]), target[2]))  # type: ignore[union-attr]
    return found


def passed(f: Any, key: str, caller_f: Any, index: int) -> tuple:
    """`(("num_workers", "given", 2), ("batch_size", "left out"))`: how the `index`-th call of `caller_f` fills the
    parameters of the module-level function `f` (`key`) with literals or leaves them at their defaults; a
    parameter it fills otherwise is not listed, nor is any for a call with `*args` / `**kwargs` or a method."""
    call = caller_f.calls[index]
    if "." in key or (len(call) > 6 and call[6]):
        return ()
    literals = caller_f.literals.get(index, {})
    positional = list(f.params)
    found = []
    for param in [*positional, *f.kwonly]:
        way = _way(param, positional, call, literals)
        if way is not _UNKNOWN:
            found.append((param, *way))
    return tuple(found)
