"""Training set-up: does this script train a model on CUDA, and what did it decide about precision and cuDNN."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.attribute_models import moves_resident_attribute, trains_resident_attribute
from gpulint.analysis.frameworks import ACCELERATE, qualified_is
from gpulint.analysis.convolutions import builds_convolution, library_conv_net, named_model
from gpulint.analysis.time_step_loops import time_step_loop
from gpulint.analysis.hot_loops import is_hot, trains
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.residency import TRAIN
from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Libraries that own precision and device placement: what they are configured with is not in this file.
PRECISION_FRAMEWORKS = ("lightning", "pytorch_lightning", "accelerate", "deepspeed", "apex", "transformers.Trainer")
_MIXED_PRECISION_WORDS = ("amp", "autocast", "fp16", "bf16", "mixed_precision", "mixed", "half", "precision")
_REDUCED_OR_DOUBLE_DTYPES = frozenset(
    {"torch.float16", "torch.half", "torch.bfloat16", "torch.float64", "torch.double", "torch.set_default_dtype"}
)  # fmt: skip
_APEX_PRECISION = ("amp", "fp16_utils")  # the apex packages that train in mixed precision
_PARAMETER_CASTS = frozenset({"half", "bfloat16", "double"})
_TF32_SETTINGS = frozenset({"allow_tf32", "fp32_precision", "set_float32_matmul_precision"})
_CUDNN_SETTINGS = frozenset(
    {"torch.backends.cudnn.benchmark", "torch.backends.cudnn.deterministic", "torch.use_deterministic_algorithms"}
)
_MODEL_FACTORIES = ("torchvision.models.", "timm.create_model", "torch.hub.load")


@dataclass
class TrainingSetup:
    model_moves: list[cst.Call]  # `model.to(device)` / `Net().cuda()`: a model moved to CUDA, in source order
    entry_script: bool  # runs training itself: a `__main__` guard, a module-level loop, a class training its `self` model
    trains: bool  # has a training loop (backward or optimizer step)
    first_backward: cst.Call | None
    mixed_precision: bool  # autocast, GradScaler, an `--amp` flag, a framework that owns precision
    non_float32_parameters: bool  # `.half()`, `.bfloat16()`, `.double()`, float16/bfloat16/float64 dtypes
    tf32_configured: bool
    cudnn_configured: bool  # `cudnn.benchmark`, `cudnn.deterministic`, `use_deterministic_algorithms`
    convolutions: bool
    toy_models: bool  # every model moved to CUDA is a toy model of linear layers (`analysis/model_size.py`)
    # every model is placed by DeepSpeed (or accelerate) and the script names a half precision (`--dtype fp16`,
    # `args.bf16`, `mixed_precision="bf16"`): its dtype is in the engine's config, most likely not float32
    engine_half_precision: bool = False
    # every model moved to CUDA runs a recurrent cell per time step from Python, or every training step loops over
    # time steps of a recurrent module (`analysis/time_step_loops.py`): kernel speed is not what the step waits for
    time_steps: bool = False
    # `torch.backends.cudnn.benchmark = False` written unconditionally, with nothing else asking for reproducible
    # convolutions: torch's default spelled out (not counted in `cudnn_configured`)
    cudnn_benchmark_off: cst.Assign | None = None
    # the model each of `model_moves` places (`net` of `net.to(device)`, of `accelerator.prepare(net, optimizer)`)
    moved_models: list[cst.BaseExpression] = field(default_factory=list)

    @property
    def cuda_training_script(self) -> bool:
        return bool(self.model_moves) and self.entry_script and self.trains


def is_model_expression(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """An `nn.Module` built here: `Net()`, `nn.Sequential(...)`, `torchvision.models.resnet18()`, a module-building
    function of this file, or a name bound to one of those (also through `.to(...)` / `.cuda()`)."""
    if depth > 4:
        return False
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda", "float", "half", "bfloat16", "double", "train"):
            return is_model_expression(model, func.value, depth + 1)
        if isinstance(func, cst.Attribute) and func.attr.value == "from_pretrained":
            return True
        qualified = model.call_name(expr) or ""
        if qualified.startswith("torch.nn.") and qualified.rsplit(".", 1)[1][:1].isupper():
            return True
        if qualified.startswith(_MODEL_FACTORIES):
            return True
        info = model.local_class_of(qualified)
        if info is not None:
            return model.is_subclass_of(info.node.name.value, "torch.nn.Module")
        callee = model.callee(expr)
        if callee is not None and callee.kind == "class" and callee.returns == ("module",):
            return True  # `VisionTransformer(config)` of models/modeling.py, an nn.Module of the project
        if callee is not None and callee.kind == "function" and callee.returns in (("module",), ("gpu_module",)):
            return True  # `build_backbone()` of another module, a factory that returns a model
        if _registry_classes(model, expr, lambda callee: callee.returns == ("module",)):
            return True  # `model_class()` with `model_class = METHODS[method]["model"]`, every entry a model class
        if isinstance(func, cst.Name) and not qualified:
            return any(
                is_model_expression(model, value, depth + 1)
                for function in model.functions.get(func.value, [])
                for ret in model.returns_of(function)
                if (value := ret.value) is not None
            )
        return False
    if isinstance(expr, cst.Name):
        return any(
            isinstance(binder, cst.Assign) and (value := _bound_value(binder, expr.value)) is not None
            and (is_model_expression(model, value, depth + 1) or _from_registry(model, value, expr))
            for binder in model.bindings_of(expr.value, expr)
        )  # fmt: skip
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        # `self.model = torch.nn.DataParallel(self.model)` then `self.model = self.model.cuda()`
        writes = model.dataflow.reaching_writes(f"self.{expr.attr.value}", expr)
        return bool(writes) and all(w.value is not None and is_model_expression(model, w.value, depth + 1) for w in writes)
    return False


def _looked_up_class(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`ModelClass(config=...)` moved to the device, where `ModelClass = getattr(importlib.import_module("models"),
    args.model_class)`: a class picked by name from a module and moved to the GPU is a model."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name)):
        return False
    binders = model.bindings_of(expr.func.value, expr.func)
    return bool(binders) and all(
        isinstance(b, cst.Assign) and isinstance(b.value, cst.Call) and isinstance(b.value.func, cst.Name)
        and b.value.func.value == "getattr" and len(b.value.args) == 2
        for b in binders
    )  # fmt: skip


def _from_registry(model: SemanticModel, value: cst.BaseExpression, name: cst.Name) -> bool:
    """`model = model_dict[opt.model](num_classes=100)`: a class looked up in a registry, and the name used as a
    module (`.parameters()`, `.train()`)."""
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Subscript) and model.residency.is_module(name)


def _project_call_bound_to_module(model: SemanticModel, move: cst.Call) -> bool:
    """`self.model = get_segmentation_model(model=args.model, ...).to(self.device)`: the value of a project
    factory whose result the project index cannot tell (`return models[name](**kwargs)`, a registry of
    builders), moved to the device and bound to a name or attribute used as a module (`.parameters()`,
    `.train()`): a model, as `_from_registry` reads `model_dict[opt.model](...)`."""
    built = move.func.value if isinstance(move.func, cst.Attribute) else None
    if not isinstance(built, cst.Call):
        return False
    callee = model.callee(built)
    if callee is None or callee.kind != "function" or callee.returns is not None:
        return False
    statement = model.parent.get(move)
    if not (isinstance(statement, cst.Assign) and statement.value is move and len(statement.targets) == 1):
        return False
    target = statement.targets[0].target
    return isinstance(target, (cst.Name, cst.Attribute)) and model.residency.is_module(target)


def _bound_value(binder: cst.Assign, name: str) -> cst.BaseExpression | None:
    """What `binder` gives `name`: its value, or the matching element of `netg, netd = NetG(), NetD()`."""
    value = binder.value
    if not isinstance(value, cst.Tuple):
        return value
    for target in binder.targets:
        if isinstance(target.target, cst.Tuple) and len(target.target.elements) == len(value.elements):
            for element, part in zip(target.target.elements, value.elements):
                if isinstance(element.value, cst.Name) and element.value.value == name and not isinstance(part, cst.StarredElement):
                    return part.value
    return value


def _keyword_names(model: SemanticModel) -> set[str]:
    return {arg.keyword.value for call in model.calls for arg in call.args if arg.keyword is not None}


def _accelerators_in_float32(model: SemanticModel) -> bool:
    """Every `Accelerator(...)` of this module is built without `mixed_precision` (and without `**kwargs` that may
    carry it), and there is one: accelerate/accelerator.py then trains in "no" mixed precision, float32, unless
    `accelerate launch` is told otherwise; the import of accelerate says nothing more."""
    built = [c for c in model.calls if qualified_is(model.call_name(c), ACCELERATE, {"Accelerator"})]
    return bool(built) and all(
        not any(a.star == "**" or a.keyword is not None and a.keyword.value == "mixed_precision" for a in c.args)
        for c in built
    )


def _accelerate_places_model(model: SemanticModel, call: cst.Call) -> bool:
    """`accelerator.prepare(model, optimizer, loader)` on an Accelerator that places objects (`cpu` and
    `device_placement` left alone): the model goes to `accelerator.device`, the GPU where there is one."""
    if model.frameworks.wrapper(call) != ("accelerate", True):
        return False
    return any(a.keyword is None and not a.star and is_model_expression(model, a.value) for a in call.args)


def _moved_model(model: SemanticModel, move: cst.Call) -> cst.BaseExpression:
    """The model a move places: `net` of `net.to(device)`, of `accelerator.prepare(net, optimizer)`."""
    if _accelerate_places_model(model, move):
        return next(a.value for a in move.args if a.keyword is None and not a.star and is_model_expression(model, a.value))
    return move.func.value if isinstance(move.func, cst.Attribute) else move.func


def _mentions_mixed_precision(model: SemanticModel) -> bool:
    read = None
    float32_accelerators = None
    for local, qualified in model.imports.bindings.items():
        if qualified.split(".", 1)[0] in ACCELERATE:
            float32_accelerators = _accelerators_in_float32(model) if float32_accelerators is None else float32_accelerators
            if float32_accelerators:
                continue  # `Accelerator(cpu=cpu)`: float32 (an `accelerator.autocast()` below still counts)
        if qualified.startswith(PRECISION_FRAMEWORKS) or ".amp" in qualified or qualified.endswith("autocast"):
            if qualified == "apex":  # `import apex` for `apex.parallel` (SyncBN, LARC) says nothing: `apex.amp` would
                if any(dotted_name(a.value) == local and a.attr.value in _APEX_PRECISION for a in model.attributes):
                    return True
                continue
            if qualified.startswith("apex.") and qualified.split(".")[1] not in _APEX_PRECISION:
                continue  # `from apex.parallel.LARC import LARC`, `apex.optimizers.FusedAdam`: not its precision
            read = _names_read(model.module) if read is None else read
            if local in read or not _optional_import(model, local):
                return True  # `try: from apex import amp` that training never uses says nothing of its precision
    for attr in model.attributes:
        if attr.attr.value in ("autocast", "GradScaler", "amp"):
            return True
    if any(k in _MIXED_PRECISION_WORDS or k.startswith(("use_amp", "mixed_precision")) for k in _keyword_names(model)):
        return True
    for string in model.strings:
        ok, value = literal_value(string)
        # A command-line switch such as `--amp` or `--fp16`: the script can already train in mixed precision.
        if ok and isinstance(value, str) and value.startswith("-"):
            words = re.split(r"[-_]+", value.lower())
            if any(w in _MIXED_PRECISION_WORDS for w in words):
                return True
    return False


def _optional_import(model: SemanticModel, local: str) -> bool:
    """`local` is bound only by imports inside `try:` blocks (an optional dependency: `except ImportError: pass`)."""
    binders = []
    for statement in model.import_statements:
        names = statement.names if not isinstance(statement.names, cst.ImportStar) else ()
        for alias in names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            while isinstance(bound, cst.Attribute):
                bound = bound.value
            if isinstance(bound, cst.Name) and bound.value == local:
                binders.append(statement)
    return bool(binders) and all(any(isinstance(a, cst.Try) for a in model.ancestors(b)) for b in binders)


def _names_read(module: cst.Module) -> set[str]:
    """The names the module reads (its import statements left out)."""
    found: set[str] = set()

    class _Reads(cst.CSTVisitor):
        def visit_Import(self, node: cst.Import) -> bool:
            return False

        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

        def visit_Attribute(self, node: cst.Attribute) -> bool:
            node.value.visit(self)  # `x.amp` reads `x`, not a name `amp`
            return False

        def visit_Arg(self, node: cst.Arg) -> bool:
            node.value.visit(self)  # `f(amp=True)`: a keyword, no name read
            return False

        def visit_Name(self, node: cst.Name) -> None:
            found.add(node.value)

    module.visit(_Reads())
    return found


def _in_autocast_call(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`dtype=torch.bfloat16` given to autocast: the parameters stay float32."""
    parent = model.parent.get(node)
    call = model.parent.get(parent) if isinstance(parent, cst.Arg) else None
    return isinstance(call, cst.Call) and (model.call_name(call) or model.code(call.func)).endswith("autocast")


