"""Where a training script's float32 work runs: in cuDNN's convolutions, which use TF32 already, or in matmuls.

`torch.set_float32_matmul_precision("high")` and `torch.backends.cuda.matmul.allow_tf32` (GPU902) govern cuBLAS
matrix multiplications only: `nn.Linear`, attention, `@`, `torch.matmul`. cuDNN's convolutions follow another
switch, `torch.backends.cudnn.allow_tf32`, which is True by default (torch/backends/cudnn/__init__.py, since torch
1.7): a convolutional network's convolutions already run in TF32 on Ampere and newer GPUs, and the matmul setting
reaches only its head, a classifier or projection on pooled features (ResNet-18's 512x10 layer: 10 kFLOP an image
against 1.8 GFLOP of convolutions at 224x224; a 512-512-128 projection head: 0.6 MFLOP). On the H200 TF32 and bf16
pay off 7-13x on large float32 matmuls and 2x at n = 1024 (bench/results/cost_facts.md, section 5), so the head's
matmuls are a small share of a small share.

`convolutions_only(model)`: the module trains a convolutional network (`conv_net`) and shows no matmul work beside
it (`matmul_evidence`): no attention or transformer named anywhere (a call, an import, an attribute, a model named
by a string), no `@`/`torch.matmul`/`einsum` written, no `nn.Linear` of more than `LARGE_LINEAR` weights. A conv
net is one the module builds from `convolutions.CONV_NET` convolutions or more (one is a vision transformer's patch
embedding, two a toy), a torchvision or library conv net (`convolutions.CONV_NET_FACTORIES`, `library_conv_net`), or
a project class or factory that builds one (`Callee.convolutions`). Unknown stays unknown: a module that builds no
conv net it can see keeps the finding. (Not read: a project class of another module that multiplies without naming
attention or a transformer; a cuDNN LSTM/GRU, whose head may be a vocabulary-sized decoder.)

Where faster kernels shorten nothing (GPU901 bf16, GPU902 TF32, GPU903 the cuDNN autotuner), measured on the H200
(bench/results/cost_facts.md, section 1): `launch_bound_training`, every model launch-bound (`model_size`: at most
300k parameters on MNIST/CIFAR-size images, or a forward that multiplies nothing) or every innermost training loop
launch-bound; and `small_network_steps`, a torchvision ImageNet network of known work on MNIST/CIFAR-size images at
a batch whose training pass is at most `SMALL_PASS_FLOPS` (host-bound: a 100 GFLOP CIFAR step keeps the GPU 52 %
busy).
"""

from __future__ import annotations

import re
import weakref
from typing import TYPE_CHECKING

import libcst as cst
import libcst.matchers as matchers

from gpulint.analysis.convolutions import CONV_NET, CONV_NET_FACTORIES, CONVOLUTIONS, library_conv_net, named_model
from gpulint.analysis.network_work import CONV_NETWORK_GFLOPS
from gpulint.analysis.value_resolution import as_int, literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# A `nn.Linear` with more weights than this (2048 x 2048) does matmul work that TF32 speeds visibly beside a conv
# net: a VGG-style classifier on flattened feature maps, an MLP trained next to the conv net.
LARGE_LINEAR = 2048 * 2048
# Words (of identifiers split at `_`, `.` and case changes) that name attention or transformer work: matmuls.
_MATMUL_WORDS = frozenset({
    "attention", "attn", "transformer", "transformers", "vit", "swin", "deit", "beit", "bert", "roberta", "gpt",
    "llama", "mistral", "t5", "perceiver", "mixer", "multiheadattention", "mha", "matmul", "bmm", "einsum", "baddbmm",
    "addmm",
})  # fmt: skip
# `torch.nn.functional.linear`, `torch.matmul`: calls that multiply; `nn.Linear` is read by its size instead.
_MATMUL_CALL_TAILS = frozenset({"matmul", "mm", "bmm", "einsum", "baddbmm", "addmm", "linear", "bilinear"})
_COMPREHENSIONS = (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)


_FACTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> {fact: value}: GPU901-903 ask the same


def _memo(function):
    """`function(model)` computed once per model (the three rules ask the same facts of a module)."""

    def cached(model: SemanticModel):
        facts = _FACTS.setdefault(model, {})
        if function.__name__ not in facts:
            facts[function.__name__] = function(model)
        return facts[function.__name__]

    cached.__name__, cached.__doc__ = function.__name__, function.__doc__
    return cached


# A product written between two operands (`a @ b`, `x @= w`), not a decorator at the start of a line: a cheap test
# of the source before the tree is searched.
_WRITTEN_PRODUCT = re.compile(r"[\w)\]][ \t]*@=?[ \t]*[\w(\[]")


