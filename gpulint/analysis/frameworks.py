"""Training frameworks as data: Lightning (Trainer and Fabric), accelerate, ignite, the HF Trainer and Determined.

These libraries run a training loop the user's code does not spell out. The tables below say which methods a
framework calls once per batch (for training or evaluation), which hooks hand it loaders, which calls take a
loader or wrap one and copy its batches to the device, and what its settings default to. Each default was read
in the framework's own source; the rule documents cite file and version. The queries at the bottom turn the
tables into facts the model already has elsewhere: per-step code (`residency.step_loop`), loader roles
(`loader_flow`), values on the GPU (`residency`). GPU context comes from the module summaries: `gpu_evidence`
reads framework set-up with `ast` (devices.EVIDENCE_FINDERS), and a class whose framework base is in another
module of the project gets it, and its per-step methods, through `ModuleContext.inherited`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Optional

import libcst as cst

from gpulint.analysis.engine_steps import ENGINE_STEP
from gpulint.analysis.hot_loops import trains
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.loader_flow import EVAL as EVAL_LOADER
from gpulint.analysis.loader_flow import TRAIN as TRAIN_LOADER
from gpulint.analysis.loader_flow import UNKNOWN
from gpulint.analysis.replaced_values import never_read, replaced_before_use
from gpulint.analysis.residency import CUDA, EVAL, TRAIN
from gpulint.analysis.devices import BASE_EVIDENCE, EVIDENCE_FINDERS, GPU_TEXT_MARKERS, MODEL_PLACERS
from gpulint.analysis.value_resolution import ResolvedValue

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Words every module with framework GPU evidence contains (in its imports): `gpu_evidence` finds nothing
# without one (devices.GPU_TEXT_MARKERS).
CONTEXT_MARKERS = ("lightning", "accelerate", "transformers", "trl", "ignite", "deepspeed", "ray.train", "determined")

LIGHTNING = ("lightning", "pytorch_lightning", "lightning_fabric")
HF = ("transformers", "trl")
ACCELERATE = ("accelerate",)
IGNITE = ("ignite",)
RAY = ("ray",)
DETERMINED = ("determined",)
# ray/train/torch/train_loop_utils.py (Ray 2.x): the calls that move a model or a loader's batches to the
# worker's device (`get_device()`: its GPU when the run's ScalingConfig has `use_gpu=True`).
RAY_PLACERS = frozenset({"ray.train.torch.prepare_model", "ray.train.torch.prepare_data_loader"})
RAY_SCALING_CONFIGS = frozenset({"ray.train.ScalingConfig", "ray.air.ScalingConfig", "ray.air.config.ScalingConfig"})
# Accelerator names that never run on a GPU (Lightning's `accelerator=`; `auto`, `gpu` and `cuda` do).
_NOT_GPU = frozenset({"cpu", "mps", "tpu", "hpu", "xla", "ipu"})


@dataclass(frozen=True)
class FrameworkClass:
    """A framework base class whose subclasses the framework drives."""

    framework: str  # for messages: "Lightning"
    roots: tuple[str, ...]  # top-level packages its qualified names start with
    names: frozenset[str]  # class names, including the framework's own subclasses
    # method -> (TRAIN or EVAL, position of the batch parameter after `self`, or None): run once per batch
    steps: Mapping[str, tuple[str, Optional[int]]] = field(default_factory=dict)
    loaders: Mapping[str, str] = field(default_factory=dict)  # hook -> the role of the loader it returns


# lightning/pytorch/core/module.py and core/hooks.py (Lightning 2.6): the step methods and per-batch hooks.
LIGHTNING_MODULE = FrameworkClass(
    "Lightning",
    LIGHTNING,
    frozenset({"LightningModule"}),
    steps={
        "training_step": (TRAIN, 0), "on_train_batch_start": (TRAIN, 0), "on_train_batch_end": (TRAIN, 1),
        "on_before_backward": (TRAIN, None), "on_after_backward": (TRAIN, None), "backward": (TRAIN, None),
        "on_before_optimizer_step": (TRAIN, None), "optimizer_step": (TRAIN, None),
        "on_before_zero_grad": (TRAIN, None), "optimizer_zero_grad": (TRAIN, None),
        "configure_gradient_clipping": (TRAIN, None),
        "validation_step": (EVAL, 0), "test_step": (EVAL, 0), "predict_step": (EVAL, 0),
        "on_validation_batch_start": (EVAL, 0), "on_validation_batch_end": (EVAL, 1),
        "on_test_batch_start": (EVAL, 0), "on_test_batch_end": (EVAL, 1),
        "on_predict_batch_start": (EVAL, 0), "on_predict_batch_end": (EVAL, 1),
    },
    loaders={"train_dataloader": TRAIN_LOADER, "val_dataloader": EVAL_LOADER, "test_dataloader": EVAL_LOADER, "predict_dataloader": EVAL_LOADER},
)  # fmt: skip
# lightning/pytorch/trainer/connectors/data_connector.py: the test and predict loaders are requested by `trainer.test()` /
# `trainer.predict()` once per call, never by the fit loop's epochs.
_ONCE_READ_HOOKS = frozenset({"test_dataloader", "predict_dataloader"})
LIGHTNING_DATAMODULE = FrameworkClass("Lightning", LIGHTNING, frozenset({"LightningDataModule"}), loaders=LIGHTNING_MODULE.loaders)
# lightning/pytorch/callbacks/callback.py: the same per-batch hooks, given (trainer, pl_module, ...).
LIGHTNING_CALLBACK = FrameworkClass(
    "Lightning",
    LIGHTNING,
    frozenset({"Callback"}),
    steps={
        "on_train_batch_start": (TRAIN, 2), "on_train_batch_end": (TRAIN, 3), "on_before_backward": (TRAIN, None),
        "on_after_backward": (TRAIN, None), "on_before_optimizer_step": (TRAIN, None), "on_before_zero_grad": (TRAIN, None),
        "on_validation_batch_start": (EVAL, 2), "on_validation_batch_end": (EVAL, 3),
        "on_test_batch_start": (EVAL, 2), "on_test_batch_end": (EVAL, 3),
    },
)  # fmt: skip
# transformers/trainer.py: `training_step` and `compute_loss` run per batch, on inputs already on the device
# (`_prepare_inputs`, or the accelerate-prepared loader); `prediction_step` per evaluation batch.
HF_TRAINER = FrameworkClass(
    "the HF Trainer",
    HF,
    frozenset({"Trainer", "Seq2SeqTrainer", "SFTTrainer", "DPOTrainer", "GRPOTrainer", "RewardTrainer", "KTOTrainer", "ORPOTrainer", "CPOTrainer"}),
    steps={"compute_loss": (TRAIN, 1), "training_step": (TRAIN, 1), "prediction_step": (EVAL, 1)},
)
# transformers/trainer_callback.py: events fired every (sub)step.
HF_CALLBACK = FrameworkClass(
    "the HF Trainer",
    HF,
    frozenset({"TrainerCallback"}),
    steps={
        "on_step_begin": (TRAIN, None), "on_substep_end": (TRAIN, None), "on_step_end": (TRAIN, None),
        "on_pre_optimizer_step": (TRAIN, None), "on_optimizer_step": (TRAIN, None), "on_prediction_step": (EVAL, None),
    },
)  # fmt: skip
# determined/pytorch/_pytorch_trial.py (0.2x-0.3x): the harness builds a trial's loaders from its hooks (a
# `determined.pytorch.DataLoader`, torch's arguments and defaults: loader_classes.py) and copies every batch to the
# trial's device (`context.to_device(batch)` before `train_batch` / `evaluate_batch`, unless the trial calls
# `context.experimental.disable_auto_to_device()`). The training loader is iterated once, through a batch sampler that
# repeats (`get_data_loader(repeat=True)`) for the configured training length; the validation loader is iterated
# again at every validation (`min_validation_period`, and at the end). Slots are GPUs on GPU agents (one per trial by
# default), so a trial trains on the GPU unless its experiment asks for none.
DETERMINED_TRIAL = FrameworkClass(
    "Determined",
    DETERMINED,
    frozenset({"PyTorchTrial"}),
    loaders={"build_training_data_loader": TRAIN_LOADER, "build_validation_data_loader": EVAL_LOADER},
)
_DETERMINED_UNPLACED = "disable_auto_to_device"  # `context.experimental.disable_auto_to_device()`: the trial moves batches itself
FRAMEWORK_CLASSES = (LIGHTNING_MODULE, LIGHTNING_DATAMODULE, LIGHTNING_CALLBACK, HF_TRAINER, HF_CALLBACK, DETERMINED_TRIAL)

# transformers/training_args.py (commit fd798335, a 4.5x release): the data-loading and precision defaults.
TRAINING_ARGUMENTS = frozenset({"TrainingArguments", "Seq2SeqTrainingArguments"})
TRAINING_ARGUMENT_DEFAULTS: Mapping[str, object] = {
    "dataloader_num_workers": 0,
    "dataloader_pin_memory": True,
    "dataloader_persistent_workers": False,
    "num_train_epochs": 3.0,
    # how long a run is and what an optimizer step reads (trainer_epochs.py)
    "max_steps": -1,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "eval_strategy": "no",
    "evaluation_strategy": "no",  # its name before transformers 4.41
    "fp16": False,
    "bf16": False,
    "tf32": None,  # None: torch's own default (TF32 off for matmuls since torch 1.12)
    "use_cpu": False,
    "no_cuda": False,
    "ddp_find_unused_parameters": None,
}
# The origin of a setting nobody wrote down: the framework's default (never an edit target).
FRAMEWORK_DEFAULT = "framework default"
# TRL's configs subclass TrainingArguments but change defaults between releases: only explicit values count.
TRL_CONFIGS = frozenset({"SFTConfig", "DPOConfig", "GRPOConfig", "RewardConfig", "KTOConfig", "ORPOConfig", "CPOConfig"})

# Lightning `Trainer(precision=...)` / `Fabric(precision=...)` values that train in float32 (None is "32-true").
_FLOAT32_PRECISION = frozenset({None, 32, "32", "32-true"})
_FLOAT64_PRECISION = frozenset({64, "64", "64-true"})


@dataclass(frozen=True)
class StepFunction:
    """A function the framework runs once per batch."""

    node: cst.CSTNode  # the FunctionDef (or Lambda given to an ignite Engine)
    role: str  # residency.TRAIN or residency.EVAL
    framework: str
    batch: Optional[str] = None  # the parameter that receives the batch, already on the device


@dataclass(frozen=True)
class Feed:
    """A loader handed to a framework that iterates it (and maybe copies its batches to the GPU)."""

    node: cst.CSTNode  # the hook method (`def train_dataloader`) or the call that takes it (`trainer.fit`)
    framework: str
    role: str  # loader_flow.TRAIN / EVAL / UNKNOWN
    places_on_device: bool  # the framework copies each batch to the GPU
    per_epoch: bool  # the framework iterates it again every epoch
    accumulates: bool = False  # the framework accumulates gradients over several batches
    epochs: Optional[int] = None  # how many epochs the framework runs, when the code says so (`max_epochs=1`)
    every: str = "epoch"  # what each new pass comes with, for messages: "epoch", "validation" (Determined)

    def describe(self, model: SemanticModel) -> str:
        """Where the hand-over is, for messages: the hook method or the call."""
        if isinstance(self.node, cst.FunctionDef):
            return f"{self.framework} (`{self.node.name.value}` at line {model.line_of(self.node)})"
        if isinstance(self.node, cst.Call) and isinstance(self.node.func, cst.Attribute):
            return f"`{model.code(self.node.func)}(...)` at line {model.line_of(self.node)}"
        return f"{self.framework} (line {model.line_of(self.node)})"


@dataclass(frozen=True)
class Precision:
    """What a framework's configuration says about the training precision."""

    call: cst.Call  # `Trainer(...)`, `TrainingArguments(...)`
    framework: str
    float32: bool  # known to train in float32 (the default, or set so)
    reason: str  # why, for messages: "`precision` is not set", "`fp16` and `bf16` are False"
    setting: str  # how to ask for mixed precision there, for messages
    # the framework leaves float32 matmuls at torch's default (no TF32) and has no setting of its own for it
    leaves_tf32: bool = False


