"""Host reads that walk a GPU tensor element by element, in helpers an epoch loop runs (GPU303's cost evidence).

An evaluation helper of a notebook or a script groups the edges of a graph by user, or lists each user's items:

    def get_user_items(edge_index):
        for i in range(edge_index.shape[1]):
            user = edge_index[0][i].item()        # <- one wait per edge: ~80k a call
    def get_metrics(model, edge_index):
        users = edge_index[0].unique()
        for user in users:                        # iterating a GPU tensor: each `user` is a GPU scalar
            truth = items[user.item()]            # <- one wait per user
    for epoch in range(31):
        for _ in range(n_batch): ...train...
        if epoch % 5 == 0:
            get_metrics(model, val_edge_index)

No step loop is around the read, so the per-step view does not see it, but each call waits once per element of
the tensor (one wait per element, every call), and the call runs every evaluation. `element_pass` answers for a
read whose innermost loop (or comprehension) in its function walks the elements of the tensor it reads:

- `for x in t:` (or a comprehension over `t`) and the read is of `x`; not when the iterable is a host copy
  (`t.tolist()`, `t.cpu()`, `t.numpy()`), whose elements are Python numbers (those reads are not in
  `residency.host_syncs` at all);
- `for i in range(t.shape[d])` / `range(len(t))` / `range(t.size(d))` and the read indexes `t` with `i`.

and the function around it is a module-level `def` one of whose calls runs in a loop that repeats it (an epoch
loop, a training or evaluation loop), directly or through other module-level functions. A call under an interval
guard (`if epoch % 5 == 0:`) counts when the loop it is in runs whole passes (its body holds a loop of its own:
every N epochs is the evaluation's cadence); in a step loop such a guard is a log interval, and the read is left
alone. One-off code (a call at module level only, after training, or in a loop that breaks after its first
batch to show one result) stays silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_HOST_COPIES = frozenset({"tolist", "cpu", "numpy", "item"})
_SIZES = frozenset({"shape", "size"})


class ElementPass(NamedTuple):
    loop: cst.CSTNode  # the loop (or comprehension) over the tensor's elements
    tensor: str  # the tensor walked, as written
    call: cst.Call  # the call in a repeating loop that runs it
    calling_loop: cst.CSTNode  # the loop around that call


def element_pass(model: SemanticModel, sync) -> Optional[ElementPass]:
    """The per-element walk of a GPU tensor `sync` reads in, when a repeating loop runs its function, or None."""
    walk = _walk(model, sync.node, sync.value)
    if walk is None or not model.residency.is_gpu(walk[2]):
        return None  # the walk is over what the model does not know to be on the GPU (a `.cpu()` copy made before)
    func = next((a for a in model.ancestors(walk[0]) if isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef))), None)
    if not isinstance(func, cst.FunctionDef) or model.parent.get(func) is not model.module:
        return None
    reached = _reached(model, func, set())
    if reached is None:
        return None
    return ElementPass(walk[0], walk[1], *reached)


def _walk(model: SemanticModel, node: cst.CSTNode, value: cst.CSTNode) -> Optional[tuple[cst.CSTNode, str, cst.BaseExpression]]:
    """(the innermost loop or comprehension around `node` in its function, the tensor it walks as written, that
    expression) when it walks the elements of the tensor `value` reads."""
    root = value
    indices: list[cst.CSTNode] = []
    while True:
        if isinstance(root, cst.Subscript):
            indices.extend(root.slice)
            root = root.value
        elif isinstance(root, cst.Attribute):
            root = root.value
        elif isinstance(root, cst.Call) and isinstance(root.func, cst.Attribute):
            root = root.func.value
        else:
            break
    if not isinstance(root, cst.Name):
        return None
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            comp = ancestor.for_in
            if isinstance(comp.target, cst.Name) and comp.target.value == root.value and not _host_copy(comp.iter):
                return ancestor, model.code(comp.iter), comp.iter
            continue
        if not isinstance(ancestor, cst.For) or model.is_inside(node, ancestor.iter):
            continue
        target = ancestor.target
        if isinstance(target, cst.Name) and target.value == root.value:
            return (ancestor, model.code(ancestor.iter), ancestor.iter) if not _host_copy(ancestor.iter) else None
        if isinstance(target, cst.Name) and _range_over(ancestor.iter, root.value):
            if any(_mentions(model, index, target.value) for index in indices):
                return ancestor, root.value, root
        return None  # the innermost loop walks something else: the loop around it decides how often (not here)
    return None


def _host_copy(iterable: cst.CSTNode) -> bool:
    """`t.tolist()`, `t.cpu()`, `t.numpy()`: a host copy made once, before the first element."""
    return isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and iterable.func.attr.value in _HOST_COPIES


def _range_over(iterable: cst.CSTNode, name: str) -> bool:
    """`range(t.shape[1])`, `range(len(t))`, `range(t.size(0))`: one index per element of `t`."""
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range"):
        return False
    if len(iterable.args) != 1:
        return False
    bound = iterable.args[0].value
    if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name) and bound.func.value == "len":
        return len(bound.args) == 1 and isinstance(bound.args[0].value, cst.Name) and bound.args[0].value.value == name
    if isinstance(bound, cst.Subscript):
        bound = bound.value
    if isinstance(bound, cst.Call):
        bound = bound.func
    return (
        isinstance(bound, cst.Attribute) and bound.attr.value in _SIZES
        and isinstance(bound.value, cst.Name) and bound.value.value == name
    )  # fmt: skip


def _mentions(model: SemanticModel, node: cst.CSTNode, name: str) -> bool:
    """`name` appears in `node` (an index `i` in `edge_index[0][i]`)."""
    if isinstance(node, cst.Name):
        return node.value == name
    return any(_mentions(model, child, name) for child in node.children)


def _reached(model: SemanticModel, func: cst.FunctionDef, seen: set) -> Optional[tuple[cst.Call, cst.CSTNode]]:
    """(a call, its loop) through which a repeating loop runs `func`, directly or through module-level functions."""
    if func in seen:
        return None
    seen.add(func)
    name = func.name.value
    if model.functions.get(name) != [func]:
        return None  # another `def` binds the name: which one a call runs is not known
    residency = model.residency
    for call in model.calls_of(name):
        if model.is_inside(call, func):
            continue
        for loop in model.repeating_loops(call):
            if residency.loop_role(loop) is None or _runs_once(model, loop):
                continue  # (`for x, y in loader: show(infer(x)); break`: one demo call, the loop around decides)
            guard = residency.rate_limit_guard(call, loop)
            if guard is not None and not _runs_passes(model, loop):
                break  # a log interval of a step loop: a handful of calls
            return call, loop
        outer = next((a for a in model.ancestors(call) if isinstance(a, (cst.FunctionDef, cst.Lambda, cst.ClassDef))), None)
        if isinstance(outer, cst.FunctionDef) and model.parent.get(outer) is model.module:
            found = _reached(model, outer, seen)
            if found is not None:
                return found
    return None


def _runs_once(model: SemanticModel, loop: cst.CSTNode) -> bool:
    """The loop's body runs at most twice (a body that ends in `break`, a range of one or two)."""
    from gpulint.analysis.loop_bounds import trip_count

    count = trip_count(model, loop) if isinstance(loop, (cst.For, cst.While)) else None
    return count is not None and count <= 2