_DOUBLE_DTYPES = frozenset({"torch.float64", "torch.double"})


def _tensor_dtype(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`torch.tensor(q, dtype=torch.float64)`, `torch.zeros(n, dtype=torch.double)`: the dtype of one tensor a
    factory builds (a buffer, an accumulator kept in double for its numerics), not of the model's parameters,
    which stay float32 unless the model itself is cast (`.double()`, `.to(torch.float64)`, `set_default_dtype`)."""
    parent = model.parent.get(node)
    call = model.parent.get(parent) if isinstance(parent, cst.Arg) else None
    return isinstance(call, cst.Call) and model.residency.factory(call) is not None


def _non_float32_parameters(model: SemanticModel) -> bool:
    for attr in model.attributes:
        qualified = model.qualified_name(attr)
        if qualified in _DOUBLE_DTYPES and _tensor_dtype(model, attr):
            continue  # a float64 tensor beside a float32 model (a half one would have to meet a half model)
        if qualified in _REDUCED_OR_DOUBLE_DTYPES and not _in_autocast_call(model, attr):
            return True
        parent = model.parent.get(attr)
        if attr.attr.value in _PARAMETER_CASTS and isinstance(parent, cst.Call) and parent.func is attr and not parent.args:
            return True
    return False


def _after_all_training(model: SemanticModel, move: cst.Call, hot: list) -> bool:
    """`net.cuda()` for one forward after the module-level loops that trained it on the CPU (a notebook's
    last cells): it runs after every training loop of this file, so no training runs on CUDA."""
    return bool(hot) and all(model.residency.runs_after(move, loop) for loop in hot)


def _engine_places_model(model: SemanticModel, call: cst.Call) -> bool:
    """`deepspeed.initialize(model=net, ...)`: the engine moves the model to this rank's GPU
    (deepspeed/runtime/engine.py, `_configure_distributed_model`)."""
    if model.call_name(call) != "deepspeed.initialize":
        return False
    given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "model"), None)
    if given is None and len(call.args) > 1 and all(a.keyword is None and not a.star for a in call.args[:2]):
        given = call.args[1].value  # initialize(args, model, ...)
    return given is not None and is_model_expression(model, given)


def _ray_places_model(model: SemanticModel, call: cst.Call) -> bool:
    """`train.torch.prepare_model(net)` in a Ray Train run on GPUs: moved to the worker's GPU (and wrapped in DDP)."""
    wrapper = model.frameworks.wrapper(call)
    given = call.args[0].value if call.args and call.args[0].keyword is None and not call.args[0].star else None
    return wrapper == ("Ray Train", True) and given is not None and is_model_expression(model, given)


_HALF_WORDS = frozenset({"fp16", "bf16", "float16", "bfloat16", "half"})


def _names_half_precision(model: SemanticModel) -> bool:
    """A string (`"fp16"`, `"--bf16"`, `"bf16": {...}`), attribute (`args.fp16`) or keyword naming a half precision."""
    for string in model.strings:
        ok, value = literal_value(string)
        if ok and isinstance(value, str) and _HALF_WORDS.intersection(re.split(r"[-_ .]+", value.lower())):
            return True
    return any(a.attr.value in _HALF_WORDS for a in model.attributes) or bool(_HALF_WORDS & _keyword_names(model))


_MODEL_NAME_KEYWORDS = ("model_name", "pretrained_model_name_or_path", "model")  # timm, transformers, torch.hub


def _library_convolutions(model: SemanticModel, call: cst.Call) -> bool:
    """`timm.create_model("resnet50d")`, `AutoModelForImageClassification.from_pretrained("facebook/convnext-tiny-224")`:
    a library conv net named by a string (`convolutions.CONV_NET_NAMES`)."""
    qualified = model.call_name(call) or ""
    position = named_model(qualified)
    if position is None and not qualified.startswith("transformers."):
        return False
    given = None
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if position is not None and len(positional) > position:
        given = positional[position].value
    else:  # `create_model(model_name="resnet50")`, `from_pretrained(pretrained_model_name_or_path=...)`
        given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value in _MODEL_NAME_KEYWORDS), None)
    resolved = model.values.resolve(given) if given is not None else None
    named = resolved.value if resolved is not None and isinstance(resolved.value, str) else None
    return library_conv_net(qualified, named)


