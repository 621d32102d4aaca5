"""Module summaries: what one file tells the rest of the project, read with CPython's `ast` (no LibCST).

A summary is computed once per file from its own source, holds no tree (plain data that round-trips
through JSON, cached by content hash) and is composed with other files' summaries by the project index
(`gpulint/analysis/project.py`).

Each function (each method as `Class.method`, and the module body as `<module>`) is read once, statement by
statement, with an environment of what its names hold. What comes from outside the function is a *source*:

    p:<name>   a parameter             c:<i>    the result of its i-th recorded call (c:<i>.<k>: element k)
    l:<j>      a batch of its j-th loop    g:<name> an imported name
    i:<name>   in a method, an attribute the constructor set from its parameter (`self.device = device`)

What the function does with a source is an *effect* (moved to the GPU, synchronised on, iterated, used as
a device, passed to a call, returned), and what it does on its own (a training step, a host sync on a
value it moved itself) is recorded with the function. The index follows `pass` effects into the callee's
summary: that is how facts cross calls and modules. Values derived from a source by tensor operations
(`out = model(x)`, `acc = (out.argmax(1) == y).float()`) stay tied to that source.

Values are small tuples: ("src", "p:x|c:2"), ("loader", facts), ("module",), ("gpu_module",), ("gpu",),
("host",) (what `.item()` / `.cpu()` give), ("device",), ("args", options), ("moved", value),
("tuple", (values...)), or None (unknown). A source list that starts with `*` is also a GPU tensor of the
function's own.
"""

from __future__ import annotations

import ast
import re
import sys
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable, Optional

from gpulint.analysis.communication import backend_questions, chosen_by_backend, starts_async_communication, waits_for_work
from gpulint.analysis.convolutions import CONV_NET, CONV_NET_FACTORIES, builds_convolution
from gpulint.analysis.forward_coverage import class_runs
from gpulint.analysis.held_defaults import held_attribute_defaults
from gpulint.analysis.time_step_loops import RECURRENT_CELLS
from gpulint.analysis.default_device import default_device_ranges, mentions_default_device
from gpulint.analysis.devices import EVIDENCE_FINDERS, GPU_TEXT_MARKERS, MODEL_PLACERS
from gpulint.analysis.error_paths import EXITS
from gpulint.analysis.generation import generates_text
from gpulint.analysis.handed_instances import SUPER_INIT, handed, handed_attribute
from gpulint.analysis.inherited_members import moved_attribute
from gpulint.analysis.held_data import held_data
from gpulint.analysis.returned_transforms import returned_transforms
from gpulint.analysis.host_objects import names_a_tokenizer
from gpulint.analysis.imports import ast_dotted_name, canonical
from gpulint.analysis.instantiated import INSTANTIATORS, hydra_main, instantiation
from gpulint.analysis.legacy_torch import copies_with_async, number_read_in, number_read_kind
from gpulint.analysis.loader_classes import LIBRARY_LOADERS, loader_classes
from gpulint.analysis.namespace_settings import UNKNOWN as UNKNOWN_FLAG
from gpulint.analysis.namespace_settings import namespace_flags
from gpulint.analysis.settings_defaults import config_paths
from gpulint.analysis.unpacked_settings import KEY as UNPACKED
from gpulint.analysis.unpacked_settings import unpacked_sections

FORMAT = 10  # 10: session 19 (calls made with autograd decided: `grad_decided`); 9: session 17 (YAML sections unpacked into calls: `literals["**"]`; attributes aliasing a made instance); 8: session 16 (results of methods of handed instances); 7: session 16 (backend-only cuda questions, library loaders in summaries); 6: session 15 (comprehension reads, module-level instances, held method defaults, models handed in eval mode, imported parsers)
# 5: session 14 (placed attributes, module uses, repeated shape ops, held data through helpers)
# Methods only an `nn.Module` has among the objects training code handles (an optimizer has `state_dict` and
# `zero_grad`, an agent or a trainer may have `train`): called on a parameter, they say the caller gives a module.
_MODULE_ONLY_METHODS = frozenset({"eval", "parameters", "named_parameters", "modules", "named_modules", "children", "buffers"})
MODULE_BODY = "<module>"
INTERNAL = "*"  # effects on values the function made itself (a tensor it moved, the device)

# torch.utils.data.DataLoader's positional parameters, in order.
_LOADER_POSITIONAL = (
    "dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn", "pin_memory",
)  # fmt: skip
_LOADER_FACTS = frozenset({"batch_size", "shuffle", "num_workers", "pin_memory", "persistent_workers", "batch_sampler"})
DATALOADER = "torch.utils.data.DataLoader"

# Kept in step with residency.py (the LibCST model): the same names mean the same things here.
_DEVICE_NAME = re.compile(r"(^|_)(device|dev|cuda|gpu)$")
# Functions that return the device to use (`dist_util.dev()`, `utils.get_device()`).
_DEVICE_GETTER = re.compile(r"^(get_|default_)?(device|dev)$")
# Integers that hold a device index by convention (`model.to(local_rank)`, `x.cuda(args.gpu_id)`).
CLOCKS = frozenset({
    "time.time", "time.perf_counter", "time.monotonic", "time.process_time", "time.perf_counter_ns", "time.time_ns",
    "time.monotonic_ns", "timeit.default_timer",
})  # fmt: skip
# A step timer's calls read a clock too: `tic`/`toc` by convention (`train_meter.iter_toc()`), and a timer
# object's verbs (`self.iter_timer.pause()`, fvcore's `Timer`).
_TIC_TOC = re.compile(r"(^|_)(tic|toc)$")
_TIMER_VERBS = frozenset({"pause", "resume", "reset", "start", "stop", "tic", "toc", "lap", "seconds", "elapsed"})


def times_a_step(method: str, receiver: str) -> bool:
    """`meter.iter_toc()`, `timer.pause()`: a call that reads a clock, given its method and dotted receiver."""
    return bool(_TIC_TOC.search(method)) or ("timer" in receiver.rsplit(".", 1)[-1].lower() and method in _TIMER_VERBS)


# `torch.device("cpu" if backend == "gloo" else "cuda")`: the process group decides (`communication.chosen_by_backend`).
_GROUP_DEVICE = ("group_device",)
DEVICE_INDEX_NAME = re.compile(r"^(local_rank|rank|gpu|gpu_id|gpu_idx|device_id|device_ids?|local_device)$")
_OPTIMIZER = re.compile(r"(self\.)?((\w*_)?optim(izer)?\w*|opt(_\w+|[A-Z]\w*)?)")
_RATE_NAME = re.compile(
    r"(log|print|display|report|eval|val|save|ckpt|checkpoint|summary|sample)\w*_?(step|every|interval|freq|iter|period)"
    r"|should_(log|print|report|eval|save)|is_(log|logging|print|report|eval|last)\w*|^(log|logging|verbose)_?now$",
    re.IGNORECASE,
)
_PARAMETER_LISTS = frozenset({"parameters", "named_parameters"})
_HOST_METHODS = frozenset({
    "item", "tolist", "numpy", "cpu", "size", "dim", "numel", "nelement", "element_size", "data_ptr", "stride",
    "is_contiguous", "get_device", "backward", "register_hook", "state_dict", "parameters", "named_parameters",
    "buffers", "modules", "children", "named_modules", "keys", "__len__", "is_floating_point", "zero_grad", "step",
    "train", "eval", "format", "join", "startswith", "append", "extend", "update", "add_scalar",
    "log", "write", "info", "debug", "warning", "synchronize", "record_stream", "ndimension", "is_pinned",
    "is_shared", "is_signed", "is_inference",
})  # fmt: skip
_HOST_ATTRIBUTES = frozenset({
    "shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "training", "is_leaf", "layout", "is_sparse",
    "is_quantized", "is_meta", "nbytes", "itemsize", "names", "grad_fn",
})  # fmt: skip
_SYNC_METHODS = frozenset({"item", "tolist", "numpy", "cpu"})
_TENSOR_METADATA = frozenset({"size", "dim", "ndimension", "numel", "nelement"})  # host values of any tensor
# A value tied to more possible instances is unknown: each method call on a call's result is tied to both, so a
# builder chain (`Builder.a(..).b(..).c(..)`, 40 calls long) would double them at every call
_MAX_CANDIDATE_INSTANCES = 8
_SYNC_BUILTINS = frozenset({"float", "int", "bool", "print", "str", "repr"})
# Ops whose output size depends on the data (residency._DATA_DEPENDENT_SHAPE: the host waits to learn it).
_DATA_DEPENDENT_SHAPE = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"})
# Factories whose positional arguments (or `size=`) are the size of the tensor they allocate.
# Receivers of `.step(action)` that are environments (`env`, `self.env`, `envs`, `train_env`, `environment`).
ENVIRONMENT = re.compile(r"(^|[._])\w*env(s|ironment)?\w*$", re.IGNORECASE)
_SIZED = frozenset({"empty", "zeros", "ones", "full", "rand", "randn", "empty_strided"})
# `shape = t.tolist()`, `n = t.item()`, `n = int(t)`: a read whose host value a later allocation may need.
_HOST_READS = frozenset({"tolist", "item"})
# torchvision's non-maximum suppression: its output size depends on the data, and its CUDA kernel finishes the
# suppression on the host (it copies the overlap mask back), so every call waits for the GPU. A function that runs
# it returns a data-dependent number of detections by design: no fixed-shape form exists for its other
# data-dependent ops (`x[conf > t]`, `nonzero()`), whose waits are the algorithm's (GPU306 is not reported at its calls).
NMS_OPS = frozenset({"torchvision.ops.nms", "torchvision.ops.batched_nms", "torchvision.ops.boxes.nms", "torchvision.ops.boxes.batched_nms"})
_CLASS_HOLDER = re.compile(r"(^|_)(class|cls)$")  # `algorithm_class = algorithms.get_algorithm_class(name)`
_WRAPPERS = frozenset({"enumerate", "zip", "iter", "tqdm"})
_FACTORIES = frozenset({
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "eye", "arange", "linspace", "logspace", "rand", "randn",
    "randint", "randperm", "normal", "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
})  # fmt: skip
_BUILTINS = frozenset(dir(__import__("builtins")))
_MODULE_METHODS_RETURNING_SELF = frozenset({"to", "cuda", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_"})
# Call roots that are never project code: the standard library and the big libraries training code uses.
_LIBRARIES = frozenset(sys.stdlib_module_names) | {
    "torch", "numpy", "np", "torchvision", "torchaudio", "torchtext", "transformers", "datasets", "tqdm", "PIL",
    "matplotlib", "pandas", "sklearn", "scipy", "cv2", "wandb", "tensorboard", "tensorboardX", "yaml", "omegaconf",
    "hydra", "timm", "accelerate", "lightning", "pytorch_lightning", "einops", "apex", "deepspeed", "h5py",
}  # fmt: skip

# What `fabric.setup_dataloaders(loader)` / `accelerator.prepare_data_loader(loader)` return: a loader whose batches the
# framework places on its device; a function whose callers all hand it one iterates device batches (`handed_loaders.py`).
PLACED_LOADER = "placed_loader"
_PLACING_FEEDS = frozenset({"setup_dataloaders", "prepare_data_loader"})
# Framework calls that take a loader and run the loop over it, copying its batches to the device
# (`analysis/frameworks.py` holds the details): method -> (the framework's packages, whether that loop trains).
_FRAMEWORK_FEEDS = {
    "prepare": (("accelerate",), True),
    "prepare_data_loader": (("accelerate",), True),
    "setup_dataloaders": (("lightning", "lightning_fabric"), True),
    "fit": (("lightning", "pytorch_lightning"), True),
    "validate": (("lightning", "pytorch_lightning"), False),
    "test": (("lightning", "pytorch_lightning"), False),
    "run": (("ignite",), True),
}


@dataclass
class FunctionSummary:
    line: int
    params: tuple[str, ...]  # positional, `self` included
    kwonly: tuple[str, ...] = ()
    calls: list[tuple] = field(default_factory=list)  # (ref, line, args, kwargs, loop, guarded)
    loops: list[tuple] = field(default_factory=list)  # (line, trains here, enclosing loop or -1)
    effects: dict[str, list[tuple]] = field(default_factory=dict)
    returns: list[Any] = field(default_factory=list)  # the value of each `return`
    trains: bool = False  # a backward pass or an optimizer step in this function itself
    gpu: bool = False  # GPU evidence in this function itself
    # the convolutions it builds itself (`nn.Conv2d(...)`, `resnet18()`), up to 3 (one in a loop counts as 3)
    convolutions: int = 0
    optional_parts: tuple[int, ...] = ()  # in `__init__`, the calls under an `if` (parts built for some settings only)
    # call index -> the arguments written as literals (position or keyword -> value: `ComputeLoss(model, False)`)
    literals: dict[int, dict] = field(default_factory=dict)
    # in a script that imports Hydra / OmegaConf: call index -> the arguments that are reads of a config parameter
    # (position or keyword -> (`p:cfg` / `i:cfg`, keys)); -1 -> (config_path, config_name) of `@hydra.main`
    configs: dict[int, dict] = field(default_factory=dict)
    generates: bool = False  # it runs a model's `generate(...)` unguarded (`analysis/generation.py`)
    # call index -> the arguments that are a parameter of the function written as its bare name (position or
    # keyword -> name: `evaluate(model, val_loader)` in `train(model, val_loader)`)
    names: dict[int, dict] = field(default_factory=dict)
    cells: int = 0  # the recurrent cells it builds (`nn.GRUCell(...)`: one time step a call, `analysis/time_step_loops.py`)
    looped_calls: tuple[str, ...] = ()  # the `self.<attr>(...)` modules it calls inside a loop of its own
    # call index -> the arguments that read one setting of a parsed command line (position or keyword -> ("p:args",
    # "batch_size") for `args.batch_size` with `args` a parameter, or ("default", 1, line) where `args` is this
    # function's own `parser.parse_args()` result): what a factory is given when the callers use the defaults
    options: dict[int, dict] = field(default_factory=dict)
    # call index -> the arguments that are `self.<attribute>` the class keeps from a parameter default of one of its
    # methods (position or keyword -> [default, line, attribute]: `analysis/held_defaults.py`)
    held: dict[int, dict] = field(default_factory=dict)
    # call index -> the arguments (position or keyword) that are a module switched to eval mode earlier in this
    # function (`model.eval()`, no `.train()` since) with autograd on at the call (`analysis/evaluated_params.py`)
    evaluated: dict[int, list] = field(default_factory=dict)
    # of those calls, the ones that evaluate a handful of items typed on the command line: the function reads an option
    # of `nargs="+"` / `"*"` (`sound_files`), and every loop around the call runs over `range(...)` or that option
    typed: tuple[int, ...] = ()
    # call indices made where autograd is off or decided (`with torch.no_grad():`, a `@torch.no_grad()` function,
    # `torch.set_grad_enabled(False)` earlier): what its callees run there records no graph (`analysis/grad_callers.py`)
    grad_decided: tuple[int, ...] = ()

    def to_json(self) -> list:
        full = [
            self.line, self.params, self.kwonly, self.calls, self.loops, self.effects, self.returns, self.trains, self.gpu,
            self.convolutions, self.optional_parts, [[i, list(v.items())] for i, v in self.literals.items()],
            [[i, list(v.items())] for i, v in self.configs.items()], self.generates,
            [[i, list(v.items())] for i, v in self.names.items()], self.cells, self.looped_calls,
            [[i, list(v.items())] for i, v in self.options.items()],
            [[i, list(v.items())] for i, v in self.held.items()], [[i, v] for i, v in self.evaluated.items()], list(self.typed),
            list(self.grad_decided),
        ]  # fmt: skip
        while len(full) > 2 and not full[-1]:
            full.pop()  # most functions call nothing the project defines: keep their summary short
        return full

    @classmethod
    def from_json(cls, data: list) -> FunctionSummary:
        line, params, kwonly, calls, loops, effects, returns, trains, gpu, convolutions, optional, literals, configs, generates, names, cells, looped, options, held, evaluated, typed, grad_decided = [
            *data, *([None] * (22 - len(data)))
        ]  # fmt: skip
        return cls(
            line,
            tuple(params),
            tuple(kwonly or ()),
            [(c[0], c[1], tuple(map(_value, c[2])), {k: _value(v) for k, v in c[3].items()}, *c[4:]) for c in calls or ()],
            [tuple(loop) for loop in loops or ()],
            {k: [tuple(e) for e in v] for k, v in (effects or {}).items()},  # effects hold no nested values
            [_value(r) for r in returns or ()],
            bool(trains),
            bool(gpu),
            int(convolutions or 0),
            tuple(optional or ()),
            {i: dict(pairs) for i, pairs in literals or ()},
            {i: {k: (v[0], tuple(v[1]) if isinstance(v[1], list) else v[1]) for k, v in pairs} for i, pairs in configs or ()},
            bool(generates),
            {i: dict(pairs) for i, pairs in names or ()},
            int(cells or 0),
            tuple(looped or ()),
            {i: {k: tuple(v) for k, v in pairs} for i, pairs in options or ()},
            {i: {k: list(v) for k, v in pairs} for i, pairs in held or ()},
            {i: list(v) for i, v in evaluated or ()},
            tuple(typed or ()),
            tuple(grad_decided or ()),
        )


@dataclass
class ClassSummary:
    line: int
    bases: tuple[str, ...]  # as written, import-resolved where possible (`torch.nn.Module`, `models.Base`)
    methods: tuple[str, ...]
    attributes: dict[str, Any] = field(default_factory=dict)  # `self.x = <value>` in its methods
    asks_worker_info: bool = False  # `get_worker_info` in the class or its module: it may shard a stream by worker
    # what its `forward` path does with the submodules `__init__` builds (`analysis/forward_coverage.py`)
    runs: Optional[dict] = None
    # the number its `__len__` returns when every `return` there is the same integer literal (`return 1`: a data set
    # of one sample, Tune-A-Video's one video); None: not written in the code
    length: Optional[int] = None

    def to_json(self) -> list:
        return [self.line, self.bases, self.methods, self.attributes, self.asks_worker_info, self.runs, self.length]

    @classmethod
    def from_json(cls, data: list) -> ClassSummary:
        line, bases, methods, attributes, asks_worker_info, runs, length = [*data, *([None] * (7 - len(data)))]
        return cls(line, tuple(bases), tuple(methods), {k: _value(v) for k, v in attributes.items()}, asks_worker_info, runs, length)


@dataclass
class ModuleSummary:
    imports: dict[str, tuple] = field(default_factory=dict)  # local name -> (level, module, name or None)
    stars: list[tuple] = field(default_factory=list)  # `from utils import *`: (level, module)
    functions: dict[str, FunctionSummary] = field(default_factory=dict)
    classes: dict[str, ClassSummary] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)  # module-level names bound once, and their value
    evidence: list[tuple[str, int]] = field(default_factory=list)  # own GPU evidence: (what, line)
    ok: bool = True  # False: `ast` could not parse the file (nothing is known about it)
    # setting files it names: ("file", "configs/x.yaml"), ("hydra", <config_path>), or ("launch", "") for a script
    # with command-line flags that job files may launch (analysis/settings_files.py)
    settings: list[tuple[str, str]] = field(default_factory=list)
    # `__all__`: None when the module has none (a star import takes every public name), else its names as
    # written (empty when not a literal list: a star import then binds nothing that is known)
    exports: Optional[tuple[str, ...]] = None
    # datasets and collate classes that hand out data held in memory (`analysis/held_data.py`)
    held: dict[str, Any] = field(default_factory=dict)
    # names of the module's own or imported functions and classes read other than as a call's callee (handed on
    # as values: `partial(Loss, ...)`, `{"focal": Loss}`): their calls are out of sight (`analysis/call_arguments.py`)
    handed: tuple[str, ...] = ()
    # yacs defaults it writes, dotted settings it writes elsewhere and reads (`analysis/settings_defaults.py`)
    config_paths: dict[str, Any] = field(default_factory=dict)
    # its classes whose call builds a DataLoader from their arguments -> signature (`analysis/loader_classes.py`)
    loader_classes: dict[str, dict] = field(default_factory=dict)
    # names imports bind to different things (`from models.a import A as M` in one branch, `... B as M` in another):
    # which one a call of the name makes is the settings' choice (`analysis/factory_instances.py`)
    rebound: tuple[str, ...] = ()
    # function key -> the line ranges in which the default device may be CUDA; `<import>`: set when imported
    # (`analysis/default_device.py`)
    default_devices: dict[str, list] = field(default_factory=dict)
    # its functions that return torchvision transforms -> their steps (`analysis/returned_transforms.py`)
    transforms: dict[str, Any] = field(default_factory=dict)
    # a digest of its code lines (blank and comment-only lines left out): equal in a copy (`analysis/superseded_code.py`)
    code: str = ""

    def to_json(self) -> dict:
        return {
            "imports": self.imports,
            "stars": self.stars,
            "functions": {k: f.to_json() for k, f in self.functions.items()},
            "classes": {k: c.to_json() for k, c in self.classes.items()},
            "values": self.values,
            "evidence": self.evidence,
            "ok": self.ok,
            "settings": self.settings,
            "exports": self.exports,
            "held": self.held,
            "handed": self.handed,
            "config_paths": self.config_paths,
            "loader_classes": self.loader_classes,
            "rebound": self.rebound,
            "default_devices": self.default_devices,
            "transforms": self.transforms,
            "code": self.code,
        }

    @classmethod
    def from_json(cls, data: dict) -> ModuleSummary:
        return cls(
            {k: tuple(v) for k, v in data["imports"].items()},
            [tuple(v) for v in data.get("stars", ())],
            {k: FunctionSummary.from_json(v) for k, v in data["functions"].items()},
            {k: ClassSummary.from_json(v) for k, v in data["classes"].items()},
            {k: _value(v) for k, v in data["values"].items()},
            [tuple(e) for e in data["evidence"]],
            data["ok"],
            [tuple(e) for e in data.get("settings", ())],
            tuple(data["exports"]) if data.get("exports") is not None else None,
            data.get("held", {}),
            tuple(data.get("handed", ())),
            data.get("config_paths", {}),
            data.get("loader_classes", {}),
            tuple(data.get("rebound", ())),
            data.get("default_devices", {}),
            data.get("transforms", {}),
            data.get("code", ""),
        )


def _value(value: Any) -> Any:
    """JSON gives lists back: values are compared as the tuples they were (dicts inside, such as a loader's
    facts, stay dicts)."""
    if type(value) is list:
        return tuple(_value(v) for v in value)
    return value


def _listed_parameters(test: ast.AST) -> frozenset[str]:
    """`isinstance(preds, (list, tuple))` (also `list` or `tuple` alone): the names the test finds to be lists."""
    if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance" and len(test.args) == 2):
        return frozenset()
    name, kinds = test.args
    written = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    if isinstance(name, ast.Name) and written and all(isinstance(k, ast.Name) and k.id in ("list", "tuple") for k in written):
        return frozenset({name.id})
    return frozenset()


_GRAD_MODES = frozenset({
    "torch.no_grad", "torch.inference_mode", "torch.set_grad_enabled", "torch.enable_grad", "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.set_grad_enabled",
})  # fmt: skip


def _grad_mode(expr: ast.AST, qualify) -> bool:
    """`torch.no_grad()` / `torch.inference_mode()` / `torch.set_grad_enabled(...)` (a context or decorator, called or
    not), or a project helper named like one (`@smart_inference_mode()`): autograd is decided there."""
    target = expr.func if isinstance(expr, ast.Call) else expr
    if qualify(target) in _GRAD_MODES:
        return True
    name = ast_dotted_name(target) or ""
    return "no_grad" in name or "inference_mode" in name


def _literal_length(methods: list[ast.AST]) -> Optional[int]:
    """What `__len__` returns when each of its `return`s is the same non-negative integer literal (`return 1`)."""
    length = next((m for m in methods if m.name == "__len__"), None)
    if length is None:
        return None
    values = {
        r.value.value if isinstance(r.value, ast.Constant) and type(r.value.value) is int else None
        for r in ast.walk(length) if isinstance(r, ast.Return)
    }  # fmt: skip
    value = values.pop() if len(values) == 1 else None
    return value if value is not None and value >= 0 else None


def _calls_super_init(func: ast.AST) -> bool:
    """`super().__init__` / `super(Cls, self).__init__`."""
    return (
        isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name) and func.value.func.id == "super"
    )  # fmt: skip