@dataclass(frozen=True)
class TrainerArguments:
    """A `TrainingArguments(...)` call (or a subclass's): its data-loading values, resolved where possible."""

    call: cst.Call
    name: str  # `TrainingArguments`
    values: Mapping[str, Optional[ResolvedValue]]  # setting -> its value; None when not known (argument unresolvable)
    explicit: frozenset[str]  # settings written in the call (or in a subclass's field defaults)

    @property
    def on_cpu(self) -> bool:
        """`use_cpu=True` (or the older `no_cuda=True`)."""
        return any(v is not None and v.value is True for v in (self.values["use_cpu"], self.values["no_cuda"]))


@dataclass(frozen=True)
class HFTrainerInputs:
    """`Trainer(args=..., train_dataset=..., eval_dataset=..., data_collator=...)`: the expressions given."""

    args: Optional[cst.BaseExpression]
    datasets: tuple[cst.BaseExpression, ...]
    collator: Optional[cst.BaseExpression]  # None: the Trainer's default, which pads or stacks


class Frameworks:
    """The framework facts of one module; computed only when a rule asks."""

    def __init__(self, model: SemanticModel) -> None:
        self.m = model

    # ---- which frameworks ------------------------------------------------------------------------

    @cached_property
    def imported(self) -> frozenset[str]:
        """The framework roots this module imports from (`lightning`, `accelerate`, ...), also through the bases
        its classes inherit from other modules of the project."""
        inherited = (base for bases in self.m.project.inherited.values() for base in bases)
        roots = {q.split(".", 1)[0] for q in (*self.m.imports.bindings.values(), *inherited)}
        return frozenset(roots & {*LIGHTNING, *HF, *ACCELERATE, *IGNITE, *RAY, *DETERMINED})

    def _cpu_only_lightning(self, call: cst.Call) -> bool:
        """A Lightning Trainer/Fabric given a non-GPU accelerator (`accelerator="cpu"`, `"mps"`, ...), or a
        Lightning 1.x Trainer asked for no device at all (1.x runs on the CPU unless asked; 2.x picks "auto")
        or told `gpus=0`."""
        accelerator = call_argument(call, "accelerator")
        if accelerator is None:
            return _cpu_by_default_lightning_1(call) or _no_gpus_written(call)
        resolved = self.m.values.resolve(accelerator)
        return resolved is not None and isinstance(resolved.value, str) and resolved.value in _NOT_GPU

    def _unpacked_settings(self, call: cst.Call) -> Optional[list[tuple[str, dict]]]:
        """The settings a call's `**cfg["trainer_params"]` arguments pass, one mapping per shipped YAML file
        that may be loaded (`value_resolution.settings_mappings`); [] when nothing is unpacked, None when
        something unpacked is not known (`*args`, `**kwargs`, a file not read)."""
        found: list[tuple[str, dict]] = []
        for arg in call.args:
            if arg.star == "*":
                return None
            if arg.star == "**":
                mappings = self.m.values.settings_mappings(arg.value)
                if mappings is None:
                    return None
                found.extend(mappings)
        return found

    def _true(self, call: cst.Call, keyword: str) -> bool:
        value = call_argument(call, keyword)
        resolved = self.m.values.resolve(value) if value is not None else None
        return resolved is not None and resolved.value is True

    # ---- framework classes and the code they run per batch ---------------------------------------

    def class_kind(self, class_name: str, _seen: frozenset[str] = frozenset()) -> Optional[FrameworkClass]:
        """The framework base class a class of this module derives from (through its local bases)."""
        info = self.m.classes.get(class_name)
        if info is None or class_name in _seen:
            return None
        # Its bases here, then those it reaches through project classes of other modules.
        for base in (*info.bases, *self.m.project.inherited.get(class_name, ())):
            for kind in FRAMEWORK_CLASSES:
                if qualified_is(base, kind.roots, kind.names):
                    return kind
            if base in self.m.classes:
                found = self.class_kind(base, _seen | {class_name})
                if found is not None:
                    return found
        return None

    @cached_property
    def step_functions(self) -> dict[cst.CSTNode, StepFunction]:
        """Methods and functions the frameworks run once per batch."""
        if not self.imported:
            return {}
        found: dict[cst.CSTNode, StepFunction] = {}
        for name, info in self.m.classes.items():
            kind = self.class_kind(name)
            if kind is None:
                continue
            for method, func in info.methods.items():
                if method in kind.steps:
                    role, position = kind.steps[method]
                    found[func] = StepFunction(func, role, kind.framework, _parameter(func, position))
        for func, role in self._ignite_step_functions():
            found.setdefault(func, StepFunction(func, role, "ignite"))
        return found

    def step_function(self, node: cst.CSTNode) -> Optional[StepFunction]:
        """The framework step function `node` runs in (also inside a closure defined there)."""
        functions = self.step_functions
        if not functions:
            return None
        for ancestor in self.m.ancestors(node):
            if ancestor in functions:
                return functions[ancestor]
        return None

    @cached_property
    def drives_training(self) -> bool:
        """A framework trains in this module: a training step method, or a trainer that fits."""
        return any(s.role == TRAIN for s in self.step_functions.values()) or any(f.role == TRAIN_LOADER for f in self._all_feeds)

    def placed_parameter(self, name: cst.Name) -> bool:
        """`batch` in `def training_step(self, batch, batch_idx)`: the framework copied it to the device."""
        if not self.step_functions:
            return False
        for func, (_, places) in self._output_transforms.items():
            # `loss` in `output_transform=lambda x, y, y_pred, loss: ...` (lambda parameters have no binding)
            if self.m.is_inside(name, func) and name.value in {p.name.value for p in func.params.params}:
                return places
        for binder in self.m.bindings_of(name.value, name):
            if isinstance(binder, cst.Param):
                func = self.m.parent.get(self.m.parent.get(binder))
                step = self.step_functions.get(func)
                if step is not None and step.batch == name.value:
                    return self.lightning_places if step.framework == LIGHTNING_MODULE.framework else self.m.uses_cuda
        return False

    # ---- ignite ------------------------------------------------------------------------------------

    def _ignite_step_functions(self) -> Iterator[tuple[cst.CSTNode, str]]:
        if "ignite" not in self.imported:
            return
        m = self.m
        for call in m.calls:
            name = m.call_name(call)
            if qualified_is(name, IGNITE, {"Engine"}) and call.args and not call.args[0].star:
                for func in self._callables(call.args[0].value):
                    yield func, TRAIN if trains(m, func) else EVAL
            for target in self._handed_to_engine(call):  # `create_trainer(train_step, ...)` of trainers.py: `Engine(train_step)` there
                for func in self._callables(target):
                    yield func, TRAIN if trains(m, func) else EVAL
            handler = self._iteration_handler(call)
            if handler is not None:
                engine, target = handler
                role = self._engine_role(engine)
                if role is not None:
                    for func in self._callables(target):
                        yield func, role
        for func, (role, _) in self._output_transforms.items():
            yield func, role

    def _handed_to_engine(self, call: cst.Call) -> list[cst.BaseExpression]:
        """The arguments of `call` that a project function of another module hands to ignite's `Engine(...)` as its
        process function (`analysis/engine_steps.py`)."""
        callee = self.m.callee(call)
        if callee is None or callee.kind != "function":
            return []
        return [arg.value for arg, param in self.m.arguments_to(call, callee) if any(e[0] == ENGINE_STEP for e in callee.effects.get(param, ()))]

    @cached_property
    def _output_transforms(self) -> dict[cst.CSTNode, tuple[str, bool]]:
        """`create_supervised_trainer(..., output_transform=lambda x, y, y_pred, loss: ...)` -> (role, whether its
        arguments are on the device): ignite/engine/__init__.py (0.4-0.5) ends the step it builds with `return
        output_transform(x, y, y_pred, loss)` (the evaluator's with `(x, y, y_pred)`), after `convert_tensor` moved
        the batch to `device`."""
        found: dict[cst.CSTNode, tuple[str, bool]] = {}
        for call in self.m.calls:
            name = self.m.call_name(call)
            if not qualified_is(name, IGNITE, {"create_supervised_trainer", "create_supervised_evaluator"}):
                continue
            transform = call_argument(call, "output_transform")
            role = TRAIN if name.endswith("trainer") else EVAL
            for func in self._callables(transform) if transform is not None else ():
                found[func] = (role, self._engine_places(call))
        return found

    def _iteration_handler(self, call: cst.Call) -> Optional[tuple[cst.BaseExpression, cst.BaseExpression]]:
        """(engine, handler) for `engine.add_event_handler(Events.ITERATION_COMPLETED, fn)` and the decorator
        `@engine.on(Events.ITERATION_COMPLETED)`: a handler that runs every iteration (no `every=` filter)."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("on", "add_event_handler") or not call.args:
            return None
        event = call.args[0].value
        if not qualified_is(self.m.qualified_name(event), IGNITE, {"ITERATION_COMPLETED", "ITERATION_STARTED"}):
            return None  # a filtered event (`Events.ITERATION_COMPLETED(every=100)`) is a Call, not named here
        if func.attr.value == "add_event_handler":
            return (func.value, call.args[1].value) if len(call.args) > 1 else None
        decorator = self.m.parent.get(call)
        decorated = self.m.parent.get(decorator) if isinstance(decorator, cst.Decorator) else None
        return (func.value, decorated.name) if isinstance(decorated, cst.FunctionDef) else None

    def _callables(self, expr: cst.BaseExpression) -> list[cst.CSTNode]:
        """The functions of this module an expression names: `fn`, `self.fn`, a lambda."""
        if isinstance(expr, cst.Lambda):
            return [expr]
        if isinstance(expr, cst.Name):
            return list(self.m.functions.get(expr.value, []))
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
            owner = next((a for a in self.m.ancestors(expr) if isinstance(a, cst.ClassDef)), None)
            return [f for f in self.m.functions.get(expr.attr.value, []) if owner is not None and self.m.parent.get(self.m.parent.get(f)) is owner]
        return []

    def _engine_role(self, expr: cst.BaseExpression) -> Optional[str]:
        """TRAIN for an ignite engine that trains (`create_supervised_trainer`, `Engine(step)` whose step runs
        backward), EVAL for an evaluator, None when `expr` is not one."""
        call = self._constructor(expr, lambda name: qualified_is(name, IGNITE, {"Engine", "create_supervised_trainer", "create_supervised_evaluator"}))
        if call is None:
            return None
        name = self.m.call_name(call) or ""
        if name.endswith("create_supervised_trainer"):
            return TRAIN
        if name.endswith("create_supervised_evaluator"):
            return EVAL
        steps = self._callables(call.args[0].value) if call.args and not call.args[0].star else []
        return TRAIN if any(trains(self.m, s) for s in steps) else EVAL

    def _engine_places(self, call: cst.Call) -> bool:
        """ignite/engine/__init__.py (0.6.0): `create_supervised_*(..., device=...)` moves each batch with
        `convert_tensor`; an `Engine(step)` moves what its step function moves."""
        name = self.m.call_name(call) or ""
        if name.endswith(("create_supervised_trainer", "create_supervised_evaluator")):
            device = call_argument(call, "device", 3 if name.endswith("trainer") else 2)
            return device is not None and self._device_is_cuda(device)
        steps = self._callables(call.args[0].value) if call.args and not call.args[0].star else []
        return any(self.m.residency.contains_cuda_move(s) for s in steps)

    def _device_is_cuda(self, device: cst.BaseExpression) -> bool:
        if isinstance(device, cst.Call) and self.m.call_name(device) == "ignite.distributed.device":
            return True
        return self.m.residency.device_kind(device) == CUDA

    # ---- loaders handed to frameworks --------------------------------------------------------------

    @cached_property
    def loader_hooks(self) -> dict[cst.FunctionDef, str]:
        """`def train_dataloader(self)` and friends of Lightning modules and data modules, `def
        build_training_data_loader(self)` of Determined trials -> loader role."""
        return {func: role for func, (role, _) in self._loader_hook_kinds.items()}

    @cached_property
    def _loader_hook_kinds(self) -> dict[cst.FunctionDef, tuple[str, FrameworkClass]]:
        found = {}
        for name, info in self.m.classes.items():
            kind = self.class_kind(name)
            if kind is not None:
                for method, func in info.methods.items():
                    if method in kind.loaders:
                        found[func] = (kind.loaders[method], kind)
                for hook, method in _hooks_bound_in_methods(info.methods.values()):
                    if hook in kind.loaders and method in info.methods:
                        found[info.methods[method]] = (kind.loaders[hook], kind)
        return found

    @cached_property
    def once_read_hooks(self) -> set[cst.FunctionDef]:
        """`test_dataloader` / `predict_dataloader`: read once per `trainer.test()` / `.predict()`, not every epoch."""
        found = set()
        for name, info in self.m.classes.items():
            kind = self.class_kind(name)
            if kind is not None and kind.loaders:
                found.update(func for method, func in info.methods.items() if method in _ONCE_READ_HOOKS)
                found.update(info.methods[m] for hook, m in _hooks_bound_in_methods(info.methods.values()) if hook in _ONCE_READ_HOOKS and m in info.methods)
        return found

    def feeds_at(self, expr: cst.BaseExpression) -> list[Feed]:
        """Where the loader `expr` is handed to a framework: returned by a loader hook, passed to
        `trainer.fit` / `engine.run` / `accelerator.prepare` / `fabric.setup_dataloaders`."""
        if not self.imported:
            return []
        m = self.m
        parent = m.parent.get(expr)
        if isinstance(parent, cst.Return):
            func = m.enclosing_function(parent)
            hook = self._loader_hook_kinds.get(func) if func is not None else None
            if hook is None:
                return []
            role, kind = hook
            if kind is DETERMINED_TRIAL:
                # One iterator over a repeating sampler for training; a new pass at every validation.
                return [Feed(func, "the Determined harness", role, self.determined_places, role == EVAL_LOADER, every="validation")]
            per_epoch = func not in self.once_read_hooks
            return [Feed(func, "the Lightning Trainer", role, self.lightning_places, per_epoch, self._lightning_accumulates)]
        if isinstance(parent, cst.Element) and isinstance(m.parent.get(parent), (cst.List, cst.Tuple)):
            return self.feeds_at(m.parent.get(parent))  # `return [loader_a, loader_b]`, `fit(model, [a, b])`
        if not (isinstance(parent, cst.Arg) and not parent.star):
            return []
        call = m.parent.get(parent)
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return []
        feed = self._lightning_feed(call, parent) or self._ignite_feed(call, parent) or self._wrapper_feed(call)
        return [feed] if feed is not None else []

    @cached_property
    def _all_feeds(self) -> list[Feed]:
        """Every loader hand-over in the module, whatever builds the loader (also loaders from elsewhere)."""
        found = []
        for func in self.loader_hooks:
            for ret in self.m.returns_of(func):
                if ret.value is not None:
                    found.extend(self.feeds_at(ret.value))
        for call in self.m.calls:
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("fit", "run") and call.args:
                for arg in call.args:
                    if not arg.star:
                        found.extend(self.feeds_at(arg.value))
        return found

    def _lightning_feed(self, call: cst.Call, arg: cst.Arg) -> Optional[Feed]:
        """`trainer.fit(model, train_dataloaders, val_dataloaders)`, `trainer.validate/test/predict(model, dataloaders)`."""
        method = call.func.attr.value
        if method not in ("fit", "validate", "test", "predict") or not self._is_lightning_trainer(call.func.value):
            return None
        keyword = arg.keyword.value if arg.keyword is not None else None
        position = [a for a in call.args if a.keyword is None].index(arg) if keyword is None else None
        if method == "fit" and (keyword == "train_dataloaders" or position == 1):
            role, per_epoch = TRAIN_LOADER, True
        elif method == "fit" and (keyword == "val_dataloaders" or position == 2):
            role, per_epoch = EVAL_LOADER, True
        elif method != "fit" and (keyword == "dataloaders" or position == 1):
            role, per_epoch = EVAL_LOADER, False
        else:
            return None
        epochs = self._max_epochs(call.func.value) if method == "fit" else None
        return Feed(call, "the Lightning Trainer", role, self.lightning_places, per_epoch, self._lightning_accumulates, epochs)

    def _max_epochs(self, trainer: cst.BaseExpression) -> Optional[int]:
        """The `max_epochs` a Lightning Trainer is built with, when the code says so (a literal, a parameter every
        call gives, an argparse default: `epoch_count.shipped_integer`); None when not written or not known."""
        from gpulint.analysis.epoch_count import shipped_integer

        call = self._constructor(trainer, lambda n: qualified_is(_constructed(n), LIGHTNING, {"Trainer"}))
        if not isinstance(call, cst.Call) or any(a.star for a in call.args):
            return None
        value = call_argument(call, "max_epochs")
        return shipped_integer(self.m, value) if value is not None else None

    def _ignite_feed(self, call: cst.Call, arg: cst.Arg) -> Optional[Feed]:
        """`engine.run(loader, max_epochs=N)`: ignite iterates the loader once per epoch."""
        if call.func.attr.value != "run" or arg.keyword is not None or call.args[0] is not arg:
            return None
        engine = self._constructor(call.func.value, lambda n: qualified_is(n, IGNITE, {"Engine", "create_supervised_trainer", "create_supervised_evaluator"}))
        role = self._engine_role(call.func.value)
        if engine is None or role is None:
            return None
        epochs = call_argument(call, "max_epochs", 1)
        resolved = self.m.values.resolve(epochs) if epochs is not None else None
        # An evaluator run from an epoch handler, or a trainer run for several (or a configurable number of) epochs.
        per_epoch = (epochs is not None and (resolved is None or (isinstance(resolved.value, int) and resolved.value > 1))) or (
            self.m.enclosing_function(call) is not None and role == EVAL
        )
        accumulation = call_argument(engine, "gradient_accumulation_steps")
        accumulated = self.m.values.resolve(accumulation) if accumulation is not None else None
        accumulates = accumulation is not None and (accumulated is None or accumulated.value != 1)
        loader_role = TRAIN_LOADER if role == TRAIN else EVAL_LOADER
        count = resolved.value if resolved is not None and type(resolved.value) is int and role == TRAIN else None
        return Feed(call, "ignite", loader_role, self._engine_places(engine), per_epoch, accumulates, count)

    def _wrapper_feed(self, call: cst.Call) -> Optional[Feed]:
        wrapper = self.wrapper(call)
        if wrapper is None:
            return None
        framework, places = wrapper
        return Feed(call, framework, UNKNOWN, places, False)

    # ---- calls that wrap loaders and models ----------------------------------------------------------

    def wrapper(self, call: cst.Call) -> Optional[tuple[str, bool]]:
        """(framework, places on the device) for a call that returns its arguments wrapped, loaders included:
        `accelerator.prepare(model, optimizer, loader)`, `accelerator.prepare_data_loader(loader)`,
        `fabric.setup_dataloaders(loader)`, `fabric.setup(model, optimizer)`."""
        if not self.imported:
            return None
        if "ray" in self.imported and self.m.call_name(call) in RAY_PLACERS:
            # `move_to_device=True` by default; on a CPU run (`use_gpu` never asked for) the device is the CPU
            return "Ray Train", self.ray_uses_gpu and not self._false(call, "move_to_device")
        if "ignite" in self.imported and self.m.call_name(call) in MODEL_PLACERS:
            return "ignite", True  # `model.to(idist.device())`: the GPU wherever there is one (as `_device_is_cuda`)
        if not isinstance(call.func, cst.Attribute):
            return None
        method = call.func.attr.value
        receiver = call.func.value
        if method in ("prepare", "prepare_data_loader", "prepare_model") and "accelerate" in self.imported:
            accelerator = self._constructor(receiver, lambda n: qualified_is(n, ACCELERATE, {"Accelerator"}), conventional=("accelerator",))
            if accelerator is None:
                return None
            # accelerate/accelerator.py (1.15): `device_placement=True` and `cpu=False` by default.
            places = accelerator is True or not (self._false(accelerator, "device_placement") or self._true(accelerator, "cpu"))
            if call_argument(call, "device_placement") is not None:
                places = False  # a per-object list: not followed
            return "accelerate", places
        if method in ("setup_dataloaders", "setup") and self.imported & set(LIGHTNING):
            fabric = self._constructor(receiver, lambda n: qualified_is(n, LIGHTNING, {"Fabric"}), conventional=("fabric",))
            if fabric is None:
                return None
            # lightning/fabric/fabric.py (2.6): `move_to_device=True` by default.
            places = not self._false(call, "move_to_device") and (fabric is True or not self._cpu_only_lightning(fabric))
            return "Fabric", places
        return None

    def result_index(self, call: cst.Call, arg: cst.Arg) -> Optional[int]:
        """Which element of a wrapper's result is `arg` wrapped: its position when several objects go in
        (the result is a tuple), None when one does (the result is the object itself)."""
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if arg not in positional:
            return -1
        return positional.index(arg) if len(positional) > 1 else None

    def wrapped_argument(self, target: cst.BaseExpression) -> Optional[tuple[cst.Call, cst.BaseExpression]]:
        """(wrapper call, argument) for a name bound to a wrapper's result: `model` in
        `model, opt = accelerator.prepare(model, opt)` or `model = fabric.setup(model)`."""
        if not self.imported:
            return None
        m = self.m
        element = m.parent.get(target)
        if isinstance(element, cst.Element):
            tuple_node = m.parent.get(element)
            assign_target = m.parent.get(tuple_node)
            assign = m.parent.get(assign_target)
            if isinstance(tuple_node, (cst.Tuple, cst.List)) and isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call):
                if self.wrapper(assign.value) is None or any(isinstance(e, cst.StarredElement) for e in tuple_node.elements):
                    return None
                index = next(i for i, e in enumerate(tuple_node.elements) if e is element)
                positional = [a for a in assign.value.args if a.keyword is None]
                if index < len(positional) and not positional[index].star:
                    return assign.value, positional[index].value
            return None
        assign_target = element
        assign = m.parent.get(assign_target)
        if isinstance(assign_target, cst.AssignTarget) and isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call):
            positional = [a for a in assign.value.args if a.keyword is None]
            if self.wrapper(assign.value) is not None and len(positional) == 1 and not positional[0].star:
                return assign.value, positional[0].value
        return None

    def placed_loop(self, loop: cst.For) -> bool:
        """A `for` over a loader that a wrapper places on the device: `for batch in train_dataloader:` after
        `train_dataloader = accelerator.prepare(train_dataloader)` (also through enumerate/tqdm), or over Ray
        Data batches that land on the worker's GPU (`ds.iter_torch_batches(...)`)."""
        if not self.imported:
            return False
        m = self.m
        expr = loop.iter
        while isinstance(expr, cst.Call) and expr.args and isinstance(expr.func, (cst.Name, cst.Attribute)):
            if (m.qualified_name(expr.func) or m.code(expr.func)).rsplit(".", 1)[-1] not in ("enumerate", "tqdm", "iter", "trange"):
                break
            expr = expr.args[0].value
        if isinstance(expr, cst.Call):
            return self._ray_places_batches(expr, loop)
        key = dotted_name(expr)
        if key is None:
            return False
        for write in m.dataflow.reaching_writes(key, loop):
            wrapped = self.wrapped_argument(write.target)
            if wrapped is not None and self.wrapper(wrapped[0])[1]:
                return True
            if isinstance(write.value, cst.Call) and self._ray_places_batches(write.value, loop):
                return True
        return False

    @cached_property
    def ray_uses_gpu(self) -> bool:
        """A Ray Train run of this module may use GPUs: a `ScalingConfig(use_gpu=...)` not literally False
        (ray/train/v2/api/config.py: `use_gpu=False` by default, so a config without it runs on CPUs)."""
        if "ray" not in self.imported:
            return False
        for call in self.m.calls:
            if self.m.call_name(call) in RAY_SCALING_CONFIGS:
                value = call_argument(call, "use_gpu")
                resolved = self.m.values.resolve(value) if value is not None else None
                if value is not None and (resolved is None or resolved.value is not False):
                    return True
        return False

    def _ray_places_batches(self, call: cst.Call, loop: cst.For) -> bool:
        """`ds.iter_torch_batches(batch_size=..., collate_fn=...)` of a Ray Train run on GPUs: with the default
        `device="auto"` Ray moves the batches to the worker's device (ray/data/iterator.py); a `collate_fn`
        then decides, and Ray's guide builds its tensors on `ray.train.torch.get_device()`: placed unless the
        loop copies the batch itself (the collate left it on the host)."""
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "iter_torch_batches" and self.ray_uses_gpu):
            return False
        device = call_argument(call, "device")
        if device is not None:
            resolved = self.m.values.resolve(device)
            return resolved is not None and isinstance(resolved.value, str) and resolved.value.startswith("cuda")
        collate = call_argument(call, "collate_fn")
        if collate is None:
            return True
        return not any(self.m.residency.moves_to_cuda(c) for c in self.m.calls_inside(loop.body))

    def placed_module(self, target: cst.BaseExpression) -> bool:
        """A model rebound to what a device-placing wrapper returns (`accelerator.prepare(model, ...)`)."""
        wrapped = self.wrapped_argument(target)
        if wrapped is None:
            return False
        wrapper = self.wrapper(wrapped[0])
        return wrapper is not None and wrapper[1] and self.m.residency.is_module(wrapped[1])

    # ---- Lightning Trainer settings ----------------------------------------------------------------

    @cached_property
    def lightning_trainers(self) -> list[cst.Call]:
        return [c for c in self.m.calls if qualified_is(_constructed(self.m.call_name(c)), LIGHTNING, {"Trainer"})]

    @cached_property
    def lightning_places(self) -> bool:
        """lightning/pytorch/core/module.py: the Trainer moves every batch to the module's device
        (`transfer_batch_to_device`); it does so for any accelerator but a CPU one."""
        return self.m.uses_cuda and not any(self._cpu_only_lightning(c) for c in self.lightning_trainers)

    @cached_property
    def determined_places(self) -> bool:
        """The Determined harness copies each batch to the trial's device (`context.to_device`), a GPU on GPU
        slots, unless the module turns that off (`context.experimental.disable_auto_to_device()`)."""
        return self.m.uses_cuda and not any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value == _DETERMINED_UNPLACED for c in self.m.calls
        )

    @cached_property
    def _lightning_accumulates(self) -> bool:
        """`Trainer(accumulate_grad_batches=k)` with k other than 1 (or not known)."""
        for trainer in self.lightning_trainers:
            value = call_argument(trainer, "accumulate_grad_batches")
            if value is not None:
                resolved = self.m.values.resolve(value)
                if resolved is None or resolved.value != 1:
                    return True
        return False

    def _is_lightning_trainer(self, expr: cst.BaseExpression) -> bool:
        conventional = ("trainer",) if self.imported & set(LIGHTNING) else ()
        # `pl.Trainer.from_argparse_args(args)` (Lightning 1.x) builds one too, as in `lightning_trainers`
        return self._constructor(expr, lambda n: qualified_is(_constructed(n), LIGHTNING, {"Trainer"}), conventional) is not None

    # ---- precision -----------------------------------------------------------------------------------

    @cached_property
    def precision(self) -> list[Precision]:
        """Lightning `Trainer(precision=...)` (lightning/pytorch/trainer/trainer.py: None means "32-true") and
        HF `TrainingArguments(fp16=..., bf16=...)` (both False by default)."""
        found = []
        for call in self.lightning_trainers:
            if self._cpu_only_lightning(call):
                continue
            unpacked = self._unpacked_settings(call)
            if unpacked is None or any("precision" in entries or _settings_say_cpu(entries) for _, entries in unpacked):
                continue  # `Trainer(**kwargs)`, or a shipped YAML that sets the precision or keeps it on the CPU
            value = call_argument(call, "precision")
            resolved = self.m.values.resolve(value) if value is not None else None
            if value is not None and resolved is None:
                continue
            setting = resolved.value if resolved is not None else None
            if setting in _FLOAT64_PRECISION:
                continue
            reason = "`precision` is not set" if value is None else f"`precision={self.m.code(value)}`"
            if value is None and unpacked:
                reason = f"`precision` is not set, nor in {_shipped_files(unpacked)}"
            float32 = setting in _FLOAT32_PRECISION
            # lightning/pytorch/accelerators/cuda.py only warns ("set torch.set_float32_matmul_precision") on Tensor Cores
            found.append(Precision(call, "the Lightning Trainer", float32, reason, '`precision="bf16-mixed"` (or `"16-mixed"`)', leaves_tf32=True))
        for arguments in self.trainer_arguments:
            if arguments.name in TRL_CONFIGS or arguments.on_cpu:
                continue
            fp16, bf16 = arguments.values.get("fp16"), arguments.values.get("bf16")
            if fp16 is None or bf16 is None:
                continue
            float32 = fp16.value is False and bf16.value is False
            given = [name for name in ("fp16", "bf16") if name in arguments.explicit]
            reason = "`fp16` and `bf16` are not set" if not given else "`fp16` and `bf16` are False"
            # transformers/training_args.py: `tf32=None` leaves `torch.backends.cuda.matmul.allow_tf32` as torch set it
            tf32 = arguments.values.get("tf32")
            leaves_tf32 = tf32 is not None and tf32.value is None and "tf32" not in arguments.explicit
            setting = "`bf16=True` (Ampere or newer) or `fp16=True`"
            found.append(Precision(arguments.call, f"`{arguments.name}`", float32, reason, setting, leaves_tf32=leaves_tf32))
        return found

    @cached_property
    def cudnn_heuristics(self) -> list[cst.Call]:
        """Lightning Trainers on the GPU that leave `benchmark` and `deterministic` unset (in the call and in the
        YAML it unpacks): lightning/pytorch/trainer/connectors/accelerator_connector.py then keeps
        `torch.backends.cudnn.benchmark` as torch set it, off."""
        found = []
        for call in self.lightning_trainers:
            if self._cpu_only_lightning(call):
                continue
            unpacked = self._unpacked_settings(call)
            if unpacked is None or any({"benchmark", "deterministic"} & set(entries) for _, entries in unpacked):
                continue  # `Trainer(**kwargs)`, or a shipped YAML that decides
            if call_argument(call, "benchmark") is None and call_argument(call, "deterministic") is None:
                found.append(call)
        return found

    # ---- HF TrainingArguments ------------------------------------------------------------------------

    @cached_property
    def trainer_arguments(self) -> list[TrainerArguments]:
        """Every `TrainingArguments(...)` / `Seq2SeqTrainingArguments(...)` / TRL config call, and calls of this
        module's dataclass subclasses of them, with their settings resolved (defaults where not given)."""
        if not self.imported & set(HF):
            return []
        found = []
        for call in self.m.calls:
            name = self.m.call_name(call)
            overrides: dict[str, cst.BaseExpression] = {}
            short = None
            if qualified_is(name, ("transformers",), TRAINING_ARGUMENTS) or qualified_is(name, ("trl",), TRL_CONFIGS):
                short = name.rsplit(".", 1)[-1]
            else:
                info = self.m.local_class_of(name)
                base = self._training_arguments_base(info.node.name.value) if info is not None else None
                if base is None:
                    continue
                short, overrides = base
            if replaced_before_use(self.m, call) or never_read(self.m, call):
                continue  # `args = TrainingArguments(...)` written again before any Trainer reads it, or never read
            found.append(self._arguments(call, short, overrides))
        return found

    @cached_property
    def hf_trainers(self) -> list[cst.Call]:
        """Every HF `Trainer(...)` (and TRL trainer) call of this module."""
        return [c for c in self.m.calls if qualified_is(self.m.call_name(c), HF, HF_TRAINER.names)]

    @staticmethod
    def hf_trainer_inputs(trainer: cst.Call) -> Optional[HFTrainerInputs]:
        """What an HF Trainer call is given to build its loaders; None when they are passed by position (past
        `model, args`) or unpacked, or no training dataset is given."""
        if any(a.star for a in trainer.args) or sum(a.keyword is None for a in trainer.args) > 2:
            return None
        train = call_argument(trainer, "train_dataset")
        if train is None:
            return None
        evaluation = call_argument(trainer, "eval_dataset")
        given = evaluation is not None and not (isinstance(evaluation, cst.Name) and evaluation.value == "None")
        datasets = (train, evaluation) if given else (train,)
        return HFTrainerInputs(call_argument(trainer, "args", 1), datasets, call_argument(trainer, "data_collator"))

    def _training_arguments_base(self, class_name: str, _seen: frozenset[str] = frozenset()):
        """(the transformers class it derives from, the field defaults it and its local bases override)."""
        info = self.m.classes.get(class_name)
        if info is None or class_name in _seen:
            return None
        overrides = {}
        for statement in info.node.body.body:
            for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value is not None:
                    overrides[small.target.value] = _field_default(self.m, small.value)
        for base in info.bases:
            if qualified_is(base, ("transformers",), TRAINING_ARGUMENTS) or qualified_is(base, ("trl",), TRL_CONFIGS):
                return base.rsplit(".", 1)[-1], overrides
            inherited = self._training_arguments_base(base, _seen | {class_name}) if base in self.m.classes else None
            if inherited is not None:
                return inherited[0], {**inherited[1], **overrides}
        return None

    def _arguments(self, call: cst.Call, short: str, overrides: dict) -> TrainerArguments:
        unpacked = any(a.star for a in call.args)
        values: dict[str, Optional[ResolvedValue]] = {}
        explicit = set()
        for setting, default in TRAINING_ARGUMENT_DEFAULTS.items():
            given = call_argument(call, setting)
            if given is not None:
                values[setting] = self.m.values.resolve(given)
                explicit.add(setting)
            elif setting in overrides:
                value = overrides[setting]
                values[setting] = self.m.values.resolve(value) if value is not None else None
                explicit.add(setting)
            elif unpacked or short in TRL_CONFIGS:
                values[setting] = None  # `TrainingArguments(**config)`, or a TRL default we do not assume
            else:
                values[setting] = ResolvedValue(default, call, FRAMEWORK_DEFAULT)
        return TrainerArguments(call, short, values, frozenset(explicit))

    @cached_property
    def debug_settings(self) -> list[tuple[cst.BaseExpression, str]]:
        """Debugging switched on in a framework's settings: Lightning `Trainer(detect_anomaly=True)`
        (lightning/pytorch/trainer/trainer.py: it runs every step under `torch.autograd.set_detect_anomaly`)."""
        found = []
        for trainer in self.lightning_trainers:
            value = call_argument(trainer, "detect_anomaly")
            if value is not None and self._true(trainer, "detect_anomaly"):
                found.append((value, "autograd anomaly detection (`detect_anomaly=True`)"))
        return found

    # ---- checkpoints -------------------------------------------------------------------------------------

    def saves_checkpoint(self, call: cst.Call) -> bool:
        """`torch.save(...)`, `model.save_pretrained(...)`, `accelerator.save_state(...)` / `save_model(...)`,
        Lightning `trainer.save_checkpoint(...)`, `fabric.save(...)`, HF `trainer.save_model(...)`: writes a
        checkpoint (a device-to-host copy of every tensor, then file I/O)."""
        m = self.m
        if m.call_name(call) == "torch.save":
            return True
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        method = func.attr.value
        if method in ("save_pretrained", "save_checkpoint"):
            return True
        if method in ("save_state", "save_model", "save") and self.imported:
            return self._constructor(
                func.value,
                lambda n: qualified_is(n, ACCELERATE, {"Accelerator"}) or qualified_is(n, LIGHTNING, {"Fabric"}) or qualified_is(n, HF, HF_TRAINER.names),
                conventional=("accelerator", "fabric", "trainer"),
            ) is not None
        return False

    # ---- DistributedDataParallel settings ------------------------------------------------------------

    @cached_property
    def unused_parameter_searches(self) -> list[tuple[cst.BaseExpression, str]]:
        """(the value, what it sets) for framework settings that turn on DDP's `find_unused_parameters`:
        Lightning `strategy="ddp_find_unused_parameters_true"` (lightning/pytorch/strategies/ddp.py registers
        the `ddp[_spawn|_fork|_notebook]_find_unused_parameters_true` aliases), `DDPStrategy(find_unused_parameters=True)`,
        accelerate `DistributedDataParallelKwargs(find_unused_parameters=True)`, ignite
        `idist.auto_model(model, find_unused_parameters=True)` (its keyword arguments go to DDP), HF
        `TrainingArguments(ddp_find_unused_parameters=True)`."""
        if not self.imported:
            return []
        found = []
        m = self.m
        for call in m.calls:
            name = m.call_name(call)
            if qualified_is(name, LIGHTNING, {"Trainer", "Fabric"}):
                strategy = call_argument(call, "strategy")
                resolved = m.values.resolve(strategy) if strategy is not None else None
                if resolved is not None and isinstance(resolved.value, str) and resolved.value.endswith("find_unused_parameters_true"):
                    found.append((strategy, f"`strategy={m.code(strategy)}`"))
            elif (
                qualified_is(name, LIGHTNING, {"DDPStrategy"})
                or qualified_is(name, ACCELERATE, {"DistributedDataParallelKwargs"})
                or name == "ignite.distributed.auto_model"
            ):
                value = call_argument(call, "find_unused_parameters")
                if value is not None and self._true(call, "find_unused_parameters"):
                    found.append((value, f"`{m.code(call.func)}(find_unused_parameters=True)`"))
        for arguments in self.trainer_arguments:
            value = arguments.values.get("ddp_find_unused_parameters")
            if value is not None and value.value is True and "ddp_find_unused_parameters" in arguments.explicit:
                found.append((value.node, f"`{arguments.name}(ddp_find_unused_parameters=True)`"))
        return found

    # ---- helpers ---------------------------------------------------------------------------------------

    def _constructor(self, expr: cst.BaseExpression, is_class, conventional: tuple[str, ...] = ()):
        """The constructor call a receiver comes from (`trainer = L.Trainer(...)`, `L.Trainer(...).fit`), or True
        for a name that conventionally holds one (`accelerator`, `fabric`, `trainer` passed in) with no other
        binding in sight; None otherwise."""
        m = self.m
        if isinstance(expr, cst.Call):
            return expr if is_class(m.call_name(expr)) else None
        key = dotted_name(expr)
        if key is None:
            return None
        writes = m.dataflow.reaching_writes(key, expr)
        closure = m.enclosing_function(expr)
        if not writes and isinstance(expr, cst.Name) and closure is not None and (id(closure), key) not in m.bindings:
            outer = m.enclosing_function(closure)
            if outer is not None:  # `evaluator.run(loader)` in a handler defined where `evaluator` is built
                writes = m.dataflow.reaching_writes(key, closure)
        calls = [w.value for w in writes if isinstance(w.value, cst.Call)]
        for call in calls:
            if is_class(m.call_name(call)):
                return call
        for call in calls:
            built = self._built_by_factory(call, is_class)
            if built is not None:
                return built
        if not writes and key.rsplit(".", 1)[-1] in conventional:
            return True
        return None

    def _built_by_factory(self, call: cst.Call, is_class, depth: int = 0) -> Optional[cst.Call]:
        """`trainer = create_trainer(...)`, a function of this module whose every return is such a construction
        (`trainer = create_supervised_trainer(...); ...; return trainer`): that constructor call."""
        m = self.m
        if depth > 1 or not isinstance(call.func, cst.Name) or len(m.functions.get(call.func.value, ())) != 1:
            return None
        func = m.functions[call.func.value][0]
        returns = [r.value for r in m.returns_of(func)]
        if not returns or any(r is None for r in returns):
            return None
        built = []
        for value in returns:
            if isinstance(value, cst.Call):
                found = value if is_class(m.call_name(value)) else self._built_by_factory(value, is_class, depth + 1)
            elif isinstance(value, cst.Name):
                writes = [w.value for w in m.dataflow.reaching_writes(value.value, value) if isinstance(w.value, cst.Call)]
                found = next((w for w in writes if is_class(m.call_name(w))), None)
            else:
                found = None
            if found is None:
                return None
            built.append(found)
        return built[0]

    def _false(self, call, keyword: str) -> bool:
        if call is True:
            return False
        value = call_argument(call, keyword)
        resolved = self.m.values.resolve(value) if value is not None else None
        return resolved is not None and resolved.value is False


