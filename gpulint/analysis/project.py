"""The project index: module summaries composed across calls and imports, and what each module may know.

Pass one summarises every module of the project (`summary.py`, with `ast`, cached by content hash). The
index then resolves imports within the project (relative imports, packages, `from .data import
make_loaders`, re-exports through `__init__.py`; anything it cannot find stays unknown, never guessed as
GPU or CPU) and composes the summaries: a helper that calls a helper moves, syncs or trains through it.

Pass two analyses each file with LibCST, given its `ModuleContext`: the facts of everything it calls
(`callee`), what the rest of the project does with what it defines (`own`), and whether it is GPU code.
The context is plain data; its digest is part of the file's cache key, so a file is re-checked exactly
when what it may know changes (edit a helper: its summary changes, so do its importers' contexts).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from gpulint.analysis import handed_instances, instantiated, settings_files, torch_pins
from gpulint.analysis.call_arguments import agreed_arguments, passed
from gpulint.analysis.held_defaults import held_arguments
from gpulint.analysis.convolutions import CONV_NET
from gpulint.analysis.default_device import project_facts as default_device_facts
from gpulint.analysis.devices import BASE_EVIDENCE, gpu_context_reason
from gpulint.analysis.engine_steps import ENGINE_STEP, engine_step_parameters
from gpulint.analysis.factory_instances import factory_calls, factory_member
from gpulint.analysis.forward_coverage import forward_coverage
from gpulint.analysis.forward_helpers import LIBRARY_MODULES, forward_called
from gpulint.analysis.forward_reach import reached_methods, reaching_refs, repeated_shape_ops
from gpulint.analysis.generation import generating_names
from gpulint.analysis.graph_batches import graph_collates
from gpulint.analysis.returned_actions import needed_results
from gpulint.analysis.handed_elements import handed_elements
from gpulint.analysis.evaluated_params import evaluated_params
from gpulint.analysis.grad_callers import grad_decided_functions
from gpulint.analysis.imported_options import parsers as imported_parsers
from gpulint.analysis.inference_results import inference_results
from gpulint.analysis.walked_params import walked_params
from gpulint.analysis.inherited_members import inherited_attributes, inherited_init, overridden_steps, placed_attributes
from gpulint.analysis.instantiated import MARKER as INSTANTIATED
from gpulint.analysis.handed_instances import MARKER as HANDED
from gpulint.analysis.loader_links import loaders_in
from gpulint.analysis.moved_returns import moved_returns
from gpulint.analysis.path_folders import child_folders, sibling_module
from gpulint.analysis.returned_views import returned_views
from gpulint.analysis.settings_defaults import ProjectSettings
from gpulint.analysis.stepped_inputs import reported_in_callee
from gpulint.analysis.test_code import DEFAULT_TEST_PATHS
from gpulint.analysis.superseded_code import superseded
from gpulint.analysis.test_named_modules import imported_by_code
from gpulint.analysis.uncalled import imported_elsewhere, uncalled_functions
from gpulint.analysis.summary import INTERNAL, KEYWORDS_AS_ATTRIBUTES, MODULE_BODY, FunctionSummary, ModuleSummary, deep_sources, sources_of

_MAX_DEPTH = 6  # calls followed through helpers, imports through re-exports
# Facts composed through more functions (or modules) than this at once are unknown: a chain of thousands of
# modules in a hostile repository must not exhaust the interpreter's recursion.
_MAX_CHAIN = 40
_ITERABLE_DATASETS = frozenset({"torch.utils.data.IterableDataset", "torch.utils.data.dataset.IterableDataset"})
_NN_MODULE = "torch.nn.Module"


@dataclass
class Consumption:
    """A loop elsewhere in the project that takes batches of a loader this module builds."""

    where: str  # the loop, `train.py:42`
    trains: bool
    gpu: bool  # the loop's function or module is GPU code
    moves: tuple[tuple[str, bool], ...] = ()  # (where the batch is copied to the GPU, non_blocking)
    # the loop that runs this one again on each of its passes (`train.py:186`): an enclosing loop, or the loop
    # a caller runs the loop's function in (`valid(...)` called in the training loop); None: runs it once
    epoch: Optional[str] = None
    restarts: bool = False  # takes one batch of a new iterator on each pass (`next(iter(loader))` in the loop)
    by_caller: bool = False  # `epoch` is the loop some caller calls the loop's function in, not one around the loop
    # the factory call whose result this loop takes (`train.py:93`) and the literals it passes (`call_arguments.passed`)
    called_at: str = ""
    passed: tuple = ()

    def to_json(self) -> list:
        return [self.where, self.trains, self.gpu, self.moves, self.epoch, self.restarts, self.by_caller, self.called_at, self.passed]


@dataclass
class Callee:
    """What calling one project function or class does, composed through the helpers it calls."""

    kind: str  # "function" or "class"
    where: str  # `utils.py:12`
    params: tuple[str, ...] = ()  # positional parameters, `self` included for methods
    trains: bool = False  # runs a backward pass or an optimizer step (itself or through what it calls)
    epoch: bool = False  # ... inside a loop of its own: a whole epoch per call, not one step
    returns: Any = None  # ("loader", facts), ("module",), ("gpu_module",), ("gpu",), ("device",), ("args", options), ("tuple", ...)
    # parameter -> [("move", where, non_blocking), ("sync", kind, where, certain), ("iter", where), ("device", where),
    # ("no_sync", where): enters DDP's `no_sync()` of the module it is given, ("forward", where, one): calls it, on a
    # batch of one (`img.unsqueeze(0)`) when `one`, ("engine_step", where): hands it to ignite's `Engine(...)` as the
    # function run every iteration (`analysis/engine_steps.py`)]
    effects: dict[str, list[tuple]] = field(default_factory=dict)
    # ("sync", kind, where) / ("synchronize", where) / ("barrier", where: one after async communication): every call; ("clock", where, drains): it reads a clock (times the GPU), and synchronizes on every call when drains
    syncs: list[tuple] = field(default_factory=list)
    yields: tuple[str, ...] = ()  # parameters whose elements it yields (a generator over a loader)
    consumes: dict[str, list[Consumption]] = field(default_factory=dict)  # parameter -> the loops taking its batches
    # builds a convolutional network (`convolutions.CONV_NET` convolutions or more: itself, through the project code
    # it calls, or a base class); one is a stem (a vision transformer's patch embedding), two a toy
    convolutions: bool = False
    # data it hands out from memory (`analysis/held_data.py`): a class's {"items": [...], "collate": True}, a
    # function's "cheap" / ["tuple", [...]]; None: not known
    held: Any = None
    # a class whose call builds a DataLoader from its arguments: its signature (`analysis/loader_classes.py`)
    loader: Optional[dict] = None
    # a model class whose forward runs a recurrent cell once per time step of a Python loop (`analysis/time_step_loops.py`)
    steps_cells: bool = False
    # a function returning torchvision transforms: ["one", steps] / ["tuple", [steps or None, ...]]
    # (`analysis/returned_transforms.py`)
    transforms: Any = None
    # a class whose `__len__` returns an integer literal: that many samples (`ClassSummary.length`)
    length: Optional[int] = None

    def to_json(self) -> list:
        consumes = {k: [c.to_json() for c in v] for k, v in self.consumes.items()}
        return [
            self.kind, self.where, self.params, self.trains, self.epoch, self.returns, self.effects, self.syncs, self.yields,
            consumes, self.convolutions, self.held, self.loader, self.steps_cells, self.transforms, self.length,
        ]  # fmt: skip


@dataclass
class ModuleContext:
    """Everything the project tells the analysis of one module (rules never see the index itself)."""

    path: str = ""
    parsed: bool = True  # False: the module does not parse, so the project knows nothing of it
    gpu: bool = False
    gpu_reason: Optional[str] = None
    callees: dict[str, Callee] = field(default_factory=dict)  # a call's reference as written -> its facts
    consumers: dict[str, list[Consumption]] = field(default_factory=dict)  # `make_loaders` / `make_loaders.0` -> loops
    inputs: dict[str, list[str]] = field(default_factory=dict)  # `train.model` -> what callers pass ("gpu_module", "cuda_device", ...)
    # A class of this module -> the library classes it derives from through project classes in other modules
    # (`LitModel(Base)`, `Base(L.LightningModule)` in base.py: ["lightning.LightningModule"]).
    inherited: dict[str, list[str]] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)  # setting files it may read -> content hash
    # names a `from <project module> import *` binds to library modules and objects that module imported
    # (`torch`, `nn` -> `torch.nn`): local name -> qualified name
    star_imports: dict[str, str] = field(default_factory=dict)
    # a method of a class of this module that runs on every step of a training loop: an instance called there
    # (`crit(pred, y)` runs `ComputeLoss.__call__`), or a method those call on `self`: key -> the call, `train.py:363`
    stepped: dict[str, str] = field(default_factory=dict)
    # a function (not a method) of this module that a model's `forward` calls every time, here or in another
    # module (`analysis/forward_helpers.py`): name -> the call, `models.py:512`
    forward_called: dict[str, str] = field(default_factory=dict)
    # a function or method of this module that a per-step `forward` reaches on every call, through submodules'
    # `forward`s and helpers, in any module (`analysis/forward_reach.py`): key -> [the call that reaches it, the step
    # loop's call of the root `forward`]; and the call references of this module that run such a function of another
    # module (its ops are reported there, at their lines)
    reached: dict[str, list] = field(default_factory=dict)
    reached_refs: list = field(default_factory=list)
    # a function or method of this module whose result a step loop of another module moves to the GPU
    # (`analysis/moved_returns.py`): key -> the move, `train.py:77`
    moved_returns: dict[str, str] = field(default_factory=dict)
    # a call reference of this module that runs a per-step method of another module -> the parameters whose syncs
    # that method reports itself, "certain" / "likely" GPU tensors (`analysis/stepped_inputs.py`)
    reported_in_callee: dict[str, dict[str, str]] = field(default_factory=dict)
    # a parameter of a function or class of this module -> how every call in the project fills it, when all are
    # in sight (`analysis/call_arguments.py`): `ComputeLoss.autobalance` -> [["left out"]]
    arguments: dict[str, list] = field(default_factory=dict)
    # a parameter of a function of this module -> [the one value every call gives it, through a method default an
    # object keeps (`self.num_workers` of `fit(..., num_workers=0)`), where that default is] (`analysis/held_defaults.py`)
    held_arguments: dict[str, list] = field(default_factory=dict)
    # a yacs setting it reads (`config.DATA.NUM_WORKERS`) -> [its default, where, every value the project may
    # give it] (`analysis/settings_defaults.py`)
    config_defaults: dict[str, list] = field(default_factory=dict)
    # a parameter of a function of this module -> the loaders every call passes it (`analysis/loader_links.py`)
    loaders_in: dict[str, list] = field(default_factory=dict)
    # the newest torch the project's metadata allows (`analysis/torch_pins.py`): [major, minor, where, spec]
    torch_pin: Optional[list] = None
    # the oldest torch (from 0.4 on) a README or Dockerfile installs exactly, no bound: [major, minor, where, spec]
    installed_torch: Optional[list] = None
    # module-level functions nothing in the project runs, and whether other modules import this one
    # (`analysis/uncalled.py`): a `__main__` block of an imported module is its self-test
    uncalled: list[str] = field(default_factory=list)
    imported: bool = False
    # a module named like a test only (`dataset_test.py`) -> the project modules outside the test paths that import
    # it: a library module, read by every rule (`analysis/test_named_modules.py`)
    imported_by_code: list[str] = field(default_factory=list)
    # the module lies in an `old/` folder nothing outside it imports (`analysis/superseded_code.py`)
    superseded: bool = False
    # a function or method name -> the graph library call (`dgl.batch`) every definition of it in the project
    # returns: a loader with that collate yields graphs `pin_memory` cannot pin (`analysis/graph_batches.py`)
    graph_collates: dict[str, str] = field(default_factory=dict)
    # the names of project functions and methods that run a model's `generate(...)` (`analysis/generation.py`)
    generating: tuple[str, ...] = ()
    # the names of project functions and methods whose every call hands the result to an environment's step or a
    # tensor's size (`analysis/returned_actions.py`): a read such a method returns is the host's input
    needed_results: tuple[str, ...] = ()
    # the lines of the module's own GPU evidence, and whether the project gives it GPU evidence too: a notebook
    # whose own evidence never runs as shipped is CPU code (`analysis/cpu_as_shipped.py`); filled for notebooks only
    own_evidence_lines: list[int] = field(default_factory=list)
    project_gpu: bool = False
    # where the default device may be CUDA (`analysis/default_device.py`): a function or method key -> [[first line,
    # last line, where it is set]] (the whole function where a caller enters it so), and `key.param` -> where the
    # data the project's callers pass for it was made under a CUDA default
    default_cuda: dict[str, list] = field(default_factory=dict)
    default_cuda_params: dict[str, str] = field(default_factory=dict)
    # a call reference of this module that builds a project model (a class, or a factory returning one) -> "every"
    # when its forward runs every submodule it owns on every call, ["skips", why] when the code shows some left out
    # (`analysis/forward_coverage.py`); absent: unknown
    forward_coverage: dict[str, Any] = field(default_factory=dict)
    # parsers it imports from other project modules (`from opts import parser`): the name as written -> {dest:
    # [default, `opts.py:64`]} (`analysis/imported_options.py`)
    parsers: dict[str, dict[str, list]] = field(default_factory=dict)
    # a parameter of a module-level function of this module -> the calls of other modules that hand it a model in
    # eval mode with autograd on (`analysis/evaluated_params.py`): `evaluate.model` -> [[call, loop, guarded, epoch
    # loop, caller trains], ...]
    evaluated: dict[str, list] = field(default_factory=dict)
    # module-level functions of this module whose every call in the project runs what they return for inference
    # only (`analysis/inference_results.py`)
    inference_results: list[str] = field(default_factory=list)
    # module-level functions of this module that every call in the project runs with autograd off or decided, itself
    # or through its callers (`analysis/grad_callers.py`)
    grad_decided: list[str] = field(default_factory=list)
    # a module-level function of this module that reads a GPU tensor it is handed element by element, run for every
    # batch by a loop of the project (`analysis/walked_params.py`): name -> [[param, [read lines], `main.py:346`]]
    walked: dict[str, list] = field(default_factory=dict)

    def callee(self, ref: Optional[str]) -> Optional[Callee]:
        return self.callees.get(ref) if ref else None

    @cached_property
    def tags(self) -> frozenset[str]:
        """What this module reaches through the project, for the prefilter (`Rule.project_tags`):
        "helper-syncs" (it calls something that waits for the GPU), "helper-moves" (something that copies an
        argument to the GPU), "returns-moved" (a step loop elsewhere moves what a function here returns), "loader-consumed"
        (its loaders are iterated elsewhere), "builds-convolutions" (it calls a project class or
        factory that builds a convolutional network), "helper-trains" (it calls something that runs a training step),
        "handed-in-eval" (another module hands one of its functions a model in eval mode, with autograd on)."""
        found = set()
        for callee in self.callees.values():
            if any(e[0] != "clock" for e in callee.syncs) or any(e[0] in ("sync", "shape") for effects in callee.effects.values() for e in effects):
                found.add("helper-syncs")
            if any(e[0] == "move" for effects in callee.effects.values() for e in effects):
                found.add("helper-moves")
        if self.consumers:
            found.add("loader-consumed")
        if self.moved_returns:
            found.add("returns-moved")  # a step loop of another module moves what a function here returns
        if any(_returns_pinned_loader(callee.returns) for callee in self.callees.values()):
            found.add("pinned-loader-returned")
        if any(facts.get("pin_memory") is True for loaders in self.loaders_in.values() for _, facts in loaders):
            found.add("pinned-loader-received")
        if any(callee.convolutions for callee in self.callees.values()):
            found.add("builds-convolutions")
        if any(callee.trains for callee in self.callees.values()):
            found.add("helper-trains")  # `train(epoch, train_loader, model, ...)` of `helper/loops.py`
        if self.evaluated:
            found.add("handed-in-eval")  # another module hands a function here a model in eval mode (GPU405)
        return frozenset(found)

    def consumed(self, function: str, element: Optional[int] = None) -> list[Consumption]:
        return self.consumers.get(function if element is None else f"{function}.{element}", [])

    def receives(self, function: str, param: str) -> list[str]:
        return self.inputs.get(f"{function}.{param}", [])

    @cached_property
    def digest(self) -> str:
        data = [
            self.parsed,
            self.gpu,
            self.gpu_reason,
            sorted((k, v.to_json()) for k, v in self.callees.items()),
            sorted((k, [c.to_json() for c in v]) for k, v in self.consumers.items()),
            sorted(self.inputs.items()),
            sorted(self.inherited.items()),
            sorted(self.settings.items()),
            sorted(self.star_imports.items()),
            sorted(self.stepped.items()),
            sorted(self.forward_called.items()),
            sorted(self.reached.items()),
            self.reached_refs,
            sorted(self.moved_returns.items()),
            sorted(self.reported_in_callee.items()),
            sorted(self.arguments.items()),
            sorted(self.held_arguments.items()),
            sorted(self.config_defaults.items()),
            sorted(self.loaders_in.items()),
            self.torch_pin,
            self.installed_torch,
            self.uncalled,
            self.imported,
            self.imported_by_code,
            self.superseded,
            sorted(self.graph_collates.items()),
            self.generating,
            self.needed_results,
            self.own_evidence_lines,
            self.project_gpu,
            sorted(self.default_cuda.items()),
            sorted(self.default_cuda_params.items()),
            sorted(self.forward_coverage.items(), key=str),
            sorted(self.parsers.items()),
            sorted(self.evaluated.items()),
            self.inference_results,
            self.grad_decided,
            sorted(self.walked.items()),
        ]
        return hashlib.sha256(json.dumps(data, default=str).encode()).hexdigest()[:16]


def lone_context(summary: ModuleSummary, path: str) -> ModuleContext:
    """The context of a module seen without its project: its own evidence and its own functions only."""
    index = ProjectIndex(Path(path).resolve().parent, {Path(path).resolve(): summary})
    return index.context(Path(path).resolve())


@dataclass(eq=False)
class ModuleRecord:
    path: Path
    shown: str  # as the command line shows it, for messages
    summary: ModuleSummary
    folder: str = ""  # the file's folder, as a string (resolution works on strings: Path objects are slow)


class ProjectIndex:
    """All summaries of a project, and the composed facts, each computed once and only when asked."""

    def __init__(self, root: Path, summaries: dict[Path, ModuleSummary]) -> None:
        from gpulint.linter import display_path  # messages name other files as the command line shows them

        self.root = root
        self._root = str(root)
        self.records: dict[Path, ModuleRecord] = {}
        self._files: dict[str, ModuleRecord] = {}
        self._computed: dict[str, Any] = {}  # project-wide facts of other modules (`computed`)
        for path, summary in summaries.items():
            record = self.records[path] = ModuleRecord(path, display_path(path), summary, os.path.dirname(str(path)))
            self._files[str(path)] = record
        self._modules: dict[tuple, Optional[ModuleRecord]] = {}
        self._symbols: dict[tuple[int, str], Optional[tuple[str, ModuleRecord, str]]] = {}
        self._callees: dict[tuple[int, str], Optional[Callee]] = {}
        self._conv_counts: dict[tuple[int, str, str], int] = {}
        self._in_progress: set[tuple[int, str]] = set()
        self._inputs: dict[tuple[int, str, str], set[str]] = {}
        self._consumptions: dict[tuple[int, str, str], list[Consumption]] = {}
        self._contexts: dict[Path, ModuleContext] = {}
        self._gpu: dict[int, Optional[str]] = {}
        self._gpu_in_progress = 0
        self._inherited: dict[tuple[int, str], list[str]] = {}
        self._stepped: dict[int, dict[str, str]] = {}
        self._reached: dict[int, dict[str, tuple[str, str]]] = {}
        self._reaching = 0  # `reached_of` computations under way (a bound on the depth of chains across modules)

    def computed(self, name: str, compute: Callable[[], Any]) -> Any:
        """A project-wide fact another module derives from the summaries, computed once per index on first ask."""
        if name not in self._computed:
            self._computed[name] = compute()
        return self._computed[name]

    @cached_property
    def settings_defaults(self) -> ProjectSettings:
        return ProjectSettings(self._root, ((r.shown, r.summary.config_paths) for r in self.records.values()))

    def with_module(self, path: Path, summary: ModuleSummary) -> ProjectIndex:
        """The same project with one module's summary replaced (or added): a file being fixed."""
        summaries = {p: r.summary for p, r in self.records.items()}
        summaries[path] = summary
        return ProjectIndex(self.root, summaries)

    # ---- modules and names ------------------------------------------------------------------------

    def _file(self, base: str) -> Optional[ModuleRecord]:
        return self._files.get(base + ".py") or self._files.get(os.path.join(base, "__init__.py"))

    @cached_property
    def _child_folders(self) -> dict[str, list[str]]:
        return child_folders(list(self._files))

    def module(self, importer: ModuleRecord, level: int, dotted: str) -> Optional[ModuleRecord]:
        """The project file `import dotted` (or `from .{level} dotted`) means in `importer`, if any."""
        key = (importer.folder, level, dotted)
        if key in self._modules:
            return self._modules[key]
        parts = [p for p in dotted.split(".") if p]
        found = None
        if level:
            base = importer.folder
            for _ in range(level - 1):
                base = os.path.dirname(base)
            found = self._file(os.path.join(base, *parts)) if parts else self._files.get(os.path.join(base, "__init__.py"))
        elif parts:
            # The script's own folder first (how `python train.py` imports), then each folder up to the root.
            folder = importer.folder
            while True:
                found = self._file(os.path.join(folder, *parts))
                if found is not None or folder == self._root or not folder.startswith(self._root + os.sep):
                    break
                folder = os.path.dirname(folder)
            for source_root in ("src", "lib"):  # `lib/` is what an `_init_paths.py` puts on `sys.path`
                found = found or self._file(os.path.join(self._root, source_root, *parts))
            if found is None:  # `from loss import ...` of `src/transformer/loss.py` in `src/solver/` (`analysis/path_folders.py`)
                found = sibling_module(importer.folder, parts, self._root, self._child_folders, self._file)
        self._modules[key] = found
        return found

    def symbol(self, record: ModuleRecord, ref: str, depth: int = 0) -> Optional[tuple[str, ModuleRecord, str]]:
        """What `ref` (a dotted name as written in `record`) is: ("function" | "class" | "value" | "module", file, name)."""
        key = (id(record), ref)
        if key in self._symbols:
            return self._symbols[key]
        if depth > _MAX_DEPTH:
            return None
        self._symbols[key] = None  # a re-export cycle resolves to nothing
        found = self._symbol(record, ref, depth)
        self._symbols[key] = found
        return found

    def _symbol(self, record: ModuleRecord, ref: str, depth: int) -> Optional[tuple[str, ModuleRecord, str]]:
        summary = record.summary
        head, _, rest = ref.partition(".")
        if head.startswith(INSTANTIATED):  # `self.agent.update` with `self.agent = hydra.utils.instantiate(cfg.agent)`
            return instantiated.resolve(self, record, head, rest.split(".") if rest else [])
        if head.startswith(HANDED):  # `self.model(x)` with `self.model = model` in `__init__`: what its callers hand it
            return handed_instances.resolve(self, record, head, rest.split(".") if rest else [])
        if head in summary.classes or (head in summary.functions and head != MODULE_BODY) or head in summary.values:
            return self._attribute(record, ref.split("."), depth)
        target = summary.imports.get(head)
        if target is None:
            for level, module in summary.stars:  # `from utils import *`
                source = self.module(record, level, module)
                found = self._attribute(source, ref.split("."), depth + 1) if source is not None else None
                if found is not None:
                    return found
            return None
        level, module, name = target
        tail = rest.split(".") if rest else []
        if name is None:
            # `import a.b as m` / `import a`: the longest module prefix that is a project file, then attributes.
            parts = [*module.split("."), *tail] if module else tail
            for cut in range(len(parts), 0, -1):
                found = self.module(record, level, ".".join(parts[:cut]))
                if found is not None:
                    return self._attribute(found, parts[cut:], depth + 1)
            return None
        source = self.module(record, level, module)
        if source is not None:
            resolved = self._attribute(source, [name, *tail], depth + 1)
            if resolved is not None:
                return resolved
        sub = self.module(record, level, f"{module}.{name}" if module else name)
        if sub is not None:
            return self._attribute(sub, tail, depth + 1)
        # `from utils import get_mask` where the walk up found a package `src/utils/` without that name: the
        # sibling folder's `src/utils/utils.py` is what a path of sibling folders imports (`analysis/path_folders.py`)
        if source is None or level or not module:
            return None
        other = sibling_module(record.folder, module.split("."), self._root, self._child_folders, self._file)
        return self._attribute(other, [name, *tail], depth + 1) if other is not None and other is not source else None

    def _attribute(self, record: ModuleRecord, names: list[str], depth: int) -> Optional[tuple[str, ModuleRecord, str]]:
        if not names:
            return ("module", record, "")
        summary = record.summary
        head, tail = names[0], names[1:]
        if head in summary.classes:
            if not tail:
                return ("class", record, head)
            if len(tail) == 1 and tail[0] == "__call__":
                return self.called_method(record, head)
            key = f"{head}.{tail[0]}"
            return ("function", record, key) if len(tail) == 1 and key in summary.functions else None
        if head in summary.functions and head != MODULE_BODY:
            if len(tail) == 1:  # `make_agent(...).update`: a method of the object a Hydra config builds
                return instantiated.returned_member(self, record, head, tail[0]) or factory_member(self, record, head, None, tail[0])
            if len(tail) == 2 and tail[0].isdigit():  # `net, crit = set_model(); crit(x, y)`: `set_model.1.__call__`
                return factory_member(self, record, head, int(tail[0]), tail[1])
            return ("function", record, head) if not tail else None
        if head in summary.values:
            return ("value", record, head) if not tail else None
        if head in summary.imports:  # a re-export (`from .data import make_loaders` in `__init__.py`)
            return self.symbol(record, ".".join(names), depth + 1)
        if summary.stars:  # ... or `from .util import *`
            found = self.symbol(record, ".".join(names), depth + 1)
            if found is not None:
                return found
        if record.path.name == "__init__.py":
            sub = self._file(os.path.join(record.folder, head))
            if sub is not None:
                return self._attribute(sub, tail, depth + 1)
        return None

    def called_method(self, record: ModuleRecord, name: str, depth: int = 0) -> Optional[tuple[str, ModuleRecord, str]]:
        """What calling an instance of project class `name` runs: its `__call__`, or for an `nn.Module` its
        `forward`, defined in it or in a project base class; None when a library class defines it (unknown)."""
        info = record.summary.classes.get(name)
        if info is None or depth > _MAX_DEPTH:
            return None
        for method in ("__call__", "forward") if self.is_module_class(record, name) else ("__call__",):
            if f"{name}.{method}" in record.summary.functions:
                return ("function", record, f"{name}.{method}")
        for base in info.bases:
            found = self.symbol(record, base) or self.qualified_symbol(record, base)
            if found is not None and found[0] == "class" and (found[1], found[2]) != (record, name):
                return self.called_method(found[1], found[2], depth + 1)
        return None

    def star_imports(self, record: ModuleRecord, depth: int = 0) -> dict[str, str]:
        """The library names `record`'s `from <project module> import *` statements bind: a star import takes
        every public name of the module (its `__all__` when it has one), the ones it imported too."""
        found: dict[str, str] = {}
        for level, module in record.summary.stars:
            source = self.module(record, level, module)
            if source is None or source is record or depth > _MAX_DEPTH:
                continue
            exported = source.summary.exports
            names = {**self.star_imports(source, depth + 1), **self._library_imports(source)}
            for name, qualified in names.items():
                if (name in exported) if exported is not None else not name.startswith("_"):
                    found[name] = qualified
        return found

    def _library_imports(self, record: ModuleRecord) -> dict[str, str]:
        """`nn` -> `torch.nn` for `import torch.nn as nn`: the module's imports that are not project modules."""
        found = {}
        for name, (level, module, imported) in record.summary.imports.items():
            if level or self.symbol(record, name) is not None:
                continue  # a project module or symbol: resolved through the index, not as a library name
            found[name] = f"{module}.{imported}" if imported else module
        return found

    # ---- composed facts ---------------------------------------------------------------------------

    def callee(self, record: ModuleRecord, ref: str) -> Optional[Callee]:
        found = self.symbol(record, ref)
        if found is None or found[0] not in ("function", "class"):
            return None
        return self._callee(found[1], found[0], found[2])

    def _callee(self, record: ModuleRecord, kind: str, name: str) -> Optional[Callee]:
        key = (id(record), name)
        if key in self._callees:
            return self._callees[key]
        if key in self._in_progress or len(self._in_progress) > _MAX_CHAIN:
            return None  # recursion (or a very deep chain): unknown
        self._in_progress.add(key)
        try:
            result = self._class_facts(record, name) if kind == "class" else self._function_facts(record, name)
        finally:
            self._in_progress.discard(key)
        self._callees[key] = result
        return result

    def _class_facts(self, record: ModuleRecord, name: str) -> Callee:
        info = record.summary.classes[name]
        init = record.summary.functions.get(f"{name}.__init__")
        facts = Callee("class", f"{record.shown}:{info.line}", init.params if init else ("self",))
        if self.is_module_class(record, name):
            facts.returns = ("module",)
        elif self._unsharded_stream(record, name):
            facts.returns = ("stream",)  # an IterableDataset that never shards by worker
        if init is not None:
            facts.effects = self._function_facts(record, f"{name}.__init__").effects
        facts.convolutions = self.convolutions(record, name, "class") >= CONV_NET
        facts.held = record.summary.held.get(name)
        facts.loader = record.summary.loader_classes.get(name)
        facts.steps_cells = self.steps_cells(record, name)
        facts.length = info.length
        return facts

    def steps_cells(self, record: ModuleRecord, name: str) -> bool:
        """The class's `forward` calls, in a loop, a recurrent cell it builds or a project class that owns one
        (`analysis/time_step_loops.py`)."""
        forward = record.summary.functions.get(f"{name}.forward")
        if forward is None:
            return False
        if forward.looped_calls and self._owns_cells(record, name, own_only=True):
            return True  # `for t in range(steps): h = self.cell(x[:, t], h)`
        for call in forward.calls:
            # `self.decoder(...)` is recorded as `Decoder.__call__`: the class it calls
            found = self.symbol(record, call[0].removesuffix(".__call__")) if call[4] >= 0 else None
            if found is not None and found[0] == "class" and self._owns_cells(found[1], found[2]):
                return True  # `for t in range(0, steps, r): self.decoder(...)`, the decoder built of cells
        return False

    def _owns_cells(self, record: ModuleRecord, name: str, own_only: bool = False, depth: int = 0) -> bool:
        """The class's `__init__` builds a recurrent cell, itself or (not `own_only`) through project classes."""
        init = record.summary.functions.get(f"{name}.__init__")
        if init is None or depth > _MAX_DEPTH:
            return False
        if init.cells:
            return True
        for call in () if own_only else init.calls:
            found = self.symbol(record, call[0])
            if found is not None and found[0] == "class" and (found[1], found[2]) != (record, name):
                if self._owns_cells(found[1], found[2], depth=depth + 1):
                    return True
        return False

    def convolutions(self, record: ModuleRecord, name: str, kind: str) -> int:
        """How many convolutions a project class (its `__init__`, its project base classes) or function builds,
        through the project code it calls, up to `CONV_NET` (a call in a loop builds several)."""
        key = (id(record), name, kind)
        if key in self._conv_counts:
            return self._conv_counts[key]
        self._conv_counts[key] = 0  # recursion adds nothing
        count = 0
        if kind == "class":
            info = record.summary.classes[name]
            for base in info.bases:
                found = self.symbol(record, base) or self.qualified_symbol(record, base)
                if found is not None and found[0] == "class" and (found[1], found[2]) != (record, name):
                    count += self.convolutions(found[1], found[2], "class")
            # the layers `__init__` builds, and a functional convolution in `forward` (`F.conv2d(x, self.weight)`)
            for method in ("__init__", "forward"):
                if f"{name}.{method}" in record.summary.functions:
                    count += self.convolutions(record, f"{name}.{method}", "function")
        else:
            f = record.summary.functions[name]
            count = f.convolutions
            for index, call in enumerate(f.calls):
                if count >= CONV_NET:
                    break
                if index in f.optional_parts:
                    continue  # a part `__init__` builds for some settings only
                found = self.symbol(record, call[0])
                if found is not None and found[0] in ("function", "class"):
                    inner = self.convolutions(found[1], found[2], found[0])
                    count += CONV_NET if call[4] >= 0 and inner else inner
        self._conv_counts[key] = min(count, CONV_NET)
        return self._conv_counts[key]

    def is_module_class(self, record: ModuleRecord, name: str, depth: int = 0) -> bool:
        info = record.summary.classes.get(name)
        if info is None or depth > _MAX_DEPTH:
            return False
        for base in info.bases:
            if base.startswith("torch.nn.") and base.rsplit(".", 1)[-1] in ("Module", "Sequential", "ModuleList", "ModuleDict"):
                return True
            if base.startswith(("pytorch_lightning.", "lightning.", "transformers.")) or base in LIBRARY_MODULES:
                return True
            found = self.symbol(record, base) or self.qualified_symbol(record, base)  # `models.base.Base` as imported
            if found is not None and found[0] == "class" and self.is_module_class(found[1], found[2], depth + 1):
                return True
        return False

    def _unsharded_stream(self, record: ModuleRecord, name: str, depth: int = 0) -> bool:
        """Class `name` derives from `IterableDataset` through project classes none of whose modules asks
        `get_worker_info()`: every DataLoader worker would replay its whole stream."""
        info = record.summary.classes.get(name)
        if info is None or info.asks_worker_info or depth > _MAX_DEPTH:
            return False
        stream = False
        for base in info.bases:
            found = None if base in _ITERABLE_DATASETS else self.symbol(record, base) or self.qualified_symbol(record, base)
            if found is not None and found[0] == "class" and found[1].summary.classes[found[2]].asks_worker_info:
                return False  # a project base (or a mixin) whose module shards by worker
            stream = stream or base in _ITERABLE_DATASETS or (
                found is not None and found[0] == "class" and self._unsharded_stream(found[1], found[2], depth + 1)
            )
        return stream

    def inherited_bases(self, record: ModuleRecord, name: str, depth: int = 0) -> list[str]:
        """The bases outside the project that class `name` of `record` derives from through project classes of
        other modules (its own direct bases are in its summary)."""
        key = (id(record), name)
        if key in self._inherited:
            return self._inherited[key]
        found: list[str] = []
        info = record.summary.classes.get(name)
        if info is None or depth > _MAX_DEPTH:
            return found
        self._inherited[key] = found  # an inheritance cycle adds nothing
        for base in info.bases:
            resolved = self.symbol(record, base) or self.qualified_symbol(record, base)
            if resolved is None or resolved[0] != "class" or resolved[1] is record and resolved[2] == name:
                continue
            ancestor, ancestor_name = resolved[1], resolved[2]
            if ancestor is not record:
                found.extend(b for b in ancestor.summary.classes[ancestor_name].bases if self._outside(ancestor, b))
            found.extend(self.inherited_bases(ancestor, ancestor_name, depth + 1))
        self._inherited[key] = list(dict.fromkeys(found))
        return self._inherited[key]

    def qualified_symbol(self, record: ModuleRecord, qualified: str) -> Optional[tuple[str, ModuleRecord, str]]:
        """What an import-resolved name (`models.base.Base`, as a summary records a base class) is in the project."""
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            found = self.module(record, 0, ".".join(parts[:cut]))
            if found is not None:
                return self._attribute(found, parts[cut:], 1)
        return None

    def _outside(self, record: ModuleRecord, base: str) -> bool:
        return "." in base and self.symbol(record, base) is None and self.qualified_symbol(record, base) is None

    def _function_facts(self, record: ModuleRecord, name: str) -> Callee:
        f = record.summary.functions[name]
        facts = Callee("function", f"{record.shown}:{f.line}", f.params, held=record.summary.held.get(name))
        facts.transforms = record.summary.transforms.get(name)
        steps = self._training_loops(record, f)
        facts.trains = f.trains or any(self._call_trains(record, call) for call in f.calls)
        facts.epoch = bool(steps) or any(
            (callee := self.callee(record, call[0])) is not None and callee.epoch for call in f.calls if call[4] < 0
        )
        for param in f.params:
            found = list(self._source_effects(record, f, f"p:{param}", steps, 0))
            forwards = {e[2]: e for e in reversed(found) if e[0] == "forward"}  # one each: a batch, a batch of one
            # last, a batch before a batch of one: a cut list never hides that one forward takes a batch
            found = [e for e in found if e[0] != "forward"] + [forwards[single] for single in (False, True) if single in forwards]
            if found:
                facts.effects[param] = found[:16]
        for param, line in engine_step_parameters(record, f):  # `Engine(train_step)`: ignite runs it every iteration
            facts.effects.setdefault(param, []).append((ENGINE_STEP, f"{record.shown}:{line}"))
        facts.syncs = list(self._internal_syncs(record, f, steps))[:8]
        returns = [self.value(record, f, value) for value in f.returns]
        facts.returns = _agree(returns)
        if facts.returns is None and len(shapes := _loader_shapes(returns)) > 1:
            facts.returns = ("shapes", tuple(shapes))  # loaders, one shape per branch: each call's unpacking picks one
        elif facts.returns is None and _moved_tuples(returns):
            facts.returns = ("shapes", tuple(returns))  # `return x, y, ds` / `return x, y`: moved tensors either way
        # a factory of a convolutional network (not a function that only runs one, such as an FID helper)
        facts.convolutions = facts.returns in (("module",), ("gpu_module",)) and self.convolutions(record, name, "function") >= CONV_NET
        facts.yields = tuple(p for p in f.params if any(e[0] == "yield" for e in f.effects.get(f"p:{p}", ())))
        for param in f.params:
            if any(e[0] in ("iter", "restart", "pass") for e in f.effects.get(f"p:{param}", ())):
                found = self.consumptions(record, name, f"p:{param}")
                if found:
                    facts.consumes[param] = found[:4]
        return facts

    def _call_trains(self, record: ModuleRecord, call: tuple) -> bool:
        callee = self.callee(record, call[0])
        return callee is not None and callee.trains

    def _step_loops(self, record: ModuleRecord, f: FunctionSummary) -> set[int]:
        """The loops of `f` that run one training step per iteration: a step in them, or a call of something
        that runs one step (not an epoch of its own), with no such loop inside them (not the epoch loop around)."""
        steps = {j for j, loop in enumerate(f.loops) if loop[1]}
        epochs: set[int] = set()  # loops that run a whole epoch per iteration (`train_one_epoch(...)` in them)
        stepping: set[tuple] = set()  # (line, loop) of calls that run one step
        trainers = []
        for call in f.calls:
            callee = self.callee(record, call[0]) if call[4] >= 0 else None
            if callee is not None and callee.trains:
                trainers.append((call, callee.epoch))
                if not callee.epoch:
                    steps.add(call[4])
                    stepping.add((call[1], call[4]))
        for call, epoch in trainers:
            # `agent.update()` with `agent` a PPO (an epoch of its own) or an A2C (one step) by a flag: a step loop for A2C
            if epoch and (call[1], call[4]) not in stepping:
                epochs.add(call[4])
        return _innermost(f, steps) - epochs

    def in_step_loop(self, record: ModuleRecord, f: FunctionSummary, loop: int) -> bool:
        """`loop` of `f` runs one training step per iteration, or is inside such a loop."""
        return _in_loop_of(f, loop, self._step_loops(record, f))

    def _training_loops(self, record: ModuleRecord, f: FunctionSummary) -> set[int]:
        """Loops of `f` that train (a step inside, or a call of something that trains): their effects happen
        per step of that loop, reported in that file, not per call of `f`."""
        training = {j for j, loop in enumerate(f.loops) if loop[1]}
        for call in f.calls:
            if call[4] >= 0 and self._call_trains(record, call):
                training.add(call[4])
        # a loop around a training loop trains too (an epoch loop)
        for j in list(training):
            parent = f.loops[j][2]
            while parent >= 0:
                training.add(parent)
                parent = f.loops[parent][2]
        return training

    def _source_effects(self, record: ModuleRecord, f: FunctionSummary, source: str, steps: set[int], depth: int) -> Iterator[tuple]:
        """What happens to `source` (a parameter, a call's result) on each call of `f`, through the helpers it
        is passed to: moves, syncs, iterations, uses as a device."""
        for effect in f.effects.get(source, ()):
            kind = effect[0]
            if kind == "move":
                _, line, non_blocking, loop, guarded = effect
                if not guarded and loop not in steps:
                    yield ("move", f"{record.shown}:{line}", non_blocking)
            elif kind in ("sync", "shape"):
                _, what, line, certain, loop, guarded = effect[:6]
                if not guarded and loop not in steps:
                    # "repeated": in a loop of its own, many waits a call (`read_cost`), as for its own reads; not a
                    # loop over a few options the caller passes (`for k in topk:`, "options")
                    repeated = "repeated" in effect[6:] or (loop >= 0 and "options" not in effect[6:])
                    yield (kind, what, f"{record.shown}:{line}", certain, *(("repeated",) if repeated else ()))
            elif kind == "iter":
                yield ("iter", f"{record.shown}:{f.loops[effect[1]][0]}")
            elif kind == "device":
                yield ("device", f"{record.shown}:{effect[1]}")
            elif kind == "no_sync":
                yield ("no_sync", f"{record.shown}:{effect[1]}")
            elif kind == "call" and len(effect) > 4:
                yield ("forward", f"{record.shown}:{effect[1]}", effect[4])  # [2]: a batch of one (`img.unsqueeze(0)`)
            elif kind in ("pass", "pass_element") and depth < _MAX_DEPTH:
                # the argument handed on to a helper ("pass_element": each of its elements, in a loop): the helper's
                # effects on it; its reads repeat when handed on in a loop (`for row in targets: to_string(row)`)
                call = f.calls[effect[1]]
                if call[5] or call[4] in steps:
                    continue
                callee = self.callee(record, call[0])
                param = _param_for(callee, effect[2], call[0])
                if callee is None or param is None:
                    continue
                looped = kind == "pass_element" or call[4] >= 0
                for e in callee.effects.get(param, ()):
                    read = e[0] == "sync" and len(e) > 3
                    if e[0] == "iter" or (kind == "pass_element" and not read):
                        continue
                    yield (*e, "repeated") if looped and read and "repeated" not in e[4:] else e
                for result in returned_views(callee.returns, param, effect[1]) if kind == "pass" else ():
                    # `y_pred, y_true = normalize_sizes(y_pred, y_true)`: what happens to the reshaped result
                    yield from (e for e in self._source_effects(record, f, result, steps, depth + 1) if e[0] in ("sync", "shape"))

    def _internal_syncs(self, record: ModuleRecord, f: FunctionSummary, steps: set[int]) -> Iterator[tuple]:
        for effect in f.effects.get(INTERNAL, ()):
            if effect[0] in ("sync", "shape") and not effect[4] and effect[3] not in steps:
                # [3:] "returned": a value it returns; "repeated": in a loop of its own, many waits a call (`read_cost`)
                yield (effect[0], effect[1], f"{record.shown}:{effect[2]}", *effect[5:], *(("repeated",) if effect[3] >= 0 and "repeated" not in effect[5:] else ()))
            elif effect[0] in ("synchronize", "barrier") and not effect[3] and effect[2] not in steps:
                yield (effect[0], f"{record.shown}:{effect[1]}")  # "barrier": after async communication, it must stay
            elif effect[0] == "clock":
                yield ("clock", f"{record.shown}:{effect[1]}", effect[2])  # it times what runs around its calls; [2]: synchronizes each call
        for call in f.calls:
            if call[5] or call[4] in steps:
                continue
            callee = self.callee(record, call[0])
            if callee is None:
                continue
            sizes = tuple(call[7:]) == ("sizes",)  # the caller sizes a tensor with the result: a returned read is inherent
            repeated = ("repeated",) if call[4] >= 0 else ()  # called in a loop of its own: its reads repeat
            yield from (
                (*entry, *repeated) if entry[0] in ("sync", "shape") and "repeated" not in entry[3:] else entry
                for entry in callee.syncs if not (sizes and "returned" in entry[3:])
            )  # fmt: skip
            for slot, value in [*enumerate(call[2]), *call[3].items()]:
                resolved = self.value(record, f, value)
                if resolved is None or resolved[0] not in ("gpu", "gpu_module"):
                    continue
                param = _param_for(callee, slot, call[0])
                for effect in callee.effects.get(param, ()) if param else ():
                    if effect[0] in ("sync", "shape"):
                        yield (effect[0], effect[1], effect[2], *(("repeated",) if repeated or "repeated" in effect[4:] else ()))

    def value(self, record: ModuleRecord, f: FunctionSummary, value: Any, depth: int = 0) -> Any:
        """A summary value with the calls it depends on resolved: ("loader", ...), ("gpu_module",), ..."""
        if value is None or depth > _MAX_DEPTH:
            return None
        kind = value[0]
        if kind == "src":
            sources = sources_of(value)
            if INTERNAL in sources:
                return ("gpu",)  # tied to sources, but made from a GPU tensor of its own
            if len(sources) != 1:
                parts = [self.value(record, f, ("src", s), depth + 1) for s in sources]
                if all(p is not None and p[0] == "param" for p in parts):
                    return ("params", tuple(p[1] for p in parts))  # `cross_entropy(logits[keep], labels[keep])`
                if all(p is not None and p[0] in ("module", "gpu_module") for p in parts):
                    # `net = vgg16_bn()` in one branch, `resnet18()` in another: a module, on the GPU if every one is
                    return ("gpu_module",) if all(p[0] == "gpu_module" for p in parts) else ("module",)
                return ("gpu",) if any(p in (("gpu",), ("gpu_module",)) for p in parts) else None
            source = sources[0]
            if source.startswith("c:"):
                index, _, element = source[2:].partition(".")
                call = f.calls[int(index)]
                callee = self.callee(record, call[0])
                result = callee.returns if callee is not None else None
                if result is not None and result[0] == "shapes":
                    # `train, val = create_dataloader(cfg, True)`: the one tuple that long (a whole result: unknown)
                    fits = [r for r in result[1] if element and r[0] == "tuple" and int(element) < len(r[1])]
                    result = fits[0] if len(fits) == 1 else None
                if element and result is not None:
                    return result[1][int(element)] if result[0] == "tuple" and int(element) < len(result[1]) else None
                return result
            if source.startswith("p:"):
                return ("param", source[2:])  # derived from an argument by tensor operations
            if source.startswith("g:"):
                found = self.symbol(record, source[2:])
                if found is not None and found[0] == "value":
                    module_body = found[1].summary.functions.get(MODULE_BODY)
                    return self.value(found[1], module_body, found[1].summary.values[found[2]], depth + 1) if module_body else None
                return None
            return None
        if kind == "moved":
            inner = self.value(record, f, value[1], depth + 1) if value[1] is not None else None
            if inner is not None and inner[0] in ("module", "gpu_module"):
                return ("gpu_module",)
            return ("gpu",)
        if kind == "tuple":
            return ("tuple", tuple(self.value(record, f, part, depth + 1) for part in value[1]))
        if kind == "made":
            return None  # an instance kept in `self.x`: it only names the class its methods are looked up in
        return value

    # ---- what callers do with what a module defines -------------------------------------------------

    @cached_property
    def _direct_calls_to(self) -> dict[tuple[int, str], list[tuple[ModuleRecord, str, int]]]:
        """`_calls_to` without the calls on objects a constructor was handed (which these resolve)."""
        found: dict[tuple[int, str], list[tuple[ModuleRecord, str, int]]] = {}
        for record in self.records.values():
            for key, f in record.summary.functions.items():
                for index, call in enumerate(f.calls):
                    target = self.symbol(record, call[0]) if not call[0].startswith(HANDED) else None
                    if target is not None and target[0] in ("function", "class"):
                        found.setdefault((id(target[1]), target[2]), []).append((record, key, index))
        return found

    @cached_property
    def _calls_to(self) -> dict[tuple[int, str], list[tuple[ModuleRecord, str, int]]]:
        """(file, function or class) -> the calls of it anywhere in the project: (caller file, caller function, call index)."""
        found = {key: list(calls) for key, calls in self._direct_calls_to.items()}
        for record in self.records.values():
            for key, f in record.summary.functions.items():
                for index, call in enumerate(f.calls):
                    target = self.symbol(record, call[0]) if call[0].startswith(HANDED) else None
                    if target is not None and target[0] in ("function", "class"):
                        found.setdefault((id(target[1]), target[2]), []).append((record, key, index))
        return found

    def callers(self, record: ModuleRecord, name: str) -> list[tuple[ModuleRecord, str, int]]:
        return self._calls_to.get((id(record), name), [])

    def direct_callers(self, record: ModuleRecord, name: str) -> list[tuple[ModuleRecord, str, int]]:
        """`callers`, leaving out calls on objects a constructor was handed (`analysis/handed_instances.py`)."""
        return self._direct_calls_to.get((id(record), name), [])

    def _called_where_handed(self, record: ModuleRecord, f: FunctionSummary, source: str) -> Optional[str]:
        """Where a function that `source` (an instance built in `f`) is handed to calls it in a training loop,
        unguarded: `fit_one_epoch(model, yolo_loss, ...)` whose loop runs `yolo_loss(l, out, targets)`."""
        for effect in f.effects.get(source, ()):
            if effect[0] != "pass":
                continue
            call = f.calls[effect[1]]
            target = self.symbol(record, call[0])
            param = _param_for(self.callee(record, call[0]), effect[2], call[0])
            if target is None or target[0] != "function" or param is None:
                continue
            g = target[1].summary.functions[target[2]]
            for used in g.effects.get(f"p:{param}", ()):
                if used[0] == "call" and not used[3] and _in_loop_of(g, used[2], self._training_loops(target[1], g)):
                    return f"{target[1].shown}:{used[1]}"
        return None

    def stepped_of(self, record: ModuleRecord) -> dict[str, str]:
        """`stepped_methods`, computed once per module."""
        if id(record) not in self._stepped:
            self._stepped[id(record)] = {}  # a cycle of base classes across modules adds nothing
            self._stepped[id(record)] = self.stepped_methods(record) if record.summary.classes else {}
        return self._stepped[id(record)]

    def reached_of(self, record: ModuleRecord) -> dict[str, tuple[str, str]]:
        """`forward_reach.reached_methods`, computed once per module."""
        if id(record) not in self._reached:
            if self._reaching > _MAX_CHAIN:
                return {}  # a very deep chain of helpers across modules: unknown (not kept, an outer call decides)
            self._reached[id(record)] = {}  # a cycle of calls across modules adds nothing
            self._reaching += 1
            try:
                self._reached[id(record)] = reached_methods(self, record)
            finally:
                self._reaching -= 1
        return self._reached[id(record)]

    def stepped_methods(self, record: ModuleRecord) -> dict[str, str]:
        """The methods of `record`'s classes that run on every step of a training loop somewhere in the project:
        an instance called in the loop, unguarded (`loss = crit(pred, y)`: `__call__`, a module's `forward`), any
        other method called in a step loop, unguarded (`agent.update(rollouts)`, `self.compute_grad_pen(...)` in
        `update`'s minibatch loop; not in the epoch loop around it), or a method of the same class called on `self`
        from one of those, unguarded (up to three hops); -> where
        the loop calls it. A method only reached from `__init__`, or under a `step % N` guard, is not."""
        stepped: dict[str, str] = {}
        for key in record.summary.functions:
            owner, _, method = key.partition(".")
            if owner not in record.summary.classes or not method or (method.startswith("__") and method != "__call__"):
                continue
            called = method in ("__call__", "forward")
            facts = self.callee(record, key) if not called else None
            reported_at_call = facts is not None and any(e[0] in ("sync", "shape", "synchronize") for e in facts.syncs)
            for caller, caller_key, index in self.callers(record, key):
                f = caller.summary.functions[caller_key]
                call = f.calls[index]
                if call[5]:
                    continue
                if called and call[0].endswith(".__call__") and _in_loop_of(f, call[4], self._training_loops(caller, f)):
                    stepped.setdefault(key, f"{caller.shown}:{call[1]}")
                elif not called and (caller is record or not reported_at_call) and _in_loop_of(f, call[4], self._step_loops(caller, f)):
                    # `self.compute_grad_pen(...)`, `agent.update(rollouts)` in the step loop; not `metrics.log()` of
                    # another module when the call is where its syncs are reported (`Residency._helper_syncs`)
                    stepped.setdefault(key, f"{caller.shown}:{call[1]}")
            if not called:
                continue
            for caller, caller_key, index in self.callers(record, owner):
                # `model = build_model(args)` for a factory that returns the instance: where its callers hand it on
                for maker, maker_key, made in [(caller, caller_key, index), *factory_calls(self, caller, caller_key, index)]:
                    where = self._called_where_handed(maker, maker.summary.functions[maker_key], f"c:{made}")
                    if where is not None:
                        stepped.setdefault(key, where)  # `fit_one_epoch(..., yolo_loss, ...)` calls it in its loop
        stepped.update(overridden_steps(self, record, stepped))  # a base class's loop runs the override every step
        frontier = list(stepped)
        for _ in range(3):
            reached = []
            for key in frontier:
                owner = key.split(".", 1)[0]
                for call in record.summary.functions[key].calls:
                    inner = call[0]
                    if inner.startswith(f"{owner}.") and inner in record.summary.functions and not call[5] and inner not in stepped:
                        if not inner.endswith(".__init__"):
                            stepped[inner] = stepped[key]
                            reached.append(inner)
            frontier = reached
        return stepped

    def consumptions(self, record: ModuleRecord, key: str, source: str, depth: int = 0) -> list[Consumption]:
        """Loops that take batches of `source` (a call's result in function `key`), here or in the helpers it
        is passed to, and what they do with them."""
        memo = (id(record), key, source)
        if memo not in self._consumptions:
            self._consumptions[memo] = []  # a cycle adds nothing
            self._consumptions[memo] = list(self._consumptions_of(record, key, source, depth))
        return self._consumptions[memo]

    def _consumptions_of(self, record: ModuleRecord, key: str, source: str, depth: int) -> Iterator[Consumption]:
        f = record.summary.functions[key]
        for effect in f.effects.get(source, ()):
            if effect[0] == "iter":
                yield self._consumption(record, key, f, effect[1], source)
            elif effect[0] == "restart":
                yield self._consumption(record, key, f, effect[1], source, restarts=True)
            elif effect[0] == "feed" and _kind(self.value(record, f, ("src", source))) == "loader":
                # handed to a framework that runs the loop over it and copies the batches
                yield Consumption(f"{record.shown}:{effect[1]}", effect[2], f.gpu or self.gpu_reason(record) is not None)
            elif effect[0] == "pass" and depth < _MAX_DEPTH:
                call = f.calls[effect[1]]
                target = self.symbol(record, call[0])
                callee = self.callee(record, call[0])
                param = _param_for(callee, effect[2], call[0])
                if callee is not None and param in callee.yields:
                    # a generator over it (`metric_logger.log_every(loader)`): the loops over the generator
                    yield from self.consumptions(record, key, f"c:{effect[1]}", depth + 1)
                elif target is not None and target[0] == "function" and param is not None:
                    for found in self.consumptions(target[1], target[2], f"p:{param}", depth + 1):
                        yield self._again_through(record, f, effect[1], source, target, found)
                elif target is not None and target[0] == "class" and param is not None:
                    # `Solver(config, train_loader)`: the constructor keeps it (`self.train_loader = train_loader`)
                    # and the object's methods iterate the attribute
                    yield from self._kept_by_instance(target[1], target[2], param, depth + 1)
        if key == MODULE_BODY and depth < _MAX_DEPTH:
            # `test_loader = get_test_dataloader(...)` at module level, iterated as a global by `eval_training()`
            for name in (n for n, v in record.summary.values.items() if v == ("src", source)):
                for other, g in record.summary.functions.items():
                    if other != MODULE_BODY and f"g:{name}" in g.effects:
                        yield from self.consumptions(record, other, f"g:{name}", depth + 1)
        if depth < _MAX_DEPTH and any(source in deep_sources(r) for r in f.returns) and key != MODULE_BODY:
            # handed on by a factory that wraps this one: its callers iterate it
            elements = _returned_at(f.returns, source)  # `return train, val, test`: only the caller's element of it
            for caller, caller_key, index in self.callers(record, key):
                caller_f = caller.summary.functions[caller_key]
                results = (f"c:{index}", *(f"c:{index}.{k}" for k in range(4))) if elements is None else [f"c:{index}.{k}" for k in elements]
                for result in results:
                    if result in caller_f.effects:
                        yield from self.consumptions(caller, caller_key, result, depth + 1)

    def _options_passed(self, f: FunctionSummary, caller: ModuleRecord, caller_key: str, index: int) -> tuple:
        """`(("batch_size", "option", 1, "main.py:79"),)`: the parameters of the module-level function `f` that the
        `index`-th call of `caller_key` fills with a setting of a parsed command line (`batch_size=config.batch_size`),
        with the setting's `add_argument` default when the callers hand that function (or it builds) one namespace."""
        call = caller.summary.functions[caller_key].calls[index]
        if len(call) > 6 and call[6]:
            return ()  # `*args` / `**kwargs`: what lands where is not known
        found = []
        for slot, read in caller.summary.functions[caller_key].options.get(index, {}).items():
            param = _slot_param(f, slot)
            if param is None:
                continue
            default = read[1:] if read[0] == "default" else self._option_default(caller, caller_key, read[0][2:], read[1])
            if default is not None and default[0] is not None:
                found.append((param, "option", default[0], f"{caller.shown}:{default[1]}" if read[0] == "default" else default[1]))
        return tuple(found)

    def _option_default(self, record: ModuleRecord, key: str, param: str, attribute: str) -> Optional[tuple]:
        """(default, `main.py:79`) of the setting `attribute` of the namespace every call of `key` (a module-level
        function) gives its parameter `param`: the same `parser.parse_args()` result of the module body."""
        f = record.summary.functions.get(key)
        if f is None or "." in key or param not in f.params:
            return None
        position = f.params.index(param)
        defaults = set()
        callers = self.callers(record, key)
        for caller, caller_key, index in callers:
            call = caller.summary.functions[caller_key].calls[index]
            value = call[2][position] if position < len(call[2]) else call[3].get(param)
            option = value[1].get(attribute) if value is not None and value[0] == "args" and isinstance(value[1], dict) else None
            if not isinstance(option, (list, tuple)) or len(option) != 2:
                return None
            defaults.add((option[0], f"{caller.shown}:{option[1]}"))
        return next(iter(defaults)) if len(defaults) == 1 else None

    def _kept_by_instance(self, record: ModuleRecord, name: str, param: str, depth: int) -> Iterator[Consumption]:
        """The loops of the methods of project class `name` over the attributes its constructor sets from its
        parameter `param` (`self.train_loader = train_loader`, then `for x, y in self.train_loader` in `train()`):
        the instance's loops take what each construction hands it."""
        info = record.summary.classes.get(name)
        if info is None or depth >= _MAX_DEPTH:
            return
        kept = [attribute for attribute, value in info.attributes.items() if value == ("init", param)]
        for attribute in kept:
            for method in info.methods:
                key = f"{name}.{method}"
                if method != "__init__" and key in record.summary.functions and f"i:{attribute}" in record.summary.functions[key].effects:
                    yield from self.consumptions(record, key, f"i:{attribute}", depth)

    def _again_through(
        self, record: ModuleRecord, f: FunctionSummary, index: int, source: str, target: tuple, found: Consumption
    ) -> Consumption:
        """A loop of a helper this call hands the loader to runs again by the loop around this call, not by the
        loop another caller calls the helper in (`validate(loader)` once in test.py, every epoch in train.py)."""
        if not found.by_caller:
            return found
        around = f.calls[index][4]
        made = f.calls[int(source[2:].split(".")[0])][4] if source.startswith("c:") else -1
        built = made >= 0 and (made == around or around in _parents(f, made))  # a new loader on each pass
        again = f"{record.shown}:{f.loops[around][0]}" if around >= 0 and not built else None
        return replace(found, epoch=again, by_caller=False)

    def _consumption(
        self, record: ModuleRecord, key: str, f: FunctionSummary, loop: int, source: str = "", restarts: bool = False
    ) -> Consumption:
        steps = self._training_loops(record, f)
        moves = tuple((e[1], e[2]) for e in self._source_effects(record, f, f"l:{loop}", steps - {loop} - _parents(f, loop), 0) if e[0] == "move")
        gpu = f.gpu or self.gpu_reason(record) is not None
        built = _built_for_each_pass(f, loop, source) and _kind(self.value(record, f, ("src", source))) == "loader"
        again = None if built else self._run_again_by(record, key, f, loop)  # not a generator over a loader given in
        by_caller = again is not None and f.loops[loop][2] < 0
        return Consumption(f"{record.shown}:{f.loops[loop][0]}", loop in steps, gpu, moves, again, restarts, by_caller)

    def _run_again_by(self, record: ModuleRecord, key: str, f: FunctionSummary, loop: int) -> Optional[str]:
        """Where the loop that runs `loop` of function `key` again and again is: the loop around it, else the
        loop a caller calls the function in."""
        outer = f.loops[loop][2]
        if outer >= 0:
            return f"{record.shown}:{f.loops[outer][0]}"
        if key == MODULE_BODY:
            return None
        for caller, caller_key, index in self.callers(record, key):
            caller_f = caller.summary.functions[caller_key]
            around = caller_f.calls[index][4]
            if around >= 0:
                return f"{caller.shown}:{caller_f.loops[around][0]}"
        return None

    def inputs(self, record: ModuleRecord, key: str, param: str, depth: int = 0) -> set[str]:
        """What callers anywhere pass for `param` of function `key`: "cuda_device", "gpu_module", "gpu", "loader"."""
        memo = (id(record), key, param)
        if memo not in self._inputs:
            self._inputs[memo] = set()  # a cycle of callers adds nothing
            self._inputs[memo] = self._inputs_of(record, key, param, depth)
        return self._inputs[memo]

    def _inputs_of(self, record: ModuleRecord, key: str, param: str, depth: int) -> set[str]:
        f = record.summary.functions.get(key)
        if f is None and key.endswith(".__init__"):
            inherited = inherited_init(self, record, key[: -len(".__init__")])  # `SequenceTrainer(...)` runs `Trainer.__init__`
            f = inherited[0].summary.functions[f"{inherited[1]}.__init__"] if inherited is not None else None
        if f is None or depth > 3:
            return set()
        positional = f.params
        found: set[str] = set()
        for caller, caller_key, index in self.callers(record, key.split(".")[0] if key.endswith(".__init__") else key):
            caller_f = caller.summary.functions[caller_key]
            call = caller_f.calls[index]
            offset = 1 if (positional[:1] == ("self",) and ("." in call[0] or key.endswith(".__init__"))) else 0
            values = dict(call[3])
            if param in positional:
                position = positional.index(param) - offset
                if 0 <= position < len(call[2]):
                    values[param] = call[2][position]
            value = values.get(param)
            if value is None:
                if not self.is_test(caller):
                    found.add(UNPLACED)
                continue
            given: set[str] = set()
            resolved = self.value(caller, caller_f, value)
            if resolved is not None:
                kind = resolved[0]
                given.add("cuda_device" if kind == "device" else kind)
                if _args_on_cuda(resolved):
                    given.add("cuda_device")
            for source in sources_of(value):
                if source.startswith("p:"):
                    given |= self.inputs(caller, caller_key, source[2:], depth + 1)
                    if any(e[0] == "module_use" for e in caller_f.effects.get(source, ())):
                        given.add("module")  # the caller's own parameter, which it puts in eval mode: a module
            # a unit test that runs a helper on the GPU says nothing of where training runs it
            if self.is_test(caller):
                found |= given - _ON_GPU - {UNPLACED}
            else:
                # a CPU device (`device=args.device` with `Namespace(cuda=False)`) is placed: on the CPU
                found |= given if given & _ON_GPU or given == {"cpu"} else given | {UNPLACED}
        return found

    def is_test(self, record: ModuleRecord) -> bool:
        """A test module, by the default test paths or because it imports pytest (as `test_code.py` decides)."""
        from gpulint.config import glob_match  # config imports the rules, which import the analysis

        rel = os.path.relpath(record.path, self.root).replace(os.sep, "/")
        imports = record.summary.imports.values()
        return any(glob_match(rel, p) for p in DEFAULT_TEST_PATHS) or any(i[1].split(".")[0] in ("pytest", "_pytest") for i in imports)

    # ---- GPU context ------------------------------------------------------------------------------

    def gpu_reason(self, record: ModuleRecord) -> Optional[str]:
        if id(record) not in self._gpu:
            if self._gpu_in_progress > _MAX_CHAIN:
                return None  # evidence from callers of callers ... this far away: not followed (nor remembered)
            self._gpu[id(record)] = None  # a cycle through the project means no evidence from it
            self._gpu_in_progress += 1
            try:
                self._gpu[id(record)] = gpu_context_reason(record.summary.evidence, self._project_evidence(record))
            finally:
                self._gpu_in_progress -= 1
        return self._gpu[id(record)]

    def _project_evidence(self, record: ModuleRecord) -> Iterator[str]:
        summary = record.summary
        yield from instantiated.config_evidence(self, record)  # `device: cuda` of a class a Hydra config builds
        for name in summary.classes:
            for attribute, received in self._inherited_inputs(record, name).items():
                if "gpu_module" in received:
                    yield f"callers give `{name}` a GPU module for `self.{attribute}` (set by its inherited constructor)"
            for attribute, placed in placed_attributes(self, record, name).items():
                what = "a module its project base class moves to the GPU" if placed == ["gpu_module"] else "the device its project base class sets"
                yield f"`{name}` inherits `self.{attribute}`, {what}"
            for base in self.inherited_bases(record, name):
                for evidence in BASE_EVIDENCE:
                    what = evidence(base)
                    if what is not None:
                        yield f"`{name}` derives from {what} (through its bases in the project)"
        for key, f in summary.functions.items():
            for param in f.params:
                given = self.inputs(record, key, param) & {"gpu_module", "gpu", "placed_loader"}
                if given:
                    what = "a GPU module" if "gpu_module" in given else "a GPU tensor" if "gpu" in given else "a loader a framework places on the device"
                    yield f"callers give `{param}` of `{key}` {what}"
            for source, effects in f.effects.items():
                if not any(e[0] == "device" for e in effects):
                    continue
                if source.startswith("p:") and "cuda_device" in self.inputs(record, key, source[2:]):
                    yield f"callers give `{source[2:]}` of `{key}` a CUDA device"
                elif source.startswith("i:") and "cuda_device" in self.inputs(record, f"{key.split('.')[0]}.__init__", source[2:]):
                    yield f"callers give `{source[2:]}` of `{key.split('.')[0]}` a CUDA device"
                elif source.startswith(("g:", "c:")) and self.value(record, f, ("src", source)) == ("device",):
                    yield f"a device from the project (`{_source_name(f, source)}`)"
                elif source.startswith("g:") and (settings := self._gpu_settings_object(record, source[2:])) is not None:
                    yield f"a device from the project (`{source[2:]}` of {settings}, which chooses a CUDA device)"
        for key in (*summary.classes, *(k for k in summary.functions if "." not in k and k != MODULE_BODY)):
            for caller, caller_key, index in self.callers(record, key):
                caller_f = caller.summary.functions[caller_key]
                result = f"c:{index}"
                for source in (result, *(f"{result}.{k}" for k in range(4))):
                    effects = list(self._source_effects(caller, caller_f, source, set(), 0))
                    if any(e[0] == "move" for e in effects) and self.gpu_reason(caller) is not None:
                        yield f"`{key}` builds values that {caller.shown} moves to the GPU"
                    for consumption in self.consumptions(caller, caller_key, source):
                        if consumption.gpu and (consumption.moves or consumption.trains):
                            yield f"the loader `{key}` builds feeds GPU code at {consumption.where}"

    def _inherited_inputs(self, record: ModuleRecord, name: str) -> dict[str, list[str]]:
        """`self.<attribute>` of class `name` set by an inherited constructor -> what the class's callers give for it."""
        found = {}
        for attribute, param in inherited_attributes(self, record, name).items():
            received = self.inputs(record, f"{name}.__init__", param)
            if received - {UNPLACED}:
                found[attribute] = sorted(received)
        return found

    def _keyword_attribute_inputs(self, record: ModuleRecord, name: str) -> dict[str, list[str]]:
        """For a class whose constructor turns its keywords into attributes (`self.__dict__.update(kwargs)`):
        `self.<keyword>` -> what the class's callers give for that keyword (`Agent(**vars(opt))`: each option)."""
        info = record.summary.classes.get(name)
        if info is None or info.attributes.get(KEYWORDS_AS_ATTRIBUTES) != ("kwargs",):
            return {}
        keywords = {k for caller, key, index in self.callers(record, name) for k in caller.summary.functions[key].calls[index][3]}
        found = {}
        for keyword in sorted(keywords - set(info.attributes)):
            received = self.inputs(record, f"{name}.__init__", keyword)
            if received - {UNPLACED}:
                found[keyword] = sorted(received)
        return found

    def _gpu_settings_object(self, record: ModuleRecord, name: str) -> Optional[str]:
        """The module that defines `name`, when it is a module-level object of the project (`opt = Config()`
        in config.py) that is used as a device (`x.to(opt.device)`) and its module picks a CUDA device itself
        (`opt.device = t.device("cuda") if opt.use_gpu else ...`): a settings object that carries the device."""
        found = self.symbol(record, name)
        if found is None or found[0] != "value" or found[1] is record or not found[1].summary.evidence:
            return None
        return found[1].shown

    # ---- one module's context ---------------------------------------------------------------------

    def context(self, path: Path, keep: bool = True) -> ModuleContext:
        """The context of module `path`; `keep=False`: not remembered (a caller that asks once per module, as a
        check of many files does, would otherwise hold every context at once: torch's 2,285, ~160 MB)."""
        found = self._contexts.get(path)
        if found is not None:
            return found
        record = self.records[path]
        summary = record.summary
        context = ModuleContext(record.shown, parsed=summary.ok)
        context.gpu_reason = self.gpu_reason(record)
        context.gpu = context.gpu_reason is not None
        # (the summary keeps 8 pieces of evidence at most: with 8, some may be missing)
        if 0 < len(summary.evidence) < 8 and path.suffix.lower() == ".ipynb":
            context.own_evidence_lines = sorted({line for _, line in summary.evidence})
            context.project_gpu = next(iter(self._project_evidence(record)), None) is not None
        refs = {call[0] for f in summary.functions.values() for call in f.calls}
        refs.update(k for k in summary.functions if k != MODULE_BODY)
        refs.update(summary.classes)
        # names imported from modules (`from ctaugment import deinterleave`): also called in nested functions (an
        # ignite `train_step` closure), whose calls the summary does not record
        refs.update(name for name, imported in summary.imports.items() if imported[2] is not None)
        # classes handed on as values (`{"byol": {"model": byol.BYOL}}`, a registry a call looks up): what they build
        refs.update(name for name in summary.handed if "." in name and not name.startswith(".") and name[:1] != "*")
        for ref in sorted(refs):
            callee = self.callee(record, ref)
            if callee is not None:
                context.callees[ref] = callee
        for key, f in summary.functions.items():
            if key == MODULE_BODY:
                continue
            for returned in _loader_shapes(f.returns):
                self._add_consumers(context, record, key, returned)
            for param in f.params:
                received = self.inputs(record, key, param)
                if received - {UNPLACED}:
                    context.inputs[f"{key}.{param}"] = sorted(received)
                for element, kinds in handed_elements(self, record, key, param).items():
                    context.inputs[f"{key}.{element}"] = kinds  # `net_g, net_d = nets`: each element's kinds
        for name in summary.classes:
            inherited = self.inherited_bases(record, name)
            if inherited:
                context.inherited[name] = inherited
            for attribute, received in self._inherited_inputs(record, name).items():
                context.inputs[f"{name}.self.{attribute}"] = received  # `self.model` a base class's constructor sets
            for attribute, received in self._keyword_attribute_inputs(record, name).items():
                context.inputs[f"{name}.self.{attribute}"] = received  # `self.dvc` of `self.__dict__.update(kwargs)`
            for attribute, received in placed_attributes(self, record, name).items():
                context.inputs.setdefault(f"{name}.self.{attribute}", received)  # `self.network` a base's method moved
        if summary.imports:
            context.parsers = imported_parsers(self, record)  # `from opts import parser`
        settings = list(summary.settings)
        if ("launch", "") not in settings and (context.parsers or any(_returns_args(c.returns) for c in context.callees.values())):
            settings.append(("launch", ""))  # `args = get_args()`: a job file near it may turn a switch on (off_options)
        if settings:
            context.settings = settings_files.digest(str(path), settings)
        if summary.config_paths.get("reads") and self.settings_defaults.defaults:
            context.config_defaults = self.settings_defaults.for_reads(summary.config_paths["reads"])
            if context.config_defaults:  # the YAML files any of which may override them: part of the digest
                context.settings = {**context.settings, **settings_files.hashes(self.settings_defaults.yaml_files() or ())}
        pinned = torch_pins.for_module(str(path))
        if pinned is not None:  # the metadata files are part of the digest: an edited pin re-checks the module
            context.torch_pin, context.installed_torch, files = pinned
            context.settings = {**context.settings, **settings_files.hashes(files)}
        if summary.classes:
            context.stepped = self.stepped_of(record)
        context.reported_in_callee = reported_in_callee(self, record, sorted(context.callees))
        context.forward_called = forward_called(self, record)
        context.reached = {k: [*v, repeated_shape_ops(self, record, k)] for k, v in self.reached_of(record).items()}
        context.reached_refs = reaching_refs(self, record)
        context.moved_returns = moved_returns(self, record)
        context.arguments = agreed_arguments(self, record)
        context.held_arguments = held_arguments(self, record)
        context.loaders_in = loaders_in(self, record)
        context.uncalled = uncalled_functions(self, record)
        context.imported = imported_elsewhere(self, record)
        context.imported_by_code = imported_by_code(self, record)
        context.superseded = superseded(self, record)
        context.graph_collates = graph_collates(self)
        context.generating = generating_names(self)
        context.needed_results = needed_results(self)
        context.default_cuda, context.default_cuda_params = default_device_facts(self, record)
        if _wraps_ddp(summary):
            context.forward_coverage = forward_coverage(self, record)
        context.evaluated = evaluated_params(self, record)
        context.inference_results = inference_results(self, record)
        context.grad_decided = grad_decided_functions(self, record)
        context.walked = walked_params(self, record)
        own = {*summary.imports, *summary.functions, *summary.classes, *summary.values}
        context.star_imports = {k: v for k, v in self.star_imports(record).items() if k not in own}
        if keep:
            self._contexts[path] = context
        return context

    def _add_consumers(self, context: ModuleContext, record: ModuleRecord, key: str, returned: Any) -> None:
        """For a function returning loaders: the loops across the project that take their batches."""
        resolved = self.value(record, record.summary.functions[key], returned)
        elements = [(None, resolved)]
        if resolved is not None and resolved[0] == "tuple":
            elements = list(enumerate(resolved[1]))
        for element, value in elements:
            if value is None or value[0] != "loader":
                continue
            found: list[Consumption] = []
            for caller, caller_key, index in self.callers(record, key):
                source = f"c:{index}" if element is None else f"c:{index}.{element}"
                caller_f = caller.summary.functions[caller_key]
                given = passed(record.summary.functions[key], key, caller_f, index) + self._options_passed(
                    record.summary.functions[key], caller, caller_key, index
                )
                at = f"{caller.shown}:{caller_f.calls[index][1]}"
                found.extend(replace(c, called_at=at, passed=given) for c in self.consumptions(caller, caller_key, source))
            if found:  # a factory with two shapes of result may give one key twice (`_loader_shapes`)
                kept = context.consumers.setdefault(key if element is None else f"{key}.{element}", [])
                kept.extend(c for c in found if c not in kept)
                del kept[8:]