def _runs_passes(model: SemanticModel, loop: cst.CSTNode) -> bool:
    """The loop's body holds a loop of its own that runs a role (an epoch loop around its step loop)."""
    return any(inner is not loop and model.residency.loop_role(inner) is not None for inner in model.loops_inside(loop))


class HandedWalk(NamedTuple):
    """A read, in a helper of this module, of an element of a GPU tensor a batch loop of the project hands it
    (`walked_params`): `sync` is the read, `loop` the walk over the tensor, `where` the batch loop's call."""

    sync: object  # a `residency.HostSync`
    loop: cst.CSTNode
    tensor: str
    param: str
    where: str


_NUMBER_CASTS = frozenset({"int", "float", "bool"})
_READ_METHODS = frozenset({"item"})  # one number a read (rows copied out one by one are outputs: `walked_params`)


def handed_walks(model: SemanticModel) -> list[HandedWalk]:
    """The element-by-element reads of GPU tensors this module's helpers are handed by a loop over batches
    elsewhere in the project (`ModuleContext.walked`), each at its read in the helper. Only a read of the walk's
    element itself (`int(n)` for `n` in the tensor, `t[i].item()` over `range(len(t))`) counts."""
    from gpulint.analysis.residency import HostSync

    found: list[HandedWalk] = []
    for name, entries in sorted(model.project.walked.items()):
        defs = model.functions.get(name) or []
        if len(defs) != 1 or model.parent.get(defs[0]) is not model.module:
            continue  # another `def` binds the name, or it is nested: which one runs is not known
        for param, lines, where in entries:
            for node, value, kind in _reads_at(model, defs[0], set(lines)):
                walk = _walk(model, node, value)
                if walk is None:
                    continue
                found.append(HandedWalk(HostSync(node, kind, value), walk[0], walk[1], param, where))
    return found


def _reads_at(model: SemanticModel, func: cst.FunctionDef, lines: set[int]):
    """(node, the value it reads, how) of each host read written at one of `lines` in `func`."""
    stack: list[cst.CSTNode] = [func.body]
    while stack:
        node = stack.pop()
        stack.extend(reversed(node.children))
        if not isinstance(node, cst.Call) or model.range(node).start.line not in lines:
            continue
        callee = node.func
        if isinstance(callee, cst.Name) and callee.value in _NUMBER_CASTS and len(node.args) == 1 and node.args[0].keyword is None:
            yield node, node.args[0].value, f"`{callee.value}()` of a GPU tensor"
        elif isinstance(callee, cst.Attribute) and callee.attr.value in _READ_METHODS and not node.args:
            yield node, callee.value, f"`.{callee.attr.value}()`"