def _hooks_bound_in_methods(methods) -> Iterator[tuple[str, str]]:
    """`self.train_dataloader = self._train_dataloader` in a method (usually `__init__`): an instance attribute
    that the framework calls as its hook, (hook, method) pairs."""
    for func in methods:
        for statement in _simple_statements(func.body):
            if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
                continue
            target, value = statement.targets[0].target, statement.value
            if all(
                isinstance(side, cst.Attribute) and isinstance(side.value, cst.Name) and side.value.value == "self"
                for side in (target, value)
            ):
                yield target.attr.value, value.attr.value


def _simple_statements(block: cst.BaseSuite) -> Iterator[cst.BaseSmallStatement]:
    """The small statements of a function body, looking into `if` blocks (`if train is not None:`)."""
    for statement in getattr(block, "body", ()):
        if isinstance(statement, cst.SimpleStatementLine):
            yield from statement.body
        elif isinstance(statement, cst.If):
            yield from _simple_statements(statement.body)
            if isinstance(statement.orelse, cst.Else):
                yield from _simple_statements(statement.orelse.body)


def qualified_is(qualified: Optional[str], roots: tuple[str, ...], names) -> bool:
    """`lightning.pytorch.Trainer`, `pytorch_lightning.Trainer`: a name under one of `roots` ending in one of `names`."""
    if not qualified:
        return False
    return qualified.split(".", 1)[0] in roots and qualified.rsplit(".", 1)[-1] in names


