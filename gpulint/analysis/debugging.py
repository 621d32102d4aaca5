"""Debugging switches that slow every step when left on: autograd anomaly detection, the autograd profiler and
NVTX ranges, CUDA sync debug mode, `CUDA_LAUNCH_BLOCKING=1`, Lightning's `Trainer(detect_anomaly=True)`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from gpulint.analysis.hot_loops import is_hot
from gpulint.analysis.residency import TRAIN
from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

ANOMALY_SWITCH = frozenset({"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"})
ANOMALY_CONTEXT = frozenset({"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"})
PROFILER_CONTEXT = frozenset({
    "torch.autograd.profiler.profile", "torch.autograd.profiler.emit_nvtx", "torch.autograd.profile", "torch.autograd.emit_nvtx",
})  # fmt: skip
SYNC_DEBUG_MODE = "torch.cuda.set_sync_debug_mode"
LAUNCH_BLOCKING = "CUDA_LAUNCH_BLOCKING"
# Names of flags, conditions and functions that say the code is there for debugging.
_DEBUG_WORDS = re.compile(r"debug|anomal|detect|profil|nvtx|verbose|sanity|trace|launch_blocking|sync_mode", re.IGNORECASE)


@dataclass(frozen=True)
class DebugSwitch:
    node: cst.CSTNode  # what to report: the call, the `with` item, the assignment
    what: str  # "autograd anomaly detection", for messages
    removable: Optional[cst.CSTNode]  # a statement of its own that turns it on (a removal fix may delete it)


def debug_switches(model: SemanticModel) -> list[DebugSwitch]:
    """The debugging switches turned on in training code (a module with a training loop, or one a framework
    trains), not under a debug flag (`if args.debug:`, `set_detect_anomaly(args.detect_anomaly)`, a function
    named `debug_*`)."""
    found = [
        switch for switch in _switches(model)
        if not _under_debug_flag(model, switch.node) and not _turned_off_later(model, switch.node)
    ]
    if not found or not (any(is_hot(model, loop) for loop in model.loops) or model.frameworks.drives_training):
        return []
    return sorted(found, key=lambda s: (model.line_of(s.node), model.range(s.node).start.column))


def _switches(model: SemanticModel) -> Iterator[DebugSwitch]:
    for call in model.calls:
        name = model.call_name(call)
        if name in ANOMALY_SWITCH and _turned_on(model, _first(call, "mode"), on=(True,)):
            yield DebugSwitch(call, "autograd anomaly detection", _own_statement(model, call))
        elif name in ANOMALY_CONTEXT and _used_as_context(model, call) and _enabled(model, call):
            yield DebugSwitch(call, "autograd anomaly detection", None)
        elif name in PROFILER_CONTEXT and _used_as_context(model, call) and _enabled(model, call, positional=True) and _around_training(model, call):
            yield DebugSwitch(call, f"the autograd profiler (`{name.rsplit('.', 1)[1]}`)", None)
        elif name == SYNC_DEBUG_MODE and _turned_on(model, _first(call, "debug_mode"), on=(1, 2, "warn", "error")):
            yield DebugSwitch(call, "CUDA sync debug mode", _own_statement(model, call))
        elif name in ("os.environ.setdefault", "os.putenv") and _sets_launch_blocking(model, call.args[:2]):
            yield DebugSwitch(call, f"`{LAUNCH_BLOCKING}=1`", _own_statement(model, call))
    for attribute in model.attributes:
        if attribute.attr.value != "environ":
            continue
        item = model.parent.get(attribute)
        target = model.parent.get(item)
        assign = model.parent.get(target)
        if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and _environ_item(model, item):
            ok, value = literal_value(assign.value)
            if ok and str(value) == "1":
                yield DebugSwitch(assign, f"`{LAUNCH_BLOCKING}=1`", assign)
    for value, what in model.frameworks.debug_settings:
        yield DebugSwitch(value, what, None)


_OFF = {SYNC_DEBUG_MODE: (0, "default")} | {name: (False,) for name in ANOMALY_SWITCH}


def _turned_off_later(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`set_sync_debug_mode("warn")` ... `set_sync_debug_mode("default")` in the same function: a region the
    author scoped on purpose (a measurement), not a switch left on."""
    name = model.call_name(node) if isinstance(node, cst.Call) else None
    if name not in _OFF:
        return False
    keyword = "debug_mode" if name == SYNC_DEBUG_MODE else "mode"
    scope = _enclosing_function(model, node)
    return any(
        model.call_name(other) == name
        and model.line_of(other) > model.line_of(node)
        and _enclosing_function(model, other) is scope
        and _turned_on(model, _first(other, keyword), on=_OFF[name])
        for other in model.calls
    )