def sources_of(value: Any) -> list[str]:
    """The sources a value is tied to: `("src", "p:x|c:1")` -> ["p:x", "c:1"]."""
    if isinstance(value, tuple) and value and value[0] == "src":
        return value[1].split("|")
    return []


def deep_sources(value: Any) -> list[str]:
    """Sources anywhere in a value, inside tuples and moves too (what a call is handed)."""
    if not isinstance(value, tuple) or not value:
        return []
    if value[0] == "src":
        return value[1].split("|")
    if value[0] == "tuple":
        return [s for part in value[1] for s in deep_sources(part)]
    if value[0] == "moved":
        return deep_sources(value[1])
    return []


def parse_for_summary(text: str) -> Optional[ast.Module]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except SyntaxError as error:
        from gpulint.recovery import recover

        from gpulint.databricks import read_export

        recovered = recover(text, error)  # Python 3.6 code (`async=True`): other modules import it too
        if recovered is None:
            export = read_export(text)  # a Databricks notebook with a `!cmd` escape
            return None if export is None or isinstance(export, SyntaxError) else export.tree
        return recovered.tree
    except (ValueError, RecursionError, MemoryError):
        return None


def summarize(text: str, tree: Optional[ast.Module] = None) -> ModuleSummary:
    """The summary of one module's source (`tree`: the same source already parsed by `ast`)."""
    tree = tree if tree is not None else parse_for_summary(text)
    if tree is None:
        return ModuleSummary(ok=False)
    try:
        summary = _Builder(tree, text).build()
    except RecursionError:
        return ModuleSummary(ok=False)
    summary.code = code_digest(text, tree)
    return summary


def code_digest(text: str, tree: ast.Module) -> str:
    """A digest of the module's code lines, stripped, without blank and comment-only lines and without its
    top-level string statements (the docstring): the same for a file and its copy, and for a script and the
    notebook sphinx-gallery makes of it (its docstring and comment blocks become text cells). Line work only:
    no second walk of the tree."""
    import hashlib

    lines = text.splitlines()
    kept = []
    for statement in tree.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str):
            continue
        first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])
        for line in lines[first - 1 : statement.end_lineno or statement.lineno]:
            line = line.strip()
            if line and not line.startswith("#"):
                kept.append(line)
    code = "\n".join(kept)
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest() if code else ""


# ---- building --------------------------------------------------------------------------------------


def _exports(body: list[ast.stmt]) -> Optional[tuple[str, ...]]:
    """The names of a module-level `__all__ = [...]` (or `(...)`), () when it is built some other way."""
    found = None
    for stmt in _module_statements(body):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, (ast.AugAssign, ast.AnnAssign)) else []
        if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        value = stmt.value
        if found is not None or not isinstance(stmt, ast.Assign) or not isinstance(value, (ast.List, ast.Tuple)):
            return ()
        names = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(names) != len(value.elts):
            return ()
        found = tuple(names)
    return found


def _batch_of_one(call: ast.Call) -> bool:
    """`model(img.unsqueeze(0))`, `model(x[None].cuda())`: the call's first argument is one item made a batch."""
    expr = call.args[0] if call.args and not isinstance(call.args[0], ast.Starred) else None
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "unsqueeze":
            dim = expr.args[0] if expr.args else next((k.value for k in expr.keywords if k.arg == "dim"), None)
            return isinstance(dim, ast.Constant) and dim.value == 0
        if expr.func.attr not in ("cuda", "to", "float", "half", "contiguous", "detach"):
            return False
        expr = expr.func.value
    if isinstance(expr, ast.Subscript):
        first = expr.slice.elts[0] if isinstance(expr.slice, ast.Tuple) and expr.slice.elts else expr.slice
        return isinstance(first, ast.Constant) and first.value is None
    return False


def _literal(node: ast.AST) -> tuple[bool, Any]:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        return True, node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, -value
    return False, None


def handed_names(tree: ast.AST, known: set[str]) -> tuple[str, ...]:
    """`known` names (and `module.name` of imported modules) read other than as the callee of a call, nor as the
    base of an attribute (handed on as values), or called where the summary's readers do not look (in a function
    or class nested in a function, in a class body outside its methods, in a lambda): their calls are out of
    sight. Also `.name` for attributes assigned on objects other than `self` (`loss.autobalance = True`)."""
    skipped: set[int] = set()  # callees of recorded calls and bases of attributes: not handed on
    found: set[str] = set()
    stack: list[tuple[ast.AST, int, bool]] = [(tree, 0, False)]
    while stack:  # parents before children: (node, functions around it, directly in a class body)
        node, depth, in_class = stack.pop()
        kind = type(node)
        if kind is ast.Call:
            if not (depth > 1 or in_class):
                skipped.add(id(node.func))
            func = node.func
            if type(func) is ast.Name and func.id == "super" and node.args:
                skipped.add(id(node.args[0]))  # `super(Loss, self).__init__()`: names its own class
        elif kind is ast.Attribute:
            skipped.add(id(node.value))
            if type(node.ctx) is not ast.Load:
                if not (type(node.value) is ast.Name and node.value.id == "self"):
                    found.add(f".{node.attr}")
            elif id(node) not in skipped:
                dotted = ast_dotted_name(node)
                if dotted is not None and dotted.split(".", 1)[0] in known:
                    found.add(dotted)
        elif kind is ast.Name:
            if node.id in known and type(node.ctx) is ast.Load and id(node) not in skipped:
                found.add(node.id)
        for child in ast.iter_child_nodes(node):
            child_kind = type(child)
            if child_kind is ast.FunctionDef or child_kind is ast.AsyncFunctionDef:
                stack.append((child, depth + 1, False))
            elif child_kind is ast.ClassDef:
                stack.append((child, depth + (1 if depth else 0), True))
            elif child_kind is ast.Lambda:
                stack.append((child, depth + 2, False))
            else:
                stack.append((child, depth, in_class))
    names = sorted(n for n in found if not n.startswith("."))
    stored = sorted(n for n in found if n.startswith("."))
    # "*": too many names to list, any may be handed on; ".*": any attribute may be set from outside
    return (*(names if len(names) <= 256 else ["*"]), *(stored if len(stored) <= 256 else [".*"]))


def _arguments(node: ast.Call) -> Iterable[tuple[Any, ast.AST]]:
    """(position or keyword, value) of a call's arguments, up to the first `*args`."""
    for i, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred):
            return
        yield i, arg
    for keyword in node.keywords:
        if keyword.arg:
            yield keyword.arg, keyword.value


def _literal_arguments(node: ast.Call) -> dict:
    """The arguments of a call written as literals: position or keyword -> value (`analysis/call_arguments.py`)."""
    found: dict = {}
    for i, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred):
            break
        ok, value = _literal(arg)
        if ok:
            found[i] = value
    for keyword in node.keywords:
        ok, value = _literal(keyword.value) if keyword.arg else (False, None)
        if ok:
            found[keyword.arg] = value
    return found


def _name_arguments(node: ast.Call) -> dict:
    """The arguments of a call written as a bare name: position or keyword -> name (`analysis/loader_links.py`)."""
    found: dict = {}
    for i, arg in enumerate(node.args):
        if isinstance(arg, ast.Starred):
            break
        if isinstance(arg, ast.Name):
            found[i] = arg.id
    found.update({k.arg: k.value.id for k in node.keywords if k.arg and isinstance(k.value, ast.Name)})
    return found


def _rate_limiting(test: ast.AST, loop_targets: set[str], divisibility_tests: frozenset[str] = frozenset()) -> bool:
    """`if step % N == 0:`, `if should_log:`, `if i == 0:`, `if divisible_by(step, N):` with a function of the module
    that returns a test of a remainder (the same tests residency.rate_limit_guard knows)."""
    kind = type(test)

    def limits(part: ast.AST) -> bool:
        return _rate_limiting(part, loop_targets, divisibility_tests)

    if kind is ast.BinOp:
        return isinstance(test.op, ast.Mod) or limits(test.left) or limits(test.right)
    if kind is ast.Name:
        return _RATE_NAME.search(test.id) is not None
    if kind is ast.Attribute:
        return _RATE_NAME.search(test.attr) is not None or limits(test.value)
    if kind is ast.Compare:
        sides = (test.left, *test.comparators)
        if any(isinstance(op, ast.Eq) for op in test.ops) and any(ast_dotted_name(side) in loop_targets for side in sides):
            return True
        return any(limits(side) for side in sides)
    if kind is ast.BoolOp:
        return any(limits(value) for value in test.values)
    if kind is ast.UnaryOp:
        return limits(test.operand)
    if kind is ast.Call:
        if isinstance(test.func, ast.Name) and test.func.id in divisibility_tests:
            return True
        return any(limits(arg) for arg in (test.func, *test.args))
    return False