# Lightning 1.x's classmethod constructors (`Trainer.from_argparse_args(opt, **kwargs)`): a Trainer too.
_ALTERNATE_CONSTRUCTORS = (".from_argparse_args",)


def _constructed(qualified: Optional[str]) -> Optional[str]:
    """The class a call builds: `pytorch_lightning.Trainer` for `Trainer.from_argparse_args`, else the name itself."""
    if qualified and qualified.endswith(_ALTERNATE_CONSTRUCTORS):
        return qualified.rsplit(".", 1)[0]
    return qualified


def _settings_say_cpu(entries: dict) -> bool:
    """Trainer settings from a YAML file that keep it off the GPU: a CPU accelerator, or `gpus: 0` / `gpus: null`
    (Lightning 1.x trains on the CPU unless `gpus` names some)."""
    accelerator = entries.get("accelerator", (None, 0))[0]
    if isinstance(accelerator, str) and accelerator in _NOT_GPU:
        return True
    return any(key in entries and entries[key][0] in (None, 0, "0", "", False) for key in ("gpus", "devices"))


def _shipped_files(unpacked: list[tuple[str, dict]]) -> str:
    """`configs/vae.yaml`, or `configs/vae.yaml and the 22 settings files beside it`."""
    from gpulint.linter import display_path

    first = f"`{display_path(unpacked[0][0])}`"
    others = len({path for path, _ in unpacked}) - 1
    return first if not others else f"{first} and the {others} settings file{'s' if others > 1 else ''} beside it"


