"""What a per-step host read costs, from the code: the evidence GPU303 needs before it reports a read by default,
and GPU306 before it reports an op whose output size depends on GPU data (`nonzero`, `x[mask]`, `unique`: a wait of
the same kind, plus a copy of a count; asked with `kind="shape"`, the project summaries' entries of that kind).

A read (`.item()`, `.cpu()`, `if t:`) makes the host wait until the GPU has run everything queued. Measured on an
H200 (bench/results/cost_facts.md, sections 1-2), one read per step costs:

- nothing measurable in a launch-bound step (an MNIST-sized model: the GPU idles anyway);
- 2-4 % of a GPU-bound step when the host has nothing else to do (the queue drains once and refills within the
  next launches): under the noise line both judges of the fourteenth and fifteenth corpora drew;
- the host work it serializes when there is some: +1.2 ms (+20 %) on a 6 ms step with 1 ms of host work after the
  read. That host work is what makes a read worth a report.

So a default finding needs evidence of such a cost, one of:

- `repeated_in_step`: the read runs several times a step. It sits in a loop (or a comprehension) inside the step:
  per class, per block of a mask, per image of the batch (`for cl in range(n_class): ... keep.cpu()`), or in a
  project helper whose read is in a loop of its own (lightly's `random_block_mask`: a `.item()` per attempted
  block of every image), also a read of a GPU tensor the step hands the helper, once per element (a vocabulary's
  `label_to_string` reading each token; a padding mask filled per utterance with `lengths[i]` as a slice bound),
  unless the loop's loader makes images in the training process (`_loading_dominates`). Each iteration is a
  round trip: a launch or two, a drain, the next launch; hundreds a step keep the GPU idle for milliseconds.
  Not a loop of training sub-steps (`substep_loop`: each iteration runs a backward, as gradient-accumulation
  micro-steps and the tasks of a meta-batch do): a read per sub-step is one wait per forward and backward, whose
  cost is judged as one read a step is (the loading below, in that loop).
- `waits_per_step` at or above `MANY_WAITS`: the step holds that many separate waits (reads separated by GPU work,
  and the reads inside the project helpers it calls every step: seven metric helpers with two or three
  `float()` each after a batch-1 U-Net step). Each wait serializes the launches that follow it. Per backward pass
  of the iteration (`training_passes`): a GAN's four updates with one wait each are one wait per update.
- `loading_serialized`: the next batch is made in the training process with real work per sample (a `DataLoader`
  whose `num_workers` is 0 or left out, GPU101's finding: decoding and augmenting images, a transform per graph),
  and the read comes after the step's last GPU work in the iteration (after the update, or after an evaluation's
  forward): the host then makes the next batch only once the GPU has finished, so loading and compute no longer
  overlap. A read with step work after it (between the forward and `backward()`) leaves that work to overlap the
  next batch's loading: a few per cent.

None of these is evidence in a pass that runs once in the run, beside training for several epochs (a final test
pass, a feature extraction and clustering after training: `one_off_passes.one_off_pass`): whatever each of its steps
pays, the pass is a sliver of the run (both judges of the sixteenth corpus: noise). So is a test pass run once per call
of a function that trains for several epochs itself (`one_off_passes.once_per_training_call`; twentieth corpus).

Without such evidence a read is silent by default: one wait per step with the batch fed by workers, held in
memory, or made by a framework. When the loop's batches come from a source whose loading the model cannot see (a
loader handed in as a parameter with unknown settings, a framework's step), the cost is unknown; the judges of
both corpora called such reads noise in most cases (docs/precision.md, round 14), so unknown is silent too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.loader_flow import EVAL

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel
    from gpulint.analysis.residency import HostSync

# Separate waits in one step (each a drain of the queue, then launches again) that make a measurable share of it.
MANY_WAITS = 4
# On MNIST/CIFAR-size images, a step of networks known to hold fewer parameters is host-bound (cost_facts.md section
# 2: the 0.9k-0.9M CNNs and MLPs add nothing measurable when a read serializes 1 ms of host work).
SMALL_IMAGE_PARAMETERS = 1_000_000
# torchvision data sets of 28x28 (USPS: 16x16) grayscale images held in memory as arrays.
TINY_IMAGE_DATASETS = frozenset({"MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "USPS"})
_ENLARGING = frozenset({"Resize", "RandomResizedCrop"})  # transforms that may make an image larger
_REPEATING = (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
# Calls that read and decode an image file: milliseconds a sample for photographs (cost_facts.md section 3).
IMAGE_DECODERS = frozenset({
    "PIL.Image.open", "cv2.imread", "imageio.imread", "imageio.v2.imread", "imageio.v3.imread", "skimage.io.imread",
    "torchvision.io.read_image", "torchvision.io.decode_image", "torchvision.io.decode_jpeg", "torchvision.io.decode_png",
})
# The help of a wait reported without evidence of its cost (`unproven-cost = true`, GPU303 and GPU306): what the
# code does not show.
UNPROVEN_HELP = (
    "its cost is unproven: the code shows one wait a step and no host work for it to serialize, "
    "a few per cent of a GPU-bound step at most, nothing in a launch-bound one"
)


@dataclass(frozen=True)
class ReadCost:
    """Why a read costs a measurable share of the step: `kind` ("repeated", "waits", "loading") and the words
    the message gives it."""

    kind: str
    text: str


def repeated_in_step(model: SemanticModel, sync: HostSync, loop: Loop, kind: str = "sync") -> Optional[str]:
    """The read runs several times in one iteration of `loop`: in a loop or comprehension inside the step (also
    in the body of a helper the step runs), or in a loop of the project helper it calls. The words for the
    message, or None."""
    node = sync.node
    child = node
    for ancestor in model.ancestors(node):
        if ancestor is loop or isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            break
        if isinstance(ancestor, _REPEATING) and _repeats(model, ancestor, child) and model.residency.rate_limit_guard(node, loop) is None:
            if substep_loop(model, ancestor):
                child = ancestor
                continue  # each iteration is a training sub-step of its own (a task of a meta-batch): one wait per sub-step
            if _searched(model, _read_root(sync.value)):
                return None  # `y_hats[i].cpu()` of `y_hats = model.recognize(x)`: a search that read every token already
            what = "loop" if isinstance(ancestor, (cst.For, cst.While)) else "comprehension"
            return f"once per iteration of the {what} at line {model.range(ancestor).start.line} inside the step"
        child = ancestor
    if sync.via is not None and isinstance(node, cst.Call):
        callee = model.callee(node)
        if callee is not None and any(entry[0] == kind and "repeated" in entry[3:] for entry in callee.syncs):
            return f"in a loop of the helper (at {sync.via}), many times a step"
        place = _repeated_on_argument(model, node, callee, kind) if callee is not None else None
        if place is not None and not _loading_dominates(model, loop):
            return f"in a loop of the helper (at {place}), once per element of the GPU tensor the step hands it"
    return None


def substep_loop(model: SemanticModel, repeating: cst.CSTNode) -> bool:
    """Each iteration of the loop `repeating` (inside a step) trains on its own: it runs a backward pass,
    `torch.autograd.grad` or an optimizer step (`loss.backward()` per task of a meta-batch, per micro-batch of a
    gradient accumulation), itself or through a project helper that trains. A read per iteration is then one wait per
    sub-step, each behind a forward and a backward of its own: the cost of a per-step read (2-4 % of a GPU-bound step
    with nothing on the host to serialize, nothing in a launch-bound one: cost_facts.md sections 1-2), not a round
    trip per element of a tensor. Whether it costs more is for the other evidence (`waits_per_step`,
    `loading_serialized`, in that loop) to show."""
    from gpulint.analysis.hot_loops import trains

    if not isinstance(repeating, (cst.For, cst.While)):
        return False
    if trains(model, repeating.body):
        return True
    for call in model.calls_inside(repeating.body):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "manual_backward":
            return True
        if (model.call_name(call) or "") in ("torch.autograd.grad", "torch.autograd.backward"):
            return True
    return False


def _loading_dominates(model: SemanticModel, loop: Loop) -> bool:
    """Every batch the loop takes comes from a loader that makes images in the training process (no workers, a
    torchvision data set or a class of this module that decodes image files, `_makes_images`), also a whole data
    set taken as one batch on every pass (`next(iter(loader))`): each iteration spends tens of microseconds or more
    a sample there, and reads of a few microseconds each are a small share of it."""
    infos = [i for i in model.loader_flow.infos if any(it.loop is loop for it in i.iterations)]
    return bool(infos) and all(_no_workers(model, i.loader) and _makes_images(model, i.loader) for i in infos)


def _no_workers(model: SemanticModel, loader) -> bool:
    if not loader.known("num_workers"):
        return False
    arg = loader.argument("num_workers")
    if arg is None:
        return True
    resolved = model.values.setting(arg.value)
    return resolved is not None and resolved.value == 0 and not isinstance(resolved.value, bool)


def training_passes(model: SemanticModel, loop: Loop) -> int:
    """The backward passes one iteration of `loop` runs (at least 1): a GAN's discriminator and generator updates, two
    each (`d_loss.backward()` then `g_loss.backward()`), or an inner loop of gradient steps (`for _ in
    range(cfg.gradient_steps):`, counted as 2: several). Its waits then spread over that many forward and backward
    passes: four waits in an iteration of four updates are one per update, the cost of a per-step read (a few per
    cent of a GPU-bound step, cost_facts.md sections 1-2; twenty-third corpus: a voice-conversion GAN's four loss
    helpers, one `.item()` run per update, both judges noise), not four waits in one step. The branches of an
    `if` count as the one that runs more (`if scaler: scaler.scale(loss).backward() else: loss.backward()`)."""
    if not isinstance(loop, (cst.For, cst.While, cst.FunctionDef)):
        return 1
    memo = model.memo("training passes")
    if loop not in memo:
        memo[loop] = max(1, _passes(model, loop.body))
    return memo[loop]


def _passes(model: SemanticModel, node: cst.CSTNode) -> int:
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return 0  # defined here, run elsewhere
    if isinstance(node, (cst.For, cst.While)):
        inner = _passes(model, node.body)
        return 2 if inner else _passes(model, node.orelse) if node.orelse is not None else 0
    if isinstance(node, cst.If):
        return max(_passes(model, node.body), _passes(model, node.orelse) if node.orelse is not None else 0)
    if isinstance(node, cst.Else):
        return _passes(model, node.body)
    if isinstance(node, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        return sum(_passes(model, child) for child in node.body)
    if isinstance(node, (cst.With, cst.Try)):
        return _passes(model, node.body)
    if isinstance(node, cst.BaseSmallStatement) or isinstance(node, cst.SimpleStatementLine):
        return sum(
            1 for call in model.calls_inside(node)
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("backward", "manual_backward")
        )
    return 0


def _repeated_on_argument(model: SemanticModel, call: cst.Call, callee, kind: str = "sync") -> Optional[str]:
    """Where the helper reads a GPU tensor `call` hands it in a loop of its own (or of a helper it hands the
    tensor or its elements on to): `for label in labels: if label.item() == eos: ...`, one read per element."""
    residency = model.residency
    for arg, param in model.arguments_to(call, callee):
        if _decoded_by_a_method(model, arg.value):
            continue  # `nbest = model.recognize(x)`: the hypotheses a search returns, not known to be a tensor
        if _unpacked_from_a_module(model, arg.value):
            continue  # `outs_r, outs_g, _, _ = mpd(y, y_hat)`: per sub-network outputs, a few, not a tensor's rows
        for e in callee.effects.get(param, ()):
            if e[0] == kind and len(e) > 4 and "repeated" in e[4:] and residency.is_gpu(arg.value, certain=e[3]):
                return e[2]
    return None


def _unpacked_from_a_module(model: SemanticModel, value: cst.BaseExpression) -> bool:
    """`value` is one of several values a module's call returned and the code unpacked (`real_outs, fake_outs, _, _ =
    mpd(y, y_hat)`): a model that returns several values returns lists of its sub-networks' outputs (one per period
    or scale of a multi-scale discriminator, one per layer of features) as often as tensors, and a helper's loop over
    such a list runs a handful of times a step, once per sub-network, not once per row of a batch (twenty-second
    corpus: BigVGAN's `discriminator_loss` reads five and three losses so, against a step of hundreds of
    milliseconds; both judges noise)."""
    if not isinstance(value, cst.Name):
        return False
    writes = model.dataflow.reaching_writes(value.value, value)
    if len(writes) != 1 or writes[0].source is None or writes[0].unpacked_position is None:
        return False
    source = writes[0].source
    if not isinstance(source, cst.Call):
        return False
    residency = model.residency
    return residency.is_gpu_module(source.func) or residency.is_module(source.func)


# Names of a model's methods that search token by token (reading each on the host as they go): their results are done.
_SEARCHING = ("recognize", "generate", "decode", "search", "translate", "greedy", "beam", "sample")


def _searched(model: SemanticModel, value: cst.BaseExpression) -> bool:
    """`value` is what a model's method other than its forward returned (as `_decoded_by_a_method`), named as a search:
    `recognize`, `generate`, `beam_search`, `greedy_decode`; not `encode`, a forward pass by another name), on every
    branch that writes it."""
    if isinstance(value, cst.Name):  # each write that reaches it (`model.module.recognize(x)` or `model.recognize(x)`)
        writes = model.dataflow.reaching_writes(value.value, value)
        return bool(writes) and all(w.value is not None and _searched(model, w.value) for w in writes)
    if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
        return False
    owner = value.func.value
    if isinstance(owner, cst.Attribute) and owner.attr.value == "module":
        owner = owner.value  # `model.module.recognize(x)`: the model a `DataParallel` wraps
    residency = model.residency
    if value.func.attr.value in ("forward", "__call__") or not (residency.is_gpu_module(owner) or residency.is_module(owner)):
        return False
    return any(word in value.func.attr.value.lower() for word in _SEARCHING)


def _read_root(value: cst.BaseExpression) -> cst.BaseExpression:
    """The name a read's tensor is taken from: `y_hats` of `y_hats[idx]` or `y_hats[idx].detach()`."""
    while True:
        if isinstance(value, cst.Subscript):
            value = value.value
        elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and not value.args:
            value = value.func.value  # `.detach()`, `.cpu()`, `.long()`
        else:
            return value


def _decoded_by_a_method(model: SemanticModel, value: cst.BaseExpression) -> bool:
    """`value` is what a method of a model other than its forward returned (`model.recognize(...)`,
    `model.beam_search(...)`): a project's decoding API returns what its own search built (lists of hypotheses,
    read on the host as it went), and iterating it is no read per element of a GPU tensor."""
    if isinstance(value, cst.Name):
        writes = model.dataflow.reaching_writes(value.value, value)
        if len(writes) != 1 or writes[0].value is None:
            return False
        value = writes[0].value
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
        return False
    residency = model.residency
    owner = value.func.value
    return value.func.attr.value not in ("forward", "__call__") and (residency.is_gpu_module(owner) or residency.is_module(owner))


def _micro_step(model: SemanticModel, sync: HostSync, loop: Loop) -> Optional[Loop]:
    """The loop of training sub-steps inside `loop` that holds the read, if any (`substep_loop`)."""
    for ancestor in model.ancestors(sync.node):
        if ancestor is loop or isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            return None
        if isinstance(ancestor, (cst.For, cst.While)) and substep_loop(model, ancestor):
            return ancestor
    return None


def _repeats(model: SemanticModel, repeating: cst.CSTNode, child: cst.CSTNode) -> bool:
    """What `child` holds runs once per iteration of `repeating`, and it may run more than a few times: not the
    iterable of a `for` (evaluated once), nor a loop over a literal of fewer than `MANY_WAITS` items (`for split in
    ["train", "valid", "test"]`: a few waits, not one per sample)."""
    if isinstance(repeating, cst.For):
        if child is not repeating.body:
            return False
        iterable = repeating.iter
    elif isinstance(repeating, cst.While):
        return child is repeating.body
    else:
        first = repeating.for_in
        if child is first.iter:
            return False
        iterable = first.iter
    if isinstance(iterable, (cst.List, cst.Tuple, cst.Set)) and len(iterable.elements) < MANY_WAITS:
        return False
    return True


def waits_per_step(model: SemanticModel, first_reads: list[list[HostSync]]) -> int:
    """The waits of one step: `first_reads` holds, per separate wait point of the step (reads with GPU work
    between them), the reads of its statement. A helper call counts once: the reads a helper may make (up to
    eight sites, on several branches) say nothing of how many run per call. A read in a branch that runs only
    without a GPU (`if self.device == 'cpu': labels.extend(y.numpy())`, `gpu_free_branches.gpu_free_rows`) is no
    wait of a GPU run: on a CUDA tensor the branch's `.numpy()` would raise, and the run takes the other branch."""
    from gpulint.analysis.gpu_free_branches import gpu_free_rows

    spans = gpu_free_rows(model)

    def on_gpu(sync: HostSync) -> bool:
        line = model.range(sync.node).start.line
        return not any(start <= line <= end for start, end in spans)

    return sum(1 for syncs in first_reads if any(on_gpu(s) for s in syncs))


def step_wait_points(model: SemanticModel, loop: Loop, ops: list[HostSync]) -> list[list[HostSync]]:
    """The separate wait points of one iteration of `loop` for `waits_per_step`, as GPU306 (data-dependent sizes)
    sees them: the statements holding its ops `ops` (the ones it reports in that loop), and those holding a host
    read (GPU303's kind: `.item()`, `.cpu()`, `if t:`) that runs every iteration of `loop`, not under a rate-limit
    guard. Each drains the queue; a statement counts once, and so does a run of them with only light GPU work queued
    between (`read_runs.previous_read`, as GPU303 counts its reads: `zx0 = max(ix - b, 0)` then `zy0 = max(iy - b, 0)`
    and `if zx0 < zx1:` drain the queue once, the later ones wait for a scalar kernel or two)."""
    from gpulint.analysis.read_runs import previous_read

    residency = model.residency
    found: dict[int, list[HostSync]] = {}
    for sync in ops:
        found.setdefault(id(model.enclosing_statement(sync.node)), []).append(sync)
    for sync in residency.host_syncs:
        if residency.step_loop(sync.node)[0] is not loop or residency.rate_limit_guard(sync.node, loop) is not None:
            continue
        found.setdefault(id(model.enclosing_statement(sync.node)), []).append(sync)
    syncs = [sync for group in found.values() for sync in group]
    order = model.dataflow.order
    points: dict[int, list[HostSync]] = {}  # id of the first statement of a run -> the syncs of the run
    run_of: dict[int, int] = {}  # id of a statement -> the first statement of its run
    for key, group in sorted(found.items(), key=lambda item: min(order[s.node] for s in item[1])):
        first = min(group, key=lambda s: order[s.node])
        earlier = previous_read(model, first, loop, syncs)
        head = run_of.get(id(model.enclosing_statement(earlier.node))) if earlier is not None else None
        if head is None:
            head = key
        run_of[key] = head
        points.setdefault(head, []).extend(group)
    return list(points.values())


def loading_serialized(model: SemanticModel, sync: HostSync, loop: Loop) -> Optional[str]:
    """The next batch is made in the training process with real work per sample, and the read comes after the
    step's last GPU work of the iteration (module docstring). The words for the message, or None."""
    from gpulint.analysis.loader_bound import loads_in_training_process
    from gpulint.analysis.one_off_passes import one_off_pass, read_once
    from gpulint.analysis.step_waits import queues_step_work

    if not isinstance(loop, (cst.For, cst.While)) or one_off_pass(model, loop):
        return None  # (a final test pass, once in the run: its waits add up to nothing)
    flow = model.loader_flow
    # The loop iterates the loader (`for x, y in loader`), or takes one batch from its iterator every iteration
    # (`x, y = next(dl_iter)` with `dl_iter = iter(loader)` or a `cycle(loader)` generator, as gradient-accumulation
    # and step-counted loops do); not `next(iter(loader))`, a new iterator every pass.
    info = next((i for i in flow.infos if any(it.loop is loop and not it.restarts for it in i.iterations)), None)
    if info is None or not loads_in_training_process(model, info.loader) or read_once(model, info):
        return None
    if not _makes_images(model, info.loader):
        return None  # an index list, a tensor data set, a class of the project's: the work per sample is not shown
    iteration = next(it for it in info.iterations if it.loop is loop and not it.restarts)
    if flow.iteration_role(iteration) == EVAL and _tiny_images(model, info.loader):
        return None  # a forward of 28x28 images: its GPU time is a sliver of making the next batch, whatever the net
    statement = model.enclosing_statement(sync.node)
    order, end = model.dataflow.order, model.dataflow.end
    residency = model.residency
    for call in model.calls_inside(loop.body):
        if order[call] >= end[statement] and residency.rate_limit_guard(call, loop) is None and queues_step_work(model, call):
            return None  # GPU work queued after the read keeps running while the host loads the next batch
    if model.model_size.loads_small_images:
        counts = step_parameters(model, loop)
        if counts and None not in counts and sum(c for c in counts if c) < SMALL_IMAGE_PARAMETERS:
            return None  # a small network on MNIST/CIFAR-size images: a host-bound step, its GPU part next to nothing
    line = model.range(info.loader.call).start.line
    return (
        f"after the step's GPU work, while the next batch is made in the training process (`DataLoader` at line {line}, "
        "no workers, images decoded and transformed per sample): loading and compute no longer overlap"
    )


def read_cost(model: SemanticModel, sync: HostSync, loop: Loop, waits: int, kind: str = "sync") -> Optional[ReadCost]:
    """The evidence that the read `sync` (the first of its statement; `waits`: the step's wait points,
    `waits_per_step`) costs a measurable share of the step in `loop`, or None (module docstring)."""
    from gpulint.analysis.one_off_passes import once_per_training_call

    if once_per_training_call(model, loop):
        return None  # one pass in the run (or in each call of a function that trains for epochs), beside the training epochs (a feature extraction after training): its waits add up to nothing
    repeated = repeated_in_step(model, sync, loop, kind)
    if repeated is not None:
        return ReadCost("repeated", repeated)
    if waits >= MANY_WAITS * training_passes(model, loop):
        return ReadCost("waits", f"as one of {waits} waits a step, each serializing the launches after it")
    loading = loading_serialized(model, sync, loop)
    if loading is None:
        micro = _micro_step(model, sync, loop)  # the batches are taken per micro-step: the loading is that loop's
        loading = loading_serialized(model, sync, micro) if micro is not None else None
    if loading is not None:
        return ReadCost("loading", loading)
    return None


def step_parameters(model: SemanticModel, loop: Loop) -> list[Optional[int]]:
    """The parameter counts (None: unknown) of the modules `loop`'s body runs."""
    residency = model.residency
    found = []
    for call in model.calls_inside(loop):
        func = call.func
        called = func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func
        if residency.is_module(called) or residency.is_gpu_module(called):
            found.append(model.model_size.parameters(called))
    return found


def _tiny_images(model: SemanticModel, loader) -> bool:
    """Every source of the loader's dataset is a torchvision data set of 28x28 (or smaller) grayscale images held
    in memory (`TINY_IMAGE_DATASETS`), given no resizing transform: an evaluation's forward of such a batch (784
    pixels a sample) is far shorter than the host's per-sample PIL conversion and transform of the next batch."""
    dataset = loader.value("dataset")
    sources = model.batch_cost.expression_sources(dataset) if dataset is not None else None
    if not sources:
        return False
    for source in sources:
        name = model.call_name(source) if isinstance(source, cst.Call) else None
        if name is None or not name.startswith("torchvision.datasets.") or name.rsplit(".", 1)[-1] not in TINY_IMAGE_DATASETS:
            return False
        transform = next((a.value for a in source.args if a.keyword is not None and a.keyword.value == "transform"), None)
        steps = model.batch_cost.expression_sources(transform) if transform is not None else []
        if steps is None:
            return False
        for step in steps:
            calls = [step] + [c for c in model.calls_inside(step)] if isinstance(step, cst.Call) else []
            if not calls and not (isinstance(step, cst.Name) and step.value == "None"):
                return False  # a transform object the code does not show
            if any((model.call_name(c) or "").rsplit(".", 1)[-1] in _ENLARGING for c in calls):
                return False  # resized (to 224 for a pretrained net): no longer a tiny image
    return True


def _makes_images(model: SemanticModel, loader) -> bool:
    """Every source of the loader's dataset is a torchvision data set: each item becomes a PIL image (decoded
    from a file, or made from an array held in memory) and goes through the transform in the training process."""
    dataset = loader.value("dataset")
    sources = model.batch_cost.expression_sources(dataset) if dataset is not None else None
    return bool(sources) and all(_image_source(model, s, 0) for s in sources)


def _image_source(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> bool:
    """A torchvision data set (also an entry of a dict of them), a data set built from one or given a torchvision
    transform (`Subset`-like classes of the project: `DatasetSubsetWithTransform(dataset, idx, train_transform)`),
    or a data set class of this module whose `__getitem__` decodes image files (`_decodes_images`)."""
    if depth > 3:
        return False
    if isinstance(expr, cst.Name):
        writes = model.dataflow.reaching_writes(expr.value, expr)
        return len(writes) == 1 and writes[0].value is not None and _image_source(model, writes[0].value, depth + 1)
    if isinstance(expr, cst.Subscript):  # `image_datasets["train"]`: an entry of a dict of data sets
        return _image_source(model, expr.value, depth + 1)
    if isinstance(expr, cst.DictComp):  # `{x: datasets.ImageFolder(os.path.join(root, x), t[x]) for x in ["train", "val"]}`
        return _image_source(model, expr.value, depth + 1)
    if isinstance(expr, cst.Dict):
        values = [e.value for e in expr.elements if isinstance(e, cst.DictElement)]
        return bool(values) and len(values) == len(expr.elements) and all(_image_source(model, v, depth + 1) for v in values)
    if not isinstance(expr, cst.Call):
        return False
    name = model.call_name(expr) or ""
    if name.startswith(("torchvision.datasets.", "torchvision.transforms.")):
        return True
    info = model.local_class_of(model.qualified_name(expr.func)) if isinstance(expr.func, (cst.Name, cst.Attribute)) else None
    if info is not None and _decodes_images(model, info):
        return True
    return any(not a.star and _image_source(model, a.value, depth + 1) for a in expr.args)


def _decodes_images(model: SemanticModel, info) -> bool:
    """The class's `__getitem__` (its own or inherited from a class of this module), or a method of `self` it
    calls, opens and decodes an image file every item (`Image.open(path)`, `cv2.imread(path)`)."""
    getitem = model.batch_cost._method(info, "__getitem__")
    if getitem is None:
        return False
    bodies = [getitem]
    for call in model.calls_inside(getitem):
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            method = model.batch_cost._method(info, func.attr.value)
            if method is not None and method is not getitem:
                bodies.append(method)
    return any(model.call_name(call) in IMAGE_DECODERS for body in bodies for call in model.calls_inside(body))
