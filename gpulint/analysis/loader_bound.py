"""Loops whose pageable batch copy hides behind the loader: what GPU102 (pinning) can save there is nothing.

A pageable copy waits for the GPU's queue, then moves the batch at 8-14 GB/s in the training process
(bench/results/cost_facts.md, sections 1 and 3). Pinning saves that time only when the training process is
what the step waits for. Two shapes of code make the loader the bottleneck instead, both proved from the code:

- `loading_dominates(model, loader)`: the loader has no workers and GPU101 reports it (`loads_in_training_process`),
  and each item provably makes an image (a torchvision data set: a PIL image per item, transformed). Loading
  runs in the training process, between the steps, and a batch copy is a small part of what that process
  does per batch; pinning it there (without workers) is itself a host copy in the same thread. One finding
  per problem: GPU101 reports the loader and its help says to pin once workers load the batches. A dataset
  whose per-item work is not shown (a class of another module, one given from outside) keeps GPU102 beside
  GPU101.
- `decode_bound(model, info)`: workers decode a photograph per item (a torchvision data set of full-size
  JPEG or PNG photographs: VOC, ImageNet, COCO, Cityscapes, KITTI, Food-101, Flowers-102, Oxford-IIIT Pet,
  Stanford Cars, SBD) and every network the module builds is a light convolutional network of torchvision
  (at most `LIGHT_GFLOPS` forward per 224x224 image, torchvision's published figures: ResNet-18, MobileNet,
  EfficientNet-B0, ShuffleNet, SqueezeNet, small RegNets) with heads of `nn.Linear` and norms, fed by 1 to
  `MAX_WORKERS` workers. Per output pixel of a float32 view: the CPU resamples a crop of the photograph,
  converts it (`ToTensor`) and normalizes it, about 10 ns a pixel on one core before any colour jitter or
  blur, and decodes the photograph (~1 ms or more for 0.15 megapixels and up with libjpeg-turbo, ~20 ns for
  each pixel of a 224x224 view): at least ~3.7 ns a pixel over 8 workers. The training process spends ~1.5 ns
  a pixel on the pageable copy (12 bytes at 8 GB/s, cost_facts.md section 3) and the GPU ~0.6 ns on a step
  of 2 GFLOP per 224x224 image (~120 kFLOP a pixel with the backward, on an H200 at ~200 TFLOPS: TF32
  convolutions, PyTorch's default for cuDNN). The workers deliver each batch after the copy and the step are
  done, so the copy's time is spent waiting for the next batch anyway; pinning saves none of it. A transformer,
  a larger network (ResNet-50: 4.1 GFLOP), a network of unknown work (`timm`, a class of another module, a
  convolution of the module's own), more workers (16 would bring the CPU's share to ~1.9 ns a pixel, under the
  copy and the step), a count from a flag, and a data set whose images may be small (`ImageFolder`, a folder
  read by a class of another library: CIFAR's 32x32 PNGs decode in microseconds) keep the finding.
- `resample_bound(model, info)`: workers resample every image of a torchvision data set of known size (CIFAR,
  MNIST: held in memory, nothing to decode) to a new literal size (`Resize(224)`, `RandomResizedCrop(224)`) and
  convert it (`ToTensor()`), for a light network as above, with a known count of workers (not from a flag). A
  worker spends ~10 ns an output pixel on that (half the ~1 ms measured for a 224x224 RGB image, cost_facts.md
  section 8), so
  a batch takes the loader B x pixels x 10 ns / workers; the training process and the GPU take the pageable copy
  (bytes at 8 GB/s), ~0.6 ns a pixel of a light network's step and a launch-bound floor (`LIGHT_STEP_FLOOR_NS`,
  5 ms: a few hundred kernels of a torchvision network's forward, backward and optimizer at 10-20 µs a launch).
  Where the loader takes longer (50 CIFAR images upscaled to 224 on 2 workers: ~12.5 ms a batch against ~3.8 ms
  of copy, ~1.5 ms of GPU work and the 5 ms floor), the loop waits on the workers and the copy hides in that
  wait. More workers (4 at that batch), a smaller output, a heavier network, or no resampling keep the finding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.network_work import NETWORK_GFLOPS
from gpulint.analysis.value_resolution import as_int

if TYPE_CHECKING:
    from gpulint.analysis.dataloaders import DataLoaderCall
    from gpulint.analysis.loader_flow import LoaderInfo
    from gpulint.analysis.model import SemanticModel

# torchvision data sets whose every item opens and decodes one full-size photograph (0.15 megapixels and up:
# VOC ~500x375, ImageNet ~400x350 on average, COCO ~640x480, Cityscapes 2048x1024, KITTI 1242x375, Food-101
# up to 512 a side, Flowers-102 ~500x600, Oxford-IIIT Pet ~500x375, Stanford Cars ~700x480).
PHOTO_DATASETS = frozenset({
    "VOCDetection", "VOCSegmentation", "SBDataset", "ImageNet", "CocoDetection", "CocoCaptions", "Cityscapes",
    "Kitti", "Food101", "Flowers102", "OxfordIIITPet", "StanfordCars",
})  # fmt: skip
# At most this much forward work per 224x224 image, and at most this many workers: the workers take longer to
# make a pixel than the pageable copy and the training step take for it (module docstring).
LIGHT_GFLOPS = 2.0
MAX_WORKERS = 8
# `resample_bound`, per float32 element of a batch (a third of an RGB pixel): a worker resamples, converts and
# normalizes at ~10 ns an output pixel on one core (bench/results/cost_facts.md section 8); the pageable copy
# moves 8 bytes a ns at best (section 3); a light network's step (2 GFLOP per 224x224 image, forward and
# backward) takes ~0.6 ns a pixel of GPU time, on top of a launch-bound floor of a few hundred kernels.
RESAMPLE_NS_PER_ELEMENT = 10 / 3
COPY_BYTES_PER_NS = 8
LIGHT_STEP_NS_PER_ELEMENT = 0.6 / 3
LIGHT_STEP_FLOOR_NS = 5_000_000
_LIBRARIES = ("torchvision.models.", "timm.")
_SUBSET_CLASSES = frozenset({"torch.utils.data.Subset", "torch.utils.data.dataset.Subset"})
# Layers a projection or classification head is made of (work per feature vector, not per pixel).
_HEAD_LAYERS = frozenset({"Linear", "BatchNorm1d", "LayerNorm", "GroupNorm", "BatchNorm2d", "ParameterList", "ModuleDict"})
_FUNCTIONAL_WORK = frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose2d", "scaled_dot_product_attention",
                              "multi_head_attention_forward", "interpolate"})  # fmt: skip


def loads_in_training_process(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """GPU101 reports `loader`: no workers (`num_workers` left out or 0, not a flag that may be more) and
    items that are real work, in a loop that feeds the GPU."""
    from gpulint.analysis.dataloaders import is_unsharded_iterable_dataset, produces_cuda_batches, transformed_graph_items
    from gpulint.analysis.one_off_passes import read_once

    if not loader.known("num_workers", "dataset", "collate_fn"):
        # a graph library's own collate (set by its loader) is known work on the CPU where each item is transformed
        if not (loader.known("num_workers", "dataset") and not loader.opaque and transformed_graph_items(model, loader)):
            return False
    if produces_cuda_batches(model, loader):
        return False
    if is_unsharded_iterable_dataset(model, loader):
        return False  # every worker would replay the whole stream, or read stale copies of live state
    flow = model.loader_flow
    info = flow.info(loader)
    if flow.never_used(info):
        return False  # no batch of it is ever taken as the code ships
    if model.batch_cost.items_are_cheap(loader) or model.batch_cost.reads_a_few_batches(info):
        return False  # nothing for workers to take off the training process, or one batch only
    if read_once(model, info):
        return False  # one evaluation pass in the run, beside training: workers would save next to nothing
    if model.batch_cost.one_batch_per_pass(loader):
        return False  # the whole dataset in one batch: workers cannot split it, nor load it while the GPU works
    if flow.stays_on_cpu(info) or flow.only_inspected(info):
        return False  # a CPU lesson, or a DataLoader API lesson that only prints its batches: no GPU waits
    arg = loader.argument("num_workers")
    if arg is None:
        return True
    resolved = model.values.setting(arg.value)
    return resolved is not None and resolved.value == 0 and not isinstance(resolved.value, bool)


def loading_dominates(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """`loader` loads in the training process and each item provably makes an image there: every source of
    its dataset is a torchvision data set (each item becomes a PIL image, from an array held in memory or a
    decoded file, and goes through the transform; tens of microseconds or more a sample, against ~1.5 µs to
    copy a 3x32x32 float32 sample at 8 GB/s). GPU101 reports it, unless a pass loads faster than workers would
    start (`loading_cost.py`): the copies of such a pass (a few thousand small images) are fewer still."""
    if loader.argument("collate_fn") is not None or not loads_in_training_process(model, loader):
        return False
    dataset = loader.value("dataset")
    sources = model.batch_cost.expression_sources(dataset) if dataset is not None else None
    return bool(sources) and all(makes_images(model, s, 0) for s in sources)


def makes_images(model: SemanticModel, source: cst.BaseExpression, depth: int) -> bool:
    """A torchvision data set, or a `Subset` subclass of this module built over one (`SubsetWithTransform(dataset,
    indices, transform)`: each item is an item of that data set, a PIL image, and the subclass can only add work
    to it)."""
    if not isinstance(source, cst.Call) or depth > 3:
        return False
    name = model.call_name(source) or ""
    if name.startswith("torchvision.datasets."):
        return True
    local = model.local_class_of(name)
    if local is None or not any(base in _SUBSET_CLASSES for base in local.bases) or not source.args or source.args[0].keyword is not None:
        return False
    inner = model.batch_cost.expression_sources(source.args[0].value)
    return bool(inner) and all(makes_images(model, s, depth + 1) for s in inner)


def copies_worth_pinning(model: SemanticModel, info: LoaderInfo) -> bool:
    """Pinning the loader's batches could save a visible part of the step, as far as the code shows: not a
    handful of batches, one pass, batches of at most 512 KiB (`batch_bytes.py`), one sample a batch, DGL
    graphs the pinning thread cannot pin, a billion-parameter model's steps, a saving under 3 % of the step the
    model sizes (`copy_cost.saving_below_share`), nor a decode-bound loop."""
    from gpulint.analysis.batch_bytes import one_sample_batches
    from gpulint.analysis.copy_cost import drained_copy_cheap, saving_below_share
    from gpulint.analysis.graph_batches import graph_batches
    from gpulint.analysis.long_steps import loads_billion_parameter_model
    from gpulint.analysis.one_off_passes import read_once

    loader = info.loader
    if model.batch_cost.reads_a_few_batches(info):
        return False  # one batch or a handful (a check that breaks after a few): nothing to overlap
    if read_once(model, info):
        return False  # one evaluation pass in the run, beside training: pinning would save next to nothing
    if model.batch_cost.batches_are_small(loader):
        return False  # token ids or toy data: pinning a few kilobytes saves nothing measurable
    if one_sample_batches(model, info):
        return False  # `batch_size=1`: one sample's copy (at most a few MB) next to that sample's whole step
    if graph_batches(model, loader):
        return False  # `dgl.batch(graphs)`: the pinning thread cannot pin a DGL graph, only the labels beside it
    if loads_billion_parameter_model(model):
        return False  # steps of a billion-parameter model take hundreds of ms: pinning saves under 1 %
    if decode_bound(model, info):
        return False  # workers decode a photograph per item for a light network
    if drained_copy_cheap(model, info):
        return False  # a batch of at most 2 MiB copied after the step's own read drained the queue: bytes only
    if saving_below_share(model, info):
        return False  # the bytes' time pinning saves is under 3 % of the shortest step the model sizes
    return not resample_bound(model, info)  # a few workers resample every image to a larger size for a light network


def resample_bound(model: SemanticModel, info: LoaderInfo) -> bool:
    """A few workers resample each image of a torchvision data set of known size to a literal size (`Resize(224)` of
    32x32 CIFAR images, `ToTensor()`) for a light network, and take longer per batch than the training process
    and the GPU do (module docstring): the loop waits on the loader and the pageable copy hides in that wait."""
    from gpulint.analysis.batch_bytes import batch_bytes, resampled_elements

    loader = info.loader
    workers, resolved = model.loader_flow.workers(loader)
    count = as_int(resolved.value) if resolved is not None else None
    if not workers or count is None or count < 1 or model.loader_flow.workers_from_command_line(loader):
        return False  # no workers (GPU101's case), or a count the run may raise
    elements = resampled_elements(model, loader)
    size = batch_bytes(model, loader)
    if elements is None or size is None:
        return False
    loading_ns = elements * RESAMPLE_NS_PER_ELEMENT / count
    busy_ns = size / COPY_BYTES_PER_NS + elements * LIGHT_STEP_NS_PER_ELEMENT + LIGHT_STEP_FLOOR_NS
    return loading_ns > busy_ns and _light_networks(model)


def decode_bound(model: SemanticModel, info: LoaderInfo) -> bool:
    """Workers decode a photograph per item for a light convolutional network: the loop waits on the loader
    (module docstring)."""
    loader = info.loader
    workers, resolved = model.loader_flow.workers(loader)
    count = as_int(resolved.value) if resolved is not None else None
    if not workers or count is None or count > MAX_WORKERS:
        return False
    if loader.argument("collate_fn") is not None or loader.argument("batch_sampler") is not None:
        return False
    dataset = loader.value("dataset")
    sources = model.batch_cost.expression_sources(dataset) if dataset is not None else None
    if not sources or not all(_photo_dataset(model, s) for s in sources):
        return False
    return _light_networks(model)


def training_waits_on_loaders(model: SemanticModel) -> bool:
    """Every loader whose batches the module moves to the GPU is `decode_bound`, and there is one: the steps wait on
    the workers, so a faster GPU step (bf16, a tuned convolution algorithm) shortens nothing (GPU901, GPU903)."""
    infos = [info for info in model.loader_flow.infos if info.moves or info.placed_by]
    return bool(infos) and all(decode_bound(model, info) for info in infos)


def _head_part(name: str) -> bool:
    """`torch.nn.Linear`, a norm, an activation, pooling, a container, a loss, an initializer, a utility: what
    a head on the network's pooled features is built from, or no layer at all."""
    from gpulint.analysis.model_size import PARAMETER_FREE

    parts = name.split(".")
    short = parts[-1]
    if parts[2] in ("init", "utils", "functional", "parallel") or not short[:1].isupper():
        return parts[2] != "functional" or short not in _FUNCTIONAL_WORK
    return short in PARAMETER_FREE or short in _HEAD_LAYERS or short.endswith("Loss") or short == "Parameter"


