"""CUDA streams: stream and event objects, `with torch.cuda.stream(s):` blocks, what crosses them, the waits.

A block on a side stream `s` races with the current stream twice: when it reads a GPU value the current
stream produced before the block (it needs `s.wait_stream(torch.cuda.current_stream())` before the block),
and when the current stream reads what the block produced (it needs
`torch.cuda.current_stream().wait_stream(s)` before the read). Inside the block `current_stream()` is `s`,
so a wait placed there does nothing. Values written to `self.x` in a block are followed into the class's
other methods: the data-prefetcher shape, where `preload()` copies on the side stream and `__next__()`
hands the batch to the training loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.dataflow import Write
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.residency import CUDA

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

STREAM_CONSTRUCTORS = frozenset({"torch.cuda.Stream", "torch.Stream", "torch.cuda.ExternalStream", "torch.cuda.streams.Stream"})
EVENT_CONSTRUCTORS = frozenset({"torch.cuda.Event", "torch.Event", "torch.cuda.streams.Event"})
CURRENT_STREAM = frozenset({"torch.cuda.current_stream", "torch.cuda.default_stream"})
STREAM_CONTEXTS = frozenset({"torch.cuda.stream", "torch.cuda.StreamContext"})
_METADATA = frozenset({"record_stream", "shape", "dtype", "device", "is_cuda", "size", "dim", "ndim"})
# Tensor methods that only make a new view of the same memory: they queue no kernel.
_VIEWS = frozenset({"view", "view_as", "unsqueeze", "squeeze", "expand", "expand_as", "permute", "transpose", "t", "detach", "T"})
_HOST_SIDE_MOVES = frozenset({"cuda", "to", "pin_memory", "record_stream"})
GRADIENTS = "<gradients>"
# Calls that make a stream (or the host) wait for other work: each one stalls the queue it runs on.
WAIT_METHODS = frozenset({"wait_stream", "wait_event", "wait", "synchronize"})


@dataclass
class Input:
    key: str
    read: cst.BaseExpression  # the first read in the block
    write: Write  # where it was produced, before the block


@dataclass
class Output:
    key: str
    write: Optional[Write]  # None for the gradients a `backward()` in the block produces
    read: cst.CSTNode  # the first read after the block with no wait before it


@dataclass
class StreamBlock:
    node: cst.With
    context: cst.BaseExpression  # `torch.cuda.stream(s)` or `s`
    stream: cst.BaseExpression
    key: str
    inputs: list[Input] = field(default_factory=list)
    self_waits: list[cst.Call] = field(default_factory=list)  # waits inside the block: no-ops
    unsynced_outputs: list[Output] = field(default_factory=list)
    records_streams: bool = False  # some `record_stream` call covers the outputs


class StreamAnalysis:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.flow = model.dataflow
        self.residency = model.residency

    # ---- objects ------------------------------------------------------------------------------

    def _bound_to(self, expr: cst.BaseExpression, qualified: frozenset[str]) -> bool:
        model = self.model
        if isinstance(expr, cst.Call):
            name = model.call_name(expr)
            if name in qualified:
                return True
            func = expr.func
            # `s.record_event()` makes an event
            return qualified is EVENT_CONSTRUCTORS and isinstance(func, cst.Attribute) and func.attr.value == "record_event"
        key = dotted_name(expr)
        if key is None:
            return False
        writes = self.flow.reaching_writes(key, expr) or self.flow.writes.get(key, [])
        return bool(writes) and all(w.value is not None and self._bound_to(w.value, qualified) for w in writes)

    def is_stream(self, expr: cst.BaseExpression) -> bool:
        return self._bound_to(expr, STREAM_CONSTRUCTORS)

    def is_current_stream(self, expr: cst.BaseExpression) -> bool:
        return self._bound_to(expr, CURRENT_STREAM)

    def is_event(self, expr: cst.BaseExpression) -> bool:
        return self._bound_to(expr, EVENT_CONSTRUCTORS)

    # ---- blocks -------------------------------------------------------------------------------

    @cached_property
    def blocks(self) -> list[StreamBlock]:
        found = []
        for node in self.model.blocks:
            if not isinstance(node, cst.With):
                continue
            for item in node.items:
                block = self._block(node, item.item)
                if block is not None:
                    found.append(block)
                    break
        for block in found:
            self._analyse(block, found)
        return found

    def _block(self, node: cst.With, context: cst.BaseExpression) -> Optional[StreamBlock]:
        if isinstance(context, cst.Call) and self.model.call_name(context) in STREAM_CONTEXTS:
            if not context.args:
                return None
            stream = context.args[0].value
            if isinstance(stream, cst.Name) and stream.value == "None":
                return None  # `torch.cuda.stream(None)` is a no-op
            if self.is_current_stream(stream):
                return None
        elif self.is_stream(context):
            stream = context
        else:
            return None
        key = dotted_name(stream)
        if key is None:
            return None
        return StreamBlock(node, context, stream, key)

    def _in_block_on(self, node: cst.CSTNode, key: str, blocks: list[StreamBlock]) -> bool:
        return any(b.key == key and self.flow.inside(node, b.node.body) for b in blocks)

    # ---- waits --------------------------------------------------------------------------------

    def _waits_for_current(self, call: cst.Call, key: str) -> bool:
        """Orders `key`'s later work after the current stream: `s.wait_stream(...)`, `s.wait_event(e)`,
        `e.wait(s)`, or a device / current-stream synchronize."""
        func = call.func
        name = self.model.call_name(call)
        if name == "torch.cuda.synchronize":
            return True
        if not isinstance(func, cst.Attribute):
            return False
        receiver = dotted_name(func.value)
        method = func.attr.value
        if method in ("wait_stream", "wait_event") and receiver == key:
            return True
        if method == "wait" and any(dotted_name(a.value) == key for a in call.args):
            return True
        if method == "synchronize" and receiver != key:
            return True
        return False

    def _waits_for_stream(self, call: cst.Call, key: str) -> bool:
        """Orders the current stream (or the host) after `key`: `cur.wait_stream(s)`, an event wait, or a
        synchronize of `s`, an event, or the device."""
        func = call.func
        if self.model.call_name(call) == "torch.cuda.synchronize":
            return True
        if not isinstance(func, cst.Attribute):
            return False
        receiver = dotted_name(func.value)
        method = func.attr.value
        if method == "wait_stream":
            return receiver != key and any(dotted_name(a.value) == key for a in call.args)
        if method == "wait_event":
            return receiver != key
        if method == "wait":
            return self.is_event(func.value) and not any(dotted_name(a.value) == key for a in call.args)
        if method == "synchronize":
            return receiver == key or self.is_event(func.value) or self.is_current_stream(func.value)
        return False

    def _is_self_wait(self, call: cst.Call, key: str) -> bool:
        """Inside a block on `key`, `current_stream()` is `key`: these waits order nothing."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "wait_stream" or not call.args:
            return False
        receiver, argument = func.value, call.args[0].value
        receiver_key = dotted_name(receiver)
        if receiver_key == key and isinstance(argument, cst.Call) and self.model.call_name(argument) in CURRENT_STREAM:
            return True
        return isinstance(receiver, cst.Call) and self.model.call_name(receiver) in CURRENT_STREAM

    # ---- analysis -----------------------------------------------------------------------------

    def _analyse(self, block: StreamBlock, blocks: list[StreamBlock]) -> None:
        model, flow = self.model, self.flow
        body = block.node.body
        scope = model.scope_of(block.node)
        block.self_waits = [c for c in model.calls if flow.inside(c, body) and self._is_self_wait(c, block.key)]
        self._find_inputs(block, blocks, scope)
        self._find_outputs(block, blocks, scope)

    def _find_inputs(self, block: StreamBlock, blocks: list[StreamBlock], scope: cst.CSTNode) -> None:
        model, flow, residency = self.model, self.flow, self.residency
        body = block.node.body
        seen: set[str] = set()
        for key, reads in flow.reads.items():
            if key == block.key or key.startswith(block.key + ".") or key in seen:
                continue
            inside = sorted((r for r in reads if flow.inside(r, body)), key=lambda r: flow.order[r])
            if not inside:
                continue
            candidates = []
            for read in inside:
                writes = flow.reaching_writes(key, read)
                if not writes or any(flow.inside(w.statement, body) for w in writes):
                    break  # produced in the block itself from here on
                candidates.append((read, writes))
            if not candidates:
                continue
            reads_before_rebinding = [r for r, _ in candidates]
            if all(self._host_side_use(r) for r in reads_before_rebinding):
                continue
            read, writes = candidates[0]
            write = max(writes, key=lambda w: flow.order[w.statement])
            if model.scope_of(write.statement) is not scope or not flow.before(write.statement, block.node):
                continue
            if self._in_block_on(write.statement, block.key, blocks):
                continue
            value = write.value if write.value is not None else write.source
            if value is None or write.is_augmented and not residency.is_gpu(value):
                continue
            if residency.is_host(value) or residency.is_module(value) or self.is_stream(value) or self.is_event(value):
                continue
            if not residency.is_gpu(value):
                continue  # a Python object, or a tensor gpulint cannot place: not reported
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("next", "iter", "getattr"):
                continue
            if self._nothing_pending(value):
                continue
            if any(self._waits_for_current(c, block.key) and not self._in_block_on(c, block.key, blocks)
                   for c in flow.calls_between(write.statement, block.node, scope)):  # fmt: skip
                continue
            seen.add(key)
            block.inputs.append(Input(key, read, write))

    def _nothing_pending(self, value: cst.BaseExpression, depth: int = 0) -> bool:
        """No kernel can still be writing this value: a bare allocation (`torch.empty(...)`), a copy the host
        waited for (`torch.tensor(data).cuda()`), or a view or slice of one."""
        while True:
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _VIEWS:
                value = value.func.value
            elif isinstance(value, cst.Subscript):
                value = value.value
            else:
                break
        if isinstance(value, cst.Call):
            return self.residency.factory(value) in ("empty", "empty_like", "empty_strided") or self.is_blocking_copy(value)
        key = dotted_name(value)
        if key is None or depth > 4:
            return False
        writes = self.flow.reaching_writes(key, value)
        return bool(writes) and all(w.value is not None and not w.is_augmented and self._nothing_pending(w.value, depth + 1) for w in writes)

    def is_blocking_copy(self, value: cst.Call) -> bool:
        """`torch.tensor(data).cuda()`, `x.to(device)` of a host value: a copy without `non_blocking=True`
        returns once it is done, so nothing is left queued."""
        if not self.residency.moves_to_cuda(value):
            return False
        if any(a.keyword is not None and a.keyword.value == "non_blocking" and self.model.code(a.value) != "False" for a in value.args):
            return False
        return not self.residency.is_gpu(value.func.value)

    def _host_side_use(self, read: cst.BaseExpression) -> bool:
        """Called, moved from the host (`x.cuda()`, `x.pin_memory()`), or asked for metadata only."""
        parent = self.model.parent.get(read)
        if isinstance(parent, cst.Call) and parent.func is read:
            return True
        if isinstance(parent, cst.Attribute) and parent.value is read:
            method = parent.attr.value
            if method in _METADATA:
                return True
            grand = self.model.parent.get(parent)
            if method in _HOST_SIDE_MOVES and isinstance(grand, cst.Call) and grand.func is parent:
                move = self.residency.move(grand)
                if method in ("pin_memory", "record_stream") or (move is not None and move[0] == CUDA):
                    return not self.residency.is_gpu(read, certain=True)
        return False

    def _find_outputs(self, block: StreamBlock, blocks: list[StreamBlock], scope: cst.CSTNode) -> None:
        """The first unsynced read of each value the block produces, in each function that reads it."""
        model, flow = self.model, self.flow
        body = block.node.body
        produced: dict[str, list[Write]] = {}
        for key, writes in flow.writes.items():
            for write in writes:
                if flow.inside(write.statement, body) and key != block.key:
                    if write.value is not None and (self.residency.is_host(write.value) or self._collective_handle(write.value)):
                        continue
                    produced.setdefault(key, []).append(write)
        waited_after = self._waited_after(block, blocks, scope)
        for key, writes in produced.items():
            reported: set[int] = set()  # the functions already reported for this value
            for read in sorted(flow.reads.get(key, ()), key=lambda r: flow.order[r]):
                read_scope = model.scope_of(read)
                if id(read_scope) in reported:
                    continue
                if flow.inside(read, body) or self._in_block_on(read, block.key, blocks) or self._metadata_use(read):
                    continue
                reaching = [w for w in flow.reaching_writes(key, read) if w in writes and not flow.exclusive(w.statement, read)]
                if not reaching:
                    continue  # never sees the block's value (another branch, or rebound in between)
                if self._protected(read, block, blocks, scope):
                    continue
                if read_scope is not scope and (waited_after or self._synced_elsewhere(block, blocks)):
                    continue  # the block's own function waits, or the class syncs where gpulint cannot follow
                if self._handed_out(read) and self._consumers_wait(read, block, blocks):
                    continue
                reported.add(id(read_scope))
                block.unsynced_outputs.append(Output(key, reaching[-1], read))
        backward = [c for c in model.calls if flow.inside(c, body) and isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward"]
        if backward:
            for call in model.calls:
                if flow.inside(call, body) or model.scope_of(call) is not scope or not flow.before(block.node, call):
                    continue
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value == "step" and "opt" in model.code(func.value).lower():
                    if not self._protected(call, block, blocks, scope):
                        block.unsynced_outputs.append(Output(GRADIENTS, None, call))
                    break
        reads_scope = block.node if not block.key.startswith("self.") else (flow.enclosing_class(block.node) or model.module)
        block.records_streams = any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value == "record_stream" and flow.inside(c, reads_scope)
            for c in model.calls
        ) or any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value == "record_stream" and model.scope_of(c) is scope
            for c in model.calls
        )

    def _collective_handle(self, value: cst.BaseExpression) -> bool:
        """`torch.distributed.all_reduce(..., async_op=True)` returns a work handle (or None), not a tensor."""
        return isinstance(value, cst.Call) and (self.model.call_name(value) or "").startswith("torch.distributed.")

    def _waited_after(self, block: StreamBlock, blocks: list[StreamBlock], scope: cst.CSTNode) -> bool:
        """The block's function waits for the stream right after the block, on every path (a wait in the
        same statement list as the block, or in one around it): whatever reads the results later is covered."""
        model, flow = self.model, self.flow
        for call in model.calls:
            if model.scope_of(call) is not scope or not flow.before(block.node, call) or self._in_block_on(call, block.key, blocks):
                continue
            if not self._waits_for_stream(call, block.key):
                continue
            statement = model.enclosing_statement(call)
            container = model.parent.get(statement)
            if container is not None and model.is_inside(block.node, container):
                return True
        return False

    def _synced_elsewhere(self, block: StreamBlock, blocks: list[StreamBlock]) -> bool:
        """The class (for `self.` streams) or module waits for the stream, or synchronizes the device,
        somewhere outside the block: cross-method paths gpulint cannot follow are then left alone."""
        model, flow = self.model, self.flow
        region = flow.enclosing_class(block.node) if block.key.startswith("self.") else None
        for call in model.calls:
            if region is not None and not flow.inside(call, region):
                continue
            if flow.inside(call, block.node) or self._in_block_on(call, block.key, blocks):
                continue
            if self._waits_for_stream(call, block.key):
                return True
        return False

    def _handed_out(self, read: cst.CSTNode) -> bool:
        """`return x` / `yield x`: the value goes to the caller, which may wait before it uses it."""
        for ancestor in self.model.ancestors(read):
            if isinstance(ancestor, (cst.Return, cst.Yield)):
                return True
            if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                return False
        return False

    def _consumers_wait(self, read: cst.CSTNode, block: StreamBlock, blocks: list[StreamBlock]) -> bool:
        """Every caller of the returning function (in this module) waits for the stream before it uses the
        result: the prefetcher whose `_prefetch()` runs on the side stream and whose loop waits first."""
        model, flow = self.model, self.flow
        func = model.enclosing_function(read)
        if func is None:
            return False
        name = func.name.value
        callers = [
            c for c in model.calls
            if (isinstance(c.func, cst.Name) and c.func.value == name)
            or (isinstance(c.func, cst.Attribute) and c.func.attr.value == name and model.code(c.func.value) == "self")
        ]  # fmt: skip
        if not callers:
            return False
        for call in callers:
            assignment = model.parent.get(call)
            if not isinstance(assignment, cst.Assign) or len(assignment.targets) != 1:
                return False
            target = dotted_name(assignment.targets[0].target)
            if target is None:
                return False
            caller_scope = model.scope_of(call)
            for use in flow.reads.get(target, ()):
                if model.scope_of(use) is not caller_scope or self._metadata_use(use):
                    continue
                if not any(w.statement is assignment for w in flow.reaching_writes(target, use)):
                    continue
                if not self._protected(use, block, blocks, model.scope_of(block.node)):
                    return False
        return True

    def _metadata_use(self, read: cst.CSTNode) -> bool:
        parent = self.model.parent.get(read)
        if isinstance(parent, cst.Attribute) and parent.value is read and parent.attr.value in _METADATA:
            return True
        # `x is None` / `x is not None` looks at the Python object only
        if isinstance(parent, cst.Comparison) and all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in parent.comparisons):
            return True
        return False

    def _protected(self, read: cst.CSTNode, block: StreamBlock, blocks: list[StreamBlock], scope: cst.CSTNode) -> bool:
        model, flow = self.model, self.flow
        read_scope = model.scope_of(read)
        after_block = read_scope is scope and flow.before(block.node, read)
        for call in model.calls:
            if model.scope_of(call) is not read_scope or not flow.before(call, read):
                continue
            if after_block and flow.order[call] < flow.order[block.node]:
                continue
            if self._in_block_on(call, block.key, blocks):
                continue
            if self._waits_for_stream(call, block.key):
                return True
        return False
