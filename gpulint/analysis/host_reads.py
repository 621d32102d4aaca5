"""Host reads inside a loop that cost nothing a rewrite could save.

Two facts about the host syncs (`residency.HostSync`) of a loop:

- `needs_host_every_iteration`: the loop needs a GPU value on the host to go on (`drives_loop`), so each
  iteration waits anyway and the other reads in it add a copy, not a stall. Greedy decoding stops at EOS
  (`if topi.item() == EOS: break`), autoregressive sampling builds the next step's input from the host value
  (`word_idx = torch.multinomial(logits.cpu(), 1)[0]; input.fill_(word_idx)`). The wait is the algorithm, not
  a habit: no GPU-side form exists while each iteration depends on the one before through the host. Only
  loops that do not train count: in a training step a branch on a GPU value has a branch-free form, and
  outputs merely collected each step (`preds.append(out.cpu())`) can be copied once after the loop.
- `queue_drained`: the iteration has already waited for the GPU (`torch.cuda.synchronize()`, or a timing
  helper that synchronizes) and launched no GPU work since, so the read copies a finished value (profiling
  harnesses record `loss.item()` right after their own synchronize).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name
from gpulint.analysis.summary import CLOCKS

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel
    from gpulint.analysis.residency import HostSync

# Hops from the read to the host values built from it (`w = x.cpu()`, `i = torch.multinomial(w, 1)[0]`, `t = tensor([[i]])`).
_MAX_HOPS = 4
# In-place writes that carry a host value into what the next iteration reads (`input.fill_(idx)`, `tokens.append(tok)`).
_IN_PLACE_WRITES = frozenset({
    "fill_", "copy_", "index_fill_", "index_copy_", "scatter_", "masked_fill_", "append", "extend", "insert",
})  # fmt: skip
# Calls that queue no GPU work when nothing they are given is a GPU tensor.
_HOST_BUILTINS = frozenset({
    "sum", "len", "min", "max", "abs", "round", "float", "int", "str", "isinstance", "hasattr", "getattr", "dict",
    "list", "tuple", "range",
})  # fmt: skip
_HOST_METHODS = frozenset({"append", "extend", "values", "items", "keys", "get", "update", "format", "write", "copy", "setdefault"})


def drives_loop(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """The value `sync` reads decides whether `loop` goes on (an `if ...: break` / `return`, the `while`
    test), or flows into a GPU input that the loop's next iteration reads: each iteration needs it on the host."""
    derived = _host_values(model, sync, loop)
    if _decides_exit(model, sync.node, derived, loop):
        return True
    return _carried_to_next_iteration(model, sync, derived, loop)


def needs_host_every_iteration(model: SemanticModel, loop: Loop, syncs: list[HostSync]) -> bool:
    """Every iteration of `loop` waits for a GPU value on the host to go on: one of `syncs` (the host reads
    in the loop) `drives_loop` and runs every iteration, or the loop leaves on a test of a GPU value that
    gpulint cannot tell for sure is one (`ni = topi[0][0]; if ni == EOS: break`). Each iteration waits for the
    GPU anyway; the other reads in it add a copy, not a stall."""
    residency = model.residency
    for sync in syncs:
        if model.is_inside(sync.node, loop) and residency.rate_limit_guard(sync.node, loop) is None and drives_loop(model, sync, loop):
            return True
    flow = model.dataflow
    for condition in flow.conditions:
        if not (isinstance(condition, cst.If) and flow.inside(condition, loop) and model.enclosing_loops(condition)[:1] == [loop]):
            continue
        every_iteration = residency.rate_limit_guard(condition, loop) is None
        if every_iteration and _leaves_loop(model, condition, loop) and _tests_gpu_value(model, condition.test):
            return True
    return False


def _tests_gpu_value(model: SemanticModel, test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.BooleanOperation):
        return _tests_gpu_value(model, test.left) or _tests_gpu_value(model, test.right)
    if isinstance(test, cst.UnaryOperation):
        return _tests_gpu_value(model, test.expression)
    if isinstance(test, cst.Comparison):
        if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons):
            return False
        return any(model.residency.is_gpu(side) for side in (test.left, *(c.comparator for c in test.comparisons)))
    return model.residency.is_gpu(test)