def _returned_at(returns: list, source: str) -> Optional[list[int]]:
    """The elements of the returned tuples that hold `source` (`return train_loader, val_loader` -> [1] for the
    second); None when some `return` hands it on otherwise (the value itself, or inside something else)."""
    found: list[int] = []
    for returned in returns:
        if source not in deep_sources(returned):
            continue
        if not (isinstance(returned, tuple) and len(returned) == 2 and returned[0] == "tuple" and isinstance(returned[1], (tuple, list))):
            return None
        for k, part in enumerate(returned[1]):
            if source in deep_sources(part) and k not in found:
                if part != ("src", source):
                    return None  # inside an element (`(DataLoader(...), ...)` wrapped): not one element's batches
                found.append(k)
    return found


def _wraps_ddp(summary: ModuleSummary) -> bool:
    """The module may hand a model to `DistributedDataParallel` (what GPU407 asks `forward_coverage` about): it
    imports torch (`torch.nn.parallel.DistributedDataParallel(...)` is no recorded call) or a name of DDP's."""
    return any(
        module.split(".", 1)[0] == "torch" or name in ("DistributedDataParallel", "DDP")
        for _, module, name in summary.imports.values()
    )


def _slot_param(f: FunctionSummary, slot: Any) -> Optional[str]:
    """The parameter of the module-level function `f` a call's argument at `slot` (position or keyword) lands on."""
    if isinstance(slot, int):
        return f.params[slot] if 0 <= slot < len(f.params) else None
    return slot if slot in f.params or slot in f.kwonly else None


