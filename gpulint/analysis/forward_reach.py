"""Code a per-step `forward` reaches: submodules' `forward`s and the helpers they call, in any module.

A model's `forward` that a training loop runs every step (`ProjectIndex.stepped_methods`: `pred = model(x)`
runs `Transformer.forward`) runs, on every call, the `forward` of each submodule it calls (`self.decoder(...)`,
an instance of a class of another module, handed to the constructor or built there), the methods those call on
`self` (`Decoder.preprocess`), and the functions of any module they call (`sample_and_group(...)`, which calls
`farthest_point_sample(...)`). All of that is per-step code as well: an op in it runs once per training step, and
an op in a loop of its own runs once per iteration of that loop, every step (a boolean mask per utterance in a
decoder's preprocessing, a mask per sampled point in farthest-point sampling).

`reached_methods` lists them for one module, with the chain that runs them: the call that reaches the function
and the step loop's call of the root `forward` (`transformer.py:30`, `solver.py:158`). Only unguarded calls count
(not under `step % N`), and only instance calls reach a class's `forward` / `__call__`; a function a per-step
method calls is reached through that method's chain. Methods the project already proves per-step themselves
(`stepped`) are not listed again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.summary import INTERNAL, MODULE_BODY, sources_of

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

_CHAIN_DEPTH = 6  # callers followed up from a reached helper's parameter to the step's tensors
_PASSES = 4  # helpers of helpers of this module (`sample_and_group` -> `farthest_point_sample`)
_HOPS = 3  # `self.<method>(...)` hops from a reached `forward`, as `stepped_methods` follows


def reached_methods(index: ProjectIndex, record: ModuleRecord) -> dict[str, tuple[str, str]]:
    """Functions and methods of `record` that a per-step `forward` reaches on every call (not those `stepped`
    already lists) -> (the call that reaches it, `transformer.py:30`; the step loop's call, `solver.py:158`).
    (Their repeated data-dependent ops: `repeated_shape_ops`.)"""
    stepped = index.stepped_of(record)
    found: dict[str, tuple[str, str]] = {}
    for _ in range(_PASSES):  # a helper this module's reached `forward` calls is reached on the next pass
        added = False
        for key in record.summary.functions:
            if key in stepped or key in found or key == MODULE_BODY:
                continue
            owner, _, method = key.partition(".")
            if method and method not in ("forward", "__call__"):
                continue  # other methods: reached through `self.` hops below
            if method and (owner not in record.summary.classes or not index.is_module_class(record, owner)):
                continue
            for caller, caller_key, position in index.callers(record, key):
                call = caller.summary.functions[caller_key].calls[position]
                if call[5] or (method and not call[0].endswith(".__call__")):
                    continue  # under a `step % N` guard, or not an instance call (`super().forward`, a class reference)
                if caller is record and caller_key == key:
                    continue  # recursion
                root = found[caller_key][1] if caller is record and caller_key in found else _root(index, caller, caller_key)
                if root is not None:
                    found[key] = (f"{caller.shown}:{call[1]}", root)
                    added = True
                    break
        frontier = [k for k in found if "." in k]
        for _ in range(_HOPS):
            reached = []
            for key in frontier:
                owner = key.split(".", 1)[0]
                for call in record.summary.functions[key].calls:
                    inner = call[0]
                    if (
                        inner.startswith(f"{owner}.") and inner in record.summary.functions and not call[5]
                        and inner not in found and inner not in stepped and not inner.endswith(".__init__")
                    ):  # fmt: skip
                        found[inner] = (f"{record.shown}:{call[1]}", found[key][1])
                        reached.append(inner)
                        added = True
            frontier = reached
        if not added:
            break
    return found


def _root(index: ProjectIndex, record: ModuleRecord, key: str) -> Optional[str]:
    """Where the step loop calls the per-step method that runs function `key` of `record` (itself, or through a
    chain `reached_of` knows); None when no step runs it."""
    where = index.stepped_of(record).get(key) if "." in key else None
    if where is not None:
        return where
    reached = index.reached_of(record).get(key)
    return reached[1] if reached is not None else None


def reaching_refs(index: ProjectIndex, record: ModuleRecord) -> list[str]:
    """The call references of `record` that run a function or method another module reaches from a per-step
    `forward` (`self.decoder(...)` in `Transformer.forward`): that module reports the ops inside at their lines."""
    return index.computed("forward_reach.reaching_refs", lambda: _reaching_refs(index)).get(id(record), [])


def _reaching_refs(index: ProjectIndex) -> dict[int, list[str]]:
    """id(a module record) -> `reaching_refs`, for every module of the project at once."""
    refs: dict[int, set[str]] = {}
    for other in index.records.values():
        for key in index.reached_of(other):
            for caller, caller_key, position in index.callers(other, key):
                if caller is not other:
                    refs.setdefault(id(caller), set()).add(caller.summary.functions[caller_key].calls[position][0])
    return {k: sorted(v) for k, v in refs.items()}


def reached_function(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.FunctionDef, str, str, list]]:
    """(the function or method around `node`, the call that reaches it, the step loop's call of the root `forward`,
    its repeated ops on GPU data as [line, kind]) when a per-step `forward` reaches it (`ModuleContext.reached`)."""
    reached = model.project.reached
    func = model.enclosing_function(node) if reached else None
    if func is None:
        return None
    holder = model.parent.get(model.parent.get(func))
    if model.parent.get(func) is model.module:
        key = func.name.value
        if model.functions.get(key) != [func]:
            return None  # another function of the same name: which one the calls run is not known
    elif isinstance(holder, cst.ClassDef) and model.parent.get(holder) is model.module:
        key = f"{holder.name.value}.{func.name.value}"
    else:
        return None
    chain = reached.get(key)
    return (func, chain[0], chain[1], chain[2]) if chain else None


def repeating_loop(model: SemanticModel, node: cst.CSTNode, function: cst.FunctionDef) -> Optional[tuple[cst.CSTNode, str, str]]:
    """(the innermost loop or comprehension of `function` around `node`, "loop" / "comprehension", its header as
    written: `for i in range(npoint)`), for messages: what sets how many times a call runs `node`."""
    for ancestor in model.ancestors(node):
        if ancestor is function:
            return None
        if isinstance(ancestor, cst.For):
            header = f"for {model.code(ancestor.target)} in {model.code(ancestor.iter)}"
            return ancestor, "loop", " ".join(header.split())
        if isinstance(ancestor, cst.While):
            return ancestor, "loop", " ".join(f"while {model.code(ancestor.test)}".split())
        if isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            clause = ancestor.for_in
            header = f"for {model.code(clause.target)} in {model.code(clause.iter)}"
            return ancestor, "comprehension", " ".join(header.split())
    return None


def repeated_shape_ops(index: ProjectIndex, record: ModuleRecord, key: str) -> list[list]:
    """The ops whose output size depends on GPU data that function `key` of `record` runs several times a call (in
    a loop or a comprehension of its own), on a tensor it makes on the GPU or on a parameter every project call
    fills with one (`ProjectIndex.inputs`, as `_helper_syncs` reads a helper's effects at its calls): [line, kind].
    The summary follows the values through the function (`[y[y != IGNORE_ID] for y in padded_input]`: each `y` is
    an element of the parameter) where the module's own residency sees only the names it can place."""
    from gpulint.analysis.residency import CERTAIN, LIKELY

    f = record.summary.functions.get(key)
    if f is None:
        return []
    found: dict[int, str] = {}
    for source, effects in f.effects.items():
        for effect in effects:
            if effect[0] != "shape" or not isinstance(effect[2], int):
                continue
            if source == INTERNAL:
                loop, guarded, flags = effect[3], effect[4], effect[5:]
            elif source.startswith("p:"):
                loop, guarded, flags = effect[4], effect[5], effect[6:]
                level = _received_level(index, record, key, source[2:])
                if level < (CERTAIN if effect[3] else LIKELY):
                    continue
            else:
                continue
            if not guarded and (loop >= 0 or "repeated" in flags):
                found.setdefault(effect[2], effect[1])
    return [[line, kind] for line, kind in sorted(found.items())]


def reached_shape_syncs(model: SemanticModel) -> list:
    """The repeated data-dependent ops (`repeated_shape_ops`) of the functions of this module that a per-step
    `forward` reaches, as `HostSync`s at their nodes: a boolean-mask read (`dist[mask]`, `y[y != pad]`), or a call of
    the op (`torch.nonzero(...)`, `x.unique()`)."""
    from gpulint.analysis.residency import _DATA_DEPENDENT, HostSync

    residency = model.residency
    found = []
    for key, chain in model.project.reached.items():
        owner, _, name = key.rpartition(".")
        func = _function_named(model, owner, name)
        if func is None:
            continue
        for line, kind in chain[2]:
            node = _op_at(model, func, line, kind)
            if node is not None:
                value = node.value if isinstance(node, cst.Subscript) else node
                found.append(HostSync(node, kind if "depends on the data" in kind else f"{kind} {_DATA_DEPENDENT}", value))
    return found


def _function_named(model: SemanticModel, owner: str, name: str) -> Optional[cst.FunctionDef]:
    if not owner:
        funcs = model.functions.get(name) or []
        return funcs[0] if len(funcs) == 1 and model.parent.get(funcs[0]) is model.module else None
    info = model.classes.get(owner)
    method = info.methods.get(name) if info is not None else None
    return method if isinstance(method, cst.FunctionDef) else None


_SHAPE_METHODS = ("nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "repeat_interleave", "where")


def _op_at(model: SemanticModel, func: cst.FunctionDef, line: int, kind: str) -> Optional[cst.CSTNode]:
    """The node at `line` of `func` that runs the op the summary names `kind`."""
    residency = model.residency
    for node in _walk(func):
        if model.range(node).start.line != line:
            continue
        if kind.startswith("boolean-mask") and isinstance(node, cst.Subscript):
            holder = model.parent.get(node)
            if isinstance(holder, (cst.AssignTarget, cst.Del)) or (isinstance(holder, cst.AugAssign) and holder.target is node):
                continue  # a masked store
            if any(isinstance(e.slice, cst.Index) and residency._is_mask(e.slice.value) for e in node.slice):
                return node
        elif isinstance(node, cst.Call) and not kind.startswith("boolean-mask"):
            func_node = node.func
            last = func_node.attr.value if isinstance(func_node, cst.Attribute) else func_node.value if isinstance(func_node, cst.Name) else ""
            if last in _SHAPE_METHODS and f"`{last}" in kind:
                return node
    return None


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _received_level(index: ProjectIndex, record: ModuleRecord, key: str, param: str, depth: int = 0) -> int:
    """How surely parameter `param` of function `key` is a GPU tensor: what the project's calls pass for it
    (`ProjectIndex.inputs`, `received_tensor_level`), or, beyond the depth `inputs` follows, a parameter of a caller
    on the way from the step that the call hands on unchanged or derived (`xyz` through `group(xyz, npoint)`, a
    submodule's `forward`, the model's `forward`): LIKELY when one such caller's parameter is a GPU tensor."""
    from gpulint.analysis.residency import LIKELY, received_tensor_level

    level = received_tensor_level(index.inputs(record, key, param))
    if level or depth >= _CHAIN_DEPTH:
        return level
    f = record.summary.functions.get(key)
    if f is None or param not in f.params:
        return 0
    for caller, caller_key, position in index.callers(record, key):
        call = caller.summary.functions[caller_key].calls[position]
        if call[5]:
            continue
        offset = 1 if f.params[:1] == ("self",) and "." in call[0] else 0
        values = dict(call[3])
        at = f.params.index(param) - offset
        value = call[2][at] if 0 <= at < len(call[2]) else values.get(param)
        for source in sources_of(value) if value is not None else ():
            if source.startswith("p:") and _received_level(index, caller, caller_key, source[2:], depth + 1):
                return LIKELY
    return 0