def _divisibility_tests(body: list[ast.stmt]) -> frozenset[str]:
    """The module's functions whose body only returns a test of a remainder (`def divisible_by(num, den): return
    (num % den) == 0`), each the one `def` of its name: a call of one in an `if` thins the iterations."""
    defs: dict[str, list[ast.AST]] = {}
    for stmt in _module_statements(body):
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(stmt.name, []).append(stmt)

    def tests_a_remainder(func: ast.AST) -> bool:
        statements = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str))]
        returned = statements[0].value if len(statements) == 1 and isinstance(statements[0], ast.Return) else None
        return returned is not None and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) for n in ast.walk(returned))

    return frozenset(name for name, found in defs.items() if len(found) == 1 and tests_a_remainder(found[0]))


def _always_ends(body: list[ast.stmt], builder: Any) -> bool:
    """The last statement raises or exits (or is an `if` whose branches all do), and no `return`, `break` or
    `continue` leaves `body` first (the same fact as analysis/error_paths.always_ends)."""
    return bool(body) and _ends(body, builder) and not any(any(_exits(stmt, in_loop=False)) for stmt in body)


def _ends(body: list[ast.stmt], builder: Any) -> bool:
    last = body[-1]
    if isinstance(last, ast.Raise):
        return True
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        return builder.qualify(last.value.func) in EXITS
    if isinstance(last, ast.If):
        return bool(last.orelse) and _ends(last.body, builder) and _ends(last.orelse, builder)
    return False


def _exits(node: ast.AST, in_loop: bool) -> Iterable[ast.AST]:
    """The `return`s, and the `break`s / `continue`s outside a loop of `node`, without entering nested functions."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
        return
    if isinstance(node, ast.Return) or (isinstance(node, (ast.Break, ast.Continue)) and not in_loop):
        yield node
        return
    looping = isinstance(node, (ast.For, ast.AsyncFor, ast.While))
    for child in ast.iter_child_nodes(node):
        inner = in_loop or (looping and child in getattr(node, "body", ()))
        yield from _exits(child, inner)


def _target_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _target_names(e)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []


# (moved, unmoved) kinds of `<moved> if <flag> else <unmoved>`: where GPU runs take the move.
_MOVED_ON_GPU_RUNS = frozenset({("gpu_module", "module"), ("moved", "src")})


def _merge(a: Any, b: Any) -> Any:
    """The value of a name that may hold `a` or `b`: what both say, else unknown."""
    if a == b:
        return a
    if a is None or b is None:
        return None
    if (sources_of(a) or a[0] == "gpu") and (sources_of(b) or b[0] == "gpu"):
        return _merge_tensor(a, b)
    if {a[0], b[0]} <= {"gpu_module", "module"}:
        return ("module",)
    return None


def _join(a: Any, b: Any) -> Any:
    """The value of a name bound to `a` in one branch and `b` in the other: what both say (a device in one and
    the CPU in the other is a device chosen at run time), else what `_merge` keeps, else unknown."""
    if a is None or b is None:
        return None
    if {a[0], b[0]} == {"device", "cpu"}:
        return ("device",)
    if a[0] == b[0] == "args":
        options = {}
        for key in a[1].keys() & b[1].keys():
            mine, theirs = a[1][key], b[1][key]
            if key == "device" and mine != theirs and str(theirs[0]).startswith("cuda"):
                mine, theirs = theirs, mine
            if key == "device" and str(mine[0]).startswith("cuda"):
                theirs = mine  # a CUDA device in one branch: chosen at run time
            options[key] = mine if mine == theirs else ["?", mine[1]]
        return ("args", options)
    if a[0] == b[0] == "tuple" and len(a[1]) == len(b[1]):
        return ("tuple", tuple(x if x == y else _join(x, y) for x, y in zip(a[1], b[1])))
    if a[0] == b[0] == "loader" and isinstance(a[1], dict) and isinstance(b[1], dict):
        return ("loader", _joined_loader_facts(a[1], b[1]))
    return _merge(a, b)


def _joined_loader_facts(a: dict, b: dict) -> dict:
    """A loader built in either branch is still a loader (its loops stay tied to both `DataLoader` calls): what
    both calls say, "?" where they differ (never pinned, never the default collate, unless both are), and the
    line of the first."""
    facts = {key: a.get(key) if a.get(key) == b.get(key) else "?" for key in (*a, *(k for k in b if k not in a)) if key != "line"}
    return {"line": a.get("line", b.get("line")), **facts}


# Names of a test that picks the GPU (`if args.cuda:`, `if use_gpu:`, `if opt.ngpu > 0:`, `if device == "cuda":`).
_GPU_CHOICE = re.compile(r"(^|_)(cuda|gpus?|n_?gpus?|ngpu|device|dev)($|_)", re.IGNORECASE)


def _chooses_gpu(test: ast.AST, qualify: Callable[[ast.AST], Optional[str]]) -> bool:
    """The test decides whether the run uses the GPU: a GPU run takes the branch that places the model there."""
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and _GPU_CHOICE.search(node.id) or isinstance(node, ast.Attribute) and _GPU_CHOICE.search(node.attr):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda"):
            return True
        if isinstance(node, ast.Call) and (qualify(node.func) or "").startswith("torch.cuda."):
            return True
    return False


def _placed(a: Any, b: Any) -> Any:
    """Of a model on the GPU in one branch and the same model (or a module) left in place in the other, the placed one:
    `model = Net(); if args.cuda: model.cuda()` is on the GPU in a GPU run (a device chosen at run time)."""
    for x, y in ((a, b), (b, a)):
        if x is None or y is None:
            continue
        if x[0] == "gpu_module" and y[0] == "module" or x[0] == "moved" and (x[1] == y or y[0] == "module"):
            return x
    return None


def _falls_through(body: list[ast.stmt], builder: Any) -> bool:
    """Control may go on past `body` (its last statement does not return, leave the loop, raise or exit)."""
    return not body or not (isinstance(body[-1], (ast.Return, ast.Break, ast.Continue)) or _ends(body, builder))


_AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.accelerator.is_available"})
_COUNTS = frozenset({"torch.cuda.device_count", "torch.accelerator.device_count"})


def _gpu_free_branch(test: ast.AST, qualify: Callable[[ast.AST], Optional[str]]) -> Optional[bool]:
    """True when the body of `if <test>:` runs only without a GPU, False when its `else:` does, else None: the
    direct tests of `analysis/gpu_free_branches.py` (`torch.cuda.is_available()`, `device_count() > 0`)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _gpu_free_branch(test.operand, qualify)
        return None if inner is None else not inner
    if isinstance(test, ast.Call) and not test.args and qualify(test.func) in _AVAILABILITY:
        return False
    if (
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Call)
        and qualify(test.left.func) in _COUNTS and _literal(test.comparators[0]) in ((True, 0), (True, 1))
    ):  # fmt: skip
        op, bound = type(test.ops[0]), _literal(test.comparators[0])[1]
        if (op, bound) in ((ast.Gt, 0), (ast.GtE, 1), (ast.NotEq, 0)):
            return False
        if (op, bound) in ((ast.Eq, 0), (ast.Lt, 1), (ast.LtE, 0)):
            return True
    return None


_LOADER_CLASS = ("loader_class",)  # a name bound to a DataLoader class: what calling it builds is a loader


def _loader_classes(body: list, qualify: Callable[[ast.AST], Optional[str]]) -> frozenset[str]:
    """Module-level subclasses of `DataLoader` called with its arguments: no `__init__`, or one that hands
    `*args, **kwargs` on to `super().__init__` unchanged (yolov7's `InfiniteDataLoader`)."""
    found = set()
    for stmt in body:
        if not isinstance(stmt, ast.ClassDef) or not any(qualify(base) == DATALOADER for base in stmt.bases):
            continue
        init = next((m for m in stmt.body if isinstance(m, ast.FunctionDef) and m.name == "__init__"), None)
        if init is None:
            found.add(stmt.name)
            continue
        a = init.args
        if not (len(a.args) == 1 and a.vararg and a.kwarg and not a.kwonlyargs and not a.posonlyargs):
            continue
        for call in ast.walk(init):
            if (
                isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "__init__"
                and isinstance(call.func.value, ast.Call) and getattr(call.func.value.func, "id", None) == "super"
                and [type(x) for x in call.args] == [ast.Starred] and getattr(call.args[0].value, "id", None) == a.vararg.arg
                and [k.arg for k in call.keywords] == [None] and getattr(call.keywords[0].value, "id", None) == a.kwarg.arg
            ):
                found.add(stmt.name)
    return frozenset(found)


