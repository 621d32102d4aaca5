"""Host reads of a step that wait for nothing new: the read before them drained the stream, and only light
GPU work (a metric's few kernels) was queued since.

`previous_read(model, sync, loop)`: the latest host read (`residency.HostSync`, not one inside a helper) of
the same iteration of `loop` that always runs before `sync` (its statement comes first in a statement list
holding `sync`, or in a `with` block before it, or the read is the test of an `if` holding `sync`; and
nothing in that statement makes the read conditional), when no heavy GPU work was launched between the two
(`work_between`) and, for a read of another tensor, no loop ran between them (`crosses_a_loop`). A host read
returns only once everything queued before it has run, so `sync` then waits for its own operand at most (a
kernel or two, microseconds), not for the step: `epoch_acc += (scores.argmax(1) == y).float().sum().item()`
right after `epoch_loss += loss.item()`, `lengths[b].item()` after `lengths.min().item()`. A performance
engineer counts the run of reads as one wait: removing the first one moves the wait to the next, so the run is
one finding at its first read, and each segment of the step that heavy work starts keeps a finding of its own.
A read of the tensor the first one read (`read_tensor`) may run in a loop nested after it (each sample's
length after the minimum: one host copy serves all); a read of another tensor may not, nor after a loop (each
iteration may queue kernels: the run ends there).

What counts as heavy GPU work between the two reads (conservative, so that a read that waits for a step stays its
own finding): a forward of a module, a backward pass, an optimizer step, a call handed a module or a project
function that trains or runs one (`step_waits`' step work); a matrix product (`a @ b`); and any call not
known to be cheap: only host builtins and bookkeeping on host values, clock reads, `torch.cuda` queries,
`numpy` / `math` / `random` calls given no GPU tensor, and torch functions and tensor methods (the elementwise
and reduction kernels of a metric, slices and copies of clips) are not work there. Inside the later read's
own statement, only step work counts: the rest is the read's own operand (`accuracy(scores, labels)`, a
helper that reads its own small metric, included), except Python's `sum` / `min` / `max` / ... over a GPU
tensor (`int(sum(predictions == target))`: a kernel per element). A read in a loop nested in the step after the first read
(`for b in range(len(lengths)): n = int(lengths[b].item())` after `lengths.min().item()`) has every call of
that nested loop in between (its earlier iterations run before it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name
from gpulint.analysis.step_waits import queues_step_work
from gpulint.analysis.summary import CLOCKS

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel
    from gpulint.analysis.residency import HostSync

# Calls that queue no GPU work when given no GPU tensor.
_HOST_BUILTINS = frozenset({
    "sum", "len", "min", "max", "abs", "round", "float", "int", "str", "bool", "isinstance", "hasattr", "getattr",
    "dict", "list", "tuple", "range", "enumerate", "zip", "sorted", "print",
})  # fmt: skip
# Builtins that iterate what they are given: over a GPU tensor, one kernel per element.
_ITERATING_BUILTINS = frozenset({"sum", "min", "max", "list", "tuple", "sorted", "enumerate", "zip", "any", "all", "map"})
# Builtins that, given several values, compare them instead of walking one (`max(iy, 0)`).
_COMPARING_BUILTINS = frozenset({"min", "max"})
_HOST_METHODS = frozenset({"append", "extend", "insert", "values", "items", "keys", "get", "update", "format", "copy", "setdefault"})
_COPIES = frozenset({"to", "cuda", "contiguous", "clone"})
_HOST_LIBRARIES = ("numpy.", "math.", "random.", "time.")
# Statements and expressions that repeat what they hold.
_LOOPS = (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
# Places inside a statement where a read may not run: a branch of an expression, a deferred body.
_CONDITIONAL = (cst.IfExp, cst.BooleanOperation, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)


def previous_read(model: SemanticModel, sync: HostSync, loop: Loop, syncs: list[HostSync]) -> Optional[HostSync]:
    flow = model.dataflow
    statement = model.enclosing_statement(sync.node)
    before = [
        s for s in syncs
        if s.via is None and flow.before(s.node, statement) and _always_runs_before(model, s, sync, loop)
    ]  # fmt: skip
    if not before:
        return _read_in_every_branch(model, sync, loop, syncs)
    latest = max(before, key=lambda s: flow.order[s.node])
    tensor = read_tensor(model, latest.value)
    if (tensor is None or tensor != read_tensor(model, sync.value)) and crosses_a_loop(model, latest, sync):
        return None  # another tensor read after a loop: what the loop queued is new work (a tensor's own per-sample reads wait for none)
    return None if work_between(model, latest, sync) else latest


def read_tensor(model: SemanticModel, value: cst.BaseExpression) -> Optional[str]:
    """The tensor a read reads, under its methods and indexing: `lengths` in `lengths.min()`, `lengths[b]`,
    `self.tokens` in `float(self.tokens)`."""
    while True:
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            value = value.func.value
        elif isinstance(value, cst.Subscript):
            value = value.value
        elif isinstance(value, (cst.BinaryOperation, cst.Comparison)):
            value = value.left  # `tokens - warmup`, `if tokens < warmup:`
        else:
            return dotted_name(value)


def crosses_a_loop(model: SemanticModel, first: HostSync, sync: HostSync) -> bool:
    """A loop runs between the read `first` and the later read `sync`: a `for`, `while` or comprehension after
    `first` and before `sync`'s statement or in it, or a loop around `sync` that is not around `first`."""
    if model.enclosing_loops(sync.node) != model.enclosing_loops(first.node):
        return True  # (the later read runs once per iteration of a loop after the first)
    flow = model.dataflow
    statement = model.enclosing_statement(sync.node)
    scope = model.scope_of(sync.node)
    return any(
        flow.before(first.node, loop) and not flow.before(statement, loop) and model.scope_of(loop) is scope
        for loop in _loops(model)
    )  # fmt: skip