# Trainer arguments that exist only in Lightning 1.x (removed by 2.0): a Trainer built with one is a 1.x Trainer.
_LIGHTNING_1_ONLY = frozenset({
    "progress_bar_refresh_rate", "weights_summary", "checkpoint_callback", "flush_logs_every_n_steps",
    "terminate_on_nan", "prepare_data_per_node", "resume_from_checkpoint", "stochastic_weight_avg",
    "auto_select_gpus", "distributed_backend", "track_grad_norm", "weights_save_path", "truncated_bptt_steps",
})  # fmt: skip
# Trainer arguments that ask Lightning 1.x for a device (`gpus=1`, `devices=1` with its "auto" accelerator, ...).
_LIGHTNING_DEVICE_ARGUMENTS = frozenset({"gpus", "devices", "tpu_cores", "ipus", "hpus", "auto_select_gpus", "num_processes", "strategy", "plugins"})


def lightning_1_trainer(call: cst.Call) -> bool:
    """A Trainer built with an argument only Lightning 1.x has (`gpus=` included): before 1.6 its `benchmark`
    default is False, which it writes to `torch.backends.cudnn.benchmark` over a start-up setting."""
    given = {a.keyword.value for a in call.args if a.keyword is not None}
    return bool(given & (_LIGHTNING_1_ONLY | {"gpus"}))


