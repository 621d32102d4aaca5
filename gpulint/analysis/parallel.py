"""Data parallelism: `nn.DataParallel` wrappers and whether they can spread over several GPUs;
`DistributedDataParallel` wrappers and gradient accumulation that still all-reduces every micro-step."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.hot_loops import is_training_step
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.inline_scripts import declares_inline_script
from gpulint.analysis.shipped_paths import one_as_shipped
from gpulint.analysis.value_resolution import LITERAL

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

DATA_PARALLEL = "torch.nn.DataParallel"
DATA_PARALLEL_FUNCTION = "torch.nn.parallel.data_parallel"
DEVICE_COUNT = "torch.cuda.device_count"
_CANONICAL = {"torch.nn.parallel.data_parallel.data_parallel": DATA_PARALLEL_FUNCTION}


@dataclass
class DataParallelCall:
    call: cst.Call
    device_ids: cst.Arg | None
    several_gpus: bool  # device_ids absent or naming several devices, or under a `device_count() > 1` guard
    why: str  # what makes it multi-GPU, for the message


def _device_ids(call: cst.Call, position: int) -> cst.Arg | None:
    positional = [a for a in call.args if a.keyword is None and not a.star]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "device_ids":
            return arg
    return positional[position] if len(positional) > position else None


def _counts_devices(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`node` calls `torch.cuda.device_count()`, or names a variable assigned from it (`n_gpu`)."""
    for call in model.calls:
        if model.call_name(call) == DEVICE_COUNT and model.is_inside(call, node):
            return True
    names = [node] if isinstance(node, (cst.Name, cst.Attribute)) else []
    for child in _sub_expressions(node):
        if isinstance(child, (cst.Name, cst.Attribute)):
            names.append(child)
    for name in names:
        leaf = name.attr.value if isinstance(name, cst.Attribute) else name.value
        for binder in model.bindings_of(leaf, name) if isinstance(name, cst.Name) else _attribute_binders(model, leaf):
            if isinstance(binder, cst.Assign) and any(
                model.call_name(c) == DEVICE_COUNT and model.is_inside(c, binder.value) for c in model.calls
            ):
                return True
    return False


def _attribute_binders(model: SemanticModel, attr: str) -> list[cst.CSTNode]:
    """Assignments to `<anything>.attr` (`args.n_gpu = torch.cuda.device_count()`)."""
    found = []
    for node in model.attributes:
        if node.attr.value == attr:
            parent = model.parent.get(model.parent.get(node))
            if isinstance(parent, cst.Assign):
                found.append(parent)
    return found