def _returns_args(returned: Any) -> bool:
    return isinstance(returned, tuple) and len(returned) == 2 and returned[0] == "args"


def _returns_pinned_loader(returned: Any) -> bool:
    """A loader built with `pin_memory=True`, or a tuple holding one, as a callee's summary returns it."""
    if not returned:
        return False
    if returned[0] == "loader":
        return isinstance(returned[1], dict) and returned[1].get("pin_memory") is True
    return returned[0] in ("tuple", "shapes") and any(_returns_pinned_loader(r) for r in returned[1])


def _built_for_each_pass(f: FunctionSummary, loop: int, source: str) -> bool:
    """The loader `loop` iterates is built by a call of the same function on each pass of what repeats the
    loop (`loader = get_eval_loader(path)` in an evaluation helper called every epoch, or inside the loop
    around it): a new loader every time, so no worker outlives its one pass whatever `persistent_workers` says."""
    if not source.startswith("c:"):
        return False
    index = source[2:].split(".", 1)[0]
    if not index.isdigit() or int(index) >= len(f.calls):
        return False
    outer = f.loops[loop][2]
    if outer < 0:
        return True  # repeated by a caller: each call of this function builds its own
    around = f.calls[int(index)][4]
    return around == outer or (around >= 0 and outer in _parents(f, around))