def _cpu_by_default_lightning_1(call: cst.Call) -> bool:
    """`pl.Trainer(progress_bar_refresh_rate=20, max_epochs=10)`: a 1.x Trainer (an argument 2.0 removed) with
    no device argument and nothing unpacked, which 1.x runs on the CPU (its `accelerator` default is None)."""
    if any(a.star for a in call.args) or any(a.keyword is None for a in call.args):
        return False  # `Trainer(**cfg)`, or positional arguments whose names are not written
    given = {a.keyword.value for a in call.args if a.keyword is not None}
    return bool(given & _LIGHTNING_1_ONLY) and not given & _LIGHTNING_DEVICE_ARGUMENTS


# `gpus=` values that ask Lightning 1.x for no GPU (pytorch_lightning/utilities/device_parser.py, 1.x: 0 and None
# select none, and with no `accelerator` the Trainer runs on the CPU). Only literals written in the call count:
# `gpus=args.gpus` is chosen at launch, whatever its default.
_NO_GPUS = (0, None)


def _no_gpus_written(call: cst.Call) -> bool:
    """`pl.Trainer(gpus=0, max_epochs=2)`: a Lightning 1.x Trainer with no `accelerator` told to use no GPU."""
    if any(a.star for a in call.args):
        return False  # `Trainer(gpus=0, **cfg)`: the unpacked settings may name an accelerator
    value = call_argument(call, "gpus")
    if value is None:
        return False
    if isinstance(value, cst.Name) and value.value == "None":
        return True
    return isinstance(value, cst.Integer) and value.evaluated_value == 0


