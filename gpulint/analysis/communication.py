"""Asynchronous communication, and the device synchronize that guards it.

Point-to-point transfers (`dist.isend` / `dist.irecv`, `dist.batch_isend_irecv(ops)` of `dist.P2POp`s) and
collectives started with `async_op=True` return work handles; `work.wait()` orders the transfer on the
current stream only. A `torch.cuda.synchronize()` after them, on the same path of the same function, is the
documented workaround for a race in batched p2p (Megatron's `batch_p2p_sync`: "to protect against race
condition when using batch_isend_irecv()"): a correctness barrier, not a stall a rewrite could remove.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# torch.distributed calls that always start a transfer and return without waiting for it.
ASYNC_P2P = frozenset({
    "torch.distributed.isend", "torch.distributed.irecv", "torch.distributed.batch_isend_irecv", "torch.distributed.P2POp",
})  # fmt: skip
SYNCHRONIZE = "torch.cuda.synchronize"
# A `.wait()` receiver that is a CUDA event or stream (or a thread's), not a work handle.
NOT_A_WORK_HANDLE = re.compile(r"event|stream|thread|cond|barrier|lock", re.IGNORECASE)


# Process-group backends that hold CPU tensors: a device chosen by testing for one is the host on that path.
HOST_BACKENDS = frozenset({"gloo", "mpi"})


def chosen_by_backend(literals: list) -> bool:
    """A device condition that names a host backend (`"cpu" if dist.get_backend(group) == "gloo" else "cuda"`):
    the group decides, and detectron2-style `all_gather` helpers pass a gloo group, so the GPU is not known."""
    return any(isinstance(v, str) and v in HOST_BACKENDS for v in literals)


def starts_async_communication(name: str, async_op: bool) -> bool:
    """`name` (a qualified call name) starts a transfer without waiting for it: a p2p call, or any
    `torch.distributed` collective given `async_op=True`."""
    return name in ASYNC_P2P or (async_op and name.startswith("torch.distributed."))


def waits_for_work(method: str, receiver: str, has_args: bool) -> bool:
    """`req.wait()` / `handle.wait()`: the wait of a communication work handle (not `event.wait(stream)`)."""
    return method == "wait" and not has_args and not NOT_A_WORK_HANDLE.search(receiver)


def guards_communication(model: SemanticModel, call: cst.Call) -> bool:
    """`call` (a device synchronize) is the first one after asynchronous communication, or the wait of its
    work handle, earlier in the same function and not in a branch beside it: it makes the transfer safe to use."""
    flow = model.dataflow
    scope = model.scope_of(call)
    pending = False
    for other in model.calls_inside(scope):
        if flow.order[other] >= flow.order[call]:
            break  # in source order: the rest come after it
        if not flow.before(other, call) or model.scope_of(other) is not scope or _exclusive(model, other, call):
            continue
        if _communicates(model, other):
            pending = True
        elif model.call_name(other) == SYNCHRONIZE:
            pending = False  # that one was the barrier
    return pending


def _communicates(model: SemanticModel, call: cst.Call) -> bool:
    func = call.func
    if isinstance(func, cst.Attribute) and waits_for_work(func.attr.value, model.code(func.value), bool(call.args)):
        return True
    async_op = any(a.keyword is not None and a.keyword.value == "async_op" and model.code(a.value) != "False" for a in call.args)
    return starts_async_communication(model.call_name(call) or "", async_op)


def _exclusive(model: SemanticModel, a: cst.CSTNode, b: cst.CSTNode) -> bool:
    """`a` and `b` sit in different branches of one `if`: no run reaches both."""
    above_a = {id(n): child for child, n in _pairs(model, a)}
    for child_b, ancestor in _pairs(model, b):
        child_a = above_a.get(id(ancestor))
        if child_a is not None:
            return isinstance(ancestor, cst.If) and child_a is not child_b and (ancestor.body is child_a or ancestor.body is child_b)
    return False


def _pairs(model: SemanticModel, node: cst.CSTNode):
    """(child, ancestor) up the tree from `node`."""
    child = node
    for ancestor in model.ancestors(node):
        yield child, ancestor
        child = ancestor