def _cudnn_settings(model: SemanticModel) -> tuple[bool, cst.Assign | None]:
    """Whether the script decides cuDNN's algorithm choice, and its unconditional `cudnn.benchmark = False`.

    `benchmark = False` alone is torch's default spelled out (NVIDIA's WaveGlow and Tacotron 2 write it next to
    `cudnn.enabled = True`): not a decision for reproducibility, which also needs `cudnn.deterministic = True`
    or `use_deterministic_algorithms`. Under an `if`, from a flag, with cuDNN disabled, or next to another cuDNN
    switch written (even a misspelt `cudnn.determinstic = True`, as the UvA notebooks have), it is a decision."""
    off = None
    for attr in model.attributes:
        qualified = model.qualified_name(attr) or ""
        if qualified == "torch.backends.cudnn.enabled":
            if _written_literal(model, attr) is not True:
                return True, None  # cuDNN switched off (or by a flag): the algorithm choice is not the question
            continue
        if qualified.startswith("torch.backends.cudnn.") and isinstance(model.parent.get(attr), cst.AssignTarget):
            if qualified not in _CUDNN_SETTINGS:
                return True, None  # another cuDNN switch written (`cudnn.determinstic = True`, misspelt): a decision
        if qualified not in _CUDNN_SETTINGS:
            continue
        if qualified != "torch.backends.cudnn.benchmark" or _written_literal(model, attr) is not False:
            return True, None
        off = off or model.parent.get(model.parent.get(attr))
    return False, off


