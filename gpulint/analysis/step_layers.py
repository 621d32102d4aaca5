"""How long a training step lasts at least, from the layers of the model it trains, where the code builds them.

A training step of eager PyTorch launches a few kernels for each layer of its model (forward, backward, the update),
and on steps of small batches the host's launches, not the GPU's work, set its length. Measured on the H200 host
(bench/results/cost_facts.md section 1, the host-bound rows: `nn.Sequential` stacks trained with SGD), a step of
3 layers takes 1.1 ms, of 5 layers 1.2 ms, of 11 layers 2.05 ms, of 15 layers 2.6 ms and of 19 layers 3.4 ms:
`step_ms(layers) = 0.7 + 0.12 x layers` is at or under every one of them (`STEP_BASE_MS`, `STEP_MS_PER_LAYER`). A GPU
of more work per step only makes it longer, so it is a floor whatever the batch.

`layers_at_least` counts the `torch.nn` layers (not containers, losses or `Identity`) a module expression builds:
`nn.Sequential(...)` of layers, a `nn.Module` class of this module (each layer its `__init__` builds, counted once
even when built in a loop; the layers of the module classes of this module it builds, likewise; and the modules its
constructor is given: `SimMIM(vit)`), one of torchvision's ResNets and ViTs (`NETWORK_LAYERS`, their leaf modules),
through a name's assignment, `.to(device)` / `.cuda()` and `DataParallel` / `torch.compile` wrappers. What it cannot
see (another library's network, a class of another module, layers built from a config) adds nothing: the count is a
floor, never a guess.

`training_step_ms` reads the models a loader's training pass runs: the modules called in the loop that iterates it
(and in the functions of this module that loop calls), the modules handed over with it (`train(model, loss_fn,
loader)`, `trainer.fit(model, loader)`), and the `LightningModule` whose `train_dataloader` hook builds it. The
largest is the step's model. `epoch_length.pass_length` uses it for the steps of a pass (GPU104).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.loader_flow import LoaderInfo
    from gpulint.analysis.model import SemanticModel

STEP_BASE_MS = 0.7
STEP_MS_PER_LAYER = 0.12
_MAX_DEPTH = 8
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "Parameter", "ParameterList", "ParameterDict", "Identity", "Module"})
_SAME_MODULE_METHODS = frozenset({"to", "cuda", "float", "half", "train", "eval", "double"})
_WRAPPERS = frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.DistributedDataParallel",
    "torch.nn.parallel.distributed.DistributedDataParallel", "torch.compile",
})  # fmt: skip
# torchvision's networks: their leaf modules, from the architectures torchvision builds (a floor: a leaf such as
# `MultiheadAttention` launches several kernels). ResNets: a stem of 4, per BasicBlock 5 (two convolutions and
# norms, a ReLU), per Bottleneck 7, 2 a downsampling shortcut, pooling and head 2; ViTs: per encoder block 9 (2 norms,
# attention, dropout, an MLP of 5), a patch convolution, a dropout, a norm and the head 4.
NETWORK_LAYERS = {
    "resnet18": 4 + 8 * 5 + 3 * 2 + 2, "resnet34": 4 + 16 * 5 + 3 * 2 + 2,
    "resnet50": 4 + 16 * 7 + 4 * 2 + 2, "resnet101": 4 + 33 * 7 + 4 * 2 + 2, "resnet152": 4 + 50 * 7 + 4 * 2 + 2,
    "vit_b_16": 12 * 9 + 4, "vit_b_32": 12 * 9 + 4, "vit_l_16": 24 * 9 + 4, "vit_l_32": 24 * 9 + 4, "vit_h_14": 32 * 9 + 4,
}  # fmt: skip
_MODULE_BASES = ("torch.nn.Module", "pytorch_lightning.LightningModule", "lightning.LightningModule",
                 "lightning.pytorch.LightningModule", "pytorch_lightning.core.LightningModule")


def step_ms(layers: int) -> float:
    return STEP_BASE_MS + STEP_MS_PER_LAYER * layers


def layers_at_least(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> int:
    """The `torch.nn` layers the module `expr` builds or names, at least (module docstring); 0 when unknown."""
    if depth > _MAX_DEPTH:
        return 0
    if isinstance(expr, (cst.Name, cst.Attribute)):
        key = dotted_name(expr)
        writes = model.dataflow.reaching_writes(key, expr) if key is not None else []
        if not writes or any(w.value is None or w.is_augmented for w in writes):
            return 0
        return min(layers_at_least(model, w.value, depth + 1) for w in writes)  # type: ignore[arg-type]
    if not isinstance(expr, cst.Call):
        return 0
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in _SAME_MODULE_METHODS:
        return layers_at_least(model, func.value, depth + 1)
    name = model.call_name(expr) or ""
    if name in _WRAPPERS:
        return layers_at_least(model, expr.args[0].value, depth + 1) if expr.args and expr.args[0].keyword is None else 0
    if name.startswith("torch.nn."):
        return _built_layers(model, expr, depth)
    if name.startswith("torchvision.models."):
        return NETWORK_LAYERS.get(name.rsplit(".", 1)[1], 0)
    info = model.local_class_of(name)
    if info is not None and _is_module_class(model, info.node.name.value):
        return _class_layers(model, info.node, depth + 1) + _handed_in(model, expr, depth)
    return 0


def _handed_in(model: SemanticModel, call: cst.Call, depth: int) -> int:
    """The layers of the modules a constructor is given (`SimMIM(vit)`, `vit = torchvision.models.vit_b_32()`): the
    class wraps them."""
    return sum(layers_at_least(model, a.value, depth + 1) for a in call.args if not a.star and model.residency.is_module(a.value))


def _is_module_class(model: SemanticModel, name: str) -> bool:
    return any(model.is_subclass_of(name, base) for base in _MODULE_BASES)


def _layer_call(model: SemanticModel, call: cst.Call) -> int:
    """1 for a call building one `torch.nn` layer; 0 for anything else (a container, a loss, `Identity`)."""
    name = model.call_name(call) or ""
    if not name.startswith("torch.nn.") or name.count(".") != 2:
        return 0
    short = name.rsplit(".", 1)[1]
    if not short[:1].isupper() or short in _CONTAINERS or short.endswith("Loss"):
        return 0
    return 1


def _built_layers(model: SemanticModel, call: cst.Call, depth: int) -> int:
    """The layers a `torch.nn` call builds: itself, or a container's layers written in its arguments (and the module
    classes of this module built there)."""
    own = _layer_call(model, call)
    if own or (model.call_name(call) or "").rsplit(".", 1)[1] not in ("Sequential", "ModuleList"):
        return own
    total = 0
    for inner in model.calls_inside(call):
        if inner is call:
            continue
        total += _layer_call(model, inner) or _local_class_layers(model, inner, depth)
    return total


def _local_class_layers(model: SemanticModel, call: cst.Call, depth: int) -> int:
    info = model.local_class_of(model.call_name(call))
    if info is None or not _is_module_class(model, info.node.name.value) or depth > _MAX_DEPTH:
        return 0
    return _class_layers(model, info.node, depth + 1)


def _class_layers(model: SemanticModel, node: cst.ClassDef, depth: int) -> int:
    """The layers the methods of a module class of this module (but `forward` and the training hooks) build, each
    construction once."""
    memo = model.memo("layers a module class builds at least")
    if node in memo:
        return memo[node]
    memo[node] = 0  # (a class building itself)
    total = 0
    for statement in node.body.body if isinstance(node.body, cst.IndentedBlock) else ():
        if not isinstance(statement, cst.FunctionDef) or statement.name.value != "__init__":
            continue
        for inner in model.calls_inside(statement):
            if _inside_container_call(model, inner, statement):
                continue  # counted with its `nn.Sequential(...)`
            total += (_layer_call(model, inner) or _local_class_layers(model, inner, depth) or _container_layers(model, inner, depth)
                      or _library_network(model, inner))
    memo[node] = total
    return total


def _library_network(model: SemanticModel, call: cst.Call) -> int:
    name = model.call_name(call) or ""
    return NETWORK_LAYERS.get(name.rsplit(".", 1)[1], 0) if name.startswith("torchvision.models.") else 0


def _container_layers(model: SemanticModel, call: cst.Call, depth: int) -> int:
    name = model.call_name(call) or ""
    return _built_layers(model, call, depth) if name in ("torch.nn.Sequential", "torch.nn.ModuleList") else 0


def _inside_container_call(model: SemanticModel, call: cst.Call, scope: cst.CSTNode) -> bool:
    node = model.parent.get(call)
    while node is not None and node is not scope:
        if isinstance(node, cst.Call) and (model.call_name(node) or "") in ("torch.nn.Sequential", "torch.nn.ModuleList"):
            return True
        node = model.parent.get(node)
    return False


def training_step_ms(model: SemanticModel, info: LoaderInfo) -> Optional[float]:
    """A training step of the pass over `info`'s loader lasts at least this long, from the layers of the largest model
    the code shows it running (module docstring); None when it shows none."""
    layers = training_layers(model, info)
    return step_ms(layers) if layers else None


def training_layers(model: SemanticModel, info: LoaderInfo) -> int:
    """The layers of the largest model the training pass over `info`'s loader runs, at least; 0 when none is known."""
    return max(_step_layers(model, info), default=0)


