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

from typing import TYPE_CHECKING, NamedTuple, Optional

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


def repeated_reads(index: ProjectIndex, record: ModuleRecord, key: str, batch: bool = False) -> list[list]:
    """The host reads (`.item()`, `int(t)`, a GPU slice bound, a Python condition on a tensor) that function `key`
    of `record` runs once per element of a GPU tensor on each call: in a loop or a comprehension of its own that is
    not a loop over a few options the caller passes (`for k in topk:`), on a tensor it makes on the GPU or on a
    parameter every project call fills with one (as `repeated_shape_ops`): [line, kind]. A padding mask filled row
    by row (`mask[i, lengths[i]:] = 0` for each utterance) reads the length tensor once per row, every call.
    `batch`: the function is one a per-batch loop runs (`batch_reach`), and a parameter's placement is what the
    calls on the way from that loop give it (not every call of the project)."""
    from gpulint.analysis.residency import CERTAIN, LIKELY

    f = record.summary.functions.get(key)
    if f is None:
        return []
    found: dict[int, str] = {}
    for source, effects in f.effects.items():
        for effect in effects:
            if effect[0] != "sync" or not isinstance(effect[2], int):
                continue
            if source == INTERNAL:
                loop, guarded, flags = effect[3], effect[4], effect[5:]
            elif source.startswith("p:"):
                loop, guarded, flags = effect[4], effect[5], effect[6:]
                needed = CERTAIN if effect[3] else LIKELY
                if (batch or _received_level(index, record, key, source[2:]) < needed) and given_level(index, record, key, source[2:], batch) < needed:
                    continue
            else:
                continue
            # a comprehension repeats per element even inside a loop over a few options (`for k in ks:`); a `for`
            # counts where it walks elements and the read uses the element ("walk", `summary.py`)
            if not guarded and ("repeated" in flags or ("walk" in flags and "options" not in flags)):
                found.setdefault(effect[2], effect[1])
    return [[line, kind] for line, kind in sorted(found.items())]


def given_level(index: ProjectIndex, record: ModuleRecord, key: str, param: str, batch: bool = False, depth: int = 0) -> int:
    """How surely `param` of function `key` is a GPU tensor on the way from the step: what the calls that give it
    pass, of the callers a per-step `forward` reaches (or the per-step method itself, from its step loop); with
    `batch`, of the calls on the way from a per-batch loop (`batch_reach.on_batch_path`). `ProjectIndex.inputs`
    counts every call, and one that leaves an optional parameter out as an unplaced value (`mask[i, lengths[i]:]`
    under `if lengths is not None:` runs only where a call gives one), and a decoding entry point's call as much
    as the step's."""
    from gpulint.analysis.batch_reach import batch_root, on_batch_path
    from gpulint.analysis.residency import received_tensor_level

    f = record.summary.functions.get(key)
    if f is None or param not in f.params or depth >= _CHAIN_DEPTH:
        return 0
    if not batch and "." in key and key in index.stepped_of(record):
        return received_tensor_level(index.inputs(record, key, param))  # the step loop's own call gives it
    received: set[str] = set()
    for caller, caller_key, position in _callers_with_bases(index, record, key) if batch else index.callers(record, key):
        caller_f = caller.summary.functions[caller_key]
        call = caller_f.calls[position]
        offset = 1 if f.params[:1] == ("self",) and "." in call[0] else 0
        at = f.params.index(param) - offset
        value = call[2][at] if 0 <= at < len(call[2]) else dict(call[3]).get(param)
        if value is None or call[5] or caller_key == key:
            continue  # left out, or under a `step % N` guard
        if (not on_batch_path(index, caller, caller_key, call)) if batch else _root(index, caller, caller_key) is None:
            continue  # a caller no step runs (a decoding entry point)
        resolved = index.value(caller, caller_f, value)
        level = 0
        if resolved is not None:
            level = received_tensor_level({"cuda_device" if resolved[0] == "device" else resolved[0]})
        for source in sources_of(value):
            if not source.startswith("p:"):
                continue
            if batch and batch_root(index, caller, caller_key) is None:
                upper = received_tensor_level(index.inputs(caller, caller_key, source[2:]))  # given from outside the loop
            else:
                upper = given_level(index, caller, caller_key, source[2:], batch, depth + 1)
            level = max(level, upper)
        received.add("gpu" if level >= 2 else "unplaced")
    return received_tensor_level(received) if received else 0


def _callers_with_bases(index: ProjectIndex, record: ModuleRecord, key: str) -> list:
    """The calls of `key`, and for a method, the calls of the project base class methods it overrides that a kept
    method of the base makes on `self` (a base trainer's loop runs `self.calculate_metrics(batch)`)."""
    from gpulint.analysis.inherited_members import _called_from_kept_method, project_bases

    found = list(index.callers(record, key))
    owner, _, method = key.partition(".")
    if method and not method.startswith("__") and owner in record.summary.classes:
        info = record.summary.classes[owner]
        for base_record, base in project_bases(index, record, owner):
            if f"{base}.{method}" in base_record.summary.functions and _called_from_kept_method(base_record, base, method, info.methods):
                found.extend(index.callers(base_record, f"{base}.{method}"))
    return found


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