def call_argument(call: cst.Call, keyword: str, position: Optional[int] = None) -> Optional[cst.BaseExpression]:
    """The value of an argument by keyword, or by position when it has one."""
    positional = []
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
        if arg.keyword is None and not arg.star:
            positional.append(arg.value)
    if position is not None and position < len(positional) and not any(a.star for a in call.args):
        return positional[position]
    return None


def _parameter(func: cst.FunctionDef, position: Optional[int]) -> Optional[str]:
    """The name of the parameter at `position` after `self`."""
    if position is None:
        return None
    params = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    if params and params[0] in ("self", "cls"):
        params = params[1:]
    return params[position] if position < len(params) else None


def _field_default(model: SemanticModel, value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`field(default=4)` -> `4`; a plain default as it is; None for `default_factory` and friends."""
    if isinstance(value, cst.Call) and model.call_name(value) == "dataclasses.field":
        return call_argument(value, "default")
    return value


# ---- GPU context, from the module's `ast` (its summary records it, devices.EVIDENCE_FINDERS) ----------


def gpu_evidence(tree: ast.Module, qualify: Callable[[ast.AST], Optional[str]]) -> Iterator[tuple[str, int]]:
    """A framework set up to train on the GPU: a Lightning Trainer/Fabric whose accelerator may be a GPU (the
    default `auto` picks one), a Lightning module or data module with no Trainer here (it lives in another
    file, with that default), an `Accelerator` not forced onto the CPU, an HF Trainer (or a subclass), HF
    TrainingArguments without `use_cpu` / `no_cuda`, ignite's `idist.device()`, `deepspeed.initialize()`."""
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}

    answers: dict[str, Optional[str]] = {}  # once per class: bases shared by many descendants are not walked again

    def framework_base(name: str) -> Optional[str]:
        """The framework class a class of this module derives from (through its local bases)."""
        if name in answers:
            return answers[name]
        answers[name] = None  # while it is being answered: a cycle of bases adds nothing
        node = classes.get(name)
        found = None
        for base in node.bases if node is not None else ():
            qualified = qualify(base)
            if qualified is not None and qualified.split(".", 1)[0] in (*LIGHTNING, *HF, *ACCELERATE, *IGNITE, *DETERMINED):
                found = qualified
            elif isinstance(base, ast.Name):
                found = framework_base(base.id)
            if found is not None:
                break
        answers[name] = found
        return found

    lightning = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _constructed(qualify(node.func)) or (framework_base(node.func.id) if isinstance(node.func, ast.Name) else None)
        if qualified_is(name, LIGHTNING, {"Trainer", "Fabric"}):
            lightning.append(node)
            if _keyword_literal(node, "accelerator") not in _NOT_GPU and not _asks_no_gpus(node):
                yield f"a Lightning {name.rsplit('.', 1)[-1]} that may use a GPU", node.lineno
        elif qualified_is(name, ACCELERATE, {"Accelerator"}) and _keyword_literal(node, "cpu") is not True:
            yield "an `Accelerator()`", node.lineno
        elif qualified_is(name, HF, HF_TRAINER.names):
            yield "an HF Trainer", node.lineno
        elif qualified_is(name, ("transformers",), TRAINING_ARGUMENTS) or qualified_is(name, ("trl",), TRL_CONFIGS):
            if _keyword_literal(node, "use_cpu") is not True and _keyword_literal(node, "no_cuda") is not True:
                yield f"`{name.rsplit('.', 1)[-1]}` without `use_cpu`", node.lineno
        elif name == "ignite.distributed.device" or name in MODEL_PLACERS:
            yield f"`{name.rsplit('.', 1)[-1]}()`", node.lineno  # ignite/distributed/comp_models/base.py: CUDA when available
        elif name == "deepspeed.initialize":
            yield "`deepspeed.initialize()`", node.lineno  # the engine moves the model to this rank's accelerator
        elif name in RAY_SCALING_CONFIGS and any(k.arg == "use_gpu" for k in node.keywords) and _keyword_literal(node, "use_gpu") is not False:
            yield "a Ray Train `ScalingConfig` that may use GPUs", node.lineno
    for class_name, node in classes.items():
        base = framework_base(class_name)
        what = _gpu_base(base) if base is not None else None
        if what is not None and (not lightning or qualified_is(base, HF, HF_TRAINER.names)):
            yield f"`{class_name}` (derived from {what})", node.lineno