class _Builder:
    def __init__(self, tree: ast.Module, text: str) -> None:
        self.tree = tree
        self.summary = ModuleSummary()
        self.module_defs: set[str] = set()  # functions and classes defined at module level
        self.scan_evidence = any(marker in text for marker in GPU_TEXT_MARKERS)
        self.configured = "hydra" in text  # Hydra configs handed down and instantiated (analysis/instantiated.py)
        self.divisibility_tests: frozenset[str] = frozenset()  # `def divisible_by(num, den): return (num % den) == 0`
        self.text = text
        self.before_torch_0_4 = "async" in text and copies_with_async(tree)  # `loss.data[0]` is a host read there
        # `args = Namespace(cuda=False)`: settings written in the code (analysis/namespace_settings.py)
        self.namespace_flags = namespace_flags(tree) if "Namespace" in text or "EasyDict" in text or "edict" in text else {}
        self.held_defaults: dict[int, dict] = {}  # id(ClassSummary) -> `analysis/held_defaults.py`
        # `torch.cuda.is_available` attributes whose answer only picks the process group's backend: no evidence
        # (`communication.backend_questions`)
        self.backend_questions: set[int] = set()  # (filled once the imports are known)
        # calls unpacking a section of a loaded YAML file (`**cfg["dataset"]`, analysis/unpacked_settings.py)
        self.unpacked: dict[int, list] = {}

    def build(self) -> ModuleSummary:
        s = self.summary
        body = self.tree.body
        for stmt in _module_statements(body):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                self.add_import(stmt)
        for stmt in _module_statements(body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.module_defs.add(stmt.name)
        self.divisibility_tests = _divisibility_tests(body)
        if "**" in self.text and ("yaml" in self.text or "OmegaConf" in self.text):
            self.unpacked = unpacked_sections(self.tree, self.qualify)
        if self.scan_evidence and ("init_process_group" in self.text or "nccl" in self.text):
            self.backend_questions = backend_questions(self.tree, self.qualify)
        self.loader_classes = _loader_classes(body, self.qualify) if "DataLoader" in self.text else frozenset()
        if "Loader" in self.text:
            self.summary.loader_classes = loader_classes(body, self.qualify)
        reader = _Reader(self, MODULE_BODY, None, None)
        s.functions[MODULE_BODY] = reader.run(body)
        for name, value in reader.env.items():
            if "." not in name and name not in s.imports and value is not None and name not in reader.rebound:
                s.values[name] = value
        for stmt in _module_statements(body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                s.functions[stmt.name] = _Reader(self, stmt.name, stmt, None).run(stmt.body)
            elif isinstance(stmt, ast.ClassDef):
                self._class(stmt)
        if "yaml" in self.text or "yml" in self.text or "hydra" in self.text or "add_argument" in self.text:
            s.settings = _setting_files(self.tree)
        if "__all__" in self.text:
            s.exports = _exports(body)
        s.config_paths = config_paths(self.tree, self.text, [k for k, v in s.imports.items() if v[2] is None])
        if any(marker in self.text for marker in ("__getitem__", "__call__", "TensorDataset", ".load(", ".map(")):
            s.held = held_data(self.tree, self.qualify)
        if "transforms" in self.text:
            s.transforms = returned_transforms(self.tree, self.qualify)
        own = {k for k, (level, module, _) in s.imports.items() if level or module.split(".", 1)[0] not in _LIBRARIES}
        s.handed = handed_names(self.tree, {*self.module_defs, *own})
        if mentions_default_device(self.text):
            s.default_devices = default_device_ranges(list(_module_statements(body)), self.qualify)
        if self.scan_evidence:
            for what, line in _nested_gpu_attributes(self.tree, self.qualify, self.backend_questions):
                self.evidence(what, line)
            for finder in EVIDENCE_FINDERS:
                for what, line in finder(self.tree, self.qualify):
                    self.evidence(what, line)
        return s

    def _class(self, node: ast.ClassDef) -> None:
        bases = tuple(b for b in (self.qualify(base) or ast_dotted_name(base) for base in node.bases) if b)
        methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
        info = ClassSummary(node.lineno, bases, tuple(m.name for m in methods), asks_worker_info="get_worker_info" in self.text)
        info.runs = class_runs(node, self.qualify)
        info.length = _literal_length(methods)
        self.summary.classes[node.name] = info
        self.held_defaults[id(info)] = held_attribute_defaults(node)
        # `__init__` first: the attributes it sets are what the other methods see.
        aliased = False
        for method in sorted(methods, key=lambda m: m.name != "__init__"):
            if method.name != "__init__" and not aliased:
                _alias_made_attributes(methods, info)  # (once `__init__` has set what they alias)
                aliased = True
            reader = _Reader(self, f"{node.name}.{method.name}", method, info)
            self.summary.functions[f"{node.name}.{method.name}"] = reader.run(method.body)

    def names_loader_class(self, node: ast.AST) -> bool:
        """`DataLoader`, a library loader that takes its arguments (PyG's `DataLoader`, `ClusterLoader`:
        `analysis/loader_classes.py`), or a class of this module that takes the same arguments (`InfiniteDataLoader`)."""
        qualified = self.qualify(node)
        if qualified == DATALOADER or qualified in LIBRARY_LOADERS:
            return True
        return isinstance(node, ast.Name) and node.id in self.loader_classes

    def qualify(self, node: ast.AST) -> Optional[str]:
        """The import-resolved dotted name (`torch.utils.data.DataLoader` for `DL`); None when not imported."""
        dotted = ast_dotted_name(node)
        if dotted is None:
            return None
        root, _, rest = dotted.partition(".")
        target = self.summary.imports.get(root)
        if target is None:
            return None
        level, module, name = target
        if level:
            return None
        full = f"{module}.{name}" if name else module
        return canonical(f"{full}.{rest}" if rest else full)

    def add_import(self, node: ast.Import | ast.ImportFrom) -> None:
        """Module-level imports are read first; an import inside a function counts from where it is read."""
        imports = self.summary.imports
        before = dict(imports)
        self._add_import(node)
        changed = [name for name, target in imports.items() if name in before and before[name] != target]
        if changed:
            self.summary.rebound = tuple(sorted({*self.summary.rebound, *changed}))

    def _add_import(self, node: ast.Import | ast.ImportFrom) -> None:
        imports = self.summary.imports
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports[alias.asname] = (0, alias.name, None)
                else:
                    root = alias.name.split(".", 1)[0]
                    imports[root] = (0, root, None)
        else:
            for alias in node.names:
                if alias.name != "*":
                    imports[alias.asname or alias.name] = (node.level, node.module or "", alias.name)
                elif node.level or (node.module or "").split(".", 1)[0] not in _LIBRARIES:
                    self.summary.stars.append((node.level, node.module or ""))

    def project_root(self, name: str, env: dict) -> bool:
        """`name` may name project code: a module-level function or class, or a name imported from
        something other than the standard library and the big libraries."""
        if name in env:
            return False
        if name in self.module_defs:
            return True
        target = self.summary.imports.get(name)
        if target is None:
            # maybe from `from utils import *` (the index finds it there, or leaves it unknown)
            return bool(self.summary.stars) and name not in _BUILTINS
        level, module, _ = target
        return level > 0 or module.split(".", 1)[0] not in _LIBRARIES

    @cached_property
    def argparse_options(self) -> dict:
        options: dict[str, Any] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                dest = _argparse_dest(node)
                if dest is not None:
                    default = next((k.value for k in node.keywords if k.arg == "default"), None)
                    ok, value = _literal(default) if default is not None else (False, None)
                    if default is None and any(k.arg == "action" and _literal(k.value) == (True, "store_true") for k in node.keywords):
                        ok, value = True, False  # a switch: off unless the command line turns it on
                    options[dest] = [value if ok else "?", node.lineno]
        for node in ast.walk(self.tree):  # `parser.set_defaults(debug=True)` wins over the option's own default
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "set_defaults":
                for keyword in node.keywords:
                    ok, value = _literal(keyword.value) if keyword.arg else (False, None)
                    if keyword.arg:
                        options[keyword.arg] = [value if ok else "?", node.lineno]
        return options

    @cached_property
    def typed_options(self) -> frozenset[str]:
        """The module's options of `nargs="+"` / `"*"`: items the user types on the command line (a few wav files
        to decode, a few weight files)."""
        found = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                if any(k.arg == "nargs" and _literal(k.value)[1] in ("+", "*") for k in node.keywords):
                    dest = _argparse_dest(node)
                    if dest is not None:
                        found.add(dest)
        return frozenset(found)

    def is_wrapper(self, func: ast.AST, name: str) -> bool:
        """`enumerate`, `zip`, `iter` (builtins), `tqdm` / `tqdm.tqdm` ...: iteration passes through them."""
        if isinstance(func, ast.Name) and name in ("enumerate", "zip", "iter"):
            return name not in self.module_defs and name not in self.summary.imports
        return (self.qualify(func) or "").startswith("tqdm")

    def evidence(self, what: str, line: int) -> None:
        # Only in a module whose text has a marker: the text prefilter relies on it (devices.GPU_TEXT_MARKERS).
        if self.scan_evidence and len(self.summary.evidence) < 8 and (what, line) not in self.summary.evidence:
            self.summary.evidence.append((what, line))


def _module_statements(body: list[ast.stmt]) -> Iterable[ast.stmt]:
    """Module-level statements, looking into `if` / `try` blocks (`if __name__ == "__main__":` too)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, ast.If):
            yield from _module_statements(stmt.body)
            yield from _module_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                yield from _module_statements(block)


class _Reader:
    """Reads one function body in order, recording calls, loops, effects and returned values."""

    def __init__(self, builder: _Builder, name: str, node: Optional[ast.AST], cls: Optional[ClassSummary]) -> None:
        self.b = builder
        self.cls = cls
        self.name = name
        self.is_module = node is None
        self.is_init = name.endswith(".__init__")
        params: list[str] = []
        kwonly: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            params = [a.arg for a in (*args.posonlyargs, *args.args)]
            kwonly = [a.arg for a in args.kwonlyargs]
        self.f = FunctionSummary(getattr(node, "lineno", 1), tuple(params), tuple(kwonly))
        self.env: dict[str, Any] = {}
        self.rebound: set[str] = set()
        self.none_bound: set[str] = set()  # names whose last binding is the literal `None` (`loader = None`)
        for param in (*params, *kwonly):
            self.env[param] = ("src", f"p:{param}")
        self.kwarg: Optional[str] = None  # `**kwargs`: the parameter that takes the keywords no other one names
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for extra in (node.args.vararg, node.args.kwarg):
                if extra is not None:
                    self.env[extra.arg] = None
            self.kwarg = node.args.kwarg.arg if node.args.kwarg is not None else None
        if cls is not None and params:
            self.env[params[0]] = ("self",)
        main = hydra_main(node, builder.qualify) if builder.configured and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
        if main is not None:
            self.f.configs[-1] = {0: main}  # `@hydra.main(config_path="cfgs", config_name="config")`
        self.nested: dict[str, ast.AST] = {}  # nested functions defined here, by name (`inline`)
        self.inlining = False
        self.loop = -1
        self.guarded = False
        self.optional = False  # under `if reduction == "mean":`: syncs there depend on what the caller passes
        # under `if lengths is not None:`: the parameters tested; a sync on one of them runs whenever a caller gives
        # it a tensor, any other sync there depends on what the caller passes (None: in no such branch)
        self.given_only: Optional[frozenset[str]] = None
        self.listed: frozenset[str] = frozenset()  # under `if isinstance(preds, (list, tuple)):`: a few items, not elements
        self.communicated = False  # an async transfer (or a work handle's wait) ran earlier on this path
        self.catching = 0  # inside this many `try` bodies with handlers: a raise there may be caught
        self.loop_targets: set[str] = set()
        self.loop_sources: dict[int, list[str]] = {}  # loop -> the sources whose elements it takes
        self.typed_loops: set[int] = set()  # `for i in range(n)` / `for f in args.files` (`nargs="+"`): no data loop
        self.node = node
        self.parameter_lists: set[str] = set()  # sources whose parameters a loop takes (`for p in model.parameters()`)
        self.masks: set[str] = set()  # names bound to a comparison (`keep = labels != -100`)
        self.instances: set[Any] = set()  # values of calls of a name that holds a class (`algorithm_class(...)`)
        self.host_reads: dict[str, list[tuple]] = {}  # `shape = t.tolist()`: the name -> the sync effects of its read
        self.call_results: dict[str, set[int]] = {}  # name -> the project calls whose result it held (any branch)
        self.reads_clock = 0  # the line of a `time.perf_counter()`, an event's `elapsed_time()`
        self.repeating = 0  # inside this many comprehensions (what they build, they build many times)
        self.branches = 0  # inside this many `if` blocks (in `__init__`, layers built there depend on the settings)
        self.runs_nms = False  # it calls torchvision's NMS: see `NMS_OPS`
        # names switched to eval mode by `x.eval()` earlier on this path (no `x.train()` since), and whether autograd is
        # off here (`with torch.no_grad():`, a `@torch.no_grad()` function, `torch.set_grad_enabled(False)`)
        self.evaluating: set[str] = set()
        self.grad_off = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
            _grad_mode(d, builder.qualify) for d in node.decorator_list
        )

    def run(self, body: list[ast.stmt]) -> FunctionSummary:
        self.block(body)
        if self.runs_nms:  # a data-dependent number of detections by design: its size syncs are the algorithm's
            self.f.effects = {k: [e for e in v if e[0] != "shape"] for k, v in self.f.effects.items()}
        if self.reads_clock:
            # `torch.cuda.synchronize(); t = time.time()`: a timing helper, whose synchronize is the measurement
            internal = [e for e in self.f.effects.get(INTERNAL, ()) if e[0] != "synchronize"]
            drains = any(e[0] == "synchronize" and e[2] == -1 and not e[3] for e in self.f.effects.get(INTERNAL, ()))
            self.f.effects[INTERNAL] = [("clock", self.reads_clock, drains), *internal]  # drains: waits for the device on every call
        return self.f

    # ---- statements -----------------------------------------------------------------------------

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        kind = type(node)
        if kind is ast.Expr:
            value = self.expr(node.value)
            self.moved_in_place(node.value, value)
            self.mode_switch(node.value)
        elif kind is ast.Assign:
            recorded = len(self.f.effects.get(INTERNAL, ()))
            value = self.rewrapped(node, self.expr(node.value))
            for target in node.targets:
                self.bind(target, value)
                self.mark_handed(target, node.value)
                if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant) and node.value.value is None:
                    self.none_bound.add(target.id)
                if isinstance(target, ast.Name):
                    (self.masks.add if self.is_mask(node.value) else self.masks.discard)(target.id)
                    self.host_reads.pop(target.id, None)
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and _is_host_read(node.value):
                self.host_reads[node.targets[0].id] = [e for e in self.f.effects.get(INTERNAL, ())[recorded:] if e[0] == "sync"]
        elif kind is ast.AnnAssign:
            if node.value is not None:
                self.bind(node.target, self.expr(node.value))
        elif kind is ast.AugAssign:
            value = self.expr(node.value)
            self.expr(node.target)
            if isinstance(node.target, ast.Name):
                self.rebound.add(node.target.id)
                if value is not None and sources_of(value):
                    self.env[node.target.id] = _merge(self.env.get(node.target.id), value)
        elif kind is ast.Return and self.inlining:
            self.expr(node.value)  # a nested function's result, not this function's
        elif kind is ast.Return:
            self.f.returns.append(self.expr(node.value) if node.value is not None else None)
            returned = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) else [node.value]
            for part in returned:
                if isinstance(part, ast.Name):
                    self.mark_host_reads(part.id, "returned")  # a caller may need it as a size
        elif kind in (ast.For, ast.AsyncFor):
            self.for_loop(node)
        elif kind is ast.While:
            self.test(node.test)
            self.in_loop(node, node.body, set())
            self.block(node.orelse)
        elif kind is ast.If:
            self.test(node.test)
            guarded = self.guarded
            if self.loop >= 0 or not self.is_module:
                self.guarded = guarded or _rate_limiting(node.test, self.loop_targets, self.b.divisibility_tests)
            optional, given_only, listed = self.optional, self.given_only, self.listed
            self.listed = listed | _listed_parameters(node.test)
            tested = self.tested_not_none(node.test)
            if tested:
                self.given_only = tested if given_only is None else given_only | tested
            self.optional = optional or (not tested and self.on_parameter_value(node.test))
            self.guarded = self.guarded or self.ends_run(node.body)
            communicated = self.communicated
            self.branches += 1
            before, nones = dict(self.env), set(self.none_bound)
            evaluating = set(self.evaluating)
            self.block(node.body)
            self.evaluating, evaluating = set(evaluating), evaluating & self.evaluating
            self.communicated, communicated = communicated, self.communicated
            self.guarded = guarded or self.ends_run(node.orelse)
            self.listed = listed
            if tested:  # the `else` of `if lengths is not None:`: what runs there depends on the callers
                self.optional, self.given_only = True, given_only
            after_body, self.env = self.env, dict(before)
            body_nones, self.none_bound = self.none_bound, set(nones)
            self.block(node.orelse)
            self.evaluating &= evaluating  # in eval mode after the `if`: before it and after each branch
            self.join_branches(node, after_body, body_nones)
            self.branches -= 1
            self.communicated = self.communicated or communicated
            self.guarded = guarded
            self.optional, self.given_only, self.listed = optional, given_only, listed
        elif kind in (ast.With, ast.AsyncWith):
            for item in node.items:
                value = self.expr(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, value if sources_of(value) else None)
            grad_off = self.grad_off
            self.grad_off = grad_off or any(_grad_mode(item.context_expr, self.b.qualify) for item in node.items)
            self.block(node.body)
            self.grad_off = grad_off
        elif kind is ast.Try or kind.__name__ == "TryStar":
            self.catching += bool(node.handlers)
            self.block(node.body)
            self.catching -= bool(node.handlers)
            guarded = self.guarded
            self.guarded = True  # an except or finally block does not run every step
            for handler in node.handlers:
                self.block(handler.body)
            self.block(node.finalbody)
            self.guarded = guarded
            self.block(node.orelse)
        elif kind is ast.Assert:
            self.test(node.test)
        elif kind is ast.Import or kind is ast.ImportFrom:
            self.b.add_import(node)
        elif kind is ast.Raise:
            if node.exc is not None:
                guarded = self.guarded
                self.guarded = guarded or not self.catching  # it ends the run: at most once (analysis/error_paths.py)
                self.expr(node.exc)
                self.guarded = guarded
        elif kind is ast.Delete:
            for target in node.targets:
                if isinstance(target, ast.Name):
                    self.env.pop(target.id, None)
        elif kind.__name__ == "Match":
            self.expr(node.subject)
            for case in node.cases:
                self.block(case.body)
        elif kind is ast.ClassDef and self.is_module:
            return
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            if not self.is_module:
                self.env[node.name] = None  # a nested function: followed only where it is called (`inline`)
                self.nested[node.name] = node
                self.sized_in_closure(node)
            return

    def on_typed_items(self) -> bool:
        """This function reads an option of items typed on the command line (`nargs="+"`: `params.sound_files`), and
        every loop around the current point runs over `range(...)` or such an option: it evaluates those few items,
        not a dataset (`FunctionSummary.typed`)."""
        typed = self.b.typed_options
        if not typed or not isinstance(self.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        if not any(isinstance(n, ast.Attribute) and n.attr in typed and isinstance(n.ctx, ast.Load) for n in ast.walk(self.node)):
            return False
        loop = self.loop
        while loop >= 0:
            if loop not in self.typed_loops:
                return False
            loop = self.f.loops[loop][2]
        return True

    def mode_switch(self, value: ast.AST) -> None:
        """`model.eval()` / `model.train()` / `model.train(False)` as a statement of its own, and
        `torch.set_grad_enabled(False)`: what later calls hand their callees (`FunctionSummary.evaluated`)."""
        if not isinstance(value, ast.Call):
            return
        func = value.func
        if self.b.qualify(func) in ("torch.set_grad_enabled", "torch.autograd.set_grad_enabled") and value.args:
            self.grad_off = _literal(value.args[0]) != (True, True)
            return
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.attr in ("eval", "train")):
            return
        evaluates = func.attr == "eval" and not value.args or func.attr == "train" and value.args and _literal(value.args[0]) == (True, False)
        (self.evaluating.add if evaluates else self.evaluating.discard)(func.value.id)

    def join_branches(self, node: ast.If, after_body: dict, body_nones: set[str]) -> None:
        """What names hold after an `if`: the join of every branch that goes on past it (one that ends the run,
        returns, or runs only without a GPU is left out), not the branch read last. `None` in one branch
        (`eval_loader = None`, then `if run_validation: eval_loader = DataLoader(...)`) is not what loops take."""
        gpu_free = _gpu_free_branch(node.test, self.b.qualify)
        taken = [env for env, body, free in ((after_body, node.body, gpu_free is True), (self.env, node.orelse, gpu_free is False))
                 if not free and _falls_through(body, self.b)]  # fmt: skip
        if not taken:
            taken = [after_body, self.env]
        if len(taken) == 1:
            self.env = taken[0]
            self.none_bound = body_nones if taken[0] is after_body else self.none_bound
            return
        joined = dict(after_body)
        chooses_gpu = _chooses_gpu(node.test, self.b.qualify)
        for name, value in self.env.items():
            if name not in joined:
                joined[name] = value  # bound in one branch only: where it is read, that branch ran
            elif name in body_nones and name not in self.none_bound:
                joined[name] = value
            elif name in self.none_bound and name not in body_nones:
                pass  # the body's value
            elif joined[name] != value:
                joined[name] = (chooses_gpu and _placed(joined[name], value)) or _join(joined[name], value)
                self.rebound.add(name)  # not one value: other modules do not take it as bound once
        self.env = joined
        self.none_bound &= body_nones

    def synchronize_kind(self) -> str:
        """"barrier" for a device synchronize after asynchronous communication on this path (a correctness
        barrier: analysis/communication.py), else "synchronize"."""
        kind = "barrier" if self.communicated else "synchronize"
        self.communicated = False  # the next one guards nothing
        return kind

    def ends_run(self, body: list[ast.stmt]) -> bool:
        """Every path through `body` raises or exits and nothing here catches it (analysis/error_paths.py)."""
        return not self.catching and _always_ends(body, self.b)

    def set_args_device(self, name: str, value: Any) -> None:
        """`args.device = torch.device("cuda")` (`else: args.device = "cpu"`): the options now hold a device; a CUDA
        device in one branch is a device chosen at run time, so "cpu" never replaces it."""
        held = self.env.get(name)
        if held is None and value == ("cpu",) and any(k.startswith(f"{name}.") for k in self.b.namespace_flags):
            held = ("args", {})  # `args.device = torch.device("cpu")` on a namespace written in the module
        if held is None or held[0] != "args" or value not in (("device",), ("cpu",)):
            return
        if value == ("device",) or "device" not in held[1]:
            self.env[name] = ("args", {**held[1], "device": ["cuda" if value == ("device",) else "cpu", None]})

    def moved_in_place(self, node: ast.AST, value: Any) -> None:
        """`model.to(device)` as a statement: a module (unlike a tensor) moves itself, so `model` is now on the GPU."""
        if value is None or value[0] not in ("gpu_module", "moved") or not isinstance(node, ast.Call):
            return
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in ("to", "cuda") and isinstance(func.value, ast.Name)):
            return
        held = self.env.get(func.value.id)
        sources = sources_of(held)
        # an instance of a class (`Net()`), or of one of several (`Net(...)` in one branch, `DataParallel(net)` in the other)
        built = bool(sources) and all(
            s.startswith("c:") and "." not in s and self.f.calls[int(s[2:])][0].rsplit(".", 1)[-1][:1].isupper() for s in sources
        )
        if held == ("module",) or built or held in self.instances:
            self.env[func.value.id] = value  # a module or an instance of a project class (`Net()`)

    def bind(self, target: ast.AST, value: Any) -> None:
        if isinstance(target, ast.Name):
            calls = {int(s[2:].split(".")[0]) for s in sources_of(value) if s.startswith("c:")}
            if calls:
                self.call_results.setdefault(target.id, set()).update(calls)
            if target.id in self.env and self.env[target.id] != value:
                self.rebound.add(target.id)
            self.none_bound.discard(target.id)
            self.env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            elements = target.elts
            if isinstance(value, tuple) and value and value[0] == "tuple" and len(value[1]) == len(elements):
                for element, part in zip(elements, value[1]):
                    self.bind(element, part)
                return
            for index, element in enumerate(elements):
                self.bind(element, _element(value, index))
        elif isinstance(target, ast.Starred):
            self.bind(target.value, None)
        elif isinstance(target, ast.Attribute):
            self.expr(target.value)
            if self.cls is not None and not self.inlining and isinstance(target.value, ast.Name) and self.env.get(target.value.id) == ("self",):
                # (a nested function's writes are not the class's: `self` there may be any object handed to it)
                # Sources are this method's own (`c:0` is its first call): other methods keep only what is known.
                if value is not None and value[0] == "moved":
                    if self.made(value[1]) is not None:  # `self.network = TabNet(...).to(self.device)`: which class
                        self.cls.attributes.setdefault(moved_attribute(target.attr), ("moved_instance", self.made(value[1])))
                    value = ("moved", None)
                if self.is_init and value is not None and value[0] == "src" and value[1].startswith("p:") and "|" not in value[1]:
                    value = ("init", value[1][2:])  # `self.device = device`: what the constructor's callers give
                if value is not None and not deep_sources(value):
                    self.cls.attributes.setdefault(target.attr, value)
                elif self.made(value) is not None:
                    self.cls.attributes.setdefault(target.attr, ("made", self.made(value)))
            elif isinstance(target.value, ast.Name) and target.attr == "device":
                self.set_args_device(target.value.id, value)
        elif isinstance(target, ast.Subscript):
            self.expr(target.value)
            self.expr(target.slice)

    def for_loop(self, node: ast.For) -> None:
        batches, bindings = self.iterated(node.iter, node.target)
        index = len(self.f.loops)
        self.f.loops.append((node.lineno, False, self.loop))
        self.loop_sources[index] = batches
        if _over_typed_items(node.iter, self.b.typed_options):
            self.typed_loops.add(index)
        for source in batches:
            if source not in self.parameter_lists:
                self.effect(source, ("iter", index))  # (a module's parameters are no batches)
        self.in_loop(node, node.body, set(_target_names(node.target)), index, node.target, bindings)
        self.block(node.orelse)

    def iterated(self, expr: ast.AST, target: ast.AST) -> tuple[list[str], list[ast.AST]]:
        """The sources whose elements `for <target> in <expr>` takes, looking through enumerate/zip/tqdm/iter,
        and the parts of the target that receive them."""
        found: list[str] = []
        bindings: list[ast.AST] = []

        def walk(e: ast.AST, t: Optional[ast.AST]) -> None:
            if isinstance(e, ast.Call) and isinstance(e.func, (ast.Name, ast.Attribute)):
                name = (ast_dotted_name(e.func) or "").rsplit(".", 1)[-1]
                positional = [a for a in e.args if not isinstance(a, ast.Starred)]
                if name in _WRAPPERS and positional and self.b.is_wrapper(e.func, name):
                    for keyword in e.keywords:
                        self.expr(keyword.value)
                    if name == "enumerate":
                        walk(positional[0], t.elts[1] if isinstance(t, ast.Tuple) and len(t.elts) == 2 else None)
                        rest = positional[1:]
                    elif name == "zip":
                        unpacked = isinstance(t, ast.Tuple) and len(t.elts) == len(positional)
                        for i, arg in enumerate(positional):
                            walk(arg, t.elts[i] if unpacked else None)
                        rest = []
                    else:
                        walk(positional[0], t)
                        rest = positional[1:]
                    for extra in rest:
                        self.expr(extra)
                    return
            parameters = isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and e.func.attr in _PARAMETER_LISTS
            # `model.parameters()`: each parameter (and its `.grad`) lives where the module does
            value = self.expr(e.func.value if parameters else e)
            for source in sources_of(value):
                if parameters:
                    self.parameter_lists.add(source)
                if source not in found:
                    found.append(source)
                if t is not None:
                    bindings.append(t)

        walk(expr, target)
        return found, bindings

    def in_loop(self, node: ast.AST, body: list[ast.stmt], targets: set[str], index: Optional[int] = None, target=None, bindings=()) -> None:
        if index is None:
            index = len(self.f.loops)
            self.f.loops.append((node.lineno, False, self.loop))
        outer, outer_targets, guarded = self.loop, self.loop_targets, self.guarded
        self.loop, self.loop_targets = index, outer_targets | targets
        if target is not None:
            for name in _target_names(target):
                self.env[name] = None
            for part in bindings:
                for name in _target_names(part):
                    self.env[name] = ("src", f"l:{index}")
        self.block(body)
        self.loop, self.loop_targets, self.guarded = outer, outer_targets, guarded

    def zipped(self, value: Any) -> bool:
        """`value` is an element of a loop over several sources at once (`for pred, n in zip(preds, lengths)`):
        every target of such a loop stands for all of them, so a wait on it cannot be put on the right one."""
        return any(
            s.startswith("l:") and len(self.loop_sources.get(int(s[2:]), ())) > 1 for s in sources_of(value)
        )  # fmt: skip

    def test(self, node: ast.AST) -> None:
        if isinstance(node, ast.BoolOp) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
            # `if t[i] != 0 and not (i > 0 and t[i - 1] == t[i]):`: Python takes the truth of each operand; a
            # comparison of a tensor is one (other operands, `n.endswith(".bias")`, are as unknown as before)
            for operand in node.values if isinstance(node, ast.BoolOp) else [node.operand]:
                if isinstance(operand, (ast.BoolOp, ast.UnaryOp, ast.Compare)):
                    self.test(operand)
                else:
                    self.expr(operand)
            return
        value = self.expr(node)
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops):
            return
        self.sync(value, "a Python condition on a tensor", node.lineno, certain=True)

    # ---- effects ---------------------------------------------------------------------------------

    def effect(self, source: str, effect: tuple) -> None:
        found = self.f.effects.setdefault(source, [])
        if effect not in found and len(found) < 24:
            found.append(effect)

    def sync(self, value: Any, kind: str, line: int, certain: bool) -> None:
        """The host waits for `value` (if it is a GPU tensor): on a source, or on a value made here."""
        if value is None:
            return
        sources = sources_of(value)
        moved = value[0] == "moved" and value[1] is not None and value[1][0] not in ("module", "gpu_module")
        given_only = self.given_only
        # "repeated": in a comprehension (`[int(n) for n in counts]`, one read per element), as a loop makes it,
        # also inside a loop over a few options (`for k in topk:`), which alone would not
        repeated = ("repeated",) if self.repeating else ()
        if value[0] == "gpu" or moved or INTERNAL in sources:
            self.effect(INTERNAL, ("sync", kind, line, self.loop, self.guarded or self.optional or given_only is not None, *repeated))
        for source in sources:
            # under `if lengths is not None:`, a sync on `lengths` runs whenever the caller gives it a tensor
            optional = self.optional or (given_only is not None and source[2:] not in given_only)
            # in a loop over other parameters only (`for k in topk:`, a few options a call): not one read per element
            options = ("options",) if self.loop >= 0 and self.over_options(self.loop, source) else ()
            if source != INTERNAL and not source.startswith("g:"):
                self.effect(source, ("sync", kind, line, certain, self.loop, self.guarded or optional, *options, *repeated))
            if source.startswith("l:"):  # on an element of what a parameter gives (`for p in model.parameters()`)
                for origin in self.loop_sources.get(int(source[2:]), ()):
                    if origin.startswith("p:"):
                        optional = self.optional or (given_only is not None and origin[2:] not in given_only)
                        self.effect(origin, ("sync", kind, line, certain, self.loop, self.guarded or optional, *repeated))

    def mark_host_reads(self, name: str, use: str) -> None:
        """The value read into `name` is a size this function allocates with ("sized": the wait is inherent,
        the sync is dropped), or is returned ("returned": inherent only if the caller sizes a tensor with it)."""
        internal = self.f.effects.get(INTERNAL, [])
        for effect in self.host_reads.get(name, ()):
            if effect in internal:
                internal.remove(effect)
                if use == "returned":
                    internal.append((*effect, "returned"))
        if use == "sized":
            self.host_reads.pop(name, None)

    def sized_with(self, sizes: list[ast.AST], values: list) -> None:
        """`torch.empty(shape, ...)`: a host value read here, or the result of a project call, sizes a tensor."""
        for node, value in zip(sizes, values):
            calls = {int(s[2:].split(".")[0]) for s in sources_of(value) if s.startswith("c:")}
            if isinstance(node, ast.Name):
                self.mark_host_reads(node.id, "sized")
                calls |= self.call_results.get(node.id, set())  # `if var: shape = exchange() else: shape = given`
            for index in calls:
                self.f.calls[index] = (*self.f.calls[index][:7], "sizes")

    def sized_in_closure(self, node: ast.AST) -> None:
        """`def create_recv(): return torch.empty(recv_shape, ...)`: a nested function that allocates with a
        value of this one (Megatron's p2p receive buffers)."""
        own = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        for call in ast.walk(node):
            qualified = self.b.qualify(call.func) if isinstance(call, ast.Call) else None
            if qualified is None or not qualified.startswith("torch.") or qualified[len("torch.") :] not in _SIZED:
                continue
            sizes = [*call.args, *(k.value for k in call.keywords if k.arg == "size")]
            sizes = [n for n in sizes if isinstance(n, ast.Name) and n.id not in own]
            self.sized_with(sizes, [self.env.get(n.id) for n in sizes])

    def over_options(self, loop: int, source: str) -> bool:
        """Loop `loop` iterates parameters of this function other than `source` (and nothing else): `for k in topk:`,
        a few options a call, not the elements of what a read reads."""
        iterated = self.loop_sources.get(loop, ())
        if any(s.startswith("p:") and s[2:] in self.listed for s in iterated):
            return True  # `for pred in preds:` under `if isinstance(preds, (list, tuple)):`: a few tensors, not elements
        return bool(iterated) and all(s.startswith("p:") and s != source for s in iterated)

    def tested_not_none(self, test: ast.AST) -> frozenset[str]:
        """`if lengths is not None:` on a parameter of this function: {"lengths"} (else empty)."""
        if self.is_module or not isinstance(test, ast.Compare) or not isinstance(test.left, ast.Name) or len(test.ops) != 1:
            return frozenset()
        name = test.left.id
        tests_none = isinstance(test.ops[0], ast.IsNot) and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
        return frozenset({name}) if tests_none and self.env.get(name) == ("src", f"p:{name}") else frozenset()

    def on_parameter_value(self, test: ast.AST) -> bool:
        """`if reduction == "mean":` / `if mode in ("a", "b"):`: a branch on an option a caller passes."""
        if self.is_module or not isinstance(test, ast.Compare) or not isinstance(test.left, ast.Name):
            return False
        is_parameter = self.env.get(test.left.id) == ("src", f"p:{test.left.id}")
        return is_parameter and all(_literal(c)[0] for c in test.comparators)

    def shape(self, value: Any, kind: str, line: int, certain: bool) -> None:
        """An op on `value` whose output size depends on its data: the host waits for it (if it is a GPU tensor)."""
        if value is None:
            return
        sources = sources_of(value)
        # "repeated": in a comprehension (`[y[y != pad] for y in ys]`, one op per element), as a loop makes it
        repeated = ("repeated",) if self.repeating and self.loop < 0 else ()
        if value[0] == "gpu" or INTERNAL in sources:
            self.effect(INTERNAL, ("shape", kind, line, self.loop, self.guarded, *repeated))
        for source in sources:
            if source != INTERNAL and not source.startswith("g:"):
                self.effect(source, ("shape", kind, line, certain, self.loop, self.guarded, *repeated))

    def mark_trains(self) -> None:
        self.f.trains = True
        if self.loop >= 0:
            line, _, parent = self.f.loops[self.loop]
            self.f.loops[self.loop] = (line, True, parent)

    def mark_gpu(self, what: str, line: int) -> None:
        if self.b.scan_evidence:
            self.f.gpu = True
            self.b.evidence(what, line)

    # ---- expressions -----------------------------------------------------------------------------

    def expr(self, node: Optional[ast.AST]) -> Any:
        if node is None:
            return None
        kind = type(node)
        if kind is ast.Name:
            if node.id in self.env:
                return self.env[node.id]
            if node.id in self.b.summary.imports:
                return ("src", f"g:{node.id}")
            if not self.is_module and node.id in self.b.summary.values:
                value = self.b.summary.values[node.id]
                # tied to the module body's own calls: named as the module-level value it is
                return ("src", f"g:{node.id}") if deep_sources(value) else value
            return None
        if kind is ast.Constant:
            value = node.value
            if isinstance(value, str) and value.split(":")[0] in ("cuda", "cpu"):
                if value.startswith("cuda"):
                    self.mark_gpu(f'the CUDA device `"{value}"`', node.lineno)
                    return ("device",)
                return ("cpu",)  # a device name, kept for `.to(name)`
            return None
        if kind is ast.Call:
            return self.call(node)
        if kind is ast.Attribute:
            base = self.expr(node.value)
            if self.b.scan_evidence:
                qualified = self.b.qualify(node)
                if (
                    qualified is not None and qualified.startswith(("torch.cuda.", "torch.accelerator.")) and qualified.count(".") == 2
                    and id(node) not in self.b.backend_questions
                ):  # fmt: skip
                    self.mark_gpu(f"`{qualified}`", node.lineno)
            if base == ("self",) and self.cls is not None:
                held = self.cls.attributes.get(node.attr)
                if held is None and self.cls.attributes.get(KEYWORDS_AS_ATTRIBUTES) == ("kwargs",) and not node.attr.startswith("__"):
                    held = ("init", node.attr)  # `self.__dict__.update(kwargs)`: the keyword its callers name so
                if held is not None and held[0] == "init":
                    return ("src", f"{'p' if self.is_init else 'i'}:{held[1]}")
                return held
            if base is not None and base[0] == "args":
                return _option_device(base[1], node.attr)
            if node.attr in _HOST_ATTRIBUTES or names_a_tokenizer(node.attr):
                return None  # (a tokenizer stays on the host when its pipeline is moved)
            if base is not None and base[0] in ("src", "gpu"):
                return base
            return None
        if kind is ast.Subscript:
            base = self.expr(node.value)
            index = self.expr(node.slice)
            if base is not None and base[0] in ("src", "gpu") and self.is_mask(node.slice):
                self.shape(index, "boolean-mask indexing", node.lineno, certain=False)  # `x[mask]` runs `nonzero(mask)`
            if base is not None and base[0] == "tuple" and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
                parts = base[1]
                return parts[node.slice.value] if -len(parts) <= node.slice.value < len(parts) else None
            if base is not None and base[0] in ("src", "gpu") and self.b.before_torch_0_4 and number_read_in(node) is not None:
                self.sync(base, number_read_kind(ast.unparse(node)), node.lineno, certain=False)
                return ("host",)  # `loss.data[0]` before PyTorch 0.4: a Python number
            if base is not None and base[0] in ("src", "gpu"):
                return base
            if base is not None and base[0] == "loader_dict":
                return None
            return None
        if kind in (ast.Tuple, ast.List):
            parts = tuple(self.expr(e) for e in node.elts)
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return None
            return ("tuple", parts) if any(p is not None for p in parts) else None
        if kind is ast.BinOp:
            left, right = self.expr(node.left), self.expr(node.right)
            if isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
                parts = right[1] if right is not None and right[0] == "tuple" else (right,)
                for part in parts:
                    self.sync(part, "`%` formatting of a tensor", node.lineno, certain=True)
                return None  # a string
            return _merge_tensor(left, right)
        if kind is ast.UnaryOp:
            value = self.expr(node.operand)
            return None if isinstance(node.op, ast.Not) else value
        if kind is ast.Compare:
            value = self.expr(node.left)
            for comparator in node.comparators:
                value = _merge_tensor(value, self.expr(comparator))
            if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
                return None  # `z is None`: an identity test is a Python bool, whatever it compares (no tensor, no wait)
            return value
        if kind is ast.BoolOp:
            for value in node.values:
                self.expr(value)
            return None
        if kind is ast.IfExp:
            self.expr(node.test)
            chosen = _shipped_flag(self, node.test)
            if chosen is not UNKNOWN_FLAG:  # `"cuda" if args.cuda else "cpu"` with `Namespace(cuda=False)`
                return self.expr(node.body if chosen else node.orelse)
            if self.b.names_loader_class(node.body) and self.b.names_loader_class(node.orelse):
                return _LOADER_CLASS
            body, orelse = self.expr(node.body), self.expr(node.orelse)
            kinds = {_device_kind_of(node.body, self, mark=False), _device_kind_of(node.orelse, self, mark=False)}
            if "cuda" in kinds and _tests_backend(node.test):
                return _GROUP_DEVICE
            if "cuda" in kinds and None not in kinds:
                if any(_literal(branch) == (True, "cuda") or isinstance(branch, ast.Call) for branch in (node.body, node.orelse)):
                    self.mark_gpu("a device chosen at run time", node.lineno)
                return ("device",)
            if body is not None and orelse is not None and (body[0], orelse[0]) in _MOVED_ON_GPU_RUNS:
                return body  # `Net().cuda() if params.cuda else Net()`: as a device chosen at run time, GPU runs move it
            for value, other in ((body, node.orelse), (orelse, node.body)):
                if value is not None and value[0] in ("loader", "gpu", "moved") and _literal(other) == (True, None):
                    # `DataLoader(...) if testset is not None else None`: where it is iterated, the loader;
                    # `None if x is None else x.to(device)`: where it is used, the moved tensor
                    return value
            return _merge(body, orelse)
        if kind is ast.JoinedStr:
            head = node.values[0] if node.values else None
            if isinstance(head, ast.Constant) and isinstance(head.value, str) and head.value.startswith("cuda:"):
                self.mark_gpu('a CUDA device `f"cuda:..."`', node.lineno)
                return ("device",)
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    value = self.expr(part.value)
                    self.sync(value, "formatting a tensor in an f-string", node.lineno, certain=True)
            return None
        if kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            return self.comprehension(node)
        if kind is ast.Dict:
            for key, value in zip(node.keys, node.values):
                self.expr(key)
                self.expr(value)
            return None
        if kind is ast.Lambda:
            return None
        if kind is ast.NamedExpr:
            value = self.expr(node.value)
            self.bind(node.target, value)
            return value
        if kind is ast.Starred:
            self.expr(node.value)
            return None
        if kind is ast.Yield or kind is ast.YieldFrom:
            value = self.expr(node.value)
            for source in sources_of(value):
                # `for batch in loader: yield batch` / `yield from loader`: iterating the result iterates the source
                iterated = self.loop_sources.get(int(source[2:])) if source.startswith("l:") else [source] if kind is ast.YieldFrom else []
                for origin in iterated or ():
                    if origin.startswith("p:"):
                        self.effect(origin, ("yield",))
            return None
        if kind is ast.Await:
            self.expr(node.value)
            return None
        if kind is ast.Slice:
            for part in (node.lower, node.upper, node.step):
                value = self.expr(part)
                if value is not None and value[0] in ("src", "gpu") and hasattr(node, "lineno") and not self.zipped(value):
                    # `mask[i, lengths[i]:] = 0`: Python's slice reads a tensor bound with `__index__` on the host,
                    # a wait when the tensor is on the GPU (`residency.SLICED_WITH_GPU_BOUND`)
                    self.sync(value, "slicing with a GPU tensor as a bound", node.lineno, certain=True)
            return None
        return None

    def comprehension(self, node: ast.AST) -> Any:
        self.repeating += 1
        try:
            return self._comprehension(node)
        finally:
            self.repeating -= 1

    def _comprehension(self, node: ast.AST) -> Any:
        saved = dict(self.env)
        for position, generator in enumerate(node.generators):
            # the first iterable is evaluated once (`[c for c in t.tolist()]`: one read), what follows once per element
            self.repeating -= position == 0
            try:
                value = self.expr(generator.iter)
            finally:
                self.repeating += position == 0
            for name in _target_names(generator.target):
                self.env[name] = value if sources_of(value) or (value is not None and value[0] == "gpu") else None
            for condition in generator.ifs:
                self.expr(condition)
        if isinstance(node, ast.DictComp):
            self.expr(node.key)
            result = self.expr(node.value)
        else:
            result = self.expr(node.elt)
        self.env = saved
        return result if result is not None and (sources_of(result) or result[0] in ("gpu", "moved")) else None

    def call(self, node: ast.Call) -> Any:
        index = len(self.f.calls)
        result = self._call(node)
        if (
            isinstance(node.func, ast.Attribute) and self.handed_receiver(node.func.value) and len(self.f.calls) > index
            and self.f.calls[index][0] == f"{handed(self.class_name(), node.func.value.attr)}.{node.func.attr}"
            and sources_of(result) == [f"i:{node.func.value.attr}"]
        ):
            # `loaders = self.dataset.get_data_loaders()`: the result of that call too (the index follows it into the
            # method of the class the constructor's callers hand it, `analysis/handed_instances.py`), as for an
            # instance the function built (`logger.log_every(loader)`)
            return ("src", f"c:{index}|{result[1]}")
        return result

    def _call(self, node: ast.Call) -> Any:
        func = node.func
        line = node.lineno
        b = self.b
        if self.is_init and self.cls is not None and self._keywords_to_attributes(node):
            self.cls.attributes.setdefault(KEYWORDS_AS_ATTRIBUTES, ("kwargs",))
        qualified = b.qualify(func)
        self.runs_nms = self.runs_nms or qualified in NMS_OPS
        timer = isinstance(func, ast.Attribute) and (func.attr == "elapsed_time" or times_a_step(func.attr, ast_dotted_name(func.value) or ""))
        if qualified in CLOCKS or timer:
            self.reads_clock = self.reads_clock or line
        if qualified is not None and builds_convolution(qualified) and not (self.is_init and self.branches):
            many = self.loop >= 0 or self.repeating or qualified.startswith(CONV_NET_FACTORIES)
            self.f.convolutions = min(CONV_NET, self.f.convolutions + (CONV_NET if many else 1))
        if qualified in RECURRENT_CELLS:
            self.f.cells += 1
        own = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and self.env.get(func.value.id) == ("self",)
        if own and self.loop >= 0:
            if func.attr not in self.f.looped_calls:
                self.f.looped_calls += (func.attr,)  # `h = self.cell(x[:, t], h)` in `for t in range(steps):`
        receiver = self.expr(func.value) if isinstance(func, ast.Attribute) else None
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        if self.is_init and self.cls is not None and _calls_super_init(func):
            # `super().__init__(vocab)`: what the base's constructor is handed (`analysis/handed_instances.py`)
            self.record(SUPER_INIT, node, args, kwargs)
            return None
        if qualified is not None and _builds_library_model(qualified):
            return ("module",)  # `torchvision.models.resnet18()`, `timm.create_model(...)`
        if qualified in MODEL_PLACERS:
            return ("gpu_module",)  # `idist.auto_model(model)`
        if qualified == "argparse.ArgumentParser" and self.is_module:
            # `parser = argparse.ArgumentParser(...)` at module level: its options, for a module that imports the
            # parser and parses it (`from opts import parser; args = parser.parse_args()`: analysis/imported_options.py)
            return ("parser", b.argparse_options)
        if qualified in INSTANTIATORS and self.b.configured:
            # `hydra.utils.instantiate(cfg.agent)`: an instance of the class the config's `_target_` names (the index reads it)
            return self.record(instantiation(self.name, len(self.f.calls)), node, args, kwargs)
        if any(_OPTIMIZER.fullmatch(ast_dotted_name(a) or "") for a in node.args):
            self.mark_trains()  # `loss_scaler(loss, optimizer)`, `amp.scale_loss(loss, optimizer)`
        async_op = any(k.arg == "async_op" and _literal(k.value) != (True, False) for k in node.keywords)
        if starts_async_communication(qualified or "", async_op) or (
            isinstance(func, ast.Attribute) and waits_for_work(func.attr, ast_dotted_name(func.value) or "", bool(node.args or node.keywords))
        ):
            self.communicated = True
        if qualified is not None and qualified.startswith("torch."):
            return self.torch_call(node, qualified, args, kwargs)
        if isinstance(func, ast.Name) and (self.env.get(func.id) == _LOADER_CLASS or func.id not in self.env and self.b.names_loader_class(func)):
            return ("loader", self.loader_facts(node))  # `loader = DataLoader if w else InfiniteDataLoader; loader(...)`
        if isinstance(func, ast.Attribute):
            method = func.attr
            if method in ("cuda", "to"):
                moved = self.move(node, receiver)
                if moved is not None:
                    return moved
            if method in _MODULE_ONLY_METHODS and not node.args and not node.keywords:
                for source in sources_of(receiver):
                    if source.startswith("p:"):
                        self.effect(source, ("module_use", line))  # `model.eval()` on a parameter: it is a module
            if method == "no_sync":
                for source in sources_of(receiver):
                    if source.startswith("p:"):
                        self.effect(source, ("no_sync", line))  # a helper that skips DDP's all-reduce for the module it is given
            if method == "step" and node.args and ENVIRONMENT.search(ast_dotted_name(func.value) or ""):
                self.sized_with(list(node.args), args)  # `env.step(action)`: the host needs the action, like a size
            if method == "type" and not node.args and not node.keywords:
                return None  # the type's name, a Python string (`x.type(T)` converts)
            if method in _SYNC_METHODS and not (method == "cpu" and node.args):
                self.sync(receiver, f"`.{method}()`", line, certain=False)
                return ("host",)  # a Python number, a list, an array, a CPU tensor
            if method in _DATA_DEPENDENT_SHAPE:
                for value in (receiver, *args[:1]) if method == "masked_select" else (receiver,):
                    self.shape(value, f"`.{method}()`", line, certain=True)
            logged = _formatted_or_logged(node, args, kwargs)
            if logged is not None:
                for value in logged[1]:
                    self.sync(value, logged[0], line, certain=True)
                return None
            owner = (ast_dotted_name(func.value) or "").lower()
            imported = (ast_dotted_name(func.value) or "").partition(".")[0] in self.b.summary.imports  # `shipname.generate(0)`: a library's
            if method == "generate" and not self.guarded and not imported and generates_text(func.value):
                self.f.generates = True  # `model.generate(ids)`: an autoregressive rollout, one host wait a token
            if method == "backward" or (method == "step" and ("opt" in owner or "scaler" in owner)):
                self.mark_trains()
                return None
            if method == "zero_grad" and _OPTIMIZER.search(ast_dotted_name(func.value) or ""):
                self.mark_trains()
                return None
            if method == "synchronize" and isinstance(func.value, ast.Call) and (b.qualify(func.value.func) or "").startswith("torch.cuda."):
                self.effect(INTERNAL, (self.synchronize_kind(), line, self.loop, self.guarded))
                return None
            if method in ("parse_args", "parse_known_args"):
                options = self.argparse_options(func.value)
                return ("args", options) if method == "parse_args" else ("tuple", (("args", options), None))
            if method == "setup" and self.fabric_setup(func, node):
                # lightning/fabric/fabric.py (2.x): `setup(module, *optimizers, move_to_device=True)` returns the module
                # on the device, alone or first of a tuple with the optimizers
                return ("gpu_module",) if len(node.args) == 1 else ("tuple", (("gpu_module",), *(None for _ in node.args[1:])))
            if method in _FRAMEWORK_FEEDS:
                self.framework_feed(method, line, [*args, *kwargs.values()])
                placed = self.placed_loaders(method, node)
                if placed is not None:
                    return placed
            if receiver == ("self",) and self.cls is not None and method in self.cls.methods:
                return self.record(f"{self.class_name()}.{method}", node, args, kwargs)
            if receiver == ("self",) and self.cls is not None:
                held = self.cls.attributes.get(method)
                if held is not None and held[0] == "made" and held[1]:
                    # `self.criterion(out, y)`, the attribute an instance of a project class: its `__call__`
                    return self.record(f"{held[1]}.__call__", node, args, kwargs)
            if receiver == ("self",) and isinstance(func.value, ast.Name) and self.holds_handed(func.value.id, method):
                # `self.model(x)` with `self.model = model` in `__init__`: what the constructor's callers hand it
                # (`analysis/handed_instances.py`); the result is as unknown as before
                self.record(f"{handed(self.class_name(), method)}.__call__", node, args, kwargs)
                return None
            if self.handed_receiver(func.value):
                # `self.vocab.label_to_string(row)`: a method of what the constructor's callers hand it
                self.record(f"{handed(self.class_name(), func.value.attr)}.{method}", node, args, kwargs)
            if receiver is not None and receiver[0] == "made":
                return self.record(f"{receiver[1]}.{method}", node, args, kwargs)  # `self.meter.update(loss)`
            moved_instance = self.made(receiver[1]) if receiver is not None and receiver[0] == "moved" else None
            if moved_instance is not None:
                # `model = RNN(...).to(device); model.init_hidden(b)`: a method of the project instance, moved or not
                return self.record(f"{moved_instance}.{method}", node, args, kwargs)
            instance = sources_of(receiver)
            made_globally = self.made_at_module_level(receiver)
            if made_globally is not None:
                # `converter = utils.strLabelConverter(alphabet)` at module level, `converter.decode(preds)` in a
                # function: a method of the project class that call built, if it built one (the index decides)
                made = self.record(f"{made_globally}.{method}", node, args, kwargs)
                return None if method in _TENSOR_METADATA else ("src", f"{made[1]}|{instance[0]}")
            if len(instance) == 1 and instance[0].startswith("c:") and "." not in instance[0]:
                # `logger = utils.MetricLogger(); logger.log_every(loader)`: a method of a project class, if
                # that call built one (the index decides); the result stays tied to the receiver too
                made = self.record(f"{self.f.calls[int(instance[0][2:])][0]}.{method}", node, args, kwargs)
                if method in _TENSOR_METADATA:
                    return None  # `pad_list(ys, eos).size()`: a shape, a host value (`assert a.size() == b.size()` reads nothing)
                return ("src", f"{made[1]}|{instance[0]}")
            if 1 < len(instance) <= _MAX_CANDIDATE_INSTANCES and all(s.startswith("c:") and "." not in s for s in instance):
                # `agent = PPO(...)` in one branch, `A2C(...)` in the other: the method of each class it may be
                made = [self.record(f"{self.f.calls[int(s[2:])][0]}.{method}", node, args, kwargs)[1] for s in instance]
                return ("src", "|".join([*made, *instance]))
            dotted = ast_dotted_name(func)
            if dotted is not None and b.project_root(dotted.split(".", 1)[0], self.env):
                return self.record(dotted, node, args, kwargs)
            if receiver is None or names_a_tokenizer(ast_dotted_name(func.value)):
                return None  # (a tokenizer's ids and counts are host values)
            if receiver[0] in ("module", "gpu_module") and method in _MODULE_METHODS_RETURNING_SELF:
                return receiver
            if receiver[0] in ("src", "gpu") and method not in _HOST_METHODS:
                return receiver  # a tensor method of (a part of) a source: tied to the same source
            return None
        if isinstance(func, ast.Name):
            name = func.id
            target = self.env.get(name)
            made_globally = self.made_at_module_level(self.expr(func)) if target is None else None
            if made_globally is not None:
                # `criterion = ComputeLoss()` at module level, `criterion(pred, y)` in a function: its `__call__`
                self.record(f"{made_globally}.__call__", node, args, kwargs)
                return None
            if target is not None:
                made = self.made(target[1] if target[0] == "moved" else target)
                if made is not None:
                    # `crit = ComputeLoss(model); crit(pred, y)`: the instance's `__call__` (a module's `forward`), if
                    # that call built one of a project class (the index decides); the result stays what it was
                    self.record(f"{made}.__call__", node, args, kwargs)
                elif target[0] == "src" and target[1].startswith("p:") and "|" not in target[1]:
                    # `yolo_loss(l, out, targets)` with `yolo_loss` a parameter: what callers hand it runs here
                    self.effect(target[1], ("call", line, self.loop, self.guarded, _batch_of_one(node)))
                if target[0] in ("gpu_module", "moved"):
                    return ("gpu",)  # only a module is called after a move
                if sources_of(target):
                    # a source called (a model or a loss passed in): its output derives from it and the inputs
                    merged = _merge_tensor(target, *args)
                    if _CLASS_HOLDER.search(name) and merged is not None:
                        # `algorithm = algorithm_class(shape, n, hparams)`, the class looked up at run time: an
                        # instance, which `algorithm.to(device)` then moves in place (`moved_in_place`)
                        self.instances.add(merged)
                    return merged
                return None
            if name in self.nested and self.env.get(name) is None and not self.inlining:
                self.inline(self.nested[name], node, args, kwargs)  # `evaluate_worker(self, pred, label)`
                return None
            if name in self.env:
                return None
            if b.project_root(name, self.env):
                return self.record(name, node, args, kwargs)
            if name in _SYNC_BUILTINS:
                for value in args:
                    self.sync(value, f"`{name}()` of a tensor", line, certain=True)
                return None
            fresh = node.args[0] if name == "next" and node.args and isinstance(node.args[0], ast.Call) else None
            if fresh is not None and self.loop >= 0 and ast_dotted_name(fresh.func) == "iter" and b.is_wrapper(fresh.func, "iter"):
                for source in sources_of(args[0]):  # `next(iter(loader))` in a loop: one batch of a new iterator per pass
                    self.effect(source, ("restart", self.loop))
            if name in ("list", "tuple", "sum", "max", "min", "abs", "iter", "next") and args and sources_of(args[0]):
                return args[0]
            if name == "tqdm" and b.is_wrapper(func, name) and args and sources_of(args[0]):
                return args[0]  # `epoch_iterator = tqdm(train_loader)`, then `for batch in epoch_iterator`
            if qualified is not None and qualified.startswith(("torchvision.models.", "timm.create_model")):
                return ("module",)
            return None
        if isinstance(func, ast.Call):
            inner = self.expr(func)
            if inner is not None and inner[0] in ("gpu_module", "moved"):
                return ("gpu",)
            if sources_of(inner):
                return _merge_tensor(inner, *args)
        return None

    def inline(self, func: ast.AST, node: ast.Call, args: list, kwargs: dict) -> None:
        """A call of a function nested in this one (`def evaluate_worker(self, pred, label)` in a metric's `update`,
        called with its arguments): its body runs here, once per call, with its parameters bound to what the call
        passes, so what it does to this function's parameters (`.item()` of `pred` in a helper it calls) are this
        function's effects. Its names and its `return` stay its own; a nested function it calls is not followed."""
        params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
        if func.args.vararg is not None or func.args.kwarg is not None or any(isinstance(a, ast.Starred) for a in node.args):
            return
        if any(k.arg is None for k in node.keywords) or len(node.args) > len(params):
            return
        bound: dict[str, Any] = {name: None for name in (*params, *(a.arg for a in func.args.kwonlyargs))}
        for name, value in zip(params, args):
            bound[name] = value
        for name, value in kwargs.items():
            if name in bound:
                bound[name] = value
        saved, rebound, none_bound = dict(self.env), set(self.rebound), set(self.none_bound)
        self.env.update(bound)
        self.inlining = True
        try:
            self.block(func.body)
        finally:
            self.inlining = False
            self.env, self.rebound, self.none_bound = saved, rebound, none_bound

    def is_mask(self, node: ast.AST) -> bool:
        """A comparison of tensors (`labels != -100`), `~m`, `a & b`, or a name bound to one here."""
        if isinstance(node, ast.Compare):
            return not any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
            return self.is_mask(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            return self.is_mask(node.left) or self.is_mask(node.right)
        return isinstance(node, ast.Name) and node.id in self.masks

    def rewrapped(self, node: ast.Assign, value: Any) -> Any:
        """`model = apply_gradient_allreduce(model)`, `model = load_weights(model, path)`: a project helper handed a
        module whose result takes the module's own name gives back that module (hooked, wrapped or loaded),
        placed where it was; what the helper returns is not known here, a module under that name is."""
        if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name) or not isinstance(node.value, ast.Call):
            return value
        name = node.targets[0].id
        held = self.env.get(name)
        # a module: built by torch or a library, or an instance of a project class (`Net().cuda()`)
        module = held in (("module",), ("gpu_module",)) or (
            held is not None and held[0] == "moved" and (self.made(held[1]) or ".").rsplit(".", 1)[-1][:1].isupper()
        )
        if not module or self.made(value) is None:
            return value
        given = [*node.value.args, *(k.value for k in node.value.keywords)]
        return held if any(isinstance(a, ast.Name) and a.id == name for a in given) else value

    def made(self, value: Any) -> Optional[str]:
        """The reference of the project call whose result `value` is (`AverageMeter` for `AverageMeter()`)."""
        sources = sources_of(value)
        if len(sources) == 1 and sources[0].startswith("c:") and "." not in sources[0]:
            return self.f.calls[int(sources[0][2:])][0]
        if len(sources) == 1 and sources[0].startswith("c:") and sources[0][2:].replace(".", "", 1).isdigit():
            index, element = sources[0][2:].split(".")  # `net, crit = set_model()`: element 1 of what it returns
            return f"{self.f.calls[int(index)][0]}.{element}"
        return None
    def made_at_module_level(self, value: Any) -> Optional[str]:
        """The reference of the project call that built the module-level instance `value` names in a function
        (`("src", "g:converter")` with `converter = utils.strLabelConverter(alphabet)` in the module body)."""
        sources = sources_of(value)
        if self.is_module or len(sources) != 1 or not sources[0].startswith("g:"):
            return None
        name = sources[0][2:]
        body = self.b.summary.functions.get(MODULE_BODY)
        held = self.b.summary.values.get(name)
        if body is None or name in self.b.summary.imports or not isinstance(held, tuple) or held[:1] != ("src",):
            return None
        origin = sources_of(held)
        if len(origin) != 1 or not origin[0].startswith("c:") or not origin[0][2:].isdigit():
            return None
        return body.calls[int(origin[0][2:])][0]

    def framework_feed(self, method: str, line: int, values: list) -> None:
        """`accelerator.prepare(model, opt, loader)`, `trainer.fit(model, loader)`: the framework iterates what it
        is handed (the index keeps the loaders among it)."""
        roots, trains = _FRAMEWORK_FEEDS[method]
        if not any(imported[1].split(".", 1)[0] in roots for imported in self.b.summary.imports.values()):
            return
        for value in values:
            for source in deep_sources(value):
                self.effect(source, ("feed", line, trains))

    def fabric_setup(self, func: ast.Attribute, node: ast.Call) -> bool:
        """`fabric.setup(model, optimizer)`: a receiver named `fabric` in a module that imports Lightning, the
        model's device placement left on."""
        if (ast_dotted_name(func.value) or "").rsplit(".", 1)[-1] != "fabric" or not node.args or any(isinstance(a, ast.Starred) for a in node.args):
            return False
        if any(k.arg in ("move_to_device", None) for k in node.keywords):
            return False
        return any(imported[1].split(".", 1)[0] in ("lightning", "lightning_fabric") for imported in self.b.summary.imports.values())

    def placed_loaders(self, method: str, node: ast.Call) -> Any:
        """`fabric.setup_dataloaders(train, val)`, `accelerator.prepare_data_loader(dl)`: loaders whose batches the
        framework moves to its device (`move_to_device=True` and `device_placement=True` by default), one value each."""
        if method not in _PLACING_FEEDS or node.keywords or not node.args or any(isinstance(a, ast.Starred) for a in node.args):
            return None
        if not any(imported[1].split(".", 1)[0] in _FRAMEWORK_FEEDS[method][0] for imported in self.b.summary.imports.values()):
            return None
        placed = (PLACED_LOADER,)
        return placed if len(node.args) == 1 else ("tuple", tuple(placed for _ in node.args))

    def _keywords_to_attributes(self, node: ast.Call) -> bool:
        """`self.__dict__.update(kwargs)` in `__init__(self, **kwargs)`: every keyword a caller gives becomes an
        attribute of the instance (`Agent(**vars(opt))` sets `self.dvc` to `opt.dvc`)."""
        func = node.func
        return (
            self.kwarg is not None and isinstance(func, ast.Attribute) and func.attr == "update"
            and isinstance(func.value, ast.Attribute) and func.value.attr == "__dict__"
            and isinstance(func.value.value, ast.Name) and self.env.get(func.value.value.id) == ("self",)
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Name) and node.args[0].id == self.kwarg
        )  # fmt: skip

    def config_read(self, node: ast.AST) -> Optional[tuple[str, tuple]]:
        """(`p:cfg` or `i:cfg`, keys) for an argument that reads a parameter of this function, or what `__init__`
        stored from one (`self.cfg.agent` -> (`i:cfg`, ("agent",))): the index follows it to a Hydra config."""
        keys: list = []
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and self.env.get(node.value.id) == ("self",):
                held = self.cls.attributes.get(node.attr) if self.cls is not None else None
                if held is None or held[0] != "init":
                    return None
                return (f"{'p' if self.is_init else 'i'}:{held[1]}", tuple(reversed(keys)))
            if isinstance(node, ast.Attribute):
                keys.append(node.attr)
            elif isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                keys.append(node.slice.value)
            else:
                return None
            node = node.value
        held = self.env.get(node.id) if isinstance(node, ast.Name) else None
        if held is None or held[0] != "src" or not held[1].startswith("p:") or "|" in held[1]:
            return None
        return (held[1], tuple(reversed(keys)))

    def option_read(self, node: ast.AST) -> Optional[tuple]:
        """`args.batch_size`: ("p:args", "batch_size") when `args` is a parameter of this function, ("default", 1,
        line) when it is the function's own parsed command line (an `add_argument` default); None otherwise."""
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)):
            return None
        held = self.env.get(node.value.id)
        if held is None:
            return None
        if held[0] == "src" and held[1].startswith("p:") and "|" not in held[1]:
            return (held[1], node.attr)
        if held[0] == "args" and isinstance(held[1], dict) and isinstance(held[1].get(node.attr), (list, tuple)):
            default = held[1][node.attr]
            return ("default", default[0], default[1]) if len(default) == 2 else None
        return None

    def unpacked_options(self, node: ast.Call) -> dict[str, Any]:
        """`f(**vars(opt))` (or `**opt.__dict__`) of parsed command-line options: the options whose default names
        a device, as the keywords the call gives (`--dvc` with `default="cuda"`: `dvc=` a CUDA device)."""
        found: dict[str, Any] = {}
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg is not None:
                continue
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "vars" and len(value.args) == 1:
                value = value.args[0]
            elif isinstance(value, ast.Attribute) and value.attr == "__dict__":
                value = value.value
            else:
                continue
            held = self.expr(value)
            if held is not None and held[0] == "args":
                found.update({name: device for name in held[1] if (device := _option_device(held[1], name)) is not None})
        return found

    def mark_handed(self, target: ast.AST, value: ast.AST) -> None:
        """`self.vocab = vocab` in `__init__`, the parameter itself (not `self.opt = model.optimizer()`): the object the
        constructor is handed (`analysis/handed_instances.py`)."""
        if (
            self.is_init and self.cls is not None and not self.inlining and isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name) and self.env.get(target.value.id) == ("self",)
            and isinstance(value, ast.Name) and self.env.get(value.id) == ("src", f"p:{value.id}")
            and self.cls.attributes.get(target.attr) == ("init", value.id)
        ):  # fmt: skip
            self.cls.attributes.setdefault(handed_attribute(target.attr), ("handed",))

    def handed_receiver(self, node: ast.AST) -> bool:
        """`self.vocab`, with `self.vocab = vocab` (a constructor parameter) in `__init__` and not a method."""
        return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and self.holds_handed(node.value.id, node.attr)

    def holds_handed(self, receiver: str, attribute: str) -> bool:
        """`self.<attribute>` (with `receiver` bound to `self`) is an object the constructor was handed."""
        return (
            self.env.get(receiver) == ("self",) and self.cls is not None and attribute not in self.cls.methods
            and self.cls.attributes.get(attribute, ("",))[0] == "init" and handed_attribute(attribute) in self.cls.attributes
        )  # fmt: skip

    def class_name(self) -> str:
        return next(name for name, info in self.b.summary.classes.items() if info is self.cls)

    def record(self, ref: str, node: ast.Call, args: list, kwargs: dict) -> Any:
        """A call of something that may be project code: the index resolves `ref` and follows it."""
        index = len(self.f.calls)
        star = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
        given = {k: v for k, v in kwargs.items() if k}
        for name, value in self.unpacked_options(node).items():
            given.setdefault(name, value)  # `Agent(**vars(opt))`: each parsed option a keyword
        self.f.calls.append((ref, node.lineno, tuple(args), given, self.loop, self.guarded, star))
        if self.grad_off:
            self.f.grad_decided = (*self.f.grad_decided, index)
        literals = _literal_arguments(node)
        if star and id(node) in self.b.unpacked:  # `Wrapper(**cfg["dataset"])` of a loaded YAML file
            literals[UNPACKED] = self.b.unpacked[id(node)]
        if literals:
            self.f.literals[index] = literals
        # only the function's own parameters handed on as they are (`evaluate(model, val_loader)`): few calls have one
        given = dict([*enumerate(args), *kwargs.items()])
        names = {slot: name for slot, name in _name_arguments(node).items() if given.get(slot) == ("src", f"p:{name}")}
        if names:
            self.f.names[index] = names
        options = {slot: read for slot, value in _arguments(node) if (read := self.option_read(value)) is not None}
        if options:
            self.f.options[index] = options
        held = self.b.held_defaults.get(id(self.cls), {}) if self.cls is not None else {}
        if held:
            kept = {
                slot: [*held[value.attr], value.attr] for slot, value in _arguments(node)
                if isinstance(value, ast.Attribute) and value.attr in held and isinstance(value.value, ast.Name)
                and self.env.get(value.value.id) == ("self",)
            }  # fmt: skip
            if kept:
                self.f.held[index] = kept
        if self.evaluating and not self.grad_off:
            evaluated = [slot for slot, value in _arguments(node) if isinstance(value, ast.Name) and value.id in self.evaluating]
            if evaluated:
                self.f.evaluated[index] = evaluated
                if self.on_typed_items():
                    self.f.typed = (*self.f.typed, index)
        if self.b.configured:
            reads = {slot: read for slot, value in _arguments(node) if (read := self.config_read(value)) is not None}
            if reads:
                self.f.configs[index] = reads
        if self.is_init and self.branches:
            self.f.optional_parts += (index,)  # `if self.hybrid: self.backbone = ResNetV2(...)`: not always built
        for slot, value in [*enumerate(args), *kwargs.items()]:
            if slot is None:
                continue
            for source in deep_sources(value):
                self.effect(source, ("pass", index, slot))
                if source.startswith("l:") and source[2:].isdigit():
                    # `for row in targets: to_string(row)`: an element of a parameter handed on, once per element
                    # (the index follows only the reads there: `ProjectIndex._source_effects`)
                    origins = self.loop_sources.get(int(source[2:]), ())
                    if any(o.startswith("p:") and o[2:] in self.listed for o in origins):
                        continue  # `for pred, label in zip(preds, labels):` where `preds` is a list: a few tensors
                    for origin in origins:
                        if origin.startswith("p:") and origin not in self.parameter_lists:
                            self.effect(origin, ("pass_element", index, slot))
        return ("src", f"c:{index}")

    def move(self, node: ast.Call, receiver: Any) -> Any:
        """`x.cuda(...)`, `x.to(<device>)`: the moved value, recording the move of a source."""
        func = node.func
        device_arg: Optional[ast.AST] = None
        if func.attr == "cuda":
            self.mark_gpu("`.cuda()`", node.lineno)
            kind = "cuda"
        else:
            for keyword in node.keywords:
                if keyword.arg == "device":
                    device_arg = keyword.value
            if device_arg is None and node.args and not isinstance(node.args[0], ast.Starred):
                device_arg = node.args[0]
            kind = _device_kind_of(device_arg, self) if device_arg is not None else None
            if kind is None and device_arg is not None:
                sources = self.device_sources(device_arg)
                if sources and all(s.startswith(("p:", "i:")) for s in sources):
                    for source in sources:  # `.to(self.dvc)`: a device when the callers give one (the index asks them)
                        self.effect(source, ("device", node.lineno))
            if kind is None or kind == "cpu":
                return None
        non_blocking = any(k.arg == "non_blocking" and _literal(k.value) == (True, True) for k in node.keywords)
        if device_arg is not None:
            for source in self.device_sources(device_arg):
                self.effect(source, ("device", node.lineno))
        for source in sources_of(receiver):
            if not source.startswith("g:"):
                self.effect(source, ("move", node.lineno, non_blocking, self.loop, self.guarded))
        if receiver is not None and receiver[0] in ("module", "gpu_module"):
            return ("gpu_module",)
        return ("moved", receiver)

    def device_sources(self, node: ast.AST) -> list[str]:
        """The sources a device expression comes from; `args.device`, `self.args.device` come from `args`."""
        if isinstance(node, ast.Attribute) and node.attr == "device":
            held = self.expr(node.value)
            if held is not None and held[0] == "src":
                return sources_of(held)
        return sources_of(self.expr(node))

    def torch_call(self, node: ast.Call, qualified: str, args: list, kwargs: dict) -> Any:
        line = node.lineno
        op = qualified[len("torch.") :]
        if op in _DATA_DEPENDENT_SHAPE or (op == "where" and len(node.args) == 1 and not node.keywords):
            for value in args[:2] if op == "masked_select" else args[:1]:
                self.shape(value, f"`torch.{op}()`", line, certain=False)
        if qualified.startswith(("torch.cuda.", "torch.accelerator.")) and id(node.func) not in self.b.backend_questions:
            self.mark_gpu(f"`{qualified}()`", line)
        if qualified == DATALOADER:
            return ("loader", self.loader_facts(node))
        if qualified == "torch.device":
            if node.args and isinstance(node.args[0], ast.IfExp) and _tests_backend(node.args[0].test):
                return _GROUP_DEVICE
            kind = _device_kind_of(node, self)
            if kind == "cuda":
                self.mark_gpu("`torch.device(...)` chosen at run time" if not _literal(node.args[0])[0] else "`torch.device(\"cuda\")`", line)
                return ("device",)
            return ("cpu",) if kind == "cpu" else None
        if qualified in ("torch.cuda.current_device", "torch.accelerator.current_accelerator", "torch.accelerator.current_device_index"):
            self.mark_gpu(f"`{qualified}()`", line)
            return ("device",)
        if qualified == "torch.cuda.synchronize":
            self.effect(INTERNAL, (self.synchronize_kind(), line, self.loop, self.guarded))
            return None
        if op in _SIZED:
            keyed = [k for k in node.keywords if k.arg == "size"]
            self.sized_with([*node.args, *(k.value for k in keyed)], [*args, *(kwargs.get("size") for _ in keyed)])
        device = next((k.value for k in node.keywords if k.arg == "device"), None)
        if device is not None:
            kind = _device_kind_of(device, self)
            sources = self.device_sources(device)
            for source in sources:
                self.effect(source, ("device", line))
            if isinstance(device, ast.Attribute) and device.attr == "device" and sources and all(s.startswith(("p:", "i:", "*")) for s in sources):
                # `torch.zeros(1, device=tensor.device)`: where `tensor` lives, so a sync on it is one on `tensor`
                return ("src", "|".join(sources))
            if kind == "cuda":
                self.mark_gpu("a tensor created with `device=`", line)
                # a host helper handed a device answers about it (`_has_foreach_support(ts, device=d)` is a bool,
                # `torch.cuda.memory_allocated(device=d)` an int): only a tensor function makes a tensor there
                return None if qualified.startswith(_HOST_HELPER_NAMESPACES) else ("gpu",)
            return None
        if qualified in ("torch.autograd.Variable", "torch.autograd.variable.Variable") and len(args) == 1 and not kwargs:
            return args[0]  # `Variable(t)`: `t` itself since PyTorch 0.4
        short = qualified.rsplit(".", 1)[-1]
        if qualified.startswith("torch.nn.") and short[:1].isupper() and short not in ("Parameter", "Buffer"):
            return ("module",)
        if qualified in ("torch.compile", "torch.jit.script") and args:
            return args[0]
        if short in _FACTORIES and qualified.count(".") == 1:
            return None
        if any(k.arg == "device" for k in node.keywords):
            return None
        tensor_op = qualified.count(".") == 1 or qualified.startswith("torch.nn.functional.")
        return _merge_tensor(*[a for a in [*args, *kwargs.values()] if a is not None]) if tensor_op else None

    def loader_facts(self, node: ast.Call) -> dict:
        facts: dict[str, Any] = {"line": node.lineno}
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            facts["unpacking"] = True
        arguments = {name: value for name, value in zip(_LOADER_POSITIONAL, node.args) if not isinstance(value, ast.Starred)}
        arguments.update({k.arg: k.value for k in node.keywords if k.arg})
        for name, value in arguments.items():
            if name in _LOADER_FACTS:
                facts[name] = self.constant(value)
        fixed = LIBRARY_LOADERS.get(self.b.qualify(node.func) or "", {}).get("fixed", ())
        if "collate_fn" in arguments or "collate_fn" in fixed:
            facts["collate_fn"] = True  # batches of a custom type may be made (whose `.to()` may take no `non_blocking`)
        return facts

    def constant(self, node: ast.AST) -> Any:
        """A literal, directly or through a module constant or this function's default; "?" when unknown."""
        ok, value = _literal(node)
        if ok:
            return value
        if isinstance(node, ast.Call) and (self.b.qualify(node.func) or "") == "torch.cuda.is_available":
            return "cuda-available"
        return "?"

    def argparse_options(self, parser: ast.AST) -> dict:
        """`{dest: [default, line]}` of the module's `add_argument` calls (on any parser: helpers that add
        groups of options take the parser as an argument)."""
        return self.b.argparse_options