class ReachedRead(NamedTuple):
    node: cst.BaseExpression  # the expression that reads (the outermost one of its line)
    kind: str  # what reads, as the summary names it
    function: cst.FunctionDef  # the function a per-step `forward` reaches
    loop: cst.CSTNode  # its loop or comprehension that repeats the read
    header: str  # that loop's header as written: `for i in range(N)`
    reached_by: str  # the call that reaches the function, `decoder.py:87`
    step: str  # the step loop's call of the root `forward`, `solver.py:158`
    places: int  # the places of the function that read once per element (`repeated_reads`)
    batch: bool  # run by a per-batch loop (`batch_reach`), not reached from a per-step `forward`


def per_element_reads(model: SemanticModel) -> list[ReachedRead]:
    """The per-element host reads (`repeated_reads`) of the functions of this module that a per-step `forward`
    reaches, at their nodes: the module's own residency sees only the names it can place, and a parameter filled
    with a GPU tensor by every call in the project is one only the index knows."""
    found = []
    chains = [(key, chain, False) for key, chain in model.project.reached.items()]
    chains += [(key, chain, True) for key, chain in model.project.batch_reached.items()]
    for key, chain, batch in chains:
        reads = (chain[2] if batch else chain[3] if len(chain) > 3 else []) or []
        owner, _, name = key.rpartition(".")
        func = _function_named(model, owner, name) if reads else None
        if func is None:
            continue
        walks = []
        for line, kind in reads:
            node = _read_at(model, func, line, kind)
            repeating = repeating_loop(model, node, func) if node is not None else None
            if repeating is not None and _walks_elements(model, node, repeating[0]):
                walks.append((node, kind, repeating))
        for node, kind, repeating in walks:
            found.append(ReachedRead(node, kind, func, repeating[0], repeating[2], chain[0], chain[1], len(walks), batch))
    return found


def _read_at(model: SemanticModel, func: cst.FunctionDef, line: int, kind: str) -> Optional[cst.BaseExpression]:
    """The expression at `line` of `func` that reads as the summary's `kind` says: the innermost call its kind
    names (`int()` of a tensor: `int(n)`; `.item()`: `x.item()`), else the outermost expression of the line (a
    subscript with a GPU slice bound, a condition)."""
    at_line = [n for n in _walk(func) if isinstance(n, cst.BaseExpression) and model.range(n).start.line == line]
    if not at_line:
        return None
    named = kind.split("`")[1] if kind.count("`") >= 2 else ""
    if named.endswith("()"):
        called = named[1:-2] if named.startswith(".") else named[:-2]
        calls = [
            n for n in at_line if isinstance(n, cst.Call) and (
                isinstance(n.func, cst.Attribute) and n.func.attr.value == called if named.startswith(".")
                else isinstance(n.func, cst.Name) and n.func.value == called
            )
        ]  # fmt: skip
        if calls:
            return calls[-1]  # (pre-order: the last is the innermost)
    return at_line[0]


def _walks_elements(model: SemanticModel, node: cst.CSTNode, loop: cst.CSTNode) -> bool:
    """`loop` walks the elements of a sequence and the read at `node` uses the element (or its index): `for i in
    range(N): mask[i, lengths[i]:]`, `for label in labels: label.item()`, any comprehension (`[int(n) for n in
    counts]`). Not a loop over a few options (`for k in sorted(ks):`, `for k in range(3):`), nor over a host copy
    (`t.tolist()`): the summary's "walk" (`summary._element_iterable`), on the module's own tree."""
    if isinstance(loop, (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
        return True  # once per element it builds, as the summary's "repeated" says (`[int(n) for n in counts]`)
    if not isinstance(loop, cst.For):
        return False
    target, iterable = loop.target, loop.iter
    names = {n.value for n in _walk(target) if isinstance(n, cst.Name)}
    return bool(names) and _uses_element(_read_operand(node), names) and _element_iterable(iterable)


def _read_operand(node: cst.CSTNode) -> cst.CSTNode:
    """What a read reads (as `summary._read_operand`): the receiver of `x.item()`, the argument of `int(x)`."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        return node.func.value
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.args:
        return node.args[0].value
    return node


def _uses_element(node: cst.CSTNode, names: set) -> bool:
    """The loop's element or an index with it (as `summary._uses_element`), not through a call."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Call):
            continue
        if isinstance(current, cst.Name) and current.value in names:
            return True
        stack.extend(current.children)
    return False


def _element_iterable(iterable: cst.BaseExpression) -> bool:
    """A sequence as written (`labels`, `self.rows`, `t[0]`), `range(<not a literal>)`, or `zip` / `enumerate` of
    those."""
    if isinstance(iterable, (cst.Name, cst.Attribute, cst.Subscript)):
        return True
    if not isinstance(iterable, cst.Call):
        return False
    func = iterable.func
    if isinstance(func, cst.Attribute):
        return False  # `t.tolist()`, `d.items()`, `t.unbind(0)`: what a method returns (a host copy, a few entries)
    if not isinstance(func, cst.Name) or not iterable.args:
        return False
    if func.value == "range":
        return not isinstance(iterable.args[-1 if len(iterable.args) < 3 else 1].value, cst.Integer)
    if func.value in ("zip", "enumerate"):
        return all(_element_iterable(a.value) for a in iterable.args if a.keyword is None)
    return False


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