def _host_values(model: SemanticModel, sync: HostSync, loop: Loop) -> set[str]:
    """Names the loop assigns from the read, directly or through host computations of it."""
    flow = model.dataflow
    found: set[str] = set()
    name = _assigned_name(model, sync.node)
    if name is not None:
        found.add(name)
    for _ in range(_MAX_HOPS):
        added = False
        for key in list(found):
            for read in flow.reads_in(key, loop):
                target = _assigned_name(model, _value_root(model, read))
                if target is not None and target not in found:
                    found.add(target)
                    added = True
        if not added:
            break
    return found


def _value_root(model: SemanticModel, node: cst.CSTNode) -> cst.CSTNode:
    """The whole right-hand side `node` is part of (`torch.multinomial(w, 1)[0]` for `w`)."""
    child = node
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, (cst.Assign, cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return child
        child = ancestor
    return child


def _assigned_name(model: SemanticModel, node: cst.CSTNode) -> Optional[str]:
    """`v` in `v = <node>` (through calls chained after it: `x.cpu().numpy()`, `tensor(...).long().to(d)`)."""
    value = node
    while True:
        parent = model.parent.get(value)
        if isinstance(parent, cst.Attribute) and parent.value is value:
            value = parent
        elif isinstance(parent, cst.Call) and parent.func is value:
            value = parent
        else:
            break
    assignment = model.parent.get(value)
    if isinstance(assignment, cst.Assign) and assignment.value is value and len(assignment.targets) == 1:
        return dotted_name(assignment.targets[0].target)
    return None


def _decides_exit(model: SemanticModel, node: cst.CSTNode, derived: set[str], loop: Loop) -> bool:
    """The read (or a host value derived from it) is in the test of the `while` loop itself, or of an `if`
    in the loop whose branch leaves the loop (`break` / `return`)."""
    flow = model.dataflow
    tests: list[tuple[cst.BaseExpression, cst.CSTNode]] = []
    if isinstance(loop, cst.While):
        tests.append((loop.test, loop))
    for condition in flow.conditions:
        if isinstance(condition, cst.If) and flow.inside(condition, loop) and model.enclosing_loops(condition)[:1] == [loop]:
            tests.append((condition.test, condition))
    for test, holder in tests:
        reads_value = flow.inside(node, test) or any(flow.reads_in(key, test) for key in derived)
        if reads_value and (holder is loop or _leaves_loop(model, holder, loop)):
            return True
    return False


def _leaves_loop(model: SemanticModel, branch: cst.If, loop: Loop) -> bool:
    """A `break` of `loop` or a `return` in the `if`'s body or its `else`."""

    class _Exits(cst.CSTVisitor):
        found = False

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, node: cst.Lambda) -> bool:
            return False

        def visit_Break(self, node: cst.Break) -> None:
            if model.enclosing_loops(node)[:1] == [loop]:
                self.found = True

        def visit_Return(self, node: cst.Return) -> None:
            self.found = True

    exits = _Exits()
    branch.body.visit(exits)
    if branch.orelse is not None:
        branch.orelse.visit(exits)
    return exits.found


def _carried_to_next_iteration(model: SemanticModel, sync: HostSync, derived: set[str], loop: Loop) -> bool:
    """A GPU input of the loop (read by a model or a GPU op before the read, in the iteration) is rebuilt
    from the host value (`x = torch.tensor([[tok]], device=d)`: a derived name) or filled with it in place
    (`input.fill_(word_idx)`, `tokens.append(tok)`)."""
    if not derived:
        return False
    flow = model.dataflow
    statement = model.enclosing_statement(sync.node)
    carried = set(derived)
    for call in model.calls_inside(loop):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _IN_PLACE_WRITES:
            if any(flow.reads_in(key, arg.value) for arg in call.args for key in derived):
                receiver = dotted_name(func.value)
                if receiver is not None:
                    carried.add(receiver)
    for key in carried:
        for read in flow.reads_in(key, loop):
            if flow.before(read, statement) and any(_runs_on_gpu(model, call) for call in _calls_given(model, read)):
                return True
    return False


