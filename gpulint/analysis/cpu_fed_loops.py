"""Loops that cannot run on a GPU as shipped: a model moved to the run's device is fed the loader's batches
as they come, on the CPU, and nothing moves them.

    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    net = Net().to(device)                      # `class Net` of this module: its forward moves nothing
    trainloader = DataLoader(trainset, batch_size=4, num_workers=2)
    for inputs, labels in trainloader:          # the batches stay on the CPU
        loss = criterion(net(inputs), labels)   # on a GPU machine this raises: only a CPU run works
        running_loss += loss.item()

On a GPU the first forward raises ("Expected all tensors to be on the same device"), so only a CPU run
works, and a GPU-underuse finding in such a loop (its `.item()`, its loader's workers, pinning and batch
size) is about a run that never uses the GPU. The linter drops findings in such loops and on the loaders
only they read. Only plain shapes count: the model's class is this module's own (its forward moves nothing:
no `.to`, `.cuda`, `device` in it) or a library one, the loop's iterable is a `DataLoader` built here without a
`collate_fn` (or `enumerate` of one), and the batch names are used only as the model's inputs, in losses
and metrics, in arithmetic and comparisons, never given to a `.to` / `.cuda` / `.type` or a function that
might move them (`to_device(batch)`). A module that sets a default device (`torch.set_default_device`) is left alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
_MOVES = frozenset({"to", "cuda", "type", "to_device", "pin_memory"})
# Calls that take a batch and never move it: builtins, torch's own functions and losses.
_HARMLESS_BUILTINS = frozenset({"len", "print", "float", "int", "str", "range", "zip", "isinstance", "enumerate"})
_HARMLESS_ROOTS = ("torch.", "torch.nn.functional.", "numpy.", "np.")
_MOVE_WORDS = (".to(", ".cuda(", "device", "set_default")


def cpu_fed_rows(model: SemanticModel) -> list[tuple[int, int]]:
    """The line spans of the loops that feed CPU batches to a model on the run's device, and of the loaders only
    they read (findings there are dropped)."""
    memo = model.memo("cpu-fed rows")
    if model.module not in memo:
        memo[model.module] = _rows(model)  # type: ignore[assignment]
    return memo[model.module]  # type: ignore[return-value]


def _rows(model: SemanticModel) -> list[tuple[int, int]]:
    if not model.calls_of("DataLoader") and not any(c for c in model.method_calls("DataLoader")):
        return []
    if any((model.qualified_name(c.func) or "").endswith("set_default_device") for c in model.calls):
        return []
    spans: list[tuple[int, int]] = []
    loaders: dict[str, cst.CSTNode] = {}
    for loop in model.loops:
        if not isinstance(loop, cst.For):
            continue
        loader = _loader_iterated(model, loop)
        if loader is None or not _feeds_cpu_batches(model, loop):
            continue
        spans.append(_span(model, loop))
        loaders[loader[0]] = loader[1]
    for name, binder in loaders.items():
        uses = [n for n in _name_loads(model.module, name) if not _counted(model, n)]
        if all(any(first <= model.line_of(n) <= last for first, last in spans) for n in uses if n is not binder):
            spans.append(_span(model, binder))
    return spans


def _counted(model: SemanticModel, name: cst.Name) -> bool:
    """`len(loader)`: the loader's length, not a read of its batches; `iter(loader)` outside any loop: one sample
    batch to show; or the loader's own assignment target."""
    if _stored(model, name):
        return True
    arg = model.parent.get(name)
    call = model.parent.get(arg) if isinstance(arg, cst.Arg) else None
    if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Name):
        return False
    return call.func.value == "len" or (call.func.value == "iter" and not model.enclosing_loops(call))


def _span(model: SemanticModel, node: cst.CSTNode) -> tuple[int, int]:
    where = model.range(node)
    return where.start.line, where.end.line