def _sub_expressions(node: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class _Walk(cst.CSTVisitor):
        def on_visit(self, child: cst.CSTNode) -> bool:
            found.append(child)
            return True

    node.visit(_Walk())
    return found


def _guarded_by_device_count(model: SemanticModel, call: cst.Call) -> bool:
    for ancestor in model.ancestors(call):
        if isinstance(ancestor, (cst.If, cst.IfExp)) and _counts_devices(model, ancestor.test):
            return True
    return False


def find_data_parallel(model: SemanticModel) -> list[DataParallelCall]:
    found = []
    for call in model.calls:
        qualified = model.call_name(call)
        qualified = _CANONICAL.get(qualified or "", qualified)
        info = model.local_class_of(qualified)
        if info is not None and model.is_subclass_of(info.node.name.value, DATA_PARALLEL):
            qualified = DATA_PARALLEL
        if qualified == DATA_PARALLEL:
            device_ids = _device_ids(call, 1)
        elif qualified == DATA_PARALLEL_FUNCTION:
            device_ids = _device_ids(call, 2)
        else:
            continue
        several, why = _several_gpus(model, call, device_ids)
        found.append(DataParallelCall(call, device_ids, several, why))
    return found


def _several_gpus(model: SemanticModel, call: cst.Call, device_ids: cst.Arg | None) -> tuple[bool, str]:
    value = device_ids.value if device_ids is not None else None
    if isinstance(value, (cst.List, cst.Tuple)) and not any(isinstance(e, cst.StarredElement) for e in value.elements):
        return len(value.elements) >= 2, f"`device_ids` names {len(value.elements)} GPUs"
    if _guarded_by_device_count(model, call):
        return True, "under a `torch.cuda.device_count()` check"
    if value is None or (isinstance(value, cst.Name) and value.value == "None"):
        if shipped_gpu_count(model) == 1:
            return False, ""  # the code is written for the one GPU it names (`num_gpus = 1`): a pass-through there
        return True, "it spreads over every visible GPU"
    if _counts_devices(model, value):
        return True, "`device_ids` spans `torch.cuda.device_count()` GPUs"
    resolved = model.values.setting(value)
    if resolved is not None and resolved.value is None and resolved.origin != LITERAL and shipped_gpu_count(model) != 1:
        # `--gpus` left out (`nargs="+"`, `default=None`): DataParallel then takes every visible GPU
        return True, f"`device_ids` is `None` unless given, the {resolved.describe(model)}: it spreads over every visible GPU"
    return False, ""  # device ids from elsewhere: may well be one GPU


# A name the code gives its number of GPUs: `num_gpus`, `n_gpu`, `ngpu`, `gpus`, `gpu_count` (not `gpu`: an index).
_GPU_COUNT = re.compile(r"^((num_?|n_?)gpus?|gpus|gpu_count)$", re.IGNORECASE)


def shipped_gpu_count(model: SemanticModel) -> int | None:
    """The number of GPUs the code says it is written for: a name read as a GPU count (`_GPU_COUNT`) that every
    assignment of the module sets to the same integer literal and the code reads (`out.view(batch_size // num_gpus,
    ...)`: each replica's share of the batch); None when there is none, when one is computed
    (`torch.cuda.device_count()`, a flag), or a function takes it as a parameter."""
    memo = model.memo("shipped gpu count")
    if model.module in memo:
        return memo[model.module]
    values: dict[str, set] = {}
    for node in _sub_expressions(model.module):
        if isinstance(node, cst.Param) and _GPU_COUNT.match(node.name.value):
            values.setdefault(node.name.value, set()).add(None)
        elif isinstance(node, (cst.For, cst.With, cst.NamedExpr)):
            targets = [node.target] if isinstance(node, (cst.For, cst.NamedExpr)) else [i.asname.name for i in node.items if i.asname]
            for target in targets:
                for name in _sub_expressions(target):
                    if isinstance(name, cst.Name) and _GPU_COUNT.match(name.value):
                        values.setdefault(name.value, set()).add(None)
        elif isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                names = [target] if isinstance(target, cst.Name) else [n for n in _sub_expressions(target) if isinstance(n, cst.Name)]
                for name in names:
                    if not _GPU_COUNT.match(name.value):
                        continue
                    literal = node.value if isinstance(target, cst.Name) and not isinstance(node, cst.AugAssign) else None
                    values.setdefault(name.value, set()).add(int(literal.value) if isinstance(literal, cst.Integer) else None)
    counts = set()
    for name, assigned in values.items():
        if _read(model, name):
            counts |= assigned
    found = counts.pop() if len(counts) == 1 else None
    memo[model.module] = found
    return found


def _read(model: SemanticModel, name: str) -> bool:
    """`name` is read somewhere in the module (not only assigned)."""
    return bool(model.dataflow.reads.get(name))


# ---- DistributedDataParallel -------------------------------------------------------------------------

DDP = frozenset({"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"})
# Contexts and switches that keep a backward pass from all-reducing: DDP's own, accelerate's, Fabric's.
_SYNC_SKIPS = frozenset({"no_sync", "accumulate", "no_backward_sync"})
_MODEL_NAME = re.compile(r"(^|_)(model|net|network|module)s?($|_|\d)", re.IGNORECASE)


def ddp_calls(model: SemanticModel) -> list[cst.Call]:
    """`DistributedDataParallel(...)` constructions (also through a subclass of this module)."""
    found = []
    for call in model.calls:
        qualified = model.call_name(call)
        info = model.local_class_of(qualified)
        if qualified in DDP or (info is not None and any(model.is_subclass_of(info.node.name.value, d) for d in DDP)):
            found.append(call)
    return found


@dataclass
class UnsyncedAccumulation:
    """Gradient accumulation where every micro-step's backward still all-reduces."""

    backward: cst.Call  # runs every micro-step
    step: cst.Call  # the optimizer step that runs every k micro-steps
    wrapper: cst.Call  # what makes the model data-parallel: `DistributedDataParallel(...)`, `accelerator.prepare(...)`


def unsynced_accumulation(model: SemanticModel) -> list[UnsyncedAccumulation]:
    """A data-parallel model (DDP, or a model given to `accelerator.prepare` / `fabric.setup`), a backward pass
    every iteration of a loop, the optimizer stepped only every k iterations (under `if ... % k == 0`, or after
    an inner micro-batch loop), and nothing that skips the gradient all-reduce on the other iterations
    (`model.no_sync()`, `accelerator.accumulate(model)`, `fabric.no_backward_sync(model)`,
    `model.require_backward_grad_sync = ...`)."""
    wrappers = ddp_calls(model) or [
        c for c in model.calls if model.frameworks.wrapper(c) is not None and any(_is_model(model, a.value) for a in c.args if not a.star)
        and not _one_process_accelerator(model, c)
    ]
    if not wrappers:
        return []
    flow = model.dataflow
    found = []
    for backward in model.method_calls("backward"):
        loops = model.enclosing_loops(backward)
        if not loops or not flow.runs_every_iteration(backward, loops[0]):
            continue
        inner = loops[0]
        steps = [c for c in model.calls_inside(inner) if is_training_step(model, c) and c.func.attr.value == "step"]
        if steps:
            step = next((s for s in steps if _under_modulo(model, s, inner)), None)
            region = inner
        elif len(loops) > 1:  # a micro-batch loop: `for micro in range(k): ... backward()`, then `optimizer.step()`
            region = loops[1]
            if _runs_once(model, inner):
                continue  # `for micro in range(accum)` with `accum` 1 as shipped: nothing is accumulated
            step = next((c for c in model.calls_inside(region) if is_training_step(model, c) and c.func.attr.value == "step" and flow.before(inner, c)), None)
        else:
            step = None
        if step is None or _skips_sync(model, region):
            continue
        found.append(UnsyncedAccumulation(backward, step, wrappers[0]))
    return found


def _one_process_accelerator(model: SemanticModel, wrapper: cst.Call) -> bool:
    """`accelerator.prepare(model, ...)` in a notebook, or in a single-file script with inline metadata (PEP 723,
    `uv run train.py`: `analysis/inline_scripts.py`), that never calls `notebook_launcher`: one process, so
    `accelerator.backward` has no gradients to all-reduce."""
    framework = model.frameworks.wrapper(wrapper)
    if framework is None or framework[0] != "accelerate" or not (model.is_notebook or declares_inline_script(model)):
        return False
    names = (model.call_name(c) or "" for c in model.calls)
    return not any(name.startswith("accelerate.") and name.endswith("notebook_launcher") for name in names)


def _runs_once(model: SemanticModel, loop: cst.CSTNode) -> bool:
    """`for _ in range(k)` where `k` is 1 as shipped."""
    if not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Call) or dotted_name(loop.iter.func) != "range":
        return False
    args = loop.iter.args
    return len(args) == 1 and not args[0].star and one_as_shipped(model, args[0].value)


