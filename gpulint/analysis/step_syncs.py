"""Where a loop's step already synchronizes the host with the GPU every iteration, and the host work between two
such points in step order.

A blocking host-to-device copy (`x.to(device)`, `x.cuda()`, `x.type(torch.cuda.FloatTensor)` without
`non_blocking=True`) ends in a stream synchronize: PyTorch's `copy_` with `non_blocking=False` waits for all the
work queued before it, then for the copy. Made unconditionally in a step (`blocking_copies`), it is a sync point
of every iteration, as a host read (`.item()`, `.cpu()`) is. Step order runs from a point to the end of the loop
body, through the loop's fetch of the next batch, and on from the top of the body (`between`).

What a wait costs is the host work it serializes. With one sync point S per iteration and a read R added, let
G1 / A be the GPU / host work queued between S and R, G2 / B the rest of the iteration: R costs
`max(A, G1) + max(B, G2) - max(A + B, max(A, G1) + G2)`, which is `min(G1 - A, B - G2)` when positive: at most B,
the host work between the read and the next sync point. Two facts follow.

- `absorbing_copy(model, sync, loop)` (GPU303): the next sync point after the read, in step order, is a blocking
  copy at the top of the step (the next batch's, reached through the loop's fetch; a copy later in the same
  iteration, of data made mid-step or a label copied again, may be the avoidable wait itself and does not count),
  and the host does only bookkeeping on the way (`trivial_between`): loop counters, a logging append or
  print, a clock read, a few light tensor ops or reads of the same step (at most `MAX_TAIL_READS` more, counting
  the earlier reads of the run GPU303 reports as one wait and asks about at its last read: each is a round trip), the next batch from a `DataLoader` with workers, from an in-memory list, or from PyG's `DataLoader` collating a few
  graphs held in memory (`_graph_loader`). B is
  microseconds, so the read costs nothing measurable: the copy would have waited for the same queue. Not when
  the way holds a forward, a backward pass or an optimizer step (the read then sits inside the step's GPU work:
  kept, conservatively), a loop, a call of a project function (its work is unknown), numpy work, or the next
  batch made in the training process (`num_workers=0`, a `torchtext` iterator, a generator): that loading is
  real host work the read serializes. GPU101 reports the loader; the read stays reported too, since either fix
  (workers, or no read) lets the loading overlap the GPU.
- `read_before_copy(model, copy, loop)` (GPU105): an unconditional host read of every iteration
  comes before the copy in step order with no step work queued between them: the copy then waits for an empty
  queue, and `non_blocking=True` has nothing to overlap it with.

Both present (a per-step read and a blocking copy of a pinned batch, only bookkeeping between): each fix alone
gains nothing, since the other point still drains the queue once per step. Both together let the host run ahead
by one step, saving one drain: the first launches of the next step, measured at 2-4 % of a GPU-bound step with
no host work to serialize and nothing on a launch- or host-bound one (bench/results/cost_facts.md, sections 1-2).
That is under the noise line, so neither is reported. When the host work between the read and the copy is real
(loading in process), GPU303 reports the read and GPU105 stays silent: fixing the copy first gains nothing, and
once the read is gone the copy is the step's only wait and GPU105 reports it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from gpulint.analysis.gpu_free_branches import means_no_gpu
from gpulint.analysis.hot_loops import wrapper_kind, wrapped_arguments
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.step_waits import queues_step_work
from gpulint.analysis.summary import CLOCKS
from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel
    from gpulint.analysis.residency import HostSync

# Reads besides the one asked about that the way to the copy may hold: each waits for a few light kernels.
MAX_TAIL_READS = 2
_HOST_BUILTINS = frozenset({
    "len", "min", "max", "abs", "round", "float", "int", "str", "bool", "isinstance", "hasattr", "getattr", "dict",
    "list", "tuple", "range", "enumerate", "zip", "print", "format", "repr", "divmod", "sum",
})  # fmt: skip
_ITERATING_BUILTINS = frozenset({"sum", "min", "max", "list", "tuple", "enumerate", "zip"})
# (not `update`: `metrics.update(pred)` may be a confusion matrix over the batch; a meter's or a bar's is logging)
_HOST_METHODS = frozenset({
    "append", "extend", "insert", "values", "items", "keys", "get", "format", "copy", "setdefault", "join", "pop", "clear",
})  # fmt: skip
_HOST_LIBRARIES = ("math.", "random.", "time.", "datetime.", "os.path.")
_ARRAY_LIBRARIES = ("numpy.", "pandas.", "scipy.", "sklearn.", "cv2.", "PIL.", "matplotlib.", "torchvision.")
# Conversions of a value already read (`loss.detach().cpu().item()`: the `.cpu()` is the read, the rest is host work
# on one number); on a GPU tensor each of these is a read of its own, counted as one.
_CONVERSIONS = frozenset({"item", "numpy", "tolist", "detach", "cpu", "float", "double", "long", "int"})
# Receivers whose methods print or log (`logger.info(...)`, `pbar.set_postfix(...)`, `writer.add_scalar(...)`).
_LOGGING = re.compile(r"(^|[._])(sys\.std(out|err)|tqdm|p?bar|progress\w*|log\w*|console|writer|meter\w*)$", re.IGNORECASE)
_TORCH_HEAVY = ("torch.nn.", "torch.optim.", "torch.distributed.", "torch.autograd.", "torch.save", "torch.load")
# Statements and expressions that repeat what they hold, or run it only on a branch.
_REPEATING = (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_BRANCHES = (cst.If, cst.Else, cst.ExceptHandler, cst.IfExp, cst.BooleanOperation, cst.Lambda, cst.FunctionDef) + _REPEATING
# PyG's loader of whole graphs: each batch collates the graphs a data set holds (`_graph_loader`).
_PYG_LOADERS = frozenset({"torch_geometric.loader.DataLoader", "torch_geometric.data.DataLoader", "torch_geometric.loader.dataloader.DataLoader"})
# At most this many graphs collated a batch in the training process: `Batch.from_data_list` concatenates each
# attribute once (a `torch.cat` of the graphs' tensors, increments of `edge_index`), tens to hundreds of
# microseconds for a few hundred molecule- or protein-size graphs of the TU/ZINC kind.
MAX_COLLATED_GRAPHS = 256
# What an in-memory list is built by: iterating it takes the host nothing.
_LIST_BUILDERS = frozenset({"list", "sorted", "range", "tuple"})


def blocking_copies(model: SemanticModel, loop: Loop) -> list[cst.Call]:
    """The copies of a host tensor to CUDA without `non_blocking=True` that `loop`'s body makes every iteration
    (at its own level, in source order): each waits for everything queued before it."""
    memo = model.memo(f"blocking copies of loop {id(loop)}")
    if loop not in memo:
        memo[loop] = [
            call for call in model.calls_inside(loop.body)
            if _blocking_copy(model, call) and every_iteration(model, call, loop, comprehensions=True)
        ]  # fmt: skip
    return memo[loop]  # type: ignore[return-value]


def _blocking_copy(model: SemanticModel, call: cst.Call) -> bool:
    residency = model.residency
    if not residency.moves_to_cuda(call):
        return False
    if any(arg.keyword is not None and arg.keyword.value in ("non_blocking", "async") for arg in call.args):
        return False  # (even a literal False: leave what the code chose to be read as it says)
    if any(arg.star for arg in call.args):
        return False
    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
    return receiver is not None and not residency.is_module(receiver) and not residency.is_gpu(receiver)


def every_iteration(model: SemanticModel, node: cst.CSTNode, loop: Loop, comprehensions: bool = False) -> bool:
    """`node` runs in every iteration of `loop`: no branch, handler, inner loop or function between them but
    `with` blocks, `try` bodies and the bodies of tests that hold whenever the run has a GPU (and, with
    `comprehensions`, a comprehension: `[t.to(device) for t in batch]` copies each tensor of the batch)."""
    child = node
    for ancestor in model.ancestors(node):
        if ancestor is loop:
            return child is loop.body
        if comprehensions and isinstance(ancestor, (cst.ListComp, cst.GeneratorExp, cst.DictComp, cst.SetComp)):
            child = ancestor
            continue
        if isinstance(ancestor, cst.If):
            in_test = child is ancestor.test  # the test itself runs whenever the `if` does
            if not in_test and not (child is ancestor.body and _holds_on_gpu(model, ancestor.test)):
                return False
        elif isinstance(ancestor, _BRANCHES):
            return False
        child = ancestor
    return False


def _holds_on_gpu(model: SemanticModel, test: cst.BaseExpression) -> bool:
    return "is_available" in model.code(test) or means_no_gpu(model, test, when=False)


def between(model: SemanticModel, start: cst.CSTNode, stop: cst.CSTNode, loop: Loop) -> tuple[list[cst.Call], bool]:
    """The calls of `loop`'s body that run after `start` and before `stop` in step order, and whether the way
    wraps around to the next iteration (through the loop's fetch of the next batch). A call runs once its
    arguments have: `losses.append(loss.item())` after the read, `torch.tensor(xs)` before `.to(device)`."""
    calls = [c for c in model.calls_inside(loop.body) if c is not start and c is not stop]
    wraps = not _runs_after(model, stop, start)
    if not wraps:
        return [c for c in calls if _runs_after(model, c, start) and _runs_after(model, stop, c)], False
    return [c for c in calls if _runs_after(model, c, start) or _runs_after(model, stop, c)], True


def _runs_after(model: SemanticModel, later: cst.CSTNode, node: cst.CSTNode) -> bool:
    """`later` runs once `node` has, in one pass over the body: it holds `node` (a call runs after its
    arguments), or it starts after `node` ends."""
    if later is node or model.is_inside(later, node):
        return False
    if model.is_inside(node, later):
        return True
    flow = model.dataflow
    return flow.order[later] >= flow.end[node]


def trivial_between(model: SemanticModel, start: cst.CSTNode, stop: cst.CSTNode, loop: Loop) -> Optional[list[cst.Call]]:
    """The reads on the way from `start` to `stop` in step order (see `between`) when the host does only
    bookkeeping there; None when it does more (module docstring)."""
    calls, wraps = between(model, start, stop, loop)
    if wraps and not fetch_is_light(model, loop):
        return None
    residency = model.residency
    reads = {id(s.node): s for s in residency.host_syncs}
    found = []
    for call in calls:
        if residency.rate_limit_guard(call, loop) is not None:
            continue  # every N steps, or on an error path: not the way of a usual step
        if id(call) in reads:
            if reads[id(call)].via is not None:
                return None  # a helper that waits: it may wait several times, with work between
            found.append(call)
            continue
        if not _bookkeeping(model, call):
            return None
    for nested in model.loops_inside(loop.body):
        if nested is loop or residency.rate_limit_guard(nested, loop) is not None:
            continue
        if _on_the_way(model, nested, start, stop, wraps):
            return None  # per-item host work (or a kernel per item)
    for comprehension in _comprehensions(model, loop):
        if _on_the_way(model, comprehension, start, stop, wraps):
            return None
    return found


def _on_the_way(model: SemanticModel, node: cst.CSTNode, start: cst.CSTNode, stop: cst.CSTNode, wraps: bool) -> bool:
    if model.is_inside(start, node) or model.is_inside(stop, node):
        return False
    after, before = _runs_after(model, node, start), _runs_after(model, stop, node)
    return (after or before) if wraps else (after and before)


def _comprehensions(model: SemanticModel, loop: Loop) -> Iterator[cst.CSTNode]:
    memo = model.memo("comprehensions")
    if model.module not in memo:
        kinds = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
        memo[model.module] = [n for n in model.dataflow.order if isinstance(n, kinds)]  # type: ignore[assignment]
    return (n for n in memo[model.module] if model.is_inside(n, loop.body))  # type: ignore[union-attr]


def _bookkeeping(model: SemanticModel, call: cst.Call) -> bool:
    """`call` costs the host microseconds: host builtins and methods on host values, logging, clock reads, a
    light tensor op or a small tensor built from Python values (a kernel launch or two)."""
    if queues_step_work(model, call):
        return False
    residency = model.residency
    name = model.call_name(call) or ""
    gpu_args = any(not a.star and residency.is_gpu(a.value) for a in call.args)
    if name in CLOCKS or name.startswith("torch.cuda."):
        return True
    if name.startswith(_HOST_LIBRARIES):
        return not gpu_args
    if name.startswith(_ARRAY_LIBRARIES):
        return False  # `np.append(all_preds, preds)`, `np.concatenate(...)`: work in proportion to the data
    if name.startswith("torch."):
        return not name.startswith(_TORCH_HEAVY) or name.startswith("torch.nn.functional.")
    func = call.func
    if isinstance(func, cst.Name):
        if func.value in _HOST_BUILTINS and not model.bindings_of(func.value, call):
            return not (func.value in _ITERATING_BUILTINS and gpu_args)  # `sum(pred == y)`: a kernel per element
        return False  # a project function (or an unknown one): its work is unknown
    if isinstance(func, cst.Attribute):
        if residency.is_gpu(func.value):
            return True  # `x.float()`, `out.argmax(1)`: a kernel
        if residency.moves_to_cuda(call):
            return True  # a non-blocking copy (a blocking one is a sync point of its own)
        if func.attr.value in _HOST_METHODS or (func.attr.value in _CONVERSIONS and not call.args):
            return True
        receiver = dotted_name(func.value) or ""
        if _LOGGING.search(receiver):
            return True
    return False


def fetch_is_light(model: SemanticModel, loop: Loop) -> bool:
    """Taking the next batch costs the host microseconds: the `for` iterates a `DataLoader` with workers
    (`num_workers` > 0, known), PyG's `DataLoader` of a few graphs held in memory (`_graph_loader`), or an in-memory
    sequence (a list, a `range`). A loader without workers, one of
    unknown settings, a generator or a `while` loop's own fetch may do real work in the training process."""
    if not isinstance(loop, cst.For):
        return False
    sources = _sources(model, loop.iter)
    if len(sources) == 1 and _graph_loader(model, sources[0], 0):
        return True  # PyG's DataLoader collating a few graphs held in memory
    flow = model.loader_flow
    for info in flow.infos:
        if any(iteration.loop is loop and iteration.is_for for iteration in info.iterations):
            return flow.workers(info.loader)[0]
    for returned in flow.returned_loaders + flow.received_loaders:
        if any(iteration.loop is loop and iteration.is_for for iteration in returned.iterations):
            workers = returned.facts.get("num_workers")
            return isinstance(workers, int) and not isinstance(workers, bool) and workers > 0
    return all(_in_memory(model, source, 0) for source in _sources(model, loop.iter))


def _graph_loader(model: SemanticModel, value: cst.BaseExpression, depth: int) -> Optional[bool]:
    """Whether the PyG `DataLoader` `value` builds or names fetches lightly (None: `value` is no such loader). Its
    batch is `Batch.from_data_list` of `batch_size` graphs: one `torch.cat` per attribute, the graphs themselves
    held in memory by a data set of `torch_geometric.datasets` (`TUDataset`, `ZINC`, `PPI`: an `InMemoryDataset`,
    loaded whole; `pre_transform` ran once, at processing). Light with workers (`num_workers` > 0), or in the
    training process with at most `MAX_COLLATED_GRAPHS` graphs a batch and no per-sample `transform=` (QM9's
    `Complete()` builds each molecule's full graph on every fetch: real host work). A sampler over one large
    graph (`NeighborLoader`, `LinkNeighborLoader`) is not this loader: it samples in the training process."""
    if depth > 3:
        return None
    if isinstance(value, cst.Name):
        writes = model.dataflow.reaching_writes(value.value, value)
        if not writes:  # a parameter (`def test(loader)`): what every caller of the function passes
            passed = model.model_size._passed(value)
            found = [_graph_loader(model, p, depth + 1) for p in passed or ()]
            return None if not found or None in found else all(found)
        if len(writes) != 1 or writes[0].value is None or writes[0].is_augmented:
            return None
        return _graph_loader(model, writes[0].value, depth + 1)
    if not isinstance(value, cst.Call) or (model.call_name(value) or "") not in _PYG_LOADERS:
        return None
    arguments = {a.keyword.value: a.value for a in value.args if a.keyword is not None}
    plain = [a.value for a in value.args if a.keyword is None and not a.star]
    if any(a.star for a in value.args):
        return False
    workers = arguments.get("num_workers", plain[3] if len(plain) > 3 else None)
    if workers is not None:
        count = _count(model, workers)
        if count is None:
            return False
        if count > 0:
            return True
    batch = arguments.get("batch_size", plain[1] if len(plain) > 1 else None)
    graphs = 1 if batch is None else _count(model, batch)
    if graphs is None or not 0 < graphs <= MAX_COLLATED_GRAPHS:
        return False
    dataset = arguments.get("dataset", plain[0] if plain else None)
    return dataset is not None and _graphs_in_memory(model, dataset, 0)


def _count(model: SemanticModel, value: cst.BaseExpression) -> Optional[int]:
    """The integer `value` holds: written in the code, or an argparse option's default (`args.batch_size`)."""
    number = model.model_size._largest_integer(value)
    if number is None:
        resolved = model.values.resolve(value)
        number = resolved.value if resolved is not None and type(resolved.value) is int else None
    return number


def _plain_setting(model: SemanticModel, value: cst.BaseExpression) -> bool:
    """A literal, or a name or option whose value is one (`split`, `name`, `train=True`): not a transform."""
    if literal_value(value)[0]:
        return True
    resolved = model.values.resolve(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
    return resolved is not None and isinstance(resolved.value, (str, int, float, bool))


def _graphs_in_memory(model: SemanticModel, value: cst.BaseExpression, depth: int) -> bool:
    """`value` is a data set of `torch_geometric.datasets` built without a per-sample `transform`, or a slice,
    an index or a shuffle of one."""
    if depth > 6:
        return False
    if isinstance(value, cst.Subscript):
        return _graphs_in_memory(model, value.value, depth + 1)
    if isinstance(value, cst.Call):
        func = value.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("shuffle", "index_select", "copy") and not model.call_name(value):
            return _graphs_in_memory(model, func.value, depth + 1)
        name = model.call_name(value) or ""
        if not name.startswith("torch_geometric.datasets."):
            return False
        if any(a.star or (a.keyword is not None and a.keyword.value == "transform") for a in value.args):
            return False
        # a positional argument after the root may be the transform (`FAUST(path, True, T.Cartesian())`,
        # `ModelNet(path, '10', True, T.SamplePoints(1024))`): only literals and settings of literal value
        return all(_plain_setting(model, a.value) for a in value.args[1:] if a.keyword is None)
    if isinstance(value, cst.Name):
        writes = model.dataflow.reaching_writes(value.value, value)
        return bool(writes) and all(
            w.value is not None and not w.is_augmented and _graphs_in_memory(model, w.value, depth + 1) for w in writes
        )  # fmt: skip
    return False


def _sources(model: SemanticModel, iterable: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(iterable, cst.Call) and wrapper_kind(model, iterable) is not None:
        inner = wrapped_arguments(model, iterable)
        return [s for arg in inner for s in _sources(model, arg)] if inner else [iterable]
    return [iterable]


def _in_memory(model: SemanticModel, value: cst.BaseExpression, depth: int) -> bool:
    """A list, tuple, `range` or a slice of one: built before the loop, iterated at no cost."""
    if depth > 3:
        return False
    if isinstance(value, (cst.List, cst.Tuple, cst.ListComp)):
        return True
    if isinstance(value, cst.Subscript):
        return _in_memory(model, value.value, depth + 1)
    if isinstance(value, cst.Call):
        return isinstance(value.func, cst.Name) and value.func.value in _LIST_BUILDERS and not model.bindings_of(value.func.value, value)
    key = dotted_name(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
    if key is None:
        return False
    writes = model.dataflow.reaching_writes(key, value)
    return bool(writes) and all(w.value is not None and not w.is_augmented and _in_memory(model, w.value, depth + 1) for w in writes)


def absorbing_copy(model: SemanticModel, sync: HostSync, loop: Loop, run: int = 1) -> Optional[cst.Call]:
    """The blocking copy where the host waits anyway, right after the read in step order, with only
    bookkeeping between them (module docstring); None when the read may serialize real host work. `run`: the
    reads of the run `sync` ends (one wait, see `read_runs`), counted with the reads on the way against
    `MAX_TAIL_READS`: each is a round trip."""
    if sync.via is not None or not isinstance(loop, (cst.For, cst.While)):
        return None  # a helper may wait several times, with work between its waits
    if model.enclosing_loops(sync.node)[:1] != [loop]:
        return None
    copies = blocking_copies(model, loop)
    if not copies:
        return None
    if any(_runs_after(model, c, sync.node) for c in copies):
        return None  # a copy later in the same iteration (data made mid-step, a label copied again): it may be the avoidable wait
    copy = copies[0]  # the next batch's copy, reached through the fetch
    reads = trivial_between(model, sync.node, copy, loop)
    if reads is None or len(reads) + run - 1 > MAX_TAIL_READS:
        return None
    return copy


def read_before_copy(model: SemanticModel, copy: cst.Call, loop: Loop) -> Optional[cst.CSTNode]:
    """An unconditional host read of every iteration of `loop` that comes before `copy` in step order with no
    step work (a forward, a backward pass, an optimizer step) queued between them: the copy then waits for no
    queue, so `non_blocking=True` has nothing to overlap (module docstring)."""
    if not isinstance(loop, (cst.For, cst.While)) or not model.is_inside(copy, loop.body):
        return None
    residency = model.residency
    for sync in residency.host_syncs:
        node = sync.node
        if not model.is_inside(node, loop.body) or not every_iteration(model, node, loop):
            continue
        if residency.rate_limit_guard(node, loop) is not None:
            continue
        calls, _ = between(model, node, copy, loop)
        if not any(queues_step_work(model, call) for call in calls):
            return node
    return None