def _loader_iterated(model: SemanticModel, loop: cst.For) -> Optional[tuple[str, cst.CSTNode]]:
    """The name and binder of the `DataLoader` (no `collate_fn`) this loop iterates, directly or via `enumerate`."""
    it = loop.iter
    if isinstance(it, cst.Call) and dotted_name(it.func) == "enumerate" and it.args:
        it = it.args[0].value
    if not isinstance(it, cst.Name):
        return None
    binders = model.bindings_of(it.value, loop)
    if len(binders) != 1 or not isinstance(binders[0], cst.Assign):
        return None
    value = binders[0].value
    if not isinstance(value, cst.Call) or model.qualified_name(value.func) not in _LOADERS:
        return None
    if any(a.keyword is not None and a.keyword.value in ("collate_fn", "pin_memory_device") for a in value.args):
        return None
    dataset = value.args[0].value if value.args and value.args[0].keyword is None else None
    if dataset is None or not _cpu_dataset(model, dataset, loop):
        return None
    return it.value, binders[0]


def _cpu_dataset(model: SemanticModel, dataset: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """The dataset is built here by a `torchvision.datasets` class or a class of this module whose code moves
    nothing, from arguments (and values they name) that move nothing (`transform=push_to_device` may)."""
    if isinstance(dataset, cst.Name):
        binders = model.bindings_of(dataset.value, at)
        if len(binders) != 1 or not isinstance(binders[0], cst.Assign):
            return False
        dataset = binders[0].value
    if not isinstance(dataset, cst.Call):
        return False
    name = model.qualified_name(dataset.func) or ""
    local = model.local_class_of(name)
    if local is not None:
        if _moves(model.module.code_for_node(local.node)):
            return False
    elif not name.startswith("torchvision.datasets."):
        return False
    for arg in dataset.args:
        if _moves(model.module.code_for_node(arg.value)):
            return False
        if isinstance(arg.value, cst.Name):
            for binder in model.bindings_of(arg.value.value, at):
                if _moves(model.module.code_for_node(binder)):
                    return False
    return True


def _moves(code: str) -> bool:
    return any(word in code for word in (*_MOVE_WORDS, "register_buffer"))


def _batch_names(loop: cst.For) -> set[str]:
    """Names the loop target binds, and those unpacked from them in the body's top statements (`x, y = data`)."""
    names: set[str] = set()
    target = loop.target
    if isinstance(loop.iter, cst.Call) and dotted_name(loop.iter.func) == "enumerate":
        if not isinstance(target, cst.Tuple) or len(target.elements) != 2:
            return set()
        target = target.elements[1].value  # `for i, data in enumerate(loader)`: `i` is a count, not a batch
    _collect(target, names)
    for statement in loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ():
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Assign) and _only_batch(small.value, names):
                    for target in small.targets:
                        _collect(target.target, names)
    return names


def _only_batch(value: cst.BaseExpression, names: set[str]) -> bool:
    if isinstance(value, cst.Name):
        return value.value in names
    return isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name) and value.value.value in names


def _collect(target: cst.BaseExpression, names: set[str]) -> None:
    if isinstance(target, cst.Name):
        names.add(target.value)
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            _collect(element.value, names)


def _feeds_cpu_batches(model: SemanticModel, loop: cst.For) -> bool:
    """A moved model is called with a batch name, and no batch name is ever given to anything that may move it."""
    batch = _batch_names(loop)
    if not batch or _moves_something(loop.body):
        return False
    fed = False
    for node in _name_loads(loop.body, None):
        if node.value not in batch:
            continue
        verdict = _use(model, loop, node)
        if verdict is None:
            return False
        fed = fed or verdict
    return fed


def _moves_something(body: cst.CSTNode) -> bool:
    """The step calls `.to` / `.cuda` / a `to_device` on anything: `{k: v.to(device) for k, v in batch.items()}` moves
    the batch through names the use check does not follow, so only a step that moves nothing counts."""
    found = []

    class _Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            func = node.func
            called = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
            if called in _MOVES:
                found.append(node)

    body.visit(_Visitor())
    return bool(found)


def _use(model: SemanticModel, loop: cst.For, name: cst.Name) -> Optional[bool]:
    """True: the batch goes into a moved model; False: a use that moves nothing; None: it may be moved."""
    node: cst.CSTNode = name
    if _stored(model, name):
        return False  # `inputs, labels = data`: the names it binds are checked where they are read
    parent = model.parent.get(node)
    if isinstance(parent, cst.Subscript) and parent.value is node:
        node, parent = parent, model.parent.get(parent)
    if isinstance(parent, cst.Attribute) and parent.value is node:
        if parent.attr.value in _MOVES:
            return None
        return False  # `labels.size(0)`, `x.shape`, `x.view(-1)`: nothing moves
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.BinaryOperation, cst.UnaryOperation)):
        return False
    if isinstance(parent, (cst.Assign, cst.Tuple, cst.Element)) and _unpacking(model, node):
        return False  # `inputs, labels = data`
    if isinstance(parent, cst.Arg) and parent.keyword is None:
        call = model.parent.get(parent)
        if isinstance(call, cst.Call):
            if _moved_model(model, loop, call.func):
                return True
            if _harmless(model, call.func):
                return False
    return None