def _words(name: str) -> set[str]:
    """`MaskedVisionTransformerTorchvision` -> {"masked", "vision", "transformer", "torchvision"}; `vit_b_32` ->
    {"vit", "b", "32"}."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    return {w.lower() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w}


@_memo
def conv_net(model: SemanticModel) -> bool:
    """The module builds a convolutional network: `CONV_NET` or more `torch.nn.Conv*` layers (one built in a loop or
    comprehension counts as many), a torchvision conv net, a library conv net named by a string, or a project class
    or factory that builds one."""
    local = 0
    for call in model.calls:
        name = model.call_name(call) or ""
        if name.startswith(CONV_NET_FACTORIES):
            return True
        if name.startswith(CONVOLUTIONS):
            repeated = model.enclosing_loops(call) or any(isinstance(a, _COMPREHENSIONS) for a in model.ancestors(call))
            local += CONV_NET if repeated else 1
            continue
        callee = model.callee(call)
        if callee is not None and callee.convolutions:
            return True
        if _named_library_model(model, call) is True:
            return True
    return local >= CONV_NET


def _named_library_model(model: SemanticModel, call: cst.Call) -> bool | None:
    """True for a library conv net named by a string (`timm.create_model("resnet50")`), False for another model
    named so (`create_model("vit_base_patch16_224")`, a name not known here), None for a call that names none."""
    qualified = model.call_name(call) or ""
    position = named_model(qualified)
    if position is None:
        return None
    positional = [a for a in call.args if a.keyword is None and not a.star]
    given = positional[position].value if len(positional) > position else None
    if given is None:
        return False
    resolved = model.values.resolve(given)
    named = resolved.value if resolved is not None and isinstance(resolved.value, str) else None
    return library_conv_net(qualified, named)


@_memo
def matmul_evidence(model: SemanticModel) -> bool:
    """The module shows matmul work a conv net's head does not explain: attention or a transformer named (a call, an
    import, an attribute, a class of its own), a library model named by a string that is no conv net, a product
    written (`@`, `torch.matmul`, `einsum`, `F.linear`), or an `nn.Linear` of more than `LARGE_LINEAR` weights."""
    product = matchers.BinaryOperation(operator=matchers.MatrixMultiply())
    product |= matchers.AugAssign(operator=matchers.MatrixMultiplyAssign())
    if _WRITTEN_PRODUCT.search(model.source) and matchers.findall(model.module, product):
        return True
    names = [q for q in model.imports.bindings.values()] + list(model.classes)
    names += [a.attr.value for a in model.attributes]
    if any(_words(name) & _MATMUL_WORDS for name in names):
        return True
    for call in model.calls:
        name = model.call_name(call) or ""
        if name == "torch.nn.Linear":
            if _large_linear(call):
                return True
            continue
        if name.rsplit(".", 1)[-1] in _MATMUL_CALL_TAILS or _words(name) & _MATMUL_WORDS:
            return True
        if isinstance(call.func, cst.Name) and _words(call.func.value) & _MATMUL_WORDS:
            return True
        if _named_library_model(model, call) is False:
            return True
    return False


def _large_linear(call: cst.Call) -> bool:
    sizes = []
    for position, keyword in ((0, "in_features"), (1, "out_features")):
        arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
        if arg is None:
            positional = [a for a in call.args if a.keyword is None and not a.star]
            arg = positional[position] if len(positional) > position else None
        ok, value = literal_value(arg.value) if arg is not None else (False, None)
        sizes.append(as_int(value) if ok else None)
    return None not in sizes and sizes[0] * sizes[1] > LARGE_LINEAR  # type: ignore[operator]


@_memo
def convolutions_only(model: SemanticModel) -> bool:
    """The module trains a conv net and shows no matmul work beside it: its float32 work is cuDNN's convolutions,
    in TF32 already by default (module docstring)."""
    return conv_net(model) and not matmul_evidence(model)


@_memo
def launch_bound_training(model: SemanticModel) -> bool:
    """Every model the script moves to CUDA is launch-bound (`model_size.launch_bound_model`: at most
    `LAUNCH_BOUND_PARAMETERS` on MNIST/CIFAR-size images, or a forward that multiplies nothing), or every innermost
    training loop is (`model_size.launch_bound_loop`): its kernels run 2-5 µs, less than the host takes to launch
    each (bench/results/cost_facts.md, section 1), so TF32, bf16 or a faster convolution algorithm shorten nothing."""
    from gpulint.analysis.hot_loops import is_hot

    sizes = model.model_size
    moved = model.training_setup.moved_models
    if moved and all(sizes.launch_bound_model(module) for module in moved):
        return True
    hot = [loop for loop in model.loops if is_hot(model, loop)]
    steps = [loop for loop in hot if not any(inner is not loop and model.is_inside(inner, loop) for inner in hot)]
    return bool(steps) and all(sizes.launch_bound_loop(loop) for loop in steps)


# ---- a torchvision ImageNet network on MNIST/CIFAR-size images ----------------------------------------------------

# At most this many FLOPs a step (forward and backward, 3x the forward) for each pass of a batch through the network:
# the cost_facts.md CNN of 3.5M parameters on CIFAR at batch 128 does 100 GFLOP a step and keeps the H200 52 % busy
# (2.07 ms of kernels in a 3.74 ms step, section 1): host-bound, so faster kernels do not shorten it. Half of that
# leaves room for a step that runs the network on two views of the batch (contrastive self-supervised learning).
SMALL_PASS_FLOPS = 50_000_000_000
# The side of MNIST/CIFAR/SVHN images (`model_size.loads_small_images`), unless the module resizes them.
SMALL_IMAGE_SIDE = 32
_SIZE_CALLS = ("Resize", "RandomResizedCrop", "CenterCrop", "RandomCrop", "FiveCrop", "TenCrop")
# Calls whose size arguments size images: transforms (`Resize`, `RandomResizedCrop`, `SimCLRTransform(input_size=32)`)
# and resampling (`F.interpolate(x, size=224)`, `nn.Upsample`).
_RESIZING = re.compile(r"transform|crop|resize|interpolate|upsample|scale", re.IGNORECASE)
_SIZE_KEYWORDS = frozenset(
    {"size", "input_size", "image_size", "img_size", "crop_size", "resolution", "global_crop_size"}
)


@_memo
def small_image_network_pass(model: SemanticModel) -> int | None:
    """The FLOPs of one training pass of a batch (forward and backward) through the network, where the module trains
    only torchvision classification networks of known work (`network_work.CONV_NETWORK_GFLOPS`) on MNIST/CIFAR-size
    images: their ImageNet figure scaled by the images' area (an image side of `SMALL_IMAGE_SIDE`, or the largest size the module
    resizes or crops to, written as a number) times the largest batch of its DataLoaders. None when any of it is
    unknown: another conv net or matmul work, a size or batch that is not a number."""
    sizes = model.model_size
    if not sizes.loads_small_images or matmul_evidence(model):
        return None
    gflops = []
    side = SMALL_IMAGE_SIDE
    for call in model.calls:
        name = model.call_name(call) or ""
        if name.startswith(CONVOLUTIONS):
            return None  # a conv layer of its own: its work is not in the table
        if name.startswith(CONV_NET_FACTORIES):
            work = CONV_NETWORK_GFLOPS.get(name.rsplit(".", 1)[-1])
            if work is None:
                return None
            gflops.append(work)
            continue
        own_function = isinstance(call.func, cst.Name) and call.func.value in model.functions
        local = model.local_class_of(name) is not None or own_function
        callee = None if local else model.callee(call)  # a class or function of this module: its calls are read here
        if (callee is not None and callee.convolutions) or _named_library_model(model, call) is not None:
            return None  # a project or library network of unknown work
        if not _RESIZING.search(name.rsplit(".", 1)[-1]):
            continue  # `NNMemoryBankModule(size=(4096, 128))`: a size, not of an image
        written = [a.value for a in call.args if a.keyword is not None and a.keyword.value in _SIZE_KEYWORDS]
        if name.rsplit(".", 1)[-1] in _SIZE_CALLS:
            written += [a.value for a in call.args[:1] if a.keyword is None and not a.star]
        for value in written:
            number = _side(sizes, value)
            if number is None:
                return None
            side = max(side, number)
    batches = [sizes.integer(loader.value("batch_size"), {}) if loader.value("batch_size") is not None else 1
               for loader in model.dataloaders]
    if not gflops or not batches or None in batches:
        return None
    per_image = max(gflops) * 1e9 * (side / 224) ** 2
    return int(3 * per_image * max(batches))  # type: ignore[type-var]


def _side(sizes, value: cst.BaseExpression) -> int | None:
    """The side an image size argument gives: `96`, `(96, 96)`; None when not written as numbers."""
    if isinstance(value, (cst.Tuple, cst.List)):
        numbers = [sizes.integer(e.value, {}) for e in value.elements]
        return None if not numbers or None in numbers else max(numbers)
    return sizes.integer(value, {})


@_memo
def small_network_steps(model: SemanticModel) -> bool:
    """A torchvision ImageNet network trained on MNIST/CIFAR-size images does at most `SMALL_PASS_FLOPS` a pass of a
    batch (`small_image_network_pass`): a host-bound step, where bf16 or a faster convolution algorithm shortens
    nothing (ResNet-18 on 32x32 images: 37 MFLOP an image, 28 GFLOP a pass of 256)."""
    work = small_image_network_pass(model)
    return work is not None and work <= SMALL_PASS_FLOPS