def _formatted_or_logged(node: ast.Call, args: list, kwargs: dict) -> Optional[tuple[str, list]]:
    """`"...".format(t)` and `writer.add_scalar(tag, t)` (TensorBoard copies the value to the host): how
    they sync, and the values they turn into host numbers."""
    func = node.func
    assert isinstance(func, ast.Attribute)
    if func.attr == "format" and isinstance(func.value, ast.Constant) and isinstance(func.value.value, str):
        return "`str.format()` of a tensor", [*args, *kwargs.values()]
    if func.attr == "add_scalar":
        value = kwargs.get("scalar_value", args[1] if len(args) > 1 else None)
        return "`add_scalar()` of a tensor", [value]
    return None


def _builds_library_model(qualified: str) -> bool:
    """A torchvision model builder (not a weights or registry helper) or `timm.create_model`."""
    if qualified == "timm.create_model":
        return True
    return (
        qualified.startswith("torchvision.models.") and "Weights" not in qualified
        and not qualified.rsplit(".", 1)[-1].startswith(("get_", "list_", "_"))
    )  # fmt: skip


# The attribute a class records when its constructor turns its keywords into attributes (`self.__dict__.update(kwargs)`)
KEYWORDS_AS_ATTRIBUTES = "__dict__"


def _option_device(options: dict, name: str) -> Any:
    """`args.device` of an option whose default names a device (`default="cuda"`): that device; else unknown."""
    default = options.get(name, [None])[0]
    if isinstance(default, str) and default.split(":")[0] in ("cuda", "cpu"):
        return ("device",) if default.startswith("cuda") else ("cpu",)
    return None


