"""Loader-to-loop data flow: where each DataLoader's batches are taken, and where they are moved to CUDA.

A loader reaches a loop through names (`loader = DataLoader(...)`), attributes (`self.loader`), containers
(`loaders["train"]`, `{phase: DataLoader(...) for phase in ...}`, tuples), factory functions (`return
DataLoader(...)`, also as part of a returned tuple), arguments of this module's functions and constructors
(`train(model, loader)`, `Trainer(model, loader)` then `self.train_loader`), wrappers bound to names
(`pbar = tqdm(loader)`), and module globals a setup function binds (`global trainloader`, then `trainloader =
DataLoader(...)`, read by `def train(epoch): for x in trainloader`). A loop takes batches from it directly or through `enumerate`, `zip`, `tqdm`,
`islice`, a generator of this module that re-yields them, and `iter()` / `next()`. Inside that loop, the batch,
an element unpacked from it, a subscript of it or a value of a comprehension over it may be moved to CUDA.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Iterator, Optional

import libcst as cst

from gpulint.analysis.dataloaders import DataLoaderCall, is_loader_call
from gpulint.analysis.error_paths import error_path
from gpulint.analysis.shipped_paths import never_runs, runs_as_a_script
from gpulint.analysis.hot_loops import assigned_names, element_targets, in_no_grad, trains, wrapped_arguments, wrapper_kind
from gpulint.analysis.value_resolution import ARGPARSE_DEFAULT, IMPORTED_ARGPARSE_DEFAULT, SETTINGS_FILE, ResolvedValue, as_int, literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel

TRAIN = "train"
EVAL = "eval"
UNKNOWN = "unknown"

_MAX_HOPS = 4
ANY_KEY = object()  # a container whose every entry is the loader (`{phase: DataLoader(...) for phase in ...}`)
_ACCUMULATION_NAME = re.compile(r"accum", re.IGNORECASE)
_EVAL_FUNCTION = re.compile(r"eval|valid|test|predict|infer", re.IGNORECASE)


# Calls that only look at a batch (print it, its size, its labels as a list).
_INSPECTING_BUILTINS = frozenset({"print", "len", "str", "repr", "type"})
_INSPECTING_METHODS = frozenset({"size", "tolist", "dim", "numel", "format", "keys"})
# What puts a module or a tensor on a device (any device: a CPU-only module names none of them).
_DEVICE_METHODS = frozenset({"to", "cuda", "to_device", "prepare", "set_default_device", "setup", "setup_dataloaders"})
_DEVICE_CALLS = frozenset({"torch.device", "torch.set_default_device", "torch.set_default_tensor_type", "torch.accelerator.current_accelerator"})
_DEVICE_KEYWORDS = frozenset({"device", "device_map", "map_location", "device_ids", "accelerator", "gpus", "devices"})


@dataclass(frozen=True)
class _Ref:
    """How a loader is named somewhere: a local name in `scope`, or an attribute spelled `code`."""

    scope: cst.CSTNode  # the function or module (for attributes: the class, or the module)
    name: str  # `loader`, or `self.train_loader`
    is_attribute: bool
    bound_at: tuple[cst.CSTNode, ...]  # the assignments (and the constructor call) that produced it
    via: tuple[cst.Call, ...]  # calls that passed it into `scope`
    key: object = None  # kept in a container: `loaders["train"]`, `loaders[0]` (ANY_KEY: every entry)


@dataclass(frozen=True)
class Iteration:
    """One place where a loader hands out batches: a `for` over it, or `next(...)` on its iterator."""

    loop: Optional[Loop]  # the loop that runs once per batch (None for a lone `next(iter(loader))`)
    regions: tuple[cst.CSTNode, ...]  # where the batch names live: the loop, or the statements after `next`
    batch_names: frozenset[str]  # names bound to the batch or to elements unpacked from it
    whole_batch: Optional[str]  # the name bound to the batch itself (`for batch in loader`)
    is_for: bool  # a `for` statement that iterates the loader itself (not `next()`)
    bound_at: tuple[cst.CSTNode, ...]
    via: tuple[cst.Call, ...]
    restarts: bool = False  # `next(iter(loader))` inside `loop`: a new iterator, for one batch, on every pass


@dataclass(frozen=True)
class BatchMove:
    """`x.to(device)` / `x.cuda()` where `x` is (part of) a batch, or a call of a project helper that moves
    the batch it is given (`to_device(batch, device)`: then `call` is that call and `via` the move in it)."""

    call: cst.Call
    receiver: cst.BaseExpression
    iteration: Iteration
    whole_batch: bool  # the receiver is the batch itself, not an element of it
    via: Optional[str] = None  # `utils.py:12`: where the helper copies it
    non_blocking: bool = False  # (helpers only) the helper's copy passes `non_blocking=True`


@dataclass
class LoaderInfo:
    loader: DataLoaderCall
    iterations: list[Iteration]
    moves: list[BatchMove]
    role: str  # TRAIN (feeds a training loop), EVAL (only no_grad / eval-mode loops), UNKNOWN
    feeds: list = field(default_factory=list)  # frameworks.Feed: frameworks it is handed to (Lightning, ignite, ...)

    @property
    def placed_by(self):
        """The framework hand-over that copies its batches to the GPU (no `.to()` in sight), if any. Only for
        loaders that feed training or evaluation: others may yield no tensors (prompts for a generation pipeline)."""
        if self.role == UNKNOWN:
            return None
        return next((feed for feed in self.feeds if feed.places_on_device), None)


@dataclass
class ReturnedLoader:
    """A loader built in another module and returned by the project function this module calls
    (`train_loader, test_loader = get_loader(args)`), with where its batches are used here."""

    call: Optional[cst.Call]  # None: handed to a parameter of this module's function (`received_loaders`)
    where: str  # `utils/data_utils.py:51`: the `DataLoader(...)` call
    facts: dict  # as the summary records the loader: `pin_memory`, `num_workers`, ... (`"?"`: not known)
    iterations: list[Iteration]
    moves: list[BatchMove]


class LoaderFlow:
    """Per-module answers: `info(loader)`, `iterations_of(node)`, roles of loops."""

    def __init__(self, model: SemanticModel) -> None:
        self.m = model
        self._infos: dict[int, LoaderInfo] = {}

    # ---- public queries --------------------------------------------------------------------------

    def info(self, loader: DataLoaderCall) -> LoaderInfo:
        key = id(loader.call)
        if key not in self._infos:
            iterations, feeds = self._follow(loader.call)
            iterations = [it for it in iterations if self._runs_as_shipped(it)]
            feeds = [feed for feed in feeds if not never_runs(self.m, feed.node)]
            moves = self._moves(iterations)
            self._infos[key] = LoaderInfo(loader, iterations, moves, self._loader_role(iterations, feeds), feeds)
        return self._infos[key]

    def every_use(self, loader: DataLoaderCall) -> tuple[list[Iteration], list]:
        """The loader's iterations and framework hand-overs, also those in branches the shipped settings never
        take (training a flag turns off as shipped still runs for whoever turns it on)."""
        return self._follow(loader.call)

    @cached_property
    def infos(self) -> list[LoaderInfo]:
        """The loaders that may hand out batches as shipped (see `never_used`)."""
        return [info for loader in self.m.dataloaders if not self.never_used(info := self.info(loader))]

    def never_used(self, info: LoaderInfo) -> bool:
        """Nothing takes a batch of the loader as the code ships: no loop, framework or helper gets it, and its
        name is read only in branches the shipped settings never take (`val_loader` passed to the training
        branch of `if skip_training: load else: train` that every call skips), or, in a notebook (also one kept
        as a `# %%` script), not at all."""
        if info.iterations or info.feeds or self.consumed_elsewhere(info):
            return False
        m = self.m
        if _counted(m, info.loader.call):
            return True  # `len(DataLoader(...))`: built to count batches, never iterated
        parent = m.parent.get(info.loader.call)
        if not (isinstance(parent, cst.Assign) and parent.value is info.loader.call and len(parent.targets) == 1):
            return False
        target = parent.targets[0].target
        if not isinstance(target, cst.Name):
            return False
        scope = m.scope_of(parent)
        ref = _Ref(scope, target.value, False, (parent,), ())
        reads = [read for read in self._reads_near(ref) if self._in_ref_scope(ref, read)]
        if not reads:
            # a library's loader may be returned, or its global imported, elsewhere; a function's local that
            # nothing reads (and no `locals()` or `global` can hand out) is dropped when the function returns
            return runs_as_a_script(m) or _unread_local(m, scope, target.value)
        # `iters = len(loader_for_count)` (minimind): counting batches takes none of them
        return all(never_runs(m, read) or _counted(m, read) for read in reads)

    @cached_property
    def returned_loaders(self) -> list[ReturnedLoader]:
        """Loaders that project functions of other modules build and return to this module's calls."""
        found = []
        m = self.m
        for call in m.calls:
            callee = m.callee(call)
            if callee is None or callee.kind != "function" or not callee.returns or callee.where.rsplit(":", 1)[0] == m.project.path:
                continue  # this module's own factories: their `DataLoader(...)` calls are followed from there
            returned = callee.returns
            if returned[0] == "shapes":
                returned = self._shape_taken(call, returned[1])
                if returned is None:
                    continue
            elements = [(None, returned)] if returned[0] == "loader" else list(enumerate(returned[1])) if returned[0] == "tuple" else []
            for index, value in elements:
                if value is None or value[0] != "loader" or not isinstance(value[1], dict):
                    continue
                iterations = self._iterations_from(list(self._refs_of_result(call, index)))
                where = f"{callee.where.rsplit(':', 1)[0]}:{value[1].get('line', '?')}"
                found.append(ReturnedLoader(call, where, value[1], iterations, self._moves(iterations)))
        return found

    @cached_property
    def received_loaders(self) -> list[ReturnedLoader]:
        """Loaders other modules build and hand to this module's functions (`train(model, train_dataloader)` in
        `finetuning.py`), with where the parameter's batches are used here (`project.loaders_in`)."""
        found = []
        m = self.m
        for key, loaders in m.project.loaders_in.items():
            name, _, param = key.rpartition(".")
            for func in self._received_by(name):
                binders = m.bindings.get((id(func), param), [])
                if not (len(binders) == 1 and isinstance(binders[0], cst.Param)):
                    continue  # the parameter is bound again in the function
                iterations = self._iterations_from([_Ref(func, param, False, (), ())])
                moves = self._moves(iterations)
                found.extend(ReturnedLoader(None, where, facts, iterations, moves) for where, facts in loaders)
        return found

    def _received_by(self, name: str) -> list[cst.FunctionDef]:
        """The module-level function `name`, or the constructor of the module-level class `Trainer.__init__`."""
        m = self.m
        if name.endswith(".__init__"):
            info = m.classes.get(name[: -len(".__init__")])
            init = info.methods.get("__init__") if info is not None else None
            return [init] if init is not None and m.parent.get(info.node) is m.module else []
        # (not a nested function or a method of the same name)
        return [
            f for f in m.functions.get(name, [])
            if m.enclosing_function(f) is None and not isinstance(m.parent.get(m.parent.get(f)), cst.ClassDef)
        ]  # fmt: skip

    def _shape_taken(self, call: cst.Call, shapes: tuple) -> Optional[tuple]:
        """Of a factory's results, one per branch (`return train, val` / `return test`), the one this call's
        assignment takes: the tuple as long as its unpacking, or the lone loader bound to one name."""
        parent = self.m.parent.get(call)
        if not (isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1):
            return None
        target = parent.targets[0].target
        if isinstance(target, (cst.Tuple, cst.List)):
            fits = [s for s in shapes if s[0] == "tuple" and len(s[1]) == len(target.elements)]
        else:
            fits = [s for s in shapes if s[0] == "loader"] if isinstance(target, cst.Name) else []
        return fits[0] if len(fits) == 1 else None

    def _refs_of_result(self, call: cst.Call, index: Optional[int]) -> Iterator[_Ref]:
        """The names the result of `call` (its element `index`) is given."""
        if index is None:
            yield from self._refs_from_value(call, (call,), (), 1)
            return
        parent = self.m.parent.get(call)
        if isinstance(parent, cst.Assign) and parent.value is call and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, (cst.Tuple, cst.List)):
                if index < len(target.elements) and not any(isinstance(e, cst.StarredElement) for e in target.elements):
                    yield from self._refs_for_target(target.elements[index].value, parent, (call, parent), ())
            elif isinstance(target, cst.Name):  # `loaders = get_loaders()`, then `loaders[0]`
                yield from self._refs_for_target(target, parent, (call, parent), (), index)

    def _iterations_from(self, pending: list[_Ref], visit: Optional[Callable[[_Ref], None]] = None) -> list[Iteration]:
        """Where the references in `pending`, and those they are forwarded to, are iterated; `visit` sees each."""
        found: list[Iteration] = []
        seen: set[tuple] = set()
        while pending:
            ref = pending.pop()
            key = (id(ref.scope), ref.name, ref.key)
            if key in seen:
                continue
            seen.add(key)
            found.extend(self._iterations_of_ref(ref))
            if visit is not None:
                visit(ref)
            if len(ref.via) < _MAX_HOPS:
                pending.extend(self._forwarded_refs(ref))
        return found

    def iterations_of(self, value: cst.CSTNode) -> list[Iteration]:
        """Where the object built by the expression `value` is iterated."""
        return self._follow(value)[0]

    def _follow(self, value: cst.CSTNode) -> tuple[list[Iteration], list]:
        """Where the object built by `value` is iterated, and the frameworks it is handed to (`frameworks.Feed`)."""
        frameworks = self.m.frameworks
        feeds = frameworks.feeds_at(value)

        def handed_to_frameworks(ref: _Ref) -> None:
            for expr in self._handed_over(ref):
                feeds.extend(frameworks.feeds_at(expr))

        found = list(self._direct_iterations(value, (value,), ()))
        found.extend(self._iterations_from(list(self._refs_from_value(value, (value,), (), 0)), handed_to_frameworks))
        return found, feeds

    def _handed_over(self, ref: _Ref) -> Iterator[cst.BaseExpression]:
        """Expressions naming the loader where a framework may take it: call arguments, returns of loader hooks."""
        for occurrence in self._ref_occurrences(ref):
            yield occurrence
            yield from self._handed_as_alias(occurrence)
        for hook in self.m.frameworks.loader_hooks:
            if self._in_ref_scope(ref, hook) or ref.scope is hook:
                for ret in self.m.returns_of(hook):
                    if ret.value is not None and self._matches(ref, ret.value):
                        yield ret.value

    def _handed_as_alias(self, occurrence: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
        """The reads of a local name bound to the loader, or to a list or tuple holding it, that this binding
        reaches (`val_loaders = [knn_loader, val_loader]` in one branch, `val_loaders = val_loader` in the other,
        then `trainer.fit(..., val_dataloaders=val_loaders)`): a framework given that name takes the loader too,
        whatever the other branches bind it to."""
        m = self.m
        value, parent = occurrence, m.parent.get(occurrence)
        if isinstance(parent, cst.Element) and parent.value is occurrence and isinstance(m.parent.get(parent), (cst.List, cst.Tuple)):
            value = m.parent.get(parent)
            parent = m.parent.get(value)
        if not (isinstance(parent, cst.Assign) and parent.value is value and len(parent.targets) == 1):
            return
        target = parent.targets[0].target
        if not isinstance(target, cst.Name):
            return
        for read in m.dataflow.reads_in(target.value, m.scope_of(parent)):
            if m.scope_of(read) is m.scope_of(parent) and any(w.statement is parent for w in m.dataflow.reaching_writes(target.value, read)):
                yield read

    def _runs_as_shipped(self, iteration: Iteration) -> bool:
        """The loop (or `next`) and every call that passes the loader to it lie outside branches the shipped
        settings never take: a validation loop reached only from a training branch that every call skips
        (`train_model(..., skip_training=True)` in a notebook) does not use the loader."""
        anchor = iteration.loop if iteration.loop is not None else iteration.regions[0]
        return not any(never_runs(self.m, node) for node in (anchor, *iteration.via))

    def iteration_role(self, iteration: Iteration) -> str:
        """EVAL under no_grad / inference_mode / after `model.eval()`; TRAIN when it steps an optimizer."""
        anchor = iteration.loop if iteration.loop is not None else iteration.regions[0]
        if in_no_grad(self.m, anchor) or any(in_no_grad(self.m, call) for call in iteration.via):
            return EVAL
        if iteration.loop is not None and trains(self.m, iteration.loop):
            return TRAIN
        if self.after_eval_mode(anchor) or any(self.after_eval_mode(call) for call in iteration.via):
            return EVAL
        func = self.m.enclosing_function(anchor)
        if func is not None and _EVAL_FUNCTION.search(func.name.value):
            return EVAL  # `def evaluate(...)`, `def validate(...)`: a loop that does not train
        return UNKNOWN

    def feeds_gpu_training(self, info: LoaderInfo) -> Optional[tuple[str, bool]]:
        """(where, trains) when the loader's batches reach the GPU out of sight of this module's loops: a
        training loop here that runs a GPU module, or a loop elsewhere in the project (the loader is returned
        by a function another module calls, or handed to one) that copies its batches or trains in GPU code."""
        project = self.m.project
        if not project.gpu:
            return None
        residency = self.m.residency
        for iteration in info.iterations:
            if iteration.loop is None or self.iteration_role(iteration) != TRAIN:
                continue
            if self.copies_rebuilt_batches(iteration):
                continue  # what reaches the GPU is a new CPU tensor built from the batch: the loader's memory is never copied
            if any(residency.is_gpu_module(call.func) for call in self.m.calls_inside(iteration.loop)):
                return f"they feed the training loop at line {self.m.line_of(iteration.loop)}, which runs a GPU model", True
        for consumption in self.consumed_elsewhere(info):
            if not consumption.gpu:
                continue  # the copy may be to the CPU: that loop's module is no GPU code
            if consumption.moves:
                return f"they are copied to the GPU at {consumption.moves[0][0]}, in the loop at {consumption.where}", consumption.trains
            if consumption.trains:
                return f"they feed the GPU training loop at {consumption.where}", True
        return None

    def stays_on_cpu(self, info: LoaderInfo) -> bool:
        """Nothing the loader's batches reach can be on a GPU: they are taken only by loops of this module,
        which hands them to no framework, and the module moves nothing to any device (no `.to()`, `.cuda()`,
        `device=`, `torch.device(...)`, no project helper that moves its argument): a CPU lesson, where
        worker and batch-size advice about keeping a GPU busy has nothing to say."""
        if self.trained_on_cpu_by_switch(info) or self.run_on_moved_cpu_modules(info) or self.moved_to_cpu_as_shipped(info):
            return True
        if not info.iterations or info.moves or info.feeds or self.consumed_elsewhere(info):
            return False
        return self._moves_nothing

    def moved_to_cpu_as_shipped(self, info: LoaderInfo) -> bool:
        """Every copy of the loader's batches is `x.to(device)` with `device` a parameter that defaults to the CPU
        and that every call of its function leaves so (`def train(model, loader, device="cpu")` called as
        `train(model, loader)`: `cpu_as_shipped.device_parameter_on_cpu`), and no framework or other module takes
        them: as shipped, no batch reaches a GPU."""
        from gpulint.analysis.cpu_as_shipped import device_parameter_on_cpu

        if not info.iterations or info.feeds:
            return False
        if any(move.via is not None for move in info.moves):
            return False  # a helper of another module copies them
        calls = [move.call for move in info.moves]
        for consumption in self.consumed_elsewhere(info):  # a function of this module the loader is handed to
            if not consumption.moves or not _this_module(self.m, consumption.where):
                return False
            for where, _ in consumption.moves:
                at = [c for c in self.m.calls if self.m.range(c).start.line == int(where.rsplit(":", 1)[1]) and _to_call(c)]
                if not at or not _this_module(self.m, where):
                    return False
                calls.extend(at)
        if not calls:
            return False
        for call in calls:
            if not _to_call(call):
                return False
            target = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
            if target is None and call.args and call.args[0].keyword is None and not call.args[0].star:
                target = call.args[0].value
            if target is None or not device_parameter_on_cpu(self.m, target):
                return False
        return True

    def run_on_moved_cpu_modules(self, info: LoaderInfo) -> bool:
        """Every loop over the loader is a `for` of this module whose function first moves the module it runs to
        the CPU (`encoder = encoder.cpu()`, `.to("cpu")`), and every call in the loop's body of a local name runs
        such a module: no batch of it reaches a GPU (`for x, y in DataLoader(data): z = encoder(x.cpu())`)."""
        m = self.m
        if not info.iterations or info.moves or info.feeds or self.consumed_elsewhere(info):
            return False
        for iteration in info.iterations:
            loop = iteration.loop
            if loop is None or not iteration.is_for or not isinstance(loop, cst.For):
                return False
            ran = False
            for call in m.calls_inside(loop.body):
                if not isinstance(call.func, cst.Name) or call.func.value in m.functions or call.func.value in m.classes:
                    continue
                writes = m.dataflow.reaching_writes(call.func.value, call)
                if not writes:
                    continue  # a builtin or an imported function
                if not all(w.value is not None and _moved_to_cpu(m, w.value) and m.is_inside(w.statement, m.scope_of(loop)) for w in writes):
                    return False
                ran = True
            if not ran:
                return False
        return True

    def trained_on_cpu_by_switch(self, info: LoaderInfo) -> bool:
        """The loader is handed to a trainer told to run on the CPU (`model.fit(dl, cpu=True)`, accelerate's
        `cpu=True`, `use_cpu=True`, `no_cuda=True`), this module copies none of its batches, and no loop of
        its own runs a GPU module: a `device=x.device` factory in the model follows that CPU run."""
        m = self.m
        if info.moves:
            return False
        parent = m.parent.get(info.loader.call)
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
            return False
        receivers = []
        for read in m.dataflow.reads.get(parent.targets[0].target.value, ()):
            arg = m.parent.get(read)
            call = m.parent.get(arg) if isinstance(arg, cst.Arg) and arg.value is read else None
            if isinstance(call, cst.Call) and any(a is arg for a in call.args):
                receivers.append(call)
        # An object told once (`model.fit(..., cpu=True)`) keeps its CPU run for its other methods (`model.evaluate(dl)`).
        switched = {_root_name(c.func) for c in m.calls if isinstance(c.func, cst.Attribute) and _cpu_switch_on(c)} - {None}
        if not receivers or not all(_cpu_switch_on(call) or _root_name(call.func) in switched for call in receivers):
            return False
        residency = m.residency
        return not any(
            residency.is_gpu_module(call.func) for it in info.iterations if it.loop is not None for call in m.calls_inside(it.loop)
        )

    def only_inspected(self, info: LoaderInfo) -> bool:
        """Every loop over the loader only looks at its batches (`print(labels.tolist())`, `x.size()`): a
        DataLoader API lesson (samplers, collate functions) where nothing is computed from them."""
        if not info.iterations or info.feeds or self.consumed_elsewhere(info):
            return False
        m = self.m
        for iteration in info.iterations:
            loop = iteration.loop
            if not isinstance(loop, cst.For) or iteration.via:
                return False
            for call in m.calls_inside(loop.body):
                func = call.func
                if isinstance(func, cst.Name) and func.value in _INSPECTING_BUILTINS and not m.module_bindings(func.value):
                    continue
                if isinstance(func, cst.Attribute) and func.attr.value in _INSPECTING_METHODS:
                    continue
                return False
        return True

    @cached_property
    def _moves_nothing(self) -> bool:
        m = self.m
        if "helper-moves" in m.project.tags or m.frameworks.hf_trainers:
            return False
        for call in m.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in _DEVICE_METHODS:
                return False
            if (m.call_name(call) or "") in _DEVICE_CALLS and not _only_printed(m, call):
                return False
            if any(a.keyword is not None and a.keyword.value in _DEVICE_KEYWORDS for a in call.args):
                return False
        residency = m.residency
        return not any(residency.is_gpu_module(call.func) for call in m.calls)

    def consumed_elsewhere(self, info: LoaderInfo) -> list:
        """The loops of other modules (`project.Consumption`) that take the batches of a loader built here:
        returned by a function they call, or handed to one of theirs (not those that only take one batch of a
        new iterator on each pass: `restarted_each_step`)."""
        return [c for c in self._consumptions_elsewhere(info) if not c.restarts]

    def _consumptions_elsewhere(self, info: LoaderInfo) -> list:
        project = self.m.project
        consumptions = [c for function, element in self.returned_by(info.loader.call) for c in project.consumed(function, element)]
        return consumptions + self._consumed_by_callees(info.loader.call)

    def restarted_each_step(self, info: LoaderInfo) -> Optional[str]:
        """Where a loop takes each batch of the loader from a new iterator (`x, y = next(iter(loader))` on every
        pass), here (`line 42`) or in another module (`train.py:42`): with workers, each `iter()` would start
        them again, or, when they persist, first drain the batches they prefetched for the old iterator."""
        for iteration in info.iterations:
            if iteration.restarts:
                return f"line {self.m.line_of(iteration.loop)}"
        return next((c.where for c in self._consumptions_elsewhere(info) if c.restarts), None)

    def copies_rebuilt_batches(self, iteration: Iteration) -> bool:
        """The loop copies to the GPU tensors it builds from the batch on the CPU (`torch.stack([transform(img)
        for img in batch["image"]])`, `processor(images=..., return_tensors="pt")`, `torch.tensor(array)`), and
        nothing selected from the batch itself (unpacking, indexing, attributes, `.float()`)."""
        m = self.m
        selected = set(iteration.batch_names)  # names holding parts of the batch itself
        for region in iteration.regions:
            selected = _BatchNames.collect(region, selected)
        derived = set(selected)  # ... and names computed from it by any means
        assignments = [a for region in iteration.regions for a in Assignments.find(region)]
        for _ in range(4):
            before = (len(selected), len(derived))
            for node in assignments:
                if reads_any(node.value, derived):
                    targets = target_names([t.target for t in node.targets])
                    derived |= targets
                    if _selection_of(node.value) in selected:
                        selected |= targets
            if (len(selected), len(derived)) == before:
                break
        rebuilt = False
        for call in (c for region in iteration.regions for c in m.calls_inside(region)):
            if not m.residency.moves_to_cuda(call):
                continue
            receiver = m.residency.unwrapped(call.func.value)
            if _selection_of(receiver) in selected:
                return False  # a part of the batch itself is copied
            rebuilt = rebuilt or reads_any(receiver, derived)
        return rebuilt

    def _consumed_by_callees(self, value: cst.CSTNode) -> list:
        """Loops of project functions (of another module) that the loader is handed to, by name or directly:
        `train_one_epoch(model, data_loader_train, ...)` from `engine.py`."""
        m = self.m
        parent = m.parent.get(value)
        names: set[str] = set()
        scope = m.scope_of(value)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
            if self._only_loader_bindings(parent.targets[0].target.value, parent):
                names.add(parent.targets[0].target.value)
        given = [value]  # handed over directly, or by a name read in its scope (not every call of the module)
        for name in names:
            ref = _Ref(scope, name, False, (), ())
            given += [read for read in self._reads_near(ref) if self._in_ref_scope(ref, read)]
        found = []
        for occurrence in given:
            arg, call = m.parent.get(occurrence), m.parent.get(m.parent.get(occurrence))
            if not (isinstance(arg, cst.Arg) and arg.value is occurrence and isinstance(call, cst.Call)):
                continue
            if never_runs(m, call):
                continue  # handed over only in a branch the shipped settings never take
            callee = m.callee(call)
            if callee is None or not callee.consumes:
                continue
            found.extend(
                self._again_here(kept, call, value) if kept.by_caller else kept
                for a, param in m.arguments_to(call, callee) if a is arg for kept in callee.consumes.get(param, ())
            )
        return found

    def _again_here(self, consumption, call: cst.Call, loader: cst.CSTNode):
        """The helper's loop runs again by the loop around this call (not by one another caller runs it in), when
        the loader is built outside that loop; handed over once, it runs once."""
        m = self.m
        outer = next((loop for loop in m.enclosing_loops(call) if not m.is_inside(loader, loop)), None)
        again = None if outer is None else f"{m.project.path}:{m.line_of(outer)}"
        return dataclasses.replace(consumption, epoch=again, by_caller=False)

    def returned_by(self, value: cst.CSTNode) -> list[tuple[str, Optional[int]]]:
        """(function, element) for each function of this module that returns the object `value` builds:
        `return DataLoader(...)`, `return train, val`, `loader = DataLoader(...)` then `return loader`."""
        m = self.m
        found: list[tuple[str, Optional[int]]] = []
        parent = m.parent.get(value)
        if isinstance(parent, cst.IfExp) and parent.body is value and literal_value(parent.orelse) == (True, None):
            value, parent = parent, m.parent.get(parent)  # `DataLoader(...) if testset is not None else None`
        names: list[str] = []
        if isinstance(parent, (cst.Return, cst.Element)):
            nodes = [value]
        elif isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
            names.append(parent.targets[0].target.value)
            nodes = []
        else:
            return found
        func = m.enclosing_function(value)
        if func is None:
            return found
        owner = m.parent.get(m.parent.get(func))
        key = f"{owner.name.value}.{func.name.value}" if isinstance(owner, cst.ClassDef) else func.name.value
        for ret in m.returns_of(func):
            result = ret.value
            if result is None:
                continue
            parts = [e.value for e in result.elements] if isinstance(result, cst.Tuple) else [result]
            for index, part in enumerate(parts):
                if any(part is node for node in nodes) or (isinstance(part, cst.Name) and part.value in names):
                    found.append((key, index if isinstance(result, cst.Tuple) else None))
        return found

    def trains_on_first_sample(self, iteration: Iteration, loader: Optional[DataLoaderCall] = None) -> bool:
        """Every read of the unpacked batch is its element `[0]` (`for lines, _ in loader: train(lines[0])`,
        `train(srcs[0], targets[0])`): the model is unbatched, so a larger batch size would silently drop the
        other samples. A whole batch counts when the loader's dataset is a bare tensor (`DataLoader(torch.arange(20),
        batch_size=1)`: the batch is a tensor of indices, `batch[0]` its first sample), and so does the batch
        indexing a bound of a slice (`out[:nodes[batch]]`: a bound must be a one-element tensor)."""
        m = self.m
        if iteration.whole_batch is not None and not (loader is not None and _tensor_dataset(m, loader)):
            return False  # `for batch in loader: batch[0]` is the first field of a tuple batch, not its first sample
        reads = [r for name in iteration.batch_names for region in iteration.regions for r in m.dataflow.reads_in(name, region)]
        if not reads:
            return False
        for read in reads:
            parent = m.parent.get(read)
            if _counted(m, read) or _indexes_a_slice_bound(m, read):
                continue  # `len(srcs)`: the batch's size, not its other samples
            if not (isinstance(parent, cst.Subscript) and parent.value is read and len(parent.slice) == 1):
                return False
            index = parent.slice[0].slice
            if not (isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0"):
                return False
        return True

    def feeds_a_first_sample(self, iteration: Iteration, loader: DataLoaderCall) -> bool:
        """One field the loop unpacks from the batch (`for sentence, tag in loader:`) is read only as its element
        `[0]` (`sentence = sentence[0].to(device)`: every read that sees the unpacked batch, not the rebound name;
        its `len` aside): the model takes one unbatched sample of variable length, so the batch size of 1 is the
        code's design, and a larger one would drop samples (or fail to collate). The whole batch counts only when
        each item is one tensor (a Dataset class of this module whose `__getitem__` returns `torch.as_tensor(...)`):
        of a tuple, `batch[0]` is its first field."""
        m = self.m
        if iteration.loop is None or not iteration.is_for:
            return False
        for name in iteration.batch_names:
            if name == iteration.whole_batch and not _one_tensor_items(m, loader):
                continue
            reads = [
                r for region in iteration.regions for r in m.dataflow.reads_in(name, region)
                if all(w.statement is iteration.loop for w in m.dataflow.reaching_writes(name, r))
            ]  # fmt: skip
            if any(_first_element(m, r) for r in reads) and all(_first_element(m, r) or _counted(m, r) for r in reads):
                return True
        return False

    def feeds_training(self, info: LoaderInfo) -> bool:
        """A training loader: its batches feed a training loop, or it shuffles and is not eval-only."""
        if info.role == TRAIN:
            return True
        if info.role == EVAL:
            return False
        shuffle = info.loader.value("shuffle")
        resolved = self.m.values.resolve(shuffle) if shuffle is not None else None
        return resolved is not None and resolved.value is True

    def after_eval_mode(self, node: cst.CSTNode) -> bool:
        """The last `<x>.eval()` / `<x>.train(...)` before `node` in its function switched to eval mode."""
        m = self.m
        scope = m.scope_of(node)
        current = m.enclosing_statement(node)
        while current is not None and current is not scope:
            parent = m.parent.get(current)
            siblings = _statement_list(parent)
            if siblings is not None:
                index = next((i for i, s in enumerate(siblings) if s is current), None)
                for statement in reversed(siblings[:index] if index is not None else []):
                    mode = self._last_mode_switch(statement, scope)
                    if mode is not None:
                        return mode == EVAL
            current = parent
            while current is not None and not isinstance(current, (cst.BaseCompoundStatement, cst.Module)):
                current = m.parent.get(current)
            if isinstance(current, (cst.FunctionDef, cst.ClassDef, cst.Module)):
                break
        return False

    def accumulates_gradients(self, loop: cst.CSTNode) -> bool:
        """Gradient accumulation: an optimizer step under `if ... % k == 0`, a loss divided by an
        `accum...` count, or `with accelerator.accumulate(...)` (also in this module's functions it calls)."""
        return self.m.through_calls("accumulates gradients", loop, self._accumulates_here)

    def _accumulates_here(self, node: cst.CSTNode) -> bool:
        for call in self.m.calls_inside(node):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("accumulate", "no_sync"):
                return True
            if isinstance(func, cst.Attribute) and func.attr.value == "step" and self._under_modulo_guard(call, node):
                return True
        return _DivisionByAccumulation.find(node)

    def pinned(self, loader: DataLoaderCall) -> bool:
        """`pin_memory` is True (literal or resolved) or `torch.cuda.is_available()`."""
        value = loader.value("pin_memory")
        if value is None:
            return False
        resolved = self.m.values.resolve(value)
        if resolved is not None:
            return resolved.value is True
        if isinstance(value, cst.Name):  # `use_cuda = torch.cuda.is_available()`
            binders = self.m.bindings_of(value.value, value)
            if len(binders) == 1 and isinstance(binders[0], cst.Assign):
                value = binders[0].value
        return isinstance(value, cst.Call) and self.m.call_name(value) == "torch.cuda.is_available"

    def workers(self, loader: DataLoaderCall) -> tuple[bool, Optional[ResolvedValue]]:
        """(num_workers is certainly > 0, its resolved value if any)."""
        value = loader.value("num_workers")
        if value is None:
            return False, None
        # a YAML setting of the repository (`cfg.data.num_workers`) when every shipped file giving it agrees
        resolved = self.m.values.resolve(value) or _divided(self.m, value) or self.m.values.agreed_setting(value)
        if resolved is not None:
            ok = isinstance(resolved.value, int) and not isinstance(resolved.value, bool) and resolved.value > 0
            return ok, resolved
        given = self._held_from_callers(value)
        if given:  # `self.num_workers` of a constructor every call in the project gives a literal (or a YAML entry)
            return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in given), None
        candidates = self.m.values.settings_defaults(value)
        if candidates:  # a yacs setting: above 0 when every value the project may give it is (8, or 2 in a YAML)
            ok = all(isinstance(c.value, int) and not isinstance(c.value, bool) and c.value > 0 for c in candidates)
            return ok, candidates[0] if all(c.value == candidates[0].value for c in candidates) else None
        bound = _lower_bound(self.m, value)
        return bound is not None and bound > 0, None

    def _held_from_callers(self, value: cst.BaseExpression) -> Optional[set]:
        """The values every call in the project gives the constructor parameter `self.num_workers` holds (`__init__`
        sets it once from that parameter: `shipped_paths.init_parameter_held`), all in sight; None otherwise."""
        from gpulint.analysis.shipped_paths import init_parameter_held, project_values

        param = init_parameter_held(self.m, value) if isinstance(value, cst.Attribute) else None
        func = self.m.parent.get(self.m.parent.get(param)) if param is not None else None
        return project_values(self.m, func, param) if isinstance(func, cst.FunctionDef) else None

    def no_workers(self, loader: DataLoaderCall) -> bool:
        """`num_workers` is certainly 0: left out (the default) or resolved to 0."""
        if not loader.known("num_workers"):
            return False
        value = loader.value("num_workers")
        if value is None:
            return True
        resolved = self.m.values.resolve(value)
        return resolved is not None and resolved.value == 0 and not isinstance(resolved.value, bool)

    def workers_from_command_line(self, loader: DataLoaderCall) -> bool:
        """The count may be 0 at run time (`--workers 0`, or half of one worker): a fix must keep that working."""
        _, resolved = self.workers(loader)
        value = loader.value("num_workers")
        if value is not None and self.m.values.argparse_default(value) is not None:
            return True  # `--workers` with any default, also one only bounded (`min(8, max(1, ...))`)
        if value is not None and self._held_from_callers(value):
            return True  # a constructor's parameter: another call (or an edited YAML file) may give it 0
        return resolved is not None and (resolved.origin in (ARGPARSE_DEFAULT, IMPORTED_ARGPARSE_DEFAULT, SETTINGS_FILE) or _divided(self.m, value) is not None)

    def workers_from_parameter(self, loader: DataLoaderCall) -> Optional[cst.Param]:
        """The parameter of the function building the loader that `num_workers` is (`num_workers=num_workers`)."""
        return self.factory_parameter(loader, "num_workers")

    def batch_size_given_by_callers(self, info: LoaderInfo) -> list[tuple[object, int, str]]:
        """(consumption, batch size, where it is set) for each training loop of another module that takes the
        batches of a loader whose `batch_size` is a parameter of the factory building it (`def get_loader(path,
        batch_size)`), where the factory call it takes them from passes a literal there (`train.py:12`), or a
        setting of the command line whose `add_argument` default is known (`main.py:79`)."""
        param = self.factory_parameter(info.loader, "batch_size")
        if param is None:
            return []
        found = []
        for consumption in self.consumed_elsewhere(info):
            if not consumption.trains:
                continue
            way = next((w[1:] for w in consumption.passed if w[0] == param.name.value), None)
            if way is None:
                continue
            if way[0] == "given" and len(way) > 1:
                size, where = way[1], consumption.called_at
            elif way[0] == "option" and len(way) > 2:
                size, where = way[1], way[2]
            else:
                continue
            if isinstance(size, int) and not isinstance(size, bool):
                found.append((consumption, size, where))
        return found

    def factory_parameter(self, loader: DataLoaderCall, argument: str) -> Optional[cst.Param]:
        """The parameter of the function building the loader that its argument `argument` is (`batch_size=batch_size`)."""
        m = self.m
        value = loader.value(argument)
        func = m.enclosing_function(loader.call)
        if not isinstance(value, cst.Name) or func is None:
            return None
        binders = m.bindings_of(value.value, value)
        param = binders[0] if len(binders) == 1 and isinstance(binders[0], cst.Param) else None
        return param if param is not None and m.enclosing_function(param) is func else None

    def workers_given_by_callers(self, info: LoaderInfo) -> list[tuple[object, int]]:
        """(consumption, workers) for each loop of another module that takes the batches of a loader whose
        `num_workers` is a parameter of the factory building it (`def build_dataloader(..., num_workers=1)`), where
        the factory call it takes them from passes a literal above 0 there or leaves a default above 0: the
        count that loader has (another call of the same factory may pass 0)."""
        param = self.workers_from_parameter(info.loader)
        if param is None:
            return []  # a local of the factory, or a name bound again there
        found = []
        for consumption in self.consumed_elsewhere(info):
            way = next((w[1:] for w in consumption.passed if w[0] == param.name.value), None)
            if way is None:
                continue  # the call fills it otherwise (a variable, `*args`): unknown
            if way[0] == "given" and len(way) > 1:
                count = way[1]
            elif way[0] == "left out" and param.default is not None:
                count = literal_value(param.default)[1]  # (False, None) when the default is not a literal
            else:
                continue
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                found.append((consumption, count))
        return found

    def device_chosen_at_run_time(self, moves: list[BatchMove]) -> bool:
        """True unless every move targets a literal CUDA device (`.cuda()`, `"cuda"`, `torch.device("cuda")`)."""
        if any(self.m.call_name(c) == "torch.cuda.is_available" for c in self.m.method_calls("is_available")):
            return True
        return not all(self._fixed_cuda_target(move.call) for move in moves)

    def epoch_loop(self, info: LoaderInfo, iteration: Iteration) -> Optional[Loop]:
        """A loop around `iteration` (or around a call passing the loader in) that re-iterates the same
        loader object: the loader is built outside it (a new `iter(loader)` inside it is the same loader)."""
        if not iteration.is_for or iteration.loop is None:
            return None
        candidates = self.m.enclosing_loops(iteration.loop)
        for call in iteration.via:
            candidates.extend(self.m.enclosing_loops(call))
        built_at = [node for node in iteration.bound_at if not self._new_iterator(node)]
        func = self.m.enclosing_function(iteration.loop)
        if not iteration.via and func is not None and not any(self.m.is_inside(node, func) for node in built_at):
            # `def validation(self): for batch in self.val_loader` (the loader built elsewhere) called by
            # `self.validation()` in a loop of this module: each pass of that loop runs the loop again
            for call in self._calls_to(func):
                if not self.m.is_inside(call, func):
                    candidates.extend(self.m.enclosing_loops(call))
        for outer in candidates:
            if not any(self.m.is_inside(node, outer) for node in built_at):
                return outer
        return None

    def _new_iterator(self, node: cst.CSTNode) -> bool:
        """`train_iter = iter(train_loader)`: a binding that starts a new pass over the loader, not a new loader."""
        return isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and self._iterator_of_loader(node.value)

    def epoch_count(self, iteration: Iteration, outer: Loop) -> Optional[int]:
        """How many passes the epoch loop `outer` around `iteration` makes, when the code says so (analysis/epoch_count.py)."""
        from gpulint.analysis.epoch_count import epoch_count

        return epoch_count(self.m, outer, iteration.via)

    # ---- following the loader object -------------------------------------------------------------

    def _refs_from_value(self, value: cst.CSTNode, bound_at: tuple, via: tuple, hops: int) -> Iterator[_Ref]:
        """The names the value of expression `value` is given: assignment targets, returns, parameters."""
        m = self.m
        parent = m.parent.get(value)
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is value:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            for target in targets:
                yield from self._refs_for_target(target, parent, bound_at + (parent,), via)
        elif isinstance(parent, cst.Return) and hops < _MAX_HOPS:
            yield from self._refs_from_factory(parent, None, bound_at, via, hops)
        elif isinstance(parent, (cst.Element, cst.DictElement)) and parent.value is value and hops < _MAX_HOPS:
            yield from self._refs_from_container(parent, bound_at, via, hops)
        elif isinstance(parent, cst.DictComp) and parent.value is value:
            # `{phase: DataLoader(...) for phase in phases}`: every entry is this loader
            holder = m.parent.get(parent)
            if isinstance(holder, cst.Assign) and holder.value is parent:
                for target in holder.targets:
                    yield from self._refs_for_target(target.target, holder, bound_at + (holder,), via, ANY_KEY)
        elif isinstance(parent, cst.Arg) and not parent.star:
            call = m.parent.get(parent)
            if not isinstance(call, cst.Call):
                return
            if wrapper_kind(m, call) == "passthrough" and any(value is a for a in wrapped_arguments(m, call)):
                yield from self._refs_from_value(call, bound_at, via, hops)  # `pbar = tqdm(loader)` hands out its batches
                if len(via) < _MAX_HOPS:
                    # `infiniteloop(loader)`, a generator of this module: its own loop (`while True: for x in loader`) takes them
                    yield from self._refs_into_function(call, parent, bound_at, via)
            elif len(via) < _MAX_HOPS:
                yield from self._refs_through_wrapper(call, parent, bound_at, via, hops)
                yield from self._refs_into_function(call, parent, bound_at, via)

    def _refs_from_container(self, element, bound_at, via, hops) -> Iterator[_Ref]:
        """A loader kept in a tuple, list or dict: returned, unpacked into names, or bound with the container."""
        m = self.m
        container = m.parent.get(element)
        holder = m.parent.get(container)
        if isinstance(element, cst.DictElement):
            ok, key = literal_value(element.key)
            if not ok or not isinstance(container, cst.Dict):
                return
        elif isinstance(container, (cst.Tuple, cst.List)):
            key = next(i for i, e in enumerate(container.elements) if e is element)
            if any(isinstance(e, cst.StarredElement) for e in container.elements[:key]):
                return
        else:
            return
        if isinstance(holder, cst.Return) and isinstance(container, cst.Tuple):
            yield from self._refs_from_factory(holder, key, bound_at, via, hops)
        elif isinstance(holder, cst.Arg) and holder.value is container and not holder.star and isinstance(key, int):
            # `train_and_evaluate(..., [train_loader, eval_loader], ...)`: the parameter holds it at that index
            call = m.parent.get(holder)
            if isinstance(call, cst.Call) and len(via) < _MAX_HOPS:
                yield from self._refs_into_function(call, holder, bound_at, via, key)
        elif isinstance(holder, cst.Assign) and holder.value is container:
            for target in holder.targets:
                target = target.target
                if isinstance(target, (cst.Tuple, cst.List)) and isinstance(key, int):
                    if len(target.elements) == len(container.elements) and not any(isinstance(e, cst.StarredElement) for e in target.elements):
                        yield from self._refs_for_target(target.elements[key].value, holder, bound_at + (holder,), via)
                else:
                    yield from self._refs_for_target(target, holder, bound_at + (holder,), via, key)

    def _refs_for_target(self, target, binder, bound_at, via, key: object = None) -> Iterator[_Ref]:
        m = self.m
        if isinstance(target, cst.Subscript) and key is None and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
            ok, index = literal_value(target.slice[0].slice.value)  # `loaders["train"] = DataLoader(...)`
            if ok and index is not None:
                yield from self._refs_for_target(target.value, binder, bound_at, via, index)
        elif isinstance(target, cst.Name):
            # A container is followed while its name is bound once; a plain name while it only holds loaders.
            scope = m.scope_of(binder)
            if scope is not m.module and target.value in declared_globals(scope):
                yield from self._global_ref(target.value, scope, binder, bound_at, via, key)
                return
            if self._one_container(target.value, scope, key) if key is not None else self._only_loader_bindings(target.value, binder):
                yield _Ref(scope, target.value, False, bound_at, via, key)
        elif isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            owner = next((a for a in m.ancestors(binder) if isinstance(a, cst.ClassDef)), m.module)
            yield _Ref(owner, m.code(target), True, bound_at, via, key)

    def _one_container(self, name: str, scope: cst.CSTNode, key: object) -> bool:
        """`name` holds one container: bound once, or (cell after cell of a notebook) rebound only to dict
        literals that each write the same expression at `key` (`params_train = {"num_epochs": 2, "train_dl":
        train_dl, ...}` again with other settings): whichever binding a read sees, its entry is that loader."""
        m = self.m
        binders = m.bindings.get((id(scope), name), [])
        if len(binders) <= 1:
            return True
        if key is ANY_KEY or isinstance(key, int):
            return False
        entries = set()
        for binder in binders:
            if not (isinstance(binder, cst.Assign) and isinstance(binder.value, cst.Dict) and len(binder.targets) == 1):
                return False
            found = [e for e in binder.value.elements if isinstance(e, cst.DictElement) and literal_value(e.key) == (True, key)]
            if len(found) != 1 or not isinstance(found[0].value, cst.Name):
                return False
            entries.add(found[0].value.value)
        return len(entries) == 1

    def _global_ref(self, name: str, func: cst.FunctionDef, binder, bound_at, via, key) -> Iterator[_Ref]:
        """`global train_loader` then `train_loader = DataLoader(...)` in a setup function: the module's name,
        read in the functions that do not bind it (`def train(epoch): for x in train_loader`). Followed while
        the module binds the name only to `None` (a placeholder) or to loaders, and the setup function binds it
        once; the calls of the setup function build it (a call inside an epoch loop builds a new loader there)."""
        m = self.m
        if len(m.bindings.get((id(func), name), [])) != 1 or not isinstance(binder, cst.Assign):
            return
        for other in m.module_bindings(name):
            none = isinstance(other, cst.Assign) and isinstance(other.value, cst.Name) and other.value.value == "None"
            if not (none or isinstance(other, cst.Assign) and isinstance(other.value, cst.Call) and self._builds_loader(other.value)):
                return
        if any(f is not func and (id(f), name) in m.bindings for f in self._global_setters.get(name, ())):
            return  # another function rebinds the global: which loader a loop sees depends on the order of calls
        yield _Ref(m.module, name, False, bound_at + tuple(self._calls_to(func)), via, key)

    @cached_property
    def _global_setters(self) -> dict[str, list[cst.FunctionDef]]:
        """name -> the functions whose `global` statement declares it."""
        found: dict[str, list[cst.FunctionDef]] = {}
        for funcs in self.m.functions.values():
            for func in funcs:
                for name in declared_globals(func):
                    found.setdefault(name, []).append(func)
        return found

    def _only_loader_bindings(self, name: str, binder: cst.CSTNode) -> bool:
        """Every binding of `name` in its scope assigns a call (a loader or a loader factory)."""
        m = self.m
        binders = m.bindings.get((id(m.scope_of(binder)), name), [])
        for other in binders:
            if other is binder:
                continue
            if not (isinstance(other, cst.Assign) and isinstance(other.value, cst.Call) and self._builds_loader(other.value)):
                return False
        return True

    def _builds_loader(self, call: cst.Call, depth: int = 0) -> bool:
        if is_loader_call(self.m, call) or self.m.frameworks.wrapper(call) is not None:
            return True  # `loader = accelerator.prepare(loader)` rebinds the same loader
        if depth == 0 and self._iterator_of_loader(call):
            return True  # `train_iter = iter(train_loader)` again at the end of each epoch
        name = call.func.value if isinstance(call.func, cst.Name) else None
        return name is not None and any(self._returns_loader(f) for f in self.m.functions.get(name, []))

    def _iterator_of_loader(self, call: cst.Call) -> bool:
        """`iter(train_loader)` where every binding of `train_loader` in its scope builds a loader."""
        m = self.m
        if not (isinstance(call.func, cst.Name) and call.func.value == "iter" and not m.module_bindings("iter")):
            return False
        if len(call.args) != 1 or call.args[0].keyword or call.args[0].star or not isinstance(call.args[0].value, cst.Name):
            return False
        name = call.args[0].value.value
        binders = m.bindings.get((id(m.scope_of(call)), name), [])
        return bool(binders) and all(
            isinstance(b, cst.Assign) and isinstance(b.value, cst.Call) and self._builds_loader(b.value, 1) for b in binders
        )

    def _returns_loader(self, func: cst.FunctionDef) -> bool:
        return any(is_loader_call(self.m, c) for c in self.m.calls_inside(func))

    def _refs_from_factory(self, ret: cst.Return, index: Optional[int], bound_at, via, hops) -> Iterator[_Ref]:
        m = self.m
        func = m.enclosing_function(ret)
        if func is None:
            return
        for call in self._calls_to(func):
            if index is None:
                yield from self._refs_from_value(call, bound_at + (call,), via, hops + 1)
                continue
            parent = m.parent.get(call)
            if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
                target = parent.targets[0].target
                if isinstance(target, (cst.Tuple, cst.List)) and index < len(target.elements):
                    element = target.elements[index].value
                    yield from self._refs_for_target(element, parent, bound_at + (call, parent), via)
                elif isinstance(target, cst.Name):  # `loaders = make_loaders()`, then `loaders[0]`
                    yield from self._refs_for_target(target, parent, bound_at + (call, parent), via, index)

    def _calls_to(self, func: cst.FunctionDef) -> Iterator[cst.Call]:
        """Calls of `func` by name, or as `self.func(...)` from inside its class."""
        m = self.m
        name = func.name.value
        owner = m.parent.get(m.parent.get(func))
        for call in (m.calls_of(name) if not isinstance(owner, cst.ClassDef) else m.method_calls(name)):
            callee = call.func
            if isinstance(callee, cst.Name) and callee.value == name and not isinstance(owner, cst.ClassDef):
                yield call
            elif (
                isinstance(callee, cst.Attribute)
                and callee.attr.value == name
                and isinstance(callee.value, cst.Name)
                and callee.value.value == "self"
                and isinstance(owner, cst.ClassDef)
                and m.is_inside(call, owner)
            ):
                yield call

    def _refs_through_wrapper(self, call: cst.Call, arg: cst.Arg, bound_at, via, hops) -> Iterator[_Ref]:
        """`loader = accelerator.prepare(loader)`, `model, opt, loader = accelerator.prepare(model, opt, loader)`:
        the names the wrapped loader is given."""
        m = self.m
        if m.frameworks.wrapper(call) is None:
            return
        index = m.frameworks.result_index(call, arg)
        if index is None:
            yield from self._refs_from_value(call, bound_at + (call,), via, hops + 1)
            return
        parent = m.parent.get(call)
        if index >= 0 and isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, (cst.Tuple, cst.List)) and index < len(target.elements):
                yield from self._refs_for_target(target.elements[index].value, parent, bound_at + (call, parent), via)

    def _refs_into_function(self, call: cst.Call, arg: cst.Arg, bound_at, via, key: object = None) -> Iterator[_Ref]:
        """`train(model, loader)`: the parameter of this module's `train` that receives the loader."""
        m = self.m
        for func in self._callees(call):
            positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
            if isinstance(m.parent.get(m.parent.get(func)), cst.ClassDef) and positional and positional[0] in ("self", "cls"):
                positional = positional[1:]
            if arg.keyword is not None:
                param = arg.keyword.value
            else:
                index = [a for a in call.args if a.keyword is None].index(arg)
                if any(a.star for a in call.args[: call.args.index(arg)]) or index >= len(positional):
                    continue
                param = positional[index]
            binders = m.bindings.get((id(func), param), [])
            if len(binders) == 1 and isinstance(binders[0], cst.Param):
                yield _Ref(func, param, False, bound_at, via + (call,), key)

    def _callees(self, call: cst.Call) -> list[cst.FunctionDef]:
        """This module's functions that `call` runs: by name, `self.method(...)`, or a class's `__init__`."""
        m = self.m
        callee = call.func
        if isinstance(callee, cst.Name):
            funcs = m.functions.get(callee.value, [])
            found = [f for f in funcs if not isinstance(m.parent.get(m.parent.get(f)), cst.ClassDef)]
            info = m.local_class_of(m.call_name(call))
            if info is not None and "__init__" in info.methods:
                found.append(info.methods["__init__"])  # `Trainer(model, train_loader)`
            instance = self._instance_class(callee, call)
            if instance is not None and "__call__" in instance.methods:
                found.append(instance.methods["__call__"])  # `evaluator = MscEval(...)`, then `evaluator(net, dl)`
            return found
        if isinstance(callee, cst.Attribute) and isinstance(callee.value, cst.Name) and callee.value.value == "self":
            owner = next((a for a in m.ancestors(call) if isinstance(a, cst.ClassDef)), None)
            if owner is not None:
                return [f for f in m.functions.get(callee.attr.value, []) if m.parent.get(m.parent.get(f)) is owner]
        if isinstance(callee, cst.Attribute) and isinstance(callee.value, cst.Name):
            instance = self._instance_class(callee.value, call)
            method = instance.methods.get(callee.attr.value) if instance is not None else None
            return [method] if method is not None else []  # `trainer = Trainer(...)`, then `trainer.fit(loader)`
        return []

    def _instance_class(self, name: cst.Name, at: cst.CSTNode):
        """The module-level class of this module that every binding of `name` visible at `at` constructs
        (`evaluator = MscEvalV0(n_classes=19)`), or None."""
        m = self.m
        binders = m.bindings_of(name.value, at)
        found = set()
        for binder in binders:
            if not (isinstance(binder, cst.Assign) and isinstance(binder.value, cst.Call) and len(binder.targets) == 1):
                return None
            if not (isinstance(binder.targets[0].target, cst.Name) and binder.targets[0].target.value == name.value):
                return None
            info = m.local_class_of(m.call_name(binder.value))
            if info is None or m.parent.get(info.node) is not m.module:
                return None
            found.add(id(info))
        if len(found) != 1:
            return None
        return m.local_class_of(m.call_name(binders[0].value))

    def _matches(self, ref: _Ref, expr: cst.BaseExpression) -> bool:
        if ref.key is not None:
            if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
                return False
            ok, key = literal_value(expr.slice[0].slice.value)
            # `loaders[phase]` may be this entry; `loaders["val"]` is another one
            return (ref.key is ANY_KEY or not ok or key == ref.key) and self._matches(dataclasses.replace(ref, key=None), expr.value)
        if ref.is_attribute:
            return isinstance(expr, cst.Attribute) and self.m.code(expr) == ref.name
        return isinstance(expr, cst.Name) and expr.value == ref.name

    def _calls_near(self, ref: _Ref) -> list[cst.Call]:
        """The calls that can be in `ref`'s scope: inside it, or anywhere for a module-level name (read as a global)."""
        return self.m.calls if ref.scope is self.m.module and not ref.is_attribute else self.m.calls_inside(ref.scope)

    def _reads_near(self, ref: _Ref) -> list[cst.BaseExpression]:
        """The reads of `ref`'s name that can be in its scope, as `_calls_near`."""
        dataflow = self.m.dataflow
        return dataflow.reads.get(ref.name, []) if ref.scope is self.m.module and not ref.is_attribute else dataflow.reads_in(ref.name, ref.scope)

    def _in_ref_scope(self, ref: _Ref, node: cst.CSTNode) -> bool:
        if ref.is_attribute:
            return self.m.is_inside(node, ref.scope)
        scope = self.m.scope_of(node)
        if scope is ref.scope:
            return True
        # A module-level loader read as a global inside a function that does not bind the name itself.
        if ref.scope is self.m.module:
            return (id(scope), ref.name) not in self.m.bindings
        # A function's loader read in a closure it defines (`def run_validation(engine): evaluator.run(val_loader)`)
        # where no function in between binds the name.
        while scope is not self.m.module and scope is not ref.scope:
            if (id(scope), ref.name) in self.m.bindings:
                return False
            scope = self.m.scope_of(scope)
        return scope is ref.scope

    def _bound_here(self, ref: _Ref, node: cst.CSTNode) -> bool:
        """The name at `node` can still hold this loader: in its own scope, a later binding of the name to
        another loader (`dataloader = DataLoader(...)` again, cell after cell of a notebook) hides it."""
        m = self.m
        if ref.is_attribute or ref.key is not None or m.scope_of(node) is not ref.scope:
            return True
        if len(m.bindings.get((id(ref.scope), ref.name), [])) <= 1:
            return True
        writes = m.dataflow.reaching_writes(ref.name, node)
        if not writes or any(w.statement in ref.bound_at for w in writes):
            return True
        # Hidden only by another loader's construction; a wrapper's result (`accelerator.prepare(...)`) is still it.
        return not all(isinstance(w.value, cst.Call) and self._builds_loader(w.value) for w in writes)

    def _entry_calls(self, ref: _Ref, node: cst.CSTNode) -> tuple[cst.Call, ...]:
        """For a global read inside a function: the calls of that function (they run the loop)."""
        scope = self.m.scope_of(node)
        if ref.is_attribute or scope is ref.scope or not isinstance(scope, cst.FunctionDef):
            return ()
        return tuple(self._calls_to(scope))

    def _ref_occurrences(self, ref: _Ref) -> Iterator[cst.BaseExpression]:
        """Expressions in the ref's scope that name the loader."""
        m = self.m
        for read in self._reads_near(ref):
            occurrence = m.parent.get(read) if ref.key is not None else read
            if not isinstance(occurrence, cst.BaseExpression) or not self._in_ref_scope(ref, read):
                continue
            if self._matches(ref, occurrence) and self._bound_here(ref, read):
                yield occurrence

    def _forwarded_refs(self, ref: _Ref) -> Iterator[_Ref]:
        """Where the loader goes next: into a function, a constructor, an attribute, a wrapper, a container,
        or back to the caller."""
        for occurrence in self._ref_occurrences(ref):
            yield from self._refs_from_value(occurrence, ref.bound_at, ref.via, len(ref.via))
        if isinstance(ref.key, int) and not ref.is_attribute:
            yield from self._unpacked(ref)
        if ref.key is not None and not ref.is_attribute:
            yield from self._container_handed_on(ref)
            yield from self._container_returned(ref)

    def _container_handed_on(self, ref: _Ref) -> Iterator[_Ref]:
        """`train_val(model, params_train)` where `params_train` holds the loader at `ref.key` (`{"train_dl":
        train_dl, ...}`): the parameter of this module's function holds it at the same key (`params["train_dl"]`)."""
        m = self.m
        plain = dataclasses.replace(ref, key=None)
        for read in self._reads_near(ref):
            arg = m.parent.get(read)
            if not (isinstance(arg, cst.Arg) and arg.value is read and not arg.star):
                continue
            call = m.parent.get(arg)
            if isinstance(call, cst.Call) and self._matches(plain, read) and self._in_ref_scope(ref, read) and self._bound_here(plain, read):
                yield from self._refs_into_function(call, arg, ref.bound_at, ref.via, ref.key)

    def _container_returned(self, ref: _Ref) -> Iterator[_Ref]:
        """`return dataloaders` (or `return dataloaders, sizes`) where `dataloaders` holds the loader at `ref.key`
        (`{x: DataLoader(...) for x in ["train", "val"]}`): the name each call of this module binds the result
        (or that element of it) to holds the loader at the same key (`dataloaders = load_data(d)`)."""
        m = self.m
        plain = dataclasses.replace(ref, key=None)
        for read in self._reads_near(ref):
            parent, index = m.parent.get(read), None
            if isinstance(parent, cst.Element) and parent.value is read and isinstance(m.parent.get(parent), cst.Tuple):
                returned = m.parent.get(parent)
                if any(isinstance(e, cst.StarredElement) for e in returned.elements):
                    continue
                index = next(i for i, e in enumerate(returned.elements) if e is parent)
                parent = m.parent.get(returned)
            else:
                returned = read
            if not (isinstance(parent, cst.Return) and parent.value is returned and m.scope_of(read) is ref.scope):
                continue
            if not (isinstance(ref.scope, cst.FunctionDef) and self._matches(plain, read) and self._bound_here(plain, read)):
                continue
            for call in self._calls_to(ref.scope):
                assign = m.parent.get(call)
                if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1):
                    continue
                target = assign.targets[0].target
                if index is not None and isinstance(target, (cst.Tuple, cst.List)):
                    if len(target.elements) != len(returned.elements) or any(isinstance(e, cst.StarredElement) for e in target.elements):
                        continue
                    target = target.elements[index].value
                elif index is not None:
                    continue  # `result = load_data(d)`, then `result[0][phase]`: not followed
                if isinstance(target, cst.Name):
                    yield from self._refs_for_target(target, assign, ref.bound_at + (call, assign), ref.via, ref.key)

    def _unpacked(self, ref: _Ref) -> Iterator[_Ref]:
        """`train_loader, eval_loader = loaders` where `loaders` holds the loader at index `ref.key`."""
        m = self.m
        plain = dataclasses.replace(ref, key=None)
        for read in self._reads_near(ref):
            parent = m.parent.get(read)
            if not (isinstance(parent, cst.Assign) and parent.value is read and len(parent.targets) == 1):
                continue
            target = parent.targets[0].target
            if not (isinstance(target, (cst.Tuple, cst.List)) and ref.key < len(target.elements)):
                continue
            if any(isinstance(e, cst.StarredElement) for e in target.elements) or not self._matches(plain, read):
                continue
            if self._in_ref_scope(ref, read) and self._bound_here(plain, read):
                yield from self._refs_for_target(target.elements[ref.key].value, parent, ref.bound_at + (parent,), ref.via)

    # ---- iterations ------------------------------------------------------------------------------

    def _direct_iterations(self, value: cst.CSTNode, bound_at: tuple, via: tuple) -> list[Iteration]:
        """`for batch in DataLoader(...)` without a name in between."""
        found = []
        outer_first = reversed([a for a in self.m.ancestors(value) if isinstance(a, cst.For)])  # only these can hold it
        for loop in outer_first:
            if self.m.is_inside(value, loop.iter):
                targets = element_targets(self.m, loop.iter, loop.target, lambda e: e is value)
                if targets is not None:
                    found.append(Iteration(loop, (loop,), target_names(targets), _whole(targets), True, bound_at, via))
        return found

    def _iterations_of_ref(self, ref: _Ref) -> list[Iteration]:
        m = self.m
        found = []
        loops = m.loops if ref.scope is m.module and not ref.is_attribute else m.loops_inside(ref.scope)
        for loop in loops:
            if not isinstance(loop, cst.For) or not self._in_ref_scope(ref, loop) or not self._bound_here(ref, loop):
                continue
            targets = element_targets(self.m, loop.iter, loop.target, lambda e: self._matches(ref, e))
            if targets is not None:
                via = ref.via + self._entry_calls(ref, loop)
                found.append(Iteration(loop, (loop,), target_names(targets), _whole(targets), True, ref.bound_at, via))
        for call in self._calls_near(ref):
            if not (isinstance(call.func, cst.Name) and call.func.value == "next" and call.args):
                continue
            if not self._in_ref_scope(ref, call) or not self._bound_here(ref, call) or not self._iterator_of(ref, call.args[0].value):
                continue
            parent = m.parent.get(call)
            if isinstance(parent, cst.Attribute) and parent.value is call:
                parent = None  # `next(looper).to(device)`: a batch taken, under no name
            elif not isinstance(parent, cst.Assign) or parent.value is not call:
                continue
            loops = m.enclosing_loops(call)
            loop = loops[0] if loops else None
            if parent is None and loop is None:
                continue
            targets = [t.target for t in parent.targets] if parent is not None else []
            regions = (loop,) if loop is not None else _statements_after(m, parent)
            via = ref.via + self._entry_calls(ref, call)
            restarts = loop is not None and isinstance(call.args[0].value, cst.Call)  # not a name kept across passes
            found.append(Iteration(loop, regions, target_names(targets), _whole(targets), False, ref.bound_at, via, restarts))
        return found

    def _iterator_of(self, ref: _Ref, expr: cst.BaseExpression) -> bool:
        """`iter(loader)`, or a name bound once to it, or the name of a generator over the loader."""
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "iter" and expr.args:
            return self._matches(ref, expr.args[0].value)
        if self._generator_ref(ref) and self._matches(ref, expr):
            return True  # `datalooper = infiniteloop(loader)`, then `next(datalooper)`
        if isinstance(expr, cst.Name):
            # `it = iter(loader)`, re-created with the same call when an epoch ends (`except StopIteration`).
            binders = self.m.bindings_of(expr.value, expr)
            return bool(binders) and all(
                isinstance(b, cst.Assign) and isinstance(b.value, cst.Call) and self._iterator_of(ref, b.value) for b in binders
            )
        if isinstance(expr, cst.Attribute) and ref.is_attribute and isinstance(ref.scope, cst.ClassDef):
            return self._attribute_iterator(ref, expr)
        return False

    def _attribute_iterator(self, ref: _Ref, expr: cst.Attribute) -> bool:
        """`self.dl_iter`, every store of which in the loader's class is `iter(self.dl)` or a generator of this
        module over it (`self.dl_iter = cycle(self.dl)` in `__init__`, `next(self.dl_iter)` in `train_step`)."""
        m = self.m
        code = m.code(expr)
        if code == ref.name:
            return False
        values = []
        for attribute in m.attributes_inside(ref.scope):
            target = m.parent.get(attribute)
            if m.code(attribute) != code or not isinstance(target, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)):
                continue
            if isinstance(target, cst.AugAssign) or (isinstance(target, cst.AnnAssign) and target.target is not attribute):
                return False
            statement = m.parent.get(target) if isinstance(target, cst.AssignTarget) else target
            if isinstance(target, cst.AssignTarget) and (target.target is not attribute or len(statement.targets) != 1):
                return False  # `self.a = self.b = iter(...)`, or a tuple target: not followed
            values.append(statement.value)
        if not values:
            return False
        for value in values:
            if not isinstance(value, cst.Call) or not value.args or value.args[0].star:
                return False
            if isinstance(value.func, cst.Name) and value.func.value == "iter":
                if not self._matches(ref, value.args[0].value):
                    return False
            elif not (isinstance(value.func, cst.Name) and m.functions.get(value.func.value) and wrapper_kind(m, value) == "passthrough"
                      and self._matches(ref, value.args[0].value)):
                return False
        return True

    def _generator_ref(self, ref: _Ref) -> bool:
        """The name holds a generator of this module that re-yields the loader's batches (`infiniteloop(loader)`)."""
        m = self.m
        if ref.is_attribute or ref.key is not None or not ref.bound_at:
            return False
        binder = ref.bound_at[-1]
        if not (isinstance(binder, cst.Assign) and isinstance(binder.value, cst.Call) and isinstance(binder.value.func, cst.Name)):
            return False
        return bool(m.functions.get(binder.value.func.value)) and wrapper_kind(m, binder.value) == "passthrough"

    # ---- batches moved to CUDA -------------------------------------------------------------------

    def _moves(self, iterations: list[Iteration]) -> list[BatchMove]:
        moves: list[BatchMove] = []
        seen: set[int] = set()
        for iteration in iterations:
            names = set(iteration.batch_names)
            for region in iteration.regions:
                names = _BatchNames.collect(region, names)
            for call in (c for region in iteration.regions for c in self.m.calls_inside(region)):
                if id(call) in seen:
                    continue
                if iteration.loop is not None and error_path(self.m, call, iteration.loop) is not None:
                    continue  # a copy on the way to a `raise` runs at most once, not per batch
                if not self.m.residency.moves_to_cuda(call):
                    helper = self._helper_move(call, names, iteration)
                    if helper is not None:
                        seen.add(id(call))
                        moves.append(helper)
                    continue
                receiver = self.m.residency.unwrapped(call.func.value)  # a move is a method call; `Variable(x).cuda()` moves `x`
                viewed = _viewed(receiver)  # `label.squeeze(1).cuda()` copies the batch's own (pinned) memory
                if _is_batch_part(viewed, names) and not self._already_moved(viewed, call, iteration.regions) and not self._shadowed(viewed, call, iteration):
                    seen.add(id(call))
                    whole = isinstance(receiver, cst.Name) and receiver.value == iteration.whole_batch
                    moves.append(BatchMove(call, receiver, iteration, whole))
        return moves

    def _shadowed(self, receiver: cst.BaseExpression, call: cst.Call, iteration: Iteration) -> bool:
        """`for batch in val_loader:` inside the training loop over `batch`: there the name holds another loader's batches."""
        m = self.m
        while isinstance(receiver, (cst.Subscript, cst.Attribute)):
            receiver = receiver.value
        if not isinstance(receiver, cst.Name):
            return False
        for ancestor in m.ancestors(call):
            if ancestor is iteration.loop:
                return False
            if isinstance(ancestor, cst.For) and receiver.value in target_names([ancestor.target]):
                return True
        return False

    def _helper_move(self, call: cst.Call, names: set[str], iteration: Iteration) -> Optional[BatchMove]:
        """`to_device(batch, device)`: a project function (of this module or another) that copies the
        argument it is given to the GPU on every call."""
        callee = self.m.callee(call)
        if callee is None:
            return None
        for arg, param in self.m.arguments_to(call, callee):
            parts = arg.value.elements if isinstance(arg.value, (cst.Tuple, cst.List)) else ()
            if not _is_batch_part(arg.value, names) and not (parts and all(_is_batch_part(e.value, names) for e in parts)):
                continue  # neither a batch nor a display of its parts (`cuda_all((images, target))`)
            for effect in callee.effects.get(param, ()):
                if effect[0] == "move":
                    whole = isinstance(arg.value, cst.Name) and arg.value.value == iteration.whole_batch
                    return BatchMove(call, arg.value, iteration, whole, via=effect[1], non_blocking=effect[2])
        return None

    def _already_moved(self, receiver: cst.BaseExpression, call: cst.Call, regions) -> bool:
        """`target = target.cuda()` earlier in the loop: a later `target.cuda()` copies nothing."""
        m = self.m
        if not isinstance(receiver, cst.Name):
            return False
        start = m.range(call).start
        start = (start.line, start.column)
        for binder in m.bindings_of(receiver.value, receiver):
            if not isinstance(binder, cst.Assign) or m.is_inside(call, binder):
                continue
            if not any(m.is_inside(binder, region) for region in regions) or not (m.range(binder).start.line, m.range(binder).start.column) < start:
                continue
            # Only when the move dominates the call: in the same block, before it (not in an `if` branch).
            block = m.parent.get(m.enclosing_statement(binder))
            if block is not None and m.is_inside(call, block) and _contains_move_of(m, binder.value, receiver.value):
                return True
        return False

    def _loader_role(self, iterations: list[Iteration], feeds: list) -> str:
        roles = [self.iteration_role(it) for it in iterations] + [f.role for f in feeds if f.role != UNKNOWN]
        if TRAIN in roles:
            return TRAIN
        if roles and all(r == EVAL for r in roles):
            return EVAL
        return UNKNOWN

    def _last_mode_switch(self, statement: cst.CSTNode, scope: cst.CSTNode) -> Optional[str]:
        last = None
        for call in self.m.calls_inside(statement):
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value not in ("eval", "train"):
                continue
            if self.m.scope_of(call) is not scope:
                continue
            if func.attr.value == "eval" and not call.args:
                last = EVAL
            elif func.attr.value == "train" and len(call.args) <= 1:
                ok, value = literal_value(call.args[0].value) if call.args else (True, True)
                last = EVAL if ok and value is False else TRAIN
        return last

    def _under_modulo_guard(self, call: cst.Call, loop: cst.CSTNode) -> bool:
        for ancestor in self.m.ancestors(call):
            if ancestor is loop:
                return False
            if isinstance(ancestor, cst.If) and _has_modulo(ancestor.test):
                return True
        return False

    def _fixed_cuda_target(self, call: cst.Call) -> bool:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
            return True
        device = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "device"), None)
        for _ in range(4):
            if isinstance(device, cst.Name):
                binders = self.m.bindings_of(device.value, device)
                if len(binders) != 1 or not isinstance(binders[0], cst.Assign):
                    return False
                device = binders[0].value
        if device is None:
            return False
        ok, value = literal_value(device)
        if ok:
            return isinstance(value, str) and value.startswith("cuda")
        if isinstance(device, cst.Call) and self.m.call_name(device) == "torch.device" and device.args:
            ok, value = literal_value(device.args[0].value)
            return ok and isinstance(value, str) and value.startswith("cuda")
        return False