def _is_model(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """An `nn.Module`, or a name that says it holds one (`model`, `net`) where its construction is elsewhere."""
    if model.residency.is_module(expr):
        return True
    name = dotted_name(expr)
    return name is not None and bool(_MODEL_NAME.search(name.rsplit(".", 1)[-1]))


def _under_modulo(model: SemanticModel, call: cst.Call, loop: cst.CSTNode) -> bool:
    for ancestor in model.ancestors(call):
        if ancestor is loop:
            return False
        if isinstance(ancestor, cst.If) and any(
            isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo) and not one_as_shipped(model, n.right)
            for n in _sub_expressions(ancestor.test)
        ):
            return True  # `% args.accumulation_steps` where the count is 1 as shipped steps every iteration
    return False


def _skips_sync(model: SemanticModel, region: cst.CSTNode) -> bool:
    """`model.no_sync()`, also picked as a value (`ctx = model.no_sync if ... else nullcontext`), a
    `require_backward_grad_sync` switch, or a project helper that enters `no_sync()` of the module it is given
    (edm's `with misc.ddp_sync(ddp, sync):`), inside `region`."""
    if any(
        (a.attr.value in _SYNC_SKIPS or a.attr.value == "require_backward_grad_sync") and model.is_inside(a, region)
        for a in model.attributes
    ):
        return True
    return any(_enters_no_sync(model, call) for call in model.calls_inside(region))


