"""Models kept on `self`: a module attribute built in one method and moved to the GPU there (`self.G.cuda()`,
`self.net = Net().to(self.device)`, in any branch that runs on a GPU machine: `if self.gpu_mode:`, `if args.cuda:`)
is GPU-resident in every method of its class, and a loop in a method of that class that trains it (forward
through the attribute, backward, optimizer step) is a GPU training loop, wherever the class is instantiated
(`gan = GAN(args); gan.train()` in another module).

Every write of the attribute in the class must be placed on the GPU in its own method: an attribute some method
rebinds to a module it never moves (`self.net = Net()` in `reset()`), or to anything not known to be a module
(`self.net = torch.load(path)`), is not resident, and a move only in a branch that runs without a GPU (the
`else:` of `if torch.cuda.is_available():`) places nothing. `self.net = None` holds no module at all (the
constructor's placeholder before `self.build_model()` builds and moves it, a teardown): nothing runs through
it, so it neither places nor displaces the model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.gpu_free_branches import gpu_free_rows
from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.dataflow import Write
    from gpulint.analysis.model import Loop, SemanticModel


def _attribute_key(expr: cst.BaseExpression) -> str | None:
    """`self.G` -> "self.G" (one attribute of `self`, not `self.args.model`)."""
    key = dotted_name(expr) if isinstance(expr, cst.Attribute) else None
    return key if key is not None and key.startswith("self.") and key.count(".") == 1 else None


def _in_gpu_free_branch(model: SemanticModel, node: cst.CSTNode) -> bool:
    line = model.line_of(node)
    return any(start <= line <= end for start, end in gpu_free_rows(model))


def _outermost_call(model: SemanticModel, call: cst.Call) -> cst.BaseExpression:
    """`Net().cuda().train()` for its `.cuda()`: the value a chain of method calls on the moved module gives."""
    node: cst.BaseExpression = call
    while True:
        parent = model.parent.get(node)
        grand = model.parent.get(parent) if isinstance(parent, cst.Attribute) else None
        if isinstance(parent, cst.Attribute) and parent.value is node and isinstance(grand, cst.Call) and grand.func is parent:
            node = grand
            continue
        return node


def _tuple_part_target(model: SemanticModel, value: cst.BaseExpression) -> str | None:
    """`self.D` for `D().cuda()` in `self.G, self.D = G().cuda(), D().cuda()`: the attribute at its place."""
    element = model.parent.get(value)
    values = model.parent.get(element) if isinstance(element, cst.Element) else None
    statement = model.parent.get(values) if isinstance(values, cst.Tuple) else None
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 or statement.value is not values:
        return None
    targets = statement.targets[0].target
    if not isinstance(targets, (cst.Tuple, cst.List)) or len(targets.elements) != len(values.elements):
        return None
    if any(isinstance(e, cst.StarredElement) for e in (*targets.elements, *values.elements)):
        return None
    return _attribute_key(targets.elements[values.elements.index(element)].value)


def _moved_attributes(model: SemanticModel) -> dict[str, list[cst.Call]]:
    """For each `self.x`: the CUDA moves that place it, outside branches that run without a GPU."""
    memo = model.memo("gpu-moved attributes")
    if model.module in memo:
        return memo[model.module]  # type: ignore[return-value]
    moves: dict[str, list[cst.Call]] = {}
    for call in model.calls:
        if not isinstance(call.func, cst.Attribute) or not model.residency.moves_to_cuda(call):
            continue
        keys = set()
        receiver = _attribute_key(call.func.value)
        if receiver is not None and model.residency.is_discarded_move(call):
            keys.add(receiver)  # `self.G.cuda()`: a module moves in place
        outer = _outermost_call(model, call)
        statement = model.parent.get(outer)
        if isinstance(statement, cst.Assign):
            keys.update(k for t in statement.targets if (k := _attribute_key(t.target)) is not None)  # `self.G = G().cuda()`
        key = _tuple_part_target(model, outer)
        if key is not None:
            keys.add(key)  # `self.G, self.D = G().cuda(), D().cuda()`
        for key in keys:
            if not _in_gpu_free_branch(model, call):
                moves.setdefault(key, []).append(call)
    memo[model.module] = moves  # type: ignore[assignment]
    return moves


def _placed(model: SemanticModel, write: Write, moves: list[cst.Call]) -> bool:
    """`write` leaves a GPU module in the attribute: it assigns a moved module, or a module its own method
    then moves, or wraps the attribute already moved there (`self.net = DataParallel(self.net)`)."""
    from gpulint.analysis.training_setup import is_model_expression

    value = write.value
    if value is None or write.is_augmented:
        return False
    flow = model.dataflow
    if any(flow.inside(m, value) for m in moves):
        return is_model_expression(model, value)
    scope = model.scope_of(write.statement)
    own = [m for m in moves if model.scope_of(m) is scope]
    if any(flow.before(write.statement, m) and model.residency.is_discarded_move(m) for m in own) and _is_parameter(model, value):
        return True  # `self.model = model; self.model.to(self.device)`: only a module moves in place
    if any(flow.before(write.statement, m) for m in own):
        return is_model_expression(model, value)
    return bool(flow.reads_in(write.key, value)) and any(flow.before(m, write.statement) for m in own)


def _holds_none(write: Write) -> bool:
    """`self.net = None`: a placeholder (or a teardown), no module."""
    return not write.is_augmented and isinstance(write.value, cst.Name) and write.value.value == "None"


def _is_parameter(model: SemanticModel, value: cst.BaseExpression) -> bool:
    """`model` in `self.model = model`: a parameter of the method, never rebound there (a constructor argument)."""
    if not isinstance(value, cst.Name):
        return False
    binders = model.bindings_of(value.value, value)
    return len(binders) == 1 and isinstance(binders[0], cst.Param)


def resident_attributes(model: SemanticModel, cls: cst.ClassDef) -> frozenset[str]:
    """The `self.x` keys of `cls` that hold a GPU module in every method of the class."""
    memo = model.memo("gpu-resident attributes")
    if cls not in memo:
        flow = model.dataflow
        resident = set()
        for key, moves in _moved_attributes(model).items():
            own = [m for m in moves if flow.enclosing_class(m) is cls]
            writes = [w for w in flow.writes_in(key, cls) if not _holds_none(w)]  # a placeholder holds no module
            if own and writes and all(flow.enclosing_class(w.statement) is cls and _placed(model, w, own) for w in writes):
                resident.add(key)
        memo[cls] = frozenset(resident)  # type: ignore[assignment]
    return memo[cls]  # type: ignore[return-value]


def trains_resident_attribute(model: SemanticModel, loop: Loop) -> bool:
    """`loop` sits in a method of a class, trains (backward / optimizer step), and runs one of the class's
    GPU-resident module attributes that has parameters (`self.D(x)`): a GPU training loop of a model kept on `self`."""
    from gpulint.analysis.hot_loops import is_hot

    cls = model.dataflow.enclosing_class(loop)
    if cls is None or model.enclosing_function(loop) is None:
        return False
    resident = resident_attributes(model, cls)
    if not resident:
        return False
    # a parameter-free module (`self.loss_fn = nn.MSELoss().cuda()`) is no model to train
    runs = any(
        _attribute_key(c.func) in resident and model.model_size.parameters(c.func) != 0 for c in model.calls_inside(loop)
    )
    return runs and is_hot(model, loop)


def moves_resident_attribute(model: SemanticModel, call: cst.Call) -> bool:
    """`self.model.to(self.device)` of an attribute resident in its class: a model move, though the module came
    in as a constructor argument (`self.model = model`) and nothing here says what it is built from."""
    if not isinstance(call.func, cst.Attribute) or not model.residency.moves_to_cuda(call):
        return False
    key = _attribute_key(call.func.value)
    cls = model.dataflow.enclosing_class(call)
    return key is not None and cls is not None and key in resident_attributes(model, cls)