def _step_layers(model: SemanticModel, info: LoaderInfo) -> list[int]:
    residency = model.residency
    found: list[cst.BaseExpression] = []
    counts: list[int] = []
    for iteration in info.iterations:
        if iteration.loop is not None:
            for call in model.calls_inside(iteration.loop):
                func = call.func
                called = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
                if isinstance(called, (cst.Name, cst.Attribute)) and residency.is_module(called):
                    found.append(called)
                found.extend(_handed_modules(model, call))  # `loss = loss_fn(score_model, x)`: a helper runs it
        for call in iteration.via:
            found.extend(_handed_modules(model, call))
    for call in _handing_calls(model, info):
        found.extend(_handed_modules(model, call))
    for feed in info.feeds:
        node = feed.node
        if isinstance(node, cst.Call):
            found.extend(_handed_modules(model, node))
        elif isinstance(node, cst.FunctionDef):  # `def train_dataloader(self)` of the LightningModule it trains
            owner = model.parent.get(model.parent.get(node))
            if isinstance(owner, cst.ClassDef) and _is_module_class(model, owner.name.value):
                counts.append(_class_layers(model, owner, 1))
    return counts + [layers_at_least(model, expr) for expr in found]


def _handing_calls(model: SemanticModel, info: LoaderInfo) -> list[cst.Call]:
    """Calls of this module that take the loader by its name (`train(model, loss_fn, train_loader)`)."""
    names: set[str] = set()
    call = info.loader.call
    parent = model.parent.get(call)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        names.add(parent.targets[0].target.value)
    if not names:
        return []
    return [c for c in model.calls if any(not a.star and isinstance(a.value, cst.Name) and a.value.value in names for a in c.args)]


def _handed_modules(model: SemanticModel, call: cst.Call) -> list[cst.BaseExpression]:
    residency = model.residency
    return [a.value for a in call.args if not a.star and isinstance(a.value, (cst.Name, cst.Attribute, cst.Call)) and residency.is_module(a.value)]