def _loops(model: SemanticModel) -> list[cst.CSTNode]:
    memo = model.memo("loops")
    if model.module not in memo:
        memo[model.module] = [n for n in model.dataflow.order if isinstance(n, _LOOPS)]
    return memo[model.module]


def _always_runs_before(model: SemanticModel, first: HostSync, sync: HostSync, loop: Loop) -> bool:
    """`first` runs in every iteration of `loop` that runs `sync`, before it: its statement dominates `sync`,
    inside the step loop (a read before the loop runs once), and nothing in the statement makes it conditional."""
    flow = model.dataflow
    statement = model.enclosing_statement(first.node)
    for ancestor in model.ancestors(first.node):
        if ancestor is statement:
            break
        if isinstance(ancestor, _CONDITIONAL) or isinstance(ancestor, (cst.IndentedBlock, cst.Else)):
            return False  # `a if c else t.item()`, `c and t.item()`, or the body of the `if` it tests
    header = isinstance(statement, cst.BaseCompoundStatement) and model.is_inside(sync.node, statement)
    if not header:  # (a read in `if t < x:` runs before the `if`'s body and `else`)
        statement = _entered_block(model, statement)
        if not flow.dominates(statement, sync.node):
            return False
    inner = model.enclosing_loops(sync.node)
    if isinstance(loop, (cst.For, cst.While)) and model.scope_of(loop) is model.scope_of(sync.node):
        return model.is_inside(first.node, loop) and first.node is not loop
    return model.enclosing_loops(first.node) == inner  # a step method or helper: the same loops around both


def _read_in_every_branch(model: SemanticModel, sync: HostSync, loop: Loop, syncs: list[HostSync]) -> Optional[HostSync]:
    """The latest of the reads that end the branches of an `if` / `else` before `sync`, when every branch has one
    and none queued heavy work since: `if p.size(1) == 1: correct += a.item()  else: correct += b.item()`, then
    `total += w.sum().item()` waits for nothing new whichever branch ran (the wait is the branch's read)."""
    flow = model.dataflow
    statement = model.enclosing_statement(sync.node)
    found = None
    for branch in (s for s in _block_statements(model, statement) if isinstance(s, cst.If) and flow.before(s, statement)):
        if not flow.dominates(_entered_block(model, branch), sync.node):
            continue
        reads = []
        arm: Optional[cst.CSTNode] = branch
        while isinstance(arm, cst.If):  # the body of each `if` / `elif`, then the final `else`
            reads.append(_last_read_of(model, arm.body, syncs))
            arm = arm.orelse.body if isinstance(arm.orelse, cst.Else) else arm.orelse
            if arm is None:
                reads.append(None)  # no `else`: a path with no read
        if arm is not None and not isinstance(arm, cst.If):
            reads.append(_last_read_of(model, arm, syncs))
        if all(r is not None for r in reads) and not any(crosses_a_loop(model, r, sync) or work_between(model, r, sync) for r in reads):
            found = max(reads, key=lambda r: flow.order[r.node])
    return found


def _block_statements(model: SemanticModel, statement: cst.CSTNode) -> list[cst.CSTNode]:
    """The statements of the block that holds `statement` (its `with` blocks entered)."""
    block = model.parent.get(_entered_block(model, statement))
    return list(block.body) if isinstance(block, (cst.IndentedBlock, cst.Module)) else []