def _over_typed_items(expr: ast.AST, typed: frozenset[str]) -> bool:
    """`range(...)`, `args.files` of an option in `typed`, or either through `enumerate` / `zip`."""
    if not typed:
        return False
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("enumerate", "zip") and expr.args:
        return all(_over_typed_items(a, typed) for a in expr.args)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "range":
        return True
    return isinstance(expr, ast.Attribute) and expr.attr in typed


def _argparse_dest(node: ast.Call) -> Optional[str]:
    for keyword in node.keywords:
        if keyword.arg == "dest":
            ok, value = _literal(keyword.value)
            return value if ok and isinstance(value, str) else None
    flags = [v for ok, v in (_literal(a) for a in node.args) if ok and isinstance(v, str)]
    if not flags:
        return None
    long_flags = [f for f in flags if f.startswith("--")]
    return re.sub(r"^-+", "", (long_flags or flags)[0]).replace("-", "_")


def _is_host_read(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr in _HOST_READS) or (isinstance(func, ast.Name) and func.id == "int")


def _alias_made_attributes(methods: list, info: ClassSummary) -> None:
    """`self.integrator = self.train_integrator` in a method (`train()`), `self.train_integrator = Integrator(...)`
    in `__init__`: the alias holds an instance of the same project class wherever the class reads it, even in a
    method read before the one that writes it (`self.integrator.add_dict(losses)` in `do_pass`). Only when every
    write of the alias in the class names an attribute `__init__` made of one and the same class."""
    aliases: dict[str, set] = {}
    for method in methods:
        for stmt in ast.walk(method):
            if not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                continue
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
                    continue
                value = stmt.value if isinstance(stmt, ast.Assign) and len(targets) == 1 else None
                held = None
                if (
                    method.name != "__init__" and isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name)
                    and value.value.id == "self"
                ):  # fmt: skip
                    made = info.attributes.get(value.attr)
                    held = made[1] if isinstance(made, tuple) and len(made) == 2 and made[0] == "made" and made[1] else None
                aliases.setdefault(target.attr, set()).add(held)
    for attribute, made in aliases.items():
        if attribute not in info.attributes and len(made) == 1 and None not in made:
            info.attributes[attribute] = ("made", made.pop())