def _photo_dataset(model: SemanticModel, source: cst.BaseExpression) -> bool:
    if not isinstance(source, cst.Call):
        return False
    name = model.call_name(source) or ""
    return name.startswith("torchvision.datasets.") and name.rsplit(".", 1)[-1] in PHOTO_DATASETS


def _light_networks(model: SemanticModel) -> bool:
    """The module builds networks from a library (torchvision, timm), each one of known forward work of at
    most `LIGHT_GFLOPS` per 224x224 image (`resnet18()`, `torchvision.models.resnet.resnet18(weights=...)`),
    and of `torch.nn` only head parts (`nn.Linear`, norms, activations: work per feature vector). Any other
    network (`timm.create_model(...)`, `torchvision.models.VisionTransformer(...)`, `get_model(name)`) or a
    layer of its own that works per pixel (`nn.Conv2d`, attention, an RNN) makes the work unknown here."""
    built = False
    for call in model.calls_inside(model.module):
        name = model.call_name(call) or ""
        if name.startswith("torch.nn."):
            if not _head_part(name):
                return False  # a convolution, attention or recurrent layer of the module's own: more work per pixel
            continue
        if not name.startswith(_LIBRARIES):
            continue
        short = name.rsplit(".", 1)[-1]
        gflops = NETWORK_GFLOPS.get(short)
        if gflops is None:
            if "_Weights" in name:
                continue  # `ResNet18_Weights.DEFAULT.transforms()`: the weights' preprocessing, no network
            return False
        if gflops > LIGHT_GFLOPS:
            return False
        built = True
    return built