def _gpu_base(qualified: str) -> Optional[str]:
    """A framework class whose subclasses train on the GPU by default: a Lightning module or data module (the
    Trainer's default accelerator is `auto`), an HF Trainer."""
    if qualified_is(qualified, LIGHTNING, {*LIGHTNING_MODULE.names, *LIGHTNING_DATAMODULE.names}):
        return f"a Lightning {qualified.rsplit('.', 1)[-1]}"
    if qualified_is(qualified, HF, HF_TRAINER.names):
        return f"the HF `{qualified.rsplit('.', 1)[-1]}`"
    if qualified_is(qualified, DETERMINED, DETERMINED_TRIAL.names):
        return "Determined's `PyTorchTrial` (one GPU slot per trial by default)"
    return None


def _asks_no_gpus(call: ast.Call) -> bool:
    """`Trainer(gpus=0)` / `Trainer(gpus=None)` with no `accelerator` and nothing unpacked (as `_no_gpus_written`)."""
    if any(kw.arg is None for kw in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    if any(kw.arg == "accelerator" for kw in call.keywords):
        return False  # a CPU accelerator is decided above; any other may be a GPU
    given = [kw.value for kw in call.keywords if kw.arg == "gpus"]
    return bool(given) and isinstance(given[0], ast.Constant) and given[0].value in _NO_GPUS and given[0].value is not False


def _keyword_literal(call: ast.Call, keyword: str) -> object:
    """The literal value of a keyword argument; `...` when it is absent or not a literal."""
    for kw in call.keywords:
        if kw.arg == keyword:
            return kw.value.value if isinstance(kw.value, ast.Constant) else ...
    return ...


EVIDENCE_FINDERS.append(gpu_evidence)
BASE_EVIDENCE.append(_gpu_base)
GPU_TEXT_MARKERS.extend(CONTEXT_MARKERS)