def _element(value: Any, index: int) -> Any:
    """Element `index` of an unpacked value: a part of the same source (`c:3.1` for a call's result)."""
    if value is None:
        return None
    if value[0] == "tuple":
        return value[1][index] if index < len(value[1]) else None
    sources = sources_of(value)
    if sources:
        parts = [f"{s}.{index}" if s.startswith("c:") and "." not in s else s for s in sources]
        return ("src", "|".join(parts))
    if value[0] == "gpu":
        return value
    if value[0] == "moved" and (value[1] is None or value[1][0] not in ("module", "gpu_module")):
        return ("gpu",)  # `a, b = [t.to(device) for t in batch]`: each part of what was moved is on the GPU
    return None


class _Quiet:
    """A reader that records no evidence (for a device look-up that is only a question)."""

    def __init__(self, reader: _Reader) -> None:
        self.b, self.env, self.is_module = reader.b, reader.env, reader.is_module

    def mark_gpu(self, what: str, line: int) -> None:
        pass


def _merge_tensor(*values: Any) -> Any:
    """The result of a tensor operation on `values`: tied to all their sources, or a GPU tensor."""
    sources: list[str] = []
    gpu = False
    for value in values:
        if value is None:
            continue
        if value[0] == "tuple":  # `torch.cat((a, b))`, `torch.stack([x, y])`
            inner = _merge_tensor(*value[1])
            if inner is None:
                continue
            value = inner
        if value[0] == "gpu" or value[0] == "moved":
            gpu = True
        for source in sources_of(value):
            if source not in sources:
                sources.append(source)
    if sources:
        # a GPU tensor made here (`*`) mixed with sources: tied to them, and still known to be on the GPU
        if gpu or INTERNAL in sources:
            sources = [INTERNAL, *(s for s in sources if s != INTERNAL)]
        return ("src", "|".join(sources))
    return ("gpu",) if gpu else None