def _calls_given(model: SemanticModel, node: cst.CSTNode) -> Iterator[cst.Call]:
    """The calls `node` is an argument of (`model(input, hidden)`, `torch.cat([input, t])`)."""
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.Call) and not model.is_inside(node, ancestor.func):
            yield ancestor
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return


def _runs_on_gpu(model: SemanticModel, call: cst.Call) -> bool:
    residency = model.residency
    return residency.is_module(call.func) or residency.is_gpu_module(call.func) or residency.is_gpu(call)


def queue_drained(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """Earlier in the same iteration the host waited for the whole device (`torch.cuda.synchronize()`, or a
    timing helper that synchronizes), and nothing since queued GPU work: the read copies a finished value."""
    flow = model.dataflow
    statement = model.enclosing_statement(sync.node)
    scope = model.scope_of(sync.node)
    memo = model.memo(f"drains the device every iteration of loop {id(loop)}")
    drains = []
    for call in model.calls_inside(loop):
        if not flow.before(call, statement):
            break  # in source order: the rest come after the read
        if call not in memo:
            memo[call] = _drains(model, call, loop)
        if memo[call]:
            drains.append(call)
    if not drains:
        return False
    last = max(drains, key=lambda call: flow.order[call])
    if model.enclosing_loops(last)[:1] != model.enclosing_loops(sync.node)[:1]:
        return False
    between = [call for call in flow.calls_between(last, statement, scope)]
    between += [call for call in model.calls_inside(statement) if flow.before(call, sync.node)]
    if any(_queues_gpu_work(model, call) for call in between):
        return False
    return not _gpu_arithmetic_between(model, last, statement, loop)


def _drains(model: SemanticModel, call: cst.Call, loop: Loop) -> bool:
    """`torch.cuda.synchronize()` (or a project helper that calls it every time) that runs every iteration:
    no branch on the way to the loop but `if torch.cuda.is_available():` and `with` blocks."""
    name = model.call_name(call) or ""
    func = call.func
    drains = name == "torch.cuda.synchronize" or (
        isinstance(func, cst.Attribute) and func.attr.value == "synchronize" and isinstance(func.value, cst.Call)
        and (model.call_name(func.value) or "") == "torch.cuda.current_stream"
    )  # fmt: skip
    if not drains:
        callee = model.callee(call)
        drains = callee is not None and any(
            entry[0] in ("synchronize", "barrier") or (entry[0] == "clock" and len(entry) > 2 and entry[2]) for entry in callee.syncs
        )
    if not drains:
        return False
    for ancestor in model.ancestors(call):
        if ancestor is loop:
            return True
        if isinstance(ancestor, cst.If) and "is_available" not in model.code(ancestor.test):
            return False
        branches = (cst.Else, cst.Try, cst.ExceptHandler, cst.Finally, cst.For, cst.While, cst.FunctionDef, cst.Lambda, cst.IfExp)
        if isinstance(ancestor, branches):
            return False
    return False


def _queues_gpu_work(model: SemanticModel, call: cst.Call) -> bool:
    """Whether `call` may queue GPU work: only clock reads, `torch.cuda` queries and host bookkeeping on
    host values (`times.append(t)`, `sum(timings.values())`) surely do not."""
    residency = model.residency
    name = model.call_name(call) or ""
    if name in CLOCKS or name.startswith("torch.cuda."):
        return False
    if any(not a.star and residency.is_gpu(a.value) for a in call.args):
        return True
    func = call.func
    if isinstance(func, cst.Name) and func.value in _HOST_BUILTINS and not model.bindings_of(func.value, call):
        return False
    if isinstance(func, cst.Attribute) and func.attr.value in _HOST_METHODS and not residency.is_gpu(func.value):
        return False
    return True


def _gpu_arithmetic_between(model: SemanticModel, start: cst.CSTNode, statement: cst.CSTNode, loop: Loop) -> bool:
    """An assignment between `start` and `statement` whose value is a GPU tensor (`x = a * b` queues a kernel)."""
    flow, residency = model.dataflow, model.residency
    for key, writes in flow.writes.items():
        for write in flow.writes_in(key, loop):
            if write.value is None or not flow.before(start, write.statement) or not flow.before(write.statement, statement):
                continue
            if residency.is_gpu(write.value):
                return True
    return False