def _stored(model: SemanticModel, name: cst.Name) -> bool:
    """`name` is (part of) an assignment's target."""
    for ancestor in model.ancestors(name):
        if isinstance(ancestor, cst.AssignTarget):
            return True
        if not isinstance(ancestor, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
            return False
    return False


def _unpacking(model: SemanticModel, node: cst.CSTNode) -> bool:
    parent = model.parent.get(node)
    return isinstance(parent, cst.Assign) and parent.value is node


def _harmless(model: SemanticModel, func: cst.BaseExpression) -> bool:
    """Calls that never move their argument: builtins, torch functions, a loss built from `torch.nn`."""
    if isinstance(func, cst.Name) and func.value in _HARMLESS_BUILTINS:
        return True
    name = model.qualified_name(func) or ""
    if name.startswith(_HARMLESS_ROOTS):
        return True
    if isinstance(func, cst.Name) and _local_function_moves_nothing(model, func.value, set()):
        return True  # a plotting helper of this module that moves nothing (nor do the helpers it calls)
    if isinstance(func, cst.Name):
        binders = model.bindings_of(func.value, func)
        return bool(binders) and all(
            isinstance(b, cst.Assign) and isinstance(b.value, cst.Call)
            and (model.qualified_name(b.value.func) or "").startswith("torch.nn.")
            and (model.qualified_name(b.value.func) or "").endswith("Loss")
            for b in binders
        )  # fmt: skip
    return False


def _local_function_moves_nothing(model: SemanticModel, name: str, seen: set[str]) -> bool:
    """`name` is a module-level function of this module whose code, and that of the module's functions it calls,
    moves nothing to a device."""
    functions = model.functions.get(name, [])
    if len(functions) != 1 or model.module_bindings(name) or name in seen:
        return name in seen and len(functions) == 1
    seen.add(name)
    if any(word in model.module.code_for_node(functions[0]) for word in _MOVE_WORDS):
        return False
    return all(
        _local_function_moves_nothing(model, callee.name.value, seen) for callee in model.callees(functions[0])
    )  # fmt: skip


def _moved_model(model: SemanticModel, loop: cst.For, func: cst.BaseExpression) -> bool:
    """`net` with every binding `net = Net().to(device)` / `.cuda()`, `Net` this module's class whose code moves
    nothing, or a library model."""
    if not isinstance(func, cst.Name):
        return False
    binders = model.bindings_of(func.value, loop)
    if not binders:
        return False
    for binder in binders:
        if not isinstance(binder, cst.Assign) or not isinstance(binder.value, cst.Call):
            return False
        moved = binder.value.func
        if not (isinstance(moved, cst.Attribute) and moved.attr.value in ("to", "cuda")):
            return False
        built = moved.value
        if not isinstance(built, cst.Call) or not _moves_nothing(model, built.func):
            return False
    return True


def _moves_nothing(model: SemanticModel, func: cst.BaseExpression) -> bool:
    name = model.qualified_name(func) or ""
    local = model.local_class_of(name)
    if local is not None:
        text = model.module.code_for_node(local.node)
        return not any(word in text for word in (*_MOVE_WORDS, "register_buffer"))
    if "Parallel" in name:
        return False  # `nn.DataParallel(net)` scatters CPU inputs to its GPUs
    return name.startswith(("torchvision.models.", "torch.nn."))


def _name_loads(root: cst.CSTNode, name: Optional[str]) -> list[cst.Name]:
    """The `Name` nodes under `root` (named `name`, when given), skipping attribute names and keywords."""
    found: list[cst.Name] = []

    class _Visitor(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)
            return False

        def visit_Name(self, node: cst.Name) -> None:
            if name is None or node.value == name:
                found.append(node)

    root.visit(_Visitor())
    return found