def _enters_no_sync(model: SemanticModel, call: cst.Call) -> bool:
    callee = model.callee(call)
    return callee is not None and any(e[0] == "no_sync" for effects in callee.effects.values() for e in effects)


# ---- what a DataParallel wrapper is given ----------------------------------------------------------------

# Chained calls that return the wrapper itself (`DataParallel(m).cuda()`) or keep a tensor's batch (`x.to(dev)`).
_SAME_OBJECT = frozenset({"cuda", "to", "eval", "train", "float", "half", "cpu", "detach", "contiguous"})


def forwards_single_items(model: SemanticModel, wrapper: cst.Call) -> bool:
    """Every forward of the `DataParallel` wrapper in this module feeds a batch of one (`img.unsqueeze(0)`,
    `x[None]`, or a name bound to one and moved): `DataParallel` splits the batch's first dimension, so there is
    nothing to spread (a predictor over single images). False when the wrapper leaves the function (passed to a
    call, returned, stored on an object) or is never called here: who runs it is not known."""
    name = wrapper_bound_name(model, wrapper)
    if name is None:
        return False
    scope = model.scope_of(wrapper)
    start = model.line_of(wrapper)
    forwards = 0
    for node in model.dataflow.reads.get(name, ()):
        if not isinstance(node, cst.Name) or model.scope_of(node) is not scope:
            continue
        if model.line_of(node) < start or any(model.is_inside(node, w.call) for w in model.data_parallel_calls):
            continue  # the module it wraps (here or in the other branch), before it is wrapped
        parent = model.parent.get(node)
        if isinstance(parent, cst.Call) and parent.func is node:
            first = next((a.value for a in parent.args if a.keyword is None and not a.star), None)
            if first is None or not _single_item(model, first, 0):
                return False
            forwards += 1
        elif isinstance(parent, cst.Attribute) and parent.value is node:
            continue  # `model.eval()`, `model.module.freeze_bn()`
        elif isinstance(parent, cst.Arg):
            handed = _forwards_of_callee(model, parent)
            if handed is None:
                return False  # handed to code that may batch
            forwards += handed
        elif isinstance(parent, (cst.Return, cst.Element, cst.DictElement)):
            return False  # handed to code that may batch
    return forwards > 0


def _forwards_of_callee(model: SemanticModel, arg: cst.Arg) -> int | None:
    """How many forwards a project function the wrapper is handed to runs on it, when each feeds a batch of one
    (`evaluate_coco(dataset, model)` calling `model(img.unsqueeze(dim=0))` per image, in this module or another,
    through the helpers it hands it to); None when it may batch, or is not known to run it."""
    call = model.parent.get(arg)
    callee = model.callee(call) if isinstance(call, cst.Call) and arg in call.args else None
    if callee is None or callee.kind != "function":
        return None
    param = next((name for given, name in model.arguments_to(call, callee) if given is arg), None)
    effects = callee.effects.get(param, ()) if param is not None else ()
    forwards = [e for e in effects if e[0] == "forward"]
    if not forwards or not all(e[2] for e in forwards):
        return None  # (its other effects are its outputs': read on the host, moved)
    return len(forwards)