def _innermost(f: FunctionSummary, loops: set[int]) -> set[int]:
    """The loops of `loops` with none of the others inside them: the step loops, not the epoch loops around them."""
    around = set()
    for loop in loops:
        parent = f.loops[loop][2]
        while parent >= 0:
            around.add(parent)
            parent = f.loops[parent][2]
    return loops - around


def _in_loop_of(f: FunctionSummary, loop: int, loops: set[int]) -> bool:
    """`loop` of `f` is one of `loops` or inside one (a call in a per-level loop of a training step)."""
    while loop >= 0:
        if loop in loops:
            return True
        loop = f.loops[loop][2]
    return False


def _parents(f: FunctionSummary, loop: int) -> set[int]:
    found = set()
    parent = f.loops[loop][2]
    while parent >= 0:
        found.add(parent)
        parent = f.loops[parent][2]
    return found


def _source_name(f: FunctionSummary, source: str) -> str:
    if source.startswith("c:"):
        return f.calls[int(source[2:].split(".")[0])][0] + "()"
    return source[2:]


def _param_for(callee: Optional[Callee], slot: Any, ref: str) -> Optional[str]:
    """The parameter a call's argument lands on: by keyword, or by position (after `self` for a method
    called on an instance or a class)."""
    if callee is None:
        return None
    if isinstance(slot, str):
        return slot if slot in callee.params or callee.kind == "class" else None
    params = callee.params
    if params[:1] == ("self",) and (callee.kind == "class" or "." in ref):
        params = params[1:]
    return params[slot] if 0 <= slot < len(params) else None