def _last_read_of(model: SemanticModel, block: cst.BaseSuite, syncs: list[HostSync]) -> Optional[HostSync]:
    """The last read of a statement of `block` itself (not nested in a branch or a loop of it, nor conditional
    within its statement), when nothing follows that statement in the block."""
    body = list(block.body) if isinstance(block, cst.IndentedBlock) else []
    if not body:
        return None
    last = body[-1]
    reads = [
        s for s in syncs
        if s.via is None and model.enclosing_statement(s.node) is last and isinstance(last, cst.SimpleStatementLine)
        and not any(isinstance(a, _CONDITIONAL) for a in model.ancestors(s.node) if model.is_inside(a, last))
    ]  # fmt: skip
    return max(reads, key=lambda s: model.dataflow.order[s.node]) if reads else None


def _entered_block(model: SemanticModel, statement: cst.CSTNode) -> cst.CSTNode:
    """The outermost `with` whose body holds `statement` with only `with` bodies between: a `with` block always
    runs its body (`with torch.no_grad(): losses.append(loss.item())` comes before what follows the block)."""
    while True:
        block = model.parent.get(statement)
        around = model.parent.get(block) if isinstance(block, cst.IndentedBlock) else None
        if not isinstance(around, cst.With):
            return statement
        statement = around


def work_between(model: SemanticModel, first: HostSync, sync: HostSync) -> bool:
    """GPU work launched after the read `first` and before the read `sync` (see the module's docstring)."""
    flow = model.dataflow
    first_statement = model.enclosing_statement(first.node)
    statement = model.enclosing_statement(sync.node)
    scope = model.scope_of(sync.node)
    between = list(flow.calls_between(first.node, statement, scope))
    # the calls the first read is handed to run after it (`losses.append(...)`)
    between += [c for c in model.calls_inside(first_statement) if c is not first.node and model.is_inside(first.node, c)]
    # a read in a loop nested after the first read waits for what that loop's earlier iterations queued
    outer = set(map(id, model.enclosing_loops(first.node)))
    for nested in model.enclosing_loops(sync.node):
        if id(nested) in outer:
            break
        between += model.calls_inside(nested)
    if any(_queues_work(model, call) for call in between if not model.is_inside(call, statement)):
        return True
    if any(flow.before(first.node, product) and flow.before(product, statement) for product in _matrix_products(model)):
        return True  # `a @ b` may be a large kernel
    own = [c for c in model.calls_inside(statement) if not flow.before(sync.node, c)]
    return any(queues_step_work(model, call) or _iterates_gpu_tensor(model, call) for call in own)


def _iterates_gpu_tensor(model: SemanticModel, call: cst.Call) -> bool:
    """`sum(predictions == target)`: Python's builtin walks the GPU tensor, a kernel (and an index) per element.
    Not `max(iy, 0)` / `min(a, b)`: given two or more values, `min` and `max` compare them (one read each), they
    walk nothing."""
    func = call.func
    if not (isinstance(func, cst.Name) and func.value in _ITERATING_BUILTINS and not model.bindings_of(func.value, call)):
        return False
    positional = [a for a in call.args if a.keyword is None]
    if func.value in _COMPARING_BUILTINS and len(positional) > 1 and not any(a.star for a in positional):
        return False
    return any(not a.star and model.residency.is_gpu(a.value) for a in call.args)


def _queues_work(model: SemanticModel, call: cst.Call) -> bool:
    """Step work, or a call not known to be a cheap tensor op or host bookkeeping."""
    if queues_step_work(model, call):
        return True
    residency = model.residency
    name = model.call_name(call) or ""
    gpu_args = any(not a.star and residency.is_gpu(a.value) for a in call.args)
    if name in CLOCKS or name.startswith("torch.cuda."):
        return False
    if name.startswith(_HOST_LIBRARIES):
        return gpu_args
    if name.startswith("torch.") and not name.startswith(("torch.nn.", "torch.optim.", "torch.distributed.")):
        return False  # `torch.cat`, `torch.from_numpy`: a kernel or a copy
    if name.startswith("torch.nn.functional."):
        return False
    func = call.func
    if isinstance(func, cst.Name) and func.value in _HOST_BUILTINS and not model.bindings_of(func.value, call):
        return _iterates_gpu_tensor(model, call)
    if isinstance(func, cst.Attribute):
        if residency.is_gpu(func.value) or func.attr.value in _COPIES:
            return False  # `x.float()`, `x.sum()`: a tensor method; `clip.to(device)`: a copy (a module's is step work)
        if func.attr.value in _HOST_METHODS:
            return gpu_args and func.attr.value not in ("append", "extend", "insert")  # a list keeps GPU tensors as they are
    return True


def _matrix_products(model: SemanticModel) -> list[cst.BinaryOperation]:
    memo = model.memo("matrix products")
    if model.module not in memo:
        memo[model.module] = [n for n in model.dataflow.order if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.MatrixMultiply)]
    return memo[model.module]