def wrapper_bound_name(model: SemanticModel, wrapper: cst.Call) -> str | None:
    """`model` in `model = nn.DataParallel(net)` (also `.cuda()` / `.to(device)` on the wrapper)."""
    node: cst.CSTNode = wrapper
    while True:
        parent = model.parent.get(node)
        grand = model.parent.get(parent) if isinstance(parent, cst.Attribute) else None
        if isinstance(grand, cst.Call) and grand.func is parent and parent.attr.value in _SAME_OBJECT:
            node = grand
            continue
        break
    assign = model.parent.get(node)
    if isinstance(assign, cst.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0].target, cst.Name):
        return assign.targets[0].target.value
    return None


def _single_item(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> bool:
    if depth > 4:
        return False
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        method = expr.func.attr.value
        if method == "unsqueeze":
            dim = next((a.value for a in expr.args), None)
            return isinstance(dim, cst.Integer) and dim.value == "0"
        if method in _SAME_OBJECT:
            return _single_item(model, expr.func.value, depth + 1)
        return False
    if isinstance(expr, cst.Subscript):  # `x[None]`, `x[None, ...]`
        first = expr.slice[0].slice if expr.slice else None
        return isinstance(first, cst.Index) and isinstance(first.value, cst.Name) and first.value.value == "None"
    if isinstance(expr, cst.Name):
        writes = model.dataflow.reaching_writes(expr.value, expr)
        return bool(writes) and all(w.value is not None and w.source is None and _single_item(model, w.value, depth + 1) for w in writes)
    return False


# ---- DataParallel as the fallback of a DistributedDataParallel launch ----------------------------------------

def ddp_fallback(model: SemanticModel, wrapper: cst.Call) -> cst.Call | None:
    """The `DistributedDataParallel(..., device_ids=[one device])` of the same `if` chain (or conditional
    expression) whose other arm builds `wrapper`: `if opt["dist"]: net = DDP(net, device_ids=[rank]) elif
    opt["num_gpu"] > 1: net = DataParallel(net)`. The code runs one process per GPU when it is launched
    distributed (a launcher, `torchrun`): its multi-GPU path is DDP already, and `DataParallel` is what a
    plain `python train.py` falls back to. A DDP over every GPU of its process (no `device_ids`: one process
    per machine, SageMaker's multi-host branch) leaves one machine's GPUs to `DataParallel`: None."""
    function = model.enclosing_function(wrapper)
    for ancestor in model.ancestors(wrapper):
        if ancestor is function:
            break
        if isinstance(ancestor, cst.IfExp):
            arms: list[cst.CSTNode] = [ancestor.body, ancestor.orelse]
        elif isinstance(ancestor, cst.If):
            arms = _chain_arms(model, ancestor)
        else:
            continue
        for arm in arms:
            if model.is_inside(wrapper, arm):
                continue
            for call in model.calls_inside(arm):
                if _per_process_ddp(model, call):
                    return call
    return None


def _chain_arms(model: SemanticModel, node: cst.If) -> list[cst.CSTNode]:
    """The bodies of every arm of the `if` / `elif` / `else` chain `node` belongs to."""
    top = node
    while isinstance(model.parent.get(top), cst.If) and model.parent.get(top).orelse is top:
        top = model.parent.get(top)
    arms: list[cst.CSTNode] = []
    current: cst.CSTNode | None = top
    while isinstance(current, cst.If):
        arms.append(current.body)
        current = current.orelse
    if isinstance(current, cst.Else):
        arms.append(current.body)
    return arms


def _per_process_ddp(model: SemanticModel, call: cst.Call) -> bool:
    """`DistributedDataParallel(module, device_ids=[rank])`: one GPU per process."""
    if model.call_name(call) not in DDP:
        return False
    ids = _device_ids(call, 1)
    return ids is not None and isinstance(ids.value, (cst.List, cst.Tuple)) and len(ids.value.elements) == 1