def _kind(value: Any) -> Optional[str]:
    return value[0] if value is not None else None


_ON_GPU = frozenset({"cuda_device", "gpu_module", "gpu", "placed_loader"})  # what callers may give that puts a function on the GPU
# What a caller gives that is not known to be on the GPU (a CPU tensor, an unmoved module, anything unknown):
# a parameter is a GPU value only where no caller gives one (`Residency.received_by_self`).
UNPLACED = "unplaced"


def _args_on_cuda(value: Any) -> bool:
    """Parsed options whose `device` is a CUDA device (`args.device = torch.device("cuda")`, `default="cuda"`)."""
    device = value[1].get("device", [None])[0] if value[0] == "args" else None
    return isinstance(device, str) and device.startswith("cuda")


def _loader_shapes(values: list) -> list:
    """The results a function's callers may unpack: what every `return` agrees on, or, for a factory whose result
    depends on an argument (`return train_loader, val_loader` if `is_train` else `return test_loader`), each
    return when every one is a loader or a tuple of loaders (a caller's unpacking then picks the shape)."""
    agreed = _agree(values)
    if agreed is not None:
        return [agreed]
    if not values or not all(v is not None and (v[0] == "loader" or v[0] == "tuple" and _holds_loaders(v[1])) for v in values):
        return []
    return values


def _moved_tuples(values: list) -> bool:
    """Tuples of GPU tensors of more than one length (`return x, y, ds` when durations are given, else `return
    x, y`): whichever a caller's unpacking takes, each name it binds holds a GPU tensor."""
    return len(values) > 1 and all(
        v is not None and v[0] == "tuple" and v[1] and all(e == ("gpu",) for e in v[1]) for v in values
    ) and len({len(v[1]) for v in values}) > 1


def _holds_loaders(elements: tuple) -> bool:
    """Loaders, and perhaps values of no known kind beside them (`return train_loader, test_loader, n_data`)."""
    return any(e is not None and e[0] == "loader" for e in elements) and all(e is None or e[0] == "loader" for e in elements)


def _agree(values: list) -> Any:
    """What every `return` gives, when they agree on its kind (the first one's details); else unknown."""
    known = [v for v in values if v is not None]
    if not known or len(known) != len(values):
        return None
    first = known[0]
    if {v[0] for v in known} == {"device", "cpu"}:
        return ("device",)  # `return torch.device("cuda")` when there is one, else the CPU: chosen at run time
    if all(v[0] == first[0] for v in known):
        if first[0] == "tuple" and any(len(v[1]) != len(first[1]) for v in known):
            return None
        return first
    return None

