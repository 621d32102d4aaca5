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


# ---- a CUDA question that only picks the process group's backend ----------------------------------------------

# The backends `torch.distributed.init_process_group` takes by name.
BACKEND_NAMES = frozenset({"nccl", "gloo", "mpi", "ucc", "hccl", "xccl", "cpu:gloo,cuda:nccl"})
_AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.accelerator.is_available"})
_INIT_GROUP = frozenset({"torch.distributed.init_process_group", "torch.distributed.distributed_c10d.init_process_group"})
# Words a statement that may place something on a device is spelled with (`.cuda()`, `.to(`, `set_device`, `device`,
# `local_rank`, `gpu`): a branch with one of them may do more than name the backend.
_DEVICE_WORDS = re.compile(r"cuda|device|gpu|rank|^to$|^accelerat", re.IGNORECASE)


def backend_questions(tree, qualify) -> set[int]:
    """The `torch.cuda.is_available` attributes (their `id`s) of `tree` (an `ast.Module`) whose answer only
    chooses the process group's backend:

        if torch.cuda.is_available():
            dist.init_process_group(backend="nccl")
        else:
            dist.init_process_group(backend="gloo")

        backend = "nccl" if torch.cuda.is_available() else "gloo"

    The question says nothing about where the model or the batches are: "nccl" on a GPU machine, "gloo" elsewhere,
    and the code may run on either; such a test is no evidence that the module puts anything on a GPU (evidence
    elsewhere in it still counts). A branch that does anything besides naming the backend (a statement spelled with
    `cuda`, `device`, `rank`, `.to(`...) keeps the question as evidence."""
    import ast

    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            question = _availability(node.test, qualify)
            if question is not None and _picks_backend(node.body + node.orelse, qualify):
                found.add(id(question))
        elif isinstance(node, ast.IfExp):
            question = _availability(node.test, qualify)
            arms = [node.body, node.orelse]
            if question is not None and all(isinstance(a, ast.Constant) and a.value in BACKEND_NAMES for a in arms):
                found.add(id(question))
    return found


def _availability(test, qualify):
    """The `torch.cuda.is_available` attribute of `torch.cuda.is_available()` or `not torch.cuda.is_available()`."""
    import ast

    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Call) and not test.args and not test.keywords and qualify(test.func) in _AVAILABILITY:
        return test.func
    return None


def _picks_backend(statements: list, qualify) -> bool:
    """The statements of both branches name a backend (`init_process_group("nccl", rank=rank, ...)`, or `backend =
    "nccl"`), and nothing else they do is spelled with a device word (a log line, `return Context.from_torch_distributed()`)."""
    import ast

    named = False
    pending = list(statements)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Call) and qualify(node.func) in _INIT_GROUP:
            named = named or any(isinstance(n, ast.Constant) and n.value in BACKEND_NAMES for n in ast.walk(node))
            continue  # its `rank=` / `world_size=` name processes, not devices
        if isinstance(node, ast.Constant) and node.value in BACKEND_NAMES:
            named = True
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda"):
            return False
        elif isinstance(node, ast.Attribute) and _DEVICE_WORDS.search(node.attr):
            return False
        elif isinstance(node, ast.Name) and _DEVICE_WORDS.search(node.id):
            return False
        elif isinstance(node, ast.keyword) and node.arg is not None and _DEVICE_WORDS.search(node.arg):
            return False
        pending.extend(ast.iter_child_nodes(node))
    return named