def _enclosing_function(model: SemanticModel, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
    return next((a for a in model.ancestors(node) if isinstance(a, cst.FunctionDef)), None)


def _first(call: cst.Call, keyword: str) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if (arg.keyword is None and not arg.star) or (arg.keyword is not None and arg.keyword.value == keyword):
            return arg.value
    return None


def _turned_on(model: SemanticModel, value: Optional[cst.BaseExpression], on: tuple) -> bool:
    """A literal (or a constant / default resolved to one) among `on`; a flag we cannot see is off."""
    resolved = model.values.resolve(value) if value is not None else None
    return resolved is not None and any(type(resolved.value) is type(v) and resolved.value == v for v in on)


def _enabled(model: SemanticModel, call: cst.Call, positional: bool = False) -> bool:
    """A context without `enabled=<anything but True>`; with `positional`, `enabled` is also its first parameter
    (`profile(enabled=True, ...)`, `emit_nvtx(enabled=True, ...)`: `profile(args.profile, use_cuda=True)`)."""
    for index, arg in enumerate(call.args):
        named = arg.keyword is not None and arg.keyword.value == "enabled"
        if named or (positional and index == 0 and arg.keyword is None and not arg.star):
            return _turned_on(model, arg.value, on=(True,))
    return True


def _used_as_context(model: SemanticModel, call: cst.Call) -> bool:
    parent = model.parent.get(call)
    return isinstance(parent, (cst.WithItem, cst.Decorator))


def _around_training(model: SemanticModel, call: cst.Call) -> bool:
    """The profiled block holds a training loop, or sits in per-step training code."""
    block = model.parent.get(model.parent.get(call))  # the `with` statement, or the decorated function
    if block is not None and any(is_hot(model, loop) and model.is_inside(loop, block) for loop in model.loops):
        return True
    return model.residency.step_loop(call)[1] == TRAIN


def _environ_item(model: SemanticModel, target: cst.CSTNode) -> bool:
    """`os.environ["CUDA_LAUNCH_BLOCKING"]`."""
    if not isinstance(target, cst.Subscript) or model.qualified_name(target.value) != "os.environ" or len(target.slice) != 1:
        return False
    index = target.slice[0].slice
    if not isinstance(index, cst.Index):
        return False
    ok, key = literal_value(index.value)
    return ok and key == LAUNCH_BLOCKING


def _sets_launch_blocking(model: SemanticModel, args) -> bool:
    if len(args) != 2 or any(a.star or a.keyword is not None for a in args):
        return False
    (key_ok, key), (value_ok, value) = literal_value(args[0].value), literal_value(args[1].value)
    return key_ok and value_ok and key == LAUNCH_BLOCKING and str(value) == "1"


def _own_statement(model: SemanticModel, call: cst.Call) -> Optional[cst.CSTNode]:
    """The `Expr` statement when the call is one of its own (nothing uses its result)."""
    parent = model.parent.get(call)
    return parent if isinstance(parent, cst.Expr) else None


def _under_debug_flag(model: SemanticModel, node: cst.CSTNode) -> bool:
    """Inside `if <debug flag>:` (or its `else`), a conditional expression, or a function named for debugging."""
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)) and _DEBUG_WORDS.search(model.code(ancestor.test)):
            return True
        if isinstance(ancestor, cst.IfExp):
            return True  # `detect_anomaly() if flag else nullcontext()`
        if isinstance(ancestor, cst.FunctionDef) and _DEBUG_WORDS.search(ancestor.name.value):
            return True
    return False

