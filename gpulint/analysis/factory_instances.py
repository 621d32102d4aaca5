"""Instances a project factory function builds: the methods a call on its result runs.

Training scripts rarely build their model and loss where they call them; a factory of the project does:

    def build_model(args):                     # graphmae/models/__init__.py
        model = PreModel(...)
        return model
    model = build_model(args)                  # main_transductive.py
    loss, loss_dict = model(graph, x)          # runs PreModel.forward every step

    def set_model(lb_ignore=255):              # tools/train_amp.py
        ...
        return net, OhemCELoss(0.7, lb_ignore), aux
    net, criteria_pre, criteria_aux = set_model(...)
    loss_pre = criteria_pre(logits, lb)        # runs OhemCELoss.forward every step

    def get_memory_updater(module_type, ...):  # tgn's modules/memory_updater.py
        if module_type == "gru":
            return GRUMemoryUpdater(...)
        elif module_type == "rnn":
            return RNNMemoryUpdater(...)       # both inherit SequenceMemoryUpdater.update_memory

A call on the result (`<factory>.<member>`, `<factory>.<k>.<member>` for element k of a returned tuple, as the
summary writes it: `summary._Reader.made`) runs the member every `return` of the factory instantiates, when that is
one method of the project (one class, or classes that share the method through a project base). A factory with a
`return` of anything else (None, a library object, a parameter) names no method: unknown; so does a class name that
imports bind to different classes (KAIR's `define_Model`: `from models.model_plain import ModelPlain as M` in one
branch, `... ModelVRT as M` in another, then `return M(opt)`): the options choose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from gpulint.analysis.inherited_members import project_bases

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

_MAX_DEPTH = 3  # factories returning another factory's result, followed this far


def factory_member(
    index: ProjectIndex, record: ModuleRecord, function: str, element: Optional[int], method: str, depth: int = 0
) -> Optional[tuple[str, ModuleRecord, str]]:
    """("function", module, key) of the method `method` of what every `return` of `function` (element `element` of
    a returned tuple when given) instantiates, when that is one project method; None otherwise."""
    f = record.summary.functions.get(function)
    if f is None or not f.returns or depth > _MAX_DEPTH:
        return None
    found = set()
    for value in f.returns:
        if element is not None:
            if not (isinstance(value, tuple) and len(value) == 2 and value[0] == "tuple" and element < len(value[1])):
                return None
            value = value[1][element]
        resolved = _returned_member(index, record, f, value, method, depth)
        if resolved is None:
            return None
        found.add((id(resolved[1]), resolved[2], resolved))
    if len({(module, key) for module, key, _ in found}) != 1:
        return None
    return found.pop()[2]


def _returned_member(
    index: ProjectIndex, record: ModuleRecord, f: Any, value: Any, method: str, depth: int
) -> Optional[tuple[str, ModuleRecord, str]]:
    """The project method `method` of the instance `value` (one returned value of `f`) is, or None."""
    if not (isinstance(value, tuple) and len(value) == 2 and value[0] == "src" and isinstance(value[1], str)):
        return None
    source = value[1]
    if not source.startswith("c:") or "|" in source or "." in source or not source[2:].isdigit() or int(source[2:]) >= len(f.calls):
        return None
    ref = f.calls[int(source[2:])][0]
    if ref.split(".", 1)[0] in record.summary.rebound:
        return None  # `M(opt)` with `M` imported from one module per setting: the settings choose the class
    target = index.symbol(record, ref)
    if target is None:
        return None
    if target[0] == "class":
        return _member(index, target[1], target[2], method)
    if target[0] == "function" and "." not in target[2]:
        return factory_member(index, target[1], target[2], None, method, depth + 1)  # `return build_net(cfg)`
    return None


def _member(index: ProjectIndex, record: ModuleRecord, name: str, method: str) -> Optional[tuple[str, ModuleRecord, str]]:
    """Method `method` of project class `name`, defined in it or in a project base (nearest first)."""
    if method == "__call__":
        return index.called_method(record, name)
    if f"{name}.{method}" in record.summary.functions:
        return ("function", record, f"{name}.{method}")
    for base_record, base in project_bases(index, record, name):
        if f"{base}.{method}" in base_record.summary.functions:
            return ("function", base_record, f"{base}.{method}")
    return None


def factory_calls(index: ProjectIndex, record: ModuleRecord, function: str, call: int) -> list[tuple[ModuleRecord, str, int]]:
    """The calls of the module-level function `function` of `record`, when its `call`-th call (an instance) is what
    it returns: `model = build_model(args)` for `model = PreModel(...); return model` (the instance is the result)."""
    f = record.summary.functions.get(function)
    if f is None or "." in function or not any(value == ("src", f"c:{call}") for value in f.returns):
        return []
    if f.calls[call][0].split(".", 1)[0] in record.summary.rebound:
        return []  # `M(opt)` with `M` imported from one module per setting: not known to be this class
    return index.callers(record, function)
