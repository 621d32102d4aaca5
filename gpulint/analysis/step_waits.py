"""Steps that already wait for the GPU every iteration, before a host read: the read adds no stall of its own.

`waited_before(model, sync, loop)`: the node, earlier in the same iteration of `loop`, where the host waits for
the whole device every iteration (`torch.cuda.synchronize()` for a per-step timer, or a project helper that
synchronizes on every call), when no step work has been queued between it and the read: no forward of a
module, no backward pass or optimizer step, no project function that trains or is handed a module. The read
then waits only for the bookkeeping launched since the drain (a metric all-reduce, a loss scaled for logging),
microseconds, whatever the logging block around it does (`lingua`'s loop synchronizes for its iteration timer
and then logs `loss.item()`).

Why only then: with one full drain per iteration, a second read at R costs
`max(A, G1) + max(B, G2) - max(A + B, G1 + G2)`, where G1 / A are the GPU / host work queued between the drain
and R, and G2 / B the rest of the iteration. With no step work in G1 that is at most G1, a few small kernels.
Once G1 holds a forward or a backward pass (a drain at the top of the step, the read at its end) the read can
cost up to the host work after it (loading the next batch in process) and it stays reported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.host_reads import drains_before, drains_every_iteration
from gpulint.analysis.hot_loops import is_training_step

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel
    from gpulint.analysis.residency import HostSync

# Methods of a module that queue no forward (`model.parameters()` for a FLOP count, `model.train()`).
_MODULE_BOOKKEEPING = frozenset({
    "eval", "train", "parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
    "children", "named_children", "state_dict", "requires_grad_", "zero_grad", "get_submodule",
})  # fmt: skip


def waited_before(model: SemanticModel, sync: HostSync, loop: Loop) -> Optional[cst.Call]:
    flow = model.dataflow
    statement = model.enclosing_statement(sync.node)
    drains = drains_before(model, statement, loop)
    last = drains[-1] if drains else None
    if last is None or model.enclosing_loops(last)[:1] != [loop]:
        return None  # (a read in a loop nested in the step, after the drain, counts: `for t in counts: t.item()`)
    between = [call for call in model.calls_inside(loop) if flow.before(last, call) and flow.before(call, sync.node)]
    between += [call for call in model.calls_inside(statement) if call not in between and flow.before(call, sync.node)]
    return None if any(queues_step_work(model, call) for call in between) else last


def drained_after(model: SemanticModel, copy: cst.Call, loop: Loop) -> Optional[cst.Call]:
    """The full drain (`torch.cuda.synchronize()`, run every iteration) that follows `copy` in the same iteration
    of `loop` before any step work is queued: torchvision's detection reference synchronizes right after the
    copy to time the model. The host then waits for the copy at the drain whatever `non_blocking` says, so a
    non-blocking copy has nothing to overlap with (GPU105)."""
    flow = model.dataflow
    statement = model.enclosing_statement(copy)
    for call in model.calls_inside(loop):
        if not flow.before(statement, call):
            continue  # (in source order: the copy's statement and what comes before it)
        if model.enclosing_loops(call)[:1] == [loop] and drains_every_iteration(model, call, loop):
            return call
        if queues_step_work(model, call):
            return None
    return None


def queues_step_work(model: SemanticModel, call: cst.Call) -> bool:
    """A forward, a backward pass, an optimizer step, or a call that may run one (a project function that
    trains, any call handed a module)."""
    residency = model.residency
    if is_training_step(model, call):
        return True
    func = call.func
    if residency.is_module(func):
        return True  # `model(x)`
    method = func.attr.value if isinstance(func, cst.Attribute) else None
    if method is not None and method not in _MODULE_BOOKKEEPING and residency.is_module(func.value):
        return not _host_number(model, call)  # `model.generate(...)`, `model.module(x)`
    if any(not arg.star and residency.is_module(arg.value) for arg in call.args):
        return True  # `evaluate(model, loader)`
    callee = model.callee(call)
    if callee is not None and callee.trains:
        return True
    if isinstance(func, cst.Name) and func.value in model.functions:
        return any(_runs_step_work(model, function) for function in model.functions[func.value])
    return False


def _host_number(model: SemanticModel, call: cst.Call) -> bool:
    """`wps * model.flops_per_token()`: a method given nothing, whose value is an operand of arithmetic with a
    value not on the GPU: a count the module computes from its configuration, not a forward (which takes inputs)."""
    parent = model.parent.get(call)
    if call.args or not isinstance(parent, cst.BinaryOperation):
        return False
    other = parent.right if parent.left is call else parent.left
    return not model.residency.is_gpu(other)  # (`is_host` knows literals and clocks, not `wps = words / seconds`)


def _runs_step_work(model: SemanticModel, function: cst.FunctionDef) -> bool:
    """A function of this module that trains or runs a module (followed through the ones it calls)."""
    return model.through_calls(
        "queues step work", function,
        lambda here: any(
            is_training_step(model, c) or model.residency.is_module(c.func) for c in model.calls_inside(here)
        ),
    )  # fmt: skip


def waited_after(model: SemanticModel, sync: HostSync, loop: Loop) -> Optional[cst.CSTNode]:
    """The wait that follows `sync` at once in the same iteration of `loop`: a host read (`.item()`, `.cpu()`, a
    `torch.allclose` test), every iteration (not under a rate-limit guard), in the rest of `sync`'s statement or in the next statement of its
    block (for an `if`, `while` or `with`: its test or items), with no other statement between them. Two waits
    with nothing between but the launches of the second's inputs cost one: the first drains the queue, the second
    finds it nearly empty, and the host work the first serializes is only those launches (`max(A, G1) + max(B, G2) -
    max(A + B, G1 + G2)` is at most B, the host work between them: none here beyond launches; bench/results/
    cost_facts.md section 2). `loss = self._compute_loss(batch)` then `self.log(..., loss.item())`; a sampler's
    `p, x_next = self._update(x, t)` then `if not torch.allclose(x_next, x):` every step."""
    residency = model.residency
    flow = model.dataflow
    if sync.via is not None and isinstance(sync.node, cst.Call) and read_later_in_helper(model, sync.node, sync.via):
        return sync.node  # the helper itself reads to the host after its op, on every call (a loss's `.item()` logs)
    statement = model.enclosing_statement(sync.node)
    block = model.parent.get(statement)
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)) or statement not in body:
        return None
    index = list(body).index(statement)
    following = body[index + 1] if index + 1 < len(body) else None
    heads: list[cst.CSTNode] = []
    if isinstance(following, (cst.If, cst.While)):
        heads.append(following.test)
    elif isinstance(following, cst.With):
        heads.extend(item.item for item in following.items)
    elif isinstance(following, cst.SimpleStatementLine):
        heads.append(following)
    if isinstance(statement, cst.BaseCompoundStatement):
        return None  # (its body runs per element or on some steps: not "at once")
    for other in residency.host_syncs:  # (a size right after is the next finding of its own: not followed here)
        if other is sync or other.node is sync.node or residency.rate_limit_guard(other.node, loop) is not None:
            continue
        if model.enclosing_loops(other.node)[:1] != model.enclosing_loops(sync.node)[:1]:
            continue
        if _conditional_within(model, other.node, statement if model.is_inside(other.node, statement) else None):
            continue
        if model.is_inside(other.node, statement) and flow.before(sync.node, other.node):
            return other.node
        if any(model.is_inside(other.node, head) for head in heads):
            return other.node
    for head in heads:  # `torch.allclose(a, b)` / `torch.equal(a, b)` of GPU tensors: a Python bool, read from the GPU
        for call in model.calls_inside(head):
            if (model.call_name(call) or "") in _BOOL_READS and not _conditional_within(model, call, None):
                if any(not a.star and residency.is_gpu(a.value) for a in call.args):  # (likely: beside the reported wait)
                    return call
    return None


_BOOL_READS = frozenset({"torch.allclose", "torch.equal"})


def read_later_in_helper(model: SemanticModel, call: cst.Call, place: str) -> Optional[str]:
    """Where the project helper that `call` runs reads a tensor to the host (`.item()`, `.cpu()`) on every call, at
    a later line of its file than `place` (its data-dependent-size op): `compute_d_loss` masks its logits under a
    flag, then returns `Munch(real=loss_real.item(), ...)`. The op's wait then costs what two back-to-back waits
    cost (`waited_after`): the read drains the queue anyway a few launches later. A read of the helper's own
    tensors, or of what it computes from an argument not known to be on the host (`nets.discriminator(x)` of the
    modules it is handed); not one under a rate-limit guard or a branch on an option (the helper's facts leave
    those out), nor a test of a flag (`if use_con_reg:`)."""
    callee = model.callee(call)
    path, _, line = place.rpartition(":")
    if callee is None or not line.isdigit():
        return None
    residency = model.residency
    reads = [entry[2] for entry in callee.syncs if entry[0] == "sync" and entry[1] != _FLAG_TEST]
    for arg, param in model.arguments_to(call, callee):
        if not residency.is_host(arg.value):  # (the op's own inputs are on the GPU: so, likely, what it computes with)
            reads += [e[2] for e in callee.effects.get(param, ()) if e[0] == "sync" and e[1] != _FLAG_TEST and len(e) > 2]
    for read in reads:
        read_path, _, read_line = str(read).rpartition(":")
        if read_path == path and read_line.isdigit() and int(read_line) > int(line):
            return str(read)
    return None


# A helper's `if flag:` on a parameter: a sync only when a caller passes a tensor there, not a read it always does.
_FLAG_TEST = "a Python condition on a tensor"


def _conditional_within(model: SemanticModel, node: cst.CSTNode, statement: Optional[cst.CSTNode]) -> bool:
    """`node` runs only on some evaluations of its statement: the branch of a conditional expression, the right of
    `and`/`or`, a lambda or a comprehension."""
    child = node
    for ancestor in model.ancestors(node):
        if ancestor is statement or isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
        if isinstance(ancestor, cst.IfExp) and child is not ancestor.test:
            return True
        if isinstance(ancestor, cst.BooleanOperation) and child is ancestor.right:
            return True
        if isinstance(ancestor, (cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)):
            return True
        child = ancestor
    return False