# ---- small helpers ---------------------------------------------------------------------------------


_CPU_SWITCHES = frozenset({"cpu", "use_cpu", "no_cuda"})


def declared_globals(func: cst.CSTNode) -> frozenset[str]:
    """The names a `global` statement of `func`'s own body (not of a nested function or class) declares."""
    found: set[str] = set()
    pending = [func.body] if isinstance(func, cst.FunctionDef) else []
    while pending:
        node = pending.pop()
        if isinstance(node, cst.Global):
            found.update(item.name.value for item in node.names)
        elif not isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.BaseExpression)):
            pending.extend(node.children)
    return frozenset(found)


def _cpu_switch_on(call: cst.Call) -> bool:
    """`fit(..., cpu=True)`: a keyword that keeps the whole run on the CPU, set to a literal True."""
    return any(
        a.keyword is not None and a.keyword.value in _CPU_SWITCHES and isinstance(a.value, cst.Name) and a.value.value == "True"
        for a in call.args
    )


def _counted(m: SemanticModel, read: cst.BaseExpression) -> bool:
    arg = m.parent.get(read)
    call = m.parent.get(arg) if isinstance(arg, cst.Arg) else None
    return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len" and not m.module_bindings("len")


def _root_name(expr: cst.BaseExpression) -> Optional[str]:
    """`model` for `model.accelerator.prepare`; None for a plain name (a function, not an object's method)."""
    if not isinstance(expr, cst.Attribute):
        return None
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _statement_list(node: Optional[cst.CSTNode]) -> Optional[list[cst.CSTNode]]:
    if isinstance(node, (cst.IndentedBlock, cst.Module)):
        return list(node.body)
    return None