# torch namespaces of host helpers (device queries, backend switches, utilities), not of tensor functions
_HOST_HELPER_NAMESPACES = ("torch.utils.", "torch.cuda.", "torch.backends.", "torch.accelerator.", "torch.distributed.")


def _device_kind_of(node: Optional[ast.AST], reader: _Reader, mark: bool = True) -> Optional[str]:
    """"cuda" (an accelerator, or a device chosen at run time), "cpu", or None when `node` may not be a device.
    With `mark`, a device that shows GPU use is recorded as evidence."""
    if node is None:
        return None
    if not mark:
        reader = _Quiet(reader)
    ok, value = _literal(node)
    if ok:
        if isinstance(value, str):
            kind = value.split(":")[0]
            if kind == "cuda":
                reader.mark_gpu(f'`"{value}"` as a device', getattr(node, "lineno", 0))
                return "cuda"
            return "cpu" if kind == "cpu" else ("other" if kind in ("mps", "xpu", "meta", "npu", "hpu", "xla") else None)
        if isinstance(value, int) and not isinstance(value, bool):
            return "cuda"
        return None
    if isinstance(node, ast.JoinedStr):
        head = node.values[0] if node.values else None
        if isinstance(head, ast.Constant) and isinstance(head.value, str) and head.value.startswith("cuda"):
            return "cuda"
        return None
    if isinstance(node, ast.Call):
        qualified = reader.b.qualify(node.func) or ""
        if qualified == "torch.device":
            if not node.args:
                return None
            inner = node.args[0]
            ok, _ = _literal(inner)
            kind = _device_kind_of(inner, reader)
            if kind is None and not ok and not (isinstance(inner, ast.IfExp) and _tests_backend(inner.test)):
                reader.mark_gpu("`torch.device(...)` chosen at run time", node.lineno)
                return "cuda"
            return kind
        if qualified in ("torch.cuda.current_device", "torch.accelerator.current_accelerator", "torch.accelerator.current_device_index"):
            return "cuda"
        getter = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if not qualified.startswith("torch.") and _DEVICE_GETTER.search(getter):
            return "cuda"  # `dist_util.dev()`, `get_device()`: named like the device getter it is, as `device` names are
        return None
    if isinstance(node, ast.IfExp):
        if _tests_backend(node.test):
            return None  # `"cpu" if backend == "gloo" else "cuda"`: the process group decides
        chosen = _shipped_flag(reader, node.test)
        if chosen is not UNKNOWN_FLAG:  # `"cuda" if args.cuda else "cpu"` with `Namespace(cuda=False)`
            return _device_kind_of(node.body if chosen else node.orelse, reader)
        kinds = {_device_kind_of(node.body, reader), _device_kind_of(node.orelse, reader)}
        return "cuda" if "cuda" in kinds and None not in kinds else None
    if isinstance(node, (ast.Name, ast.Attribute)):
        value = reader.env.get(node.id) if isinstance(node, ast.Name) else None
        if isinstance(node, ast.Name) and node.id not in reader.env and not reader.is_module:
            value = reader.b.summary.values.get(node.id)
        if value == ("device",):
            return "cuda"
        if value == ("cpu",):
            return "cpu"
        if value == _GROUP_DEVICE:
            return None  # not known to be the GPU, whatever the name says
        last = node.attr if isinstance(node, ast.Attribute) else node.id
        if isinstance(node, ast.Attribute) and last == "device":
            return "cuda"
        if DEVICE_INDEX_NAME.match(last):
            reader.mark_gpu(f"`{last}` used as a device", node.lineno)
            return "cuda"
        if _DEVICE_NAME.search(last):
            return "cuda"
    return None


def _shipped_flag(reader: Any, test: ast.AST) -> object:
    """`args.cuda` of a namespace written in the module (`Namespace(cuda=False)`), read in the module body."""
    if not reader.is_module or not isinstance(test, ast.Attribute) or not isinstance(test.value, ast.Name):
        return UNKNOWN_FLAG
    return reader.b.namespace_flags.get(f"{test.value.id}.{test.attr}", UNKNOWN_FLAG)


def _tests_backend(test: ast.AST) -> bool:
    """A condition that names a host backend (`backend == "gloo"`): see `communication.chosen_by_backend`."""
    return chosen_by_backend([n.value for n in ast.walk(test) if isinstance(n, ast.Constant)])


def _setting_files(tree: ast.AST) -> list[tuple[str, str]]:
    """YAML paths written as literals, Hydra's `config_path=` literals, and for a script with command-line flags
    the job files that may launch it: the files a module's settings may come from (their contents are part of its context's digest)."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith((".yaml", ".yml")):
            entry = ("file", node.value)
        elif isinstance(node, ast.keyword) and node.arg == "config_path" and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            entry = ("hydra", node.value.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            entry = ("launch", "")  # a command-line script: job files may launch it with flags
        else:
            continue
        if entry not in found and len(found) < 16:
            found.append(entry)
    return found


def _nested_gpu_attributes(tree: ast.AST, qualify, quiet: set[int] = frozenset()) -> Iterable[tuple[str, int]]:
    """`torch.cuda.*` / `torch.accelerator.*` in functions and classes nested in a function, which the readers
    do not enter (a prefetcher's inner `_prefetch` under `torch.cuda.stream(...)`)."""

    def nested(node: ast.AST, in_function: bool) -> Iterable[ast.AST]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and in_function:
                yield child
            else:
                yield from nested(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)))

    for inner in nested(tree, False):
        for node in ast.walk(inner):
            if isinstance(node, ast.Attribute) and id(node) not in quiet:
                qualified = qualify(node)
                if qualified is not None and qualified.startswith(("torch.cuda.", "torch.accelerator.")) and qualified.count(".") == 2:
                    yield f"`{qualified}`", node.lineno