def _main_guard(model: SemanticModel, node: cst.CSTNode) -> bool:
    return isinstance(node, cst.If) and model.parent.get(node) is model.module and "__name__" in model.code(node.test)


def _written_literal(model: SemanticModel, attr: cst.Attribute) -> bool | None:
    """`True` / `False` for `attr = True` / `attr = False` written unconditionally (not under an `if` or `try`);
    None for anything else (a read, a flag, a conditional write)."""
    target = model.parent.get(attr)
    assign = model.parent.get(target)
    if not (isinstance(target, cst.AssignTarget) and isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Name)):
        return None
    conditions = [a for a in model.ancestors(assign) if isinstance(a, (cst.If, cst.Try)) and not _main_guard(model, a)]
    if assign.value.value not in ("True", "False") or conditions:
        return None
    return assign.value.value == "True"


def _steps_cells(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`Tacotron(...)` moved to CUDA: a project class whose forward loops over time steps of recurrent cells."""
    callee = model.callee(expr) if isinstance(expr, cst.Call) else None
    return callee is not None and callee.steps_cells


def _time_step_loops(model: SemanticModel, hot: list) -> bool:
    """Every training loop here runs each step as a Python loop over time steps of a recurrent module."""
    return bool(hot) and all(time_step_loop(model, loop) for loop in hot)


def _project_convolutions(model: SemanticModel, call: cst.Call) -> bool:
    callee = model.callee(call)
    return callee is not None and callee.convolutions


def _annotated_classes(annotation: cst.BaseExpression) -> list[str]:
    """`SoundStream`, `models.Net`, each side of `SoundStream | EncodecWrapper`, `Optional[Net]`: the classes named."""
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return _annotated_classes(annotation.left) + _annotated_classes(annotation.right)
    if isinstance(annotation, cst.Subscript) and dotted_name(annotation.value) in ("Optional", "typing.Optional"):
        return [c for element in annotation.slice if isinstance(element.slice, cst.Index) for c in _annotated_classes(element.slice.value)]
    name = dotted_name(annotation) if isinstance(annotation, (cst.Name, cst.Attribute)) else None
    return [name] if name is not None and name != "None" else []


def _annotated_convolutions(model: SemanticModel) -> bool:
    """`def __init__(self, soundstream: SoundStream, ...)`: a parameter typed as a project class that builds a
    convolutional network (as `_project_convolutions` reads a call of it): the conv net this module runs comes in
    built by its callers."""
    for function in (f for functions in model.functions.values() for f in functions):
        for param in (*function.params.params, *function.params.kwonly_params):
            if param.annotation is None:
                continue
            for name in _annotated_classes(param.annotation.annotation):
                callee = model.project.callee(name)
                if callee is not None and callee.kind == "class" and callee.convolutions:
                    return True
    return False


def _registry_entries(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> list[cst.BaseExpression] | None:
    """What `METHODS[method]["model"]` may be, where `METHODS = {"byol": {"model": byol.BYOL, ...}, ...}` is a dict
    literal bound once: every entry under a key not known here, the entry of a string key; None when not such a
    lookup (also through `model_class = METHODS[method]["model"]`, a name bound once)."""
    if depth > 4:
        return None
    if isinstance(expr, cst.Name):
        binders = model.bindings_of(expr.value, expr)
        if len(binders) != 1 or not isinstance(binders[0], cst.Assign) or len(binders[0].targets) != 1:
            return None
        value = binders[0].value
        return [value] if depth and isinstance(value, cst.Dict) else _registry_entries(model, value, depth + 1) if not depth else None
    if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    tables = _registry_entries(model, expr.value, depth + 1)
    if not tables:
        return None
    ok, key = literal_value(expr.slice[0].slice.value)
    found = []
    for table in tables:
        if not isinstance(table, cst.Dict) or any(not isinstance(e, cst.DictElement) for e in table.elements):
            return None
        entries = [e.value for e in table.elements if not ok or literal_value(e.key) == (True, key)]
        if not entries:
            return None
        found += entries
    return found


def _registry_classes(model: SemanticModel, call: cst.Call, holds) -> bool:
    """`model_class(**kwargs)` with `model_class = METHODS[method]["model"]`: every class the registry may give is
    a project class for which `holds(callee)`."""
    if not isinstance(call.func, (cst.Name, cst.Subscript)):
        return False
    entries = _registry_entries(model, call.func)
    if not entries:
        return False
    for entry in entries:
        name = dotted_name(entry) if isinstance(entry, (cst.Name, cst.Attribute)) else None
        callee = model.project.callee(name) if name is not None else None
        if callee is None or callee.kind != "class" or not holds(callee):
            return False
    return True


def _registry_convolutions(model: SemanticModel, call: cst.Call) -> bool:
    """Every class the registry may give builds a conv net (lightly's ImageNet benchmarks: ResNet-50 methods)."""
    return _registry_classes(model, call, lambda callee: callee.convolutions)


def _runs_training_helper(model: SemanticModel) -> bool:
    """`solver = Solver(data, model, optimizer, args); solver.train()`: a call of project code that runs a whole
    training loop itself (backward or an optimizer step inside a loop of its own, `Callee.epoch`), as denoiser's
    train.py hands the model it moved to its Solver: the training runs from here, the loop is elsewhere."""
    return any((callee := model.callee(c)) is not None and callee.trains and callee.epoch for c in model.calls)


def _ignite_trains(model: SemanticModel) -> bool:
    """`trainer = Engine(update)` with an `update(engine, batch)` of this file that runs backward: ignite's
    `Engine.run` calls it once per batch, the training loop is in the library (ignite/engine/engine.py)."""
    return any(
        step.framework == "ignite" and step.role == TRAIN and trains(model, step.node)
        for step in model.frameworks.step_functions.values()
    )


def find_training_setup(model: SemanticModel) -> TrainingSetup:
    hot = [loop for loop in model.loops if is_hot(model, loop)]
    moves = [
        call for call in model.calls
        if (model.residency.moves_to_cuda(call) and (
                is_model_expression(model, call.func.value) or _looked_up_class(model, call.func.value)
                or _project_call_bound_to_module(model, call))
            or _engine_places_model(model, call) or _ray_places_model(model, call) or _accelerate_places_model(model, call)
            or moves_resident_attribute(model, call))
        and not _after_all_training(model, call, hot)
    ]  # fmt: skip
    # runs training itself: a `__main__` guard, a module-level training loop, or a class that trains the model
    # it keeps on the GPU in `self` (`gan = GAN(args); gan.train()` elsewhere runs it as it is)
    entry = (
        model.has_main_guard
        or any(model.enclosing_function(loop) is None for loop in hot)
        or any(trains_resident_attribute(model, loop) for loop in hot)
    )
    backward = next((c for c in model.method_calls("backward")), None)
    # a convolution built here, a project class or factory (of any module) that builds one, or a library conv net
    convolutions = any(
        builds_convolution(model.call_name(c) or "") or _project_convolutions(model, c) or _library_convolutions(model, c)
        or _registry_convolutions(model, c)
        for c in model.calls
    ) or _annotated_convolutions(model)
    cudnn_configured, cudnn_off = _cudnn_settings(model)
    return TrainingSetup(
        model_moves=moves,
        entry_script=entry,
        trains=bool(hot) or _ignite_trains(model) or _runs_training_helper(model),
        first_backward=backward,
        mixed_precision=_mentions_mixed_precision(model),
        non_float32_parameters=_non_float32_parameters(model),
        tf32_configured=any(a.attr.value in _TF32_SETTINGS for a in model.attributes),
        cudnn_configured=cudnn_configured,
        convolutions=convolutions,
        # A convolution's work grows with the image, not with its parameters: only linear toy models.
        toy_models=bool(moves) and not convolutions and all(model.model_size.is_toy_model(_moved_model(model, m)) for m in moves),
        engine_half_precision=bool(moves) and all(_engine_places_model(model, m) or _accelerate_places_model(model, m) for m in moves)
        and _names_half_precision(model),
        cudnn_benchmark_off=cudnn_off,
        moved_models=[_moved_model(model, m) for m in moves],
        time_steps=bool(moves) and (all(_steps_cells(model, _moved_model(model, m)) for m in moves) or _time_step_loops(model, hot)),
    )