def _statements_after(model: SemanticModel, node: cst.CSTNode) -> tuple[cst.CSTNode, ...]:
    """The statements that follow `node`'s statement in its block."""
    statement = model.enclosing_statement(node)
    siblings = _statement_list(model.parent.get(statement)) or []
    index = next((i for i, s in enumerate(siblings) if s is statement), len(siblings))
    return tuple(siblings[index:])


def _whole(targets: list) -> Optional[str]:
    return targets[0].value if len(targets) == 1 and isinstance(targets[0], cst.Name) else None


def target_names(targets: list) -> frozenset[str]:
    """The names a list of assignment or loop targets binds."""
    return frozenset().union(*(assigned_names(target) for target in targets))


def _is_batch_part(expr: cst.BaseExpression, names: set[str]) -> bool:
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value in names


# Tensor methods whose result shares the tensor's memory, contiguous as it was: a copy of it copies that memory.
_VIEW_METHODS = frozenset({"squeeze", "unsqueeze", "view", "detach"})


def _viewed(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The tensor a chain of views is taken of: `label` for `label.squeeze(1)`."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _VIEW_METHODS:
        expr = expr.func.value
    return expr


# Tensor methods that view or convert in place of the copy: `batch["x"].float().to(device)` still copies the batch.
_SELECTION_METHODS = frozenset({"float", "half", "double", "long", "int", "bool", "contiguous", "permute", "view", "reshape",
                                "squeeze", "unsqueeze", "transpose", "flatten", "type", "to", "cuda"})  # fmt: skip


def _selection_of(expr: cst.BaseExpression) -> Optional[str]:
    """The name `expr` selects from (`x`, `batch["x"]`, `batch.image`, `inputs[0].float()`), or None when it
    builds something new (a call of a constructor or a transform)."""
    while True:
        if isinstance(expr, (cst.Subscript, cst.Attribute)):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _SELECTION_METHODS:
            expr = expr.func.value
        else:
            return expr.value if isinstance(expr, cst.Name) else None


class Assignments(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[cst.Assign] = []

    @classmethod
    def find(cls, region: cst.CSTNode) -> list[cst.Assign]:
        visitor = cls()
        region.visit(visitor)
        return visitor.found

    def visit_Assign(self, node: cst.Assign) -> None:
        self.found.append(node)


def reads_any(expr: cst.CSTNode, names: set[str]) -> bool:
    found = []

    class _Reads(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            if node.value in names:
                found.append(node)

    expr.visit(_Reads())
    return bool(found)


def _contains_move_of(model: SemanticModel, value: cst.BaseExpression, name: str) -> bool:
    """`value` is (or is a tuple holding) a CUDA move of the variable `name`."""
    parts = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
    return any(
        isinstance(p, cst.Call) and model.residency.moves_to_cuda(p) and isinstance(p.func.value, cst.Name) and p.func.value.value == name
        for p in parts
    )


def _has_modulo(expr: cst.CSTNode) -> bool:
    class _Finder(cst.CSTVisitor):
        found = False

        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
            if isinstance(node.operator, cst.Modulo):
                self.found = True

    finder = _Finder()
    expr.visit(finder)
    return finder.found


def _divided(model: SemanticModel, expr: cst.BaseExpression) -> Optional[ResolvedValue]:
    """`int(num_workers / 2)` or `num_workers // 2` of a known count (the test loader's half of the workers):
    the quotient, from where the count comes (an argparse default stays one, so a fix keeps `--workers 1` working)."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "int" and len(expr.args) == 1:
        if model.module_bindings("int") or expr.args[0].keyword or expr.args[0].star:
            return None
        expr = expr.args[0].value
        if not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, (cst.Divide, cst.FloorDivide)):
            return None
    elif not isinstance(expr, cst.BinaryOperation) or not isinstance(expr.operator, cst.FloorDivide):
        return None
    count, (known, divisor) = model.values.resolve(expr.left), literal_value(expr.right)
    if count is None or type(count.value) is not int or not known or type(divisor) is not int or divisor <= 0:
        return None
    return dataclasses.replace(count, value=count.value // divisor)


# The machine's CPU count: at least 1 wherever the process runs.
_CPU_COUNTS = frozenset({"os.cpu_count", "multiprocessing.cpu_count"})


def _lower_bound(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> Optional[int]:
    """A proven lower bound of an int expression built from literals, `min(...)`, `max(...)` and the CPU count
    (`NUM_WORKERS = os.cpu_count()`), also behind an argparse default (`--workers` defaulting to
    `min(8, max(1, os.cpu_count() - 1))`, GPU101's own fix) or a name bound once."""
    if depth > 8:
        return None
    resolved = model.values.resolve(expr)
    if resolved is not None:
        return as_int(resolved.value)
    default = model.values.argparse_default(expr)
    if default is not None:
        return _lower_bound(model, default, depth + 1)
    if isinstance(expr, cst.Name):  # `NUM_WORKERS = os.cpu_count()`, bound once
        binders = model.bindings_of(expr.value, expr)
        if len(binders) == 1 and isinstance(binders[0], cst.Assign) and len(binders[0].targets) == 1:
            return _lower_bound(model, binders[0].value, depth + 1) if isinstance(binders[0].targets[0].target, cst.Name) else None
    if isinstance(expr, cst.Call) and not expr.args and model.call_name(expr) in _CPU_COUNTS:
        return 1  # the process runs on at least one CPU
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("min", "max"):
        if model.module_bindings(expr.func.value) or any(a.keyword or a.star for a in expr.args) or not expr.args:
            return None
        bounds = [_lower_bound(model, a.value, depth + 1) for a in expr.args]
        if expr.func.value == "min":
            return None if any(b is None for b in bounds) else min(bounds)  # type: ignore[type-var]
        known = [b for b in bounds if b is not None]
        return max(known) if known else None
    return None


class _BatchNames(cst.CSTVisitor):
    """Names in a region that hold (parts of) a batch: `x, y = batch`, `inputs = batch[0]`,
    `{k: v for k, v in batch.items()}`, `[t for t in batch]`."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.changed = False

    @classmethod
    def collect(cls, region: cst.CSTNode, names: set[str]) -> set[str]:
        for _ in range(4):
            visitor = cls(names)
            region.visit(visitor)
            if not visitor.changed:
                break
        return names

    def _add(self, target: cst.BaseExpression) -> None:
        for name in target_names([target]):
            if name not in self.names:
                self.names.add(name)
                self.changed = True

    def visit_Assign(self, node: cst.Assign) -> None:
        if _is_batch_part(node.value, self.names):
            for target in node.targets:
                self._add(target.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        source = node.iter
        if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) and not source.args:
            method = source.func.attr.value
            if method in ("items", "values") and _is_batch_part(source.func.value, self.names):
                target = node.target
                if method == "items" and isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2:
                    self._add(target.elements[1].value)
                elif method == "values":
                    self._add(target)
                return
        if _is_batch_part(source, self.names):
            self._add(node.target)


class _DivisionByAccumulation(cst.CSTVisitor):
    """`loss / accum_steps`, `loss /= args.gradient_accumulation_steps`."""

    def __init__(self) -> None:
        self.found = False

    @classmethod
    def find(cls, node: cst.CSTNode) -> bool:
        visitor = cls()
        node.visit(visitor)
        return visitor.found

    def _check(self, divisor: cst.BaseExpression) -> None:
        last = divisor.attr.value if isinstance(divisor, cst.Attribute) else divisor.value if isinstance(divisor, cst.Name) else ""
        if _ACCUMULATION_NAME.search(last):
            self.found = True

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if isinstance(node.operator, cst.Divide):
            self._check(node.right)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.DivideAssign):
            self._check(node.value)


__all__ = ["EVAL", "TRAIN", "UNKNOWN", "BatchMove", "Iteration", "LoaderFlow", "LoaderInfo"]


def _only_printed(m: SemanticModel, call: cst.Call) -> bool:
    """`device = torch.device("cuda:0" if ... else "cpu")` read only by `print(device)`: a lesson shows which
    device it would use and moves nothing there (the move is left to the reader)."""
    if m.call_name(call) != "torch.device":
        return False
    parent = m.parent.get(call)
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
        return False
    reads = m.dataflow.reads.get(parent.targets[0].target.value, ())
    if not reads:
        return False  # chosen and not read here: the script's GPU choice all the same
    for read in reads:
        arg = m.parent.get(read)
        printer = m.parent.get(arg) if isinstance(arg, cst.Arg) and arg.value is read else None
        if not (isinstance(printer, cst.Call) and isinstance(printer.func, cst.Name) and printer.func.value == "print"):
            return False
    return True


# Tensors a DataLoader can take as its dataset: `dataset[i]` is row `i`, the batch a tensor of rows.
_TENSOR_BUILDERS = frozenset(
    {"torch.arange", "torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.LongTensor", "torch.FloatTensor", "torch.randperm", "torch.from_numpy"}
)


def _tensor_dataset(m: SemanticModel, loader: DataLoaderCall) -> bool:
    """The loader's dataset is a bare tensor built here and it has no collate_fn: each batch is one tensor."""
    if loader.argument("collate_fn") is not None:
        return False
    sources = m.batch_cost.dataset_sources(loader)
    return bool(sources) and all(isinstance(s, cst.Call) and m.call_name(s) in _TENSOR_BUILDERS for s in sources)  # type: ignore[union-attr]


def _indexes_a_slice_bound(m: SemanticModel, read: cst.BaseExpression) -> bool:
    """`read` is the one index of a subscript that bounds a slice (`output[:train_nodes[batch]]`): a bound must be
    a one-element tensor, so the code runs at batch size 1 only."""
    element = m.parent.get(m.parent.get(read))
    subscript = m.parent.get(element) if isinstance(element, cst.SubscriptElement) else None
    if not (isinstance(subscript, cst.Subscript) and len(subscript.slice) == 1 and subscript.value is not read):
        return False
    bound = m.parent.get(subscript)
    return isinstance(bound, cst.Slice) and subscript in (bound.lower, bound.upper)


def _first_element(m, read: cst.BaseExpression) -> bool:
    parent = m.parent.get(read)
    if not (isinstance(parent, cst.Subscript) and parent.value is read and len(parent.slice) == 1):
        return False
    index = parent.slice[0].slice
    return isinstance(index, cst.Index) and isinstance(index.value, cst.Integer) and index.value.value == "0"


def _one_tensor_items(m: SemanticModel, loader: DataLoaderCall) -> bool:
    """Each item of the loader's dataset is one tensor: a bare tensor dataset, or a Dataset class of this module whose
    `__getitem__` returns only a tensor builder's call (`return torch.as_tensor(self.data[idx])`); no collate_fn."""
    from gpulint.analysis.dataloaders import dataset_class

    if loader.argument("collate_fn") is not None:
        return False
    if _tensor_dataset(m, loader):
        return True
    info = dataset_class(m, loader)
    method = info.methods.get("__getitem__") if info is not None else None
    if method is None:
        return False
    returns = [node for node in _walk(method) if isinstance(node, cst.Return)]
    return bool(returns) and all(
        isinstance(r.value, cst.Call) and m.call_name(r.value) in _TENSOR_BUILDERS for r in returns
    )


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.children)


def _to_call(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "to"


def _this_module(model: SemanticModel, where: str) -> bool:
    """`where` (`lesson.ipynb:12`, as the project index names places) is in the module `model` reads."""
    path = where.rsplit(":", 1)[0].replace("\\", "/")
    own = model.path.replace("\\", "/")
    return path == own or own.endswith("/" + path) or path.endswith("/" + own)


def _moved_to_cpu(m, value: cst.BaseExpression) -> bool:
    """`x.cpu()`, `x.to("cpu")`, `x.to(torch.device("cpu"))`: the CPU written at the move, not a device setting
    (`x.to(device)` with `device = "cpu"` is a script's setting, changed at launch: `cpu_as_shipped.py`)."""
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
        return False
    method = value.func.attr.value
    if method == "cpu" and not value.args:
        return True
    if method != "to" or len(value.args) != 1 or value.args[0].star or value.args[0].keyword is not None:
        return False
    device = value.args[0].value
    if isinstance(device, cst.Call) and m.call_name(device) == "torch.device" and len(device.args) == 1:
        device = device.args[0].value
    return isinstance(device, cst.SimpleString) and device.evaluated_value == "cpu"


# Builtins that hand out a function's local names by string: a local nothing reads by name may still be read.
_NAMESPACE_READERS = frozenset({"locals", "vars", "eval", "exec"})


def _unread_local(m, scope: cst.CSTNode, name: str) -> bool:
    """`name` is a plain local of the function `scope` (not declared `global` or `nonlocal` there) and the
    function never reads its namespace by string (`locals()`, `vars()`, `eval`, `exec`): a value bound to it
    and never read by name is lost when the function returns."""
    if not isinstance(scope, (cst.FunctionDef, cst.Lambda)):
        return False
    for node in m.calls_inside(scope):
        if isinstance(node.func, cst.Name) and node.func.value in _NAMESPACE_READERS:
            return False
    declared = _DeclaredNames()
    scope.visit(declared)
    return name not in declared.names


class _DeclaredNames(cst.CSTVisitor):
    """The names a function declares `global` or `nonlocal` (they outlive its call)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Global(self, node: cst.Global) -> None:
        self.names.update(item.name.value for item in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.names.update(item.name.value for item in node.names)
