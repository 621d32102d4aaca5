"""Command-line options parsed from a parser another module defines: `from opts import parser` then
`args = parser.parse_args()` (temporal-shift-module's `main.py`), or `args = get_args()` where `get_args` of
another module returns `parser.parse_args()`.

The project side (`parsers`) lists, for a module, the parsers it imports: a module-level
`parser = argparse.ArgumentParser(...)` of another project module, with that module's `add_argument` defaults
(`parser.set_defaults(...)` applied), as the module summary records them (`("parser", options)`). The module side
(`imported_options`) says which of those options a name of the parsed command line reads: `args.gpus` with
`args = parser.parse_args()` is `--gpus`'s default, where `opts.py` writes it. Value resolution asks it
(`ValueResolver.resolve`), so every rule that reads an argparse default (a worker count, a batch size, device ids,
a diagnostic switch) reads it the same way whichever module defines the parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

_UNKNOWN = "?"  # a default that is not a literal (the summary's mark)


def parsers(index: ProjectIndex, record: ModuleRecord) -> dict[str, dict[str, list]]:
    """The parsers `record` imports from other project modules: the name as written (`parser`, `opts.parser` for
    `import opts`) -> {dest: [default, `opts.py:64`]}."""
    found: dict[str, dict[str, list]] = {}
    for name, (_, _, imported) in record.summary.imports.items():
        target = index.symbol(record, name)
        if target is None or target[1] is record:
            continue
        if target[0] == "value" and imported is not None:
            options = _parser_options(target[1], target[2])
            if options is not None:
                found[name] = options
        elif target[0] == "module":
            for value_name in target[1].summary.values:
                options = _parser_options(target[1], value_name)
                if options is not None:
                    found[f"{name}.{value_name}"] = options
    return found


def _parser_options(record: ModuleRecord, name: str) -> Optional[dict[str, list]]:
    value = record.summary.values.get(name)
    if not (isinstance(value, tuple) and len(value) == 2 and value[0] == "parser" and isinstance(value[1], dict)):
        return None
    return {dest: [entry[0], f"{record.shown}:{entry[1]}"] for dest, entry in value[1].items() if _entry(entry)}


def _entry(entry: Any) -> bool:
    return isinstance(entry, (list, tuple)) and len(entry) == 2


def namespace_options(model: SemanticModel, base: cst.Name) -> Optional[dict[str, list]]:
    """{dest: [default, where]} of the command line `base` names when another module defines its options: every
    binding of `base` in sight is `parser.parse_args()` (or `parser.parse_known_args()[0]`, `args, _ =
    parser.parse_known_args()`) of one imported parser, or a call of a function of another module that returns
    the parsed command line (`args = get_args()`). None otherwise (this module's own parser: `ValueResolver`)."""
    binders = model.bindings_of(base.value, base)
    if not binders:
        return None
    found = [_bound_options(model, binder, base.value) for binder in binders]
    first = found[0]
    return first if first is not None and all(f is first for f in found[1:]) else None


def _bound_options(model: SemanticModel, binder: cst.CSTNode, name: str) -> Optional[dict[str, list]]:
    if not (isinstance(binder, cst.Assign) and len(binder.targets) == 1):
        return None
    target, value = binder.targets[0].target, binder.value
    pair = isinstance(target, cst.Tuple)  # the first of `parse_known_args()`'s pair
    if pair:  # `args, unknown = parser.parse_known_args()`
        first = target.elements[0].value if target.elements else None
        if not (isinstance(first, cst.Name) and first.value == name and _method(value) == "parse_known_args"):
            return None
    elif not isinstance(target, cst.Name):
        return None
    elif isinstance(value, cst.Subscript) and _method(value.value) == "parse_known_args":
        index = value.slice[0].slice if len(value.slice) == 1 else None
        if not (isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0"):
            return None
        value, pair = value.value, True
    if not isinstance(value, cst.Call) or not pair and _method(value) == "parse_known_args":
        return None  # (`args = parser.parse_known_args()` is a pair)
    if _method(value) in ("parse_args", "parse_known_args"):
        receiver = dotted_name(value.func.value)  # type: ignore[attr-defined]
        if receiver is None or model.bindings_of(receiver.split(".")[0], value):
            return None  # a parser this module builds (value resolution reads its own options)
        return model.project.parsers.get(receiver)
    if not pair:
        callee = model.callee(value)
        returned = callee.returns if callee is not None and callee.kind == "function" else None
        if isinstance(returned, tuple) and len(returned) == 2 and returned[0] == "args" and isinstance(returned[1], dict):
            module = callee.where.rsplit(":", 1)[0]
            return _cached_returns(model, returned[1], module)
    return None


def _cached_returns(model: SemanticModel, options: dict, module: str) -> dict[str, list]:
    """The options a function of another module returns, with where their defaults are written (one dict per
    result, so that two bindings of the same call agree by identity)."""
    memo = model.memo("imported_options")
    key = (id(options), module)
    if key not in memo:
        memo[key] = {dest: [entry[0], f"{module}:{entry[1]}"] for dest, entry in options.items() if _entry(entry)}  # type: ignore[index]
    return memo[key]  # type: ignore[index]


def _method(node: cst.BaseExpression) -> Optional[str]:
    """`parse_args` for `parser.parse_args()` (a call of a method); None otherwise."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.attr.value
    return None


def imported_default(model: SemanticModel, attr: cst.Attribute) -> Optional[tuple[object, str]]:
    """(default, `opts.py:64`) of the option `args.<name>` reads, where another module defines it; None when not
    known (not such a namespace, no such option, or a default that is not a literal)."""
    if not isinstance(attr.value, cst.Name):
        return None
    options = namespace_options(model, attr.value)
    entry = options.get(attr.attr.value) if options is not None else None
    if entry is None or entry[0] == _UNKNOWN:
        return None
    return entry[0], entry[1]
