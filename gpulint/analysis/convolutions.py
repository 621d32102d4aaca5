"""Which calls build convolutional networks: a fact both models share (the `ast` summaries and training set-up).

A model class or factory of another module counts through the project index: the summary counts the convolutions
each function (and each method, `Class.__init__` included) builds itself, and the index adds up those of the
project classes and functions it calls (`project.ProjectIndex.convolutions`, `project.Callee.convolutions`).
"""

from __future__ import annotations

CONVOLUTIONS = (
    "torch.nn.Conv", "torch.nn.LazyConv", "torch.nn.ConvTranspose", "torch.nn.LazyConvTranspose", "torch.nn.functional.conv",
)  # fmt: skip
# torchvision models made of convolutions (the vision transformers have one conv stem only, so not those).
CONV_NET_FACTORIES = (
    "torchvision.models.resnet", "torchvision.models.resnext", "torchvision.models.wide_resnet", "torchvision.models.vgg",
    "torchvision.models.densenet", "torchvision.models.mobilenet", "torchvision.models.efficientnet",
    "torchvision.models.regnet", "torchvision.models.convnext", "torchvision.models.alexnet",
    "torchvision.models.squeezenet", "torchvision.models.shufflenet", "torchvision.models.mnasnet",
    "torchvision.models.googlenet", "torchvision.models.inception", "torchvision.models.detection",
    "torchvision.models.segmentation",
)  # fmt: skip


# A convolutional network builds this many convolutions or more (one in a loop counts as many): one is a stem
# (a vision transformer's patch embedding), two make a toy (the CIFAR tutorial's net, LeNet).
CONV_NET = 3


def builds_convolution(qualified: str) -> bool:
    """`torch.nn.Conv2d`, `torchvision.models.resnet18`: a call that builds a convolution layer or network."""
    return qualified.startswith(CONVOLUTIONS + CONV_NET_FACTORIES)


# Library conv nets named by a string: timm's `create_model("resnet50d")`, `torch.hub.load("pytorch/vision",
# "resnet50")`, and Hugging Face checkpoints (`from_pretrained("facebook/convnext-tiny-224")`). A name counts when it
# starts with one of these family names (timm/models/*.py and transformers/models/*: the architectures made of
# convolutions; vision transformers, hybrids (`vit_base_r50_s16_384`) and MLP mixers start otherwise).
CONV_NET_NAMES = (
    "resnet", "resnext", "seresnet", "seresnext", "wide_resnet", "ecaresnet", "skresnet", "resnest", "res2net", "regnet",
    "efficientnet", "tf_efficientnet", "mobilenet", "tf_mobilenet", "convnext", "densenet", "vgg", "dpn", "dla",
    "cspresnet", "cspdarknet", "darknet", "ghostnet", "hrnet", "inception", "xception", "nfnet", "dm_nfnet",
    "nf_resnet", "rexnet", "mixnet", "mnasnet", "repvgg", "tresnet", "legacy_seresnet", "alexnet", "squeezenet",
    "shufflenet", "googlenet",
)  # fmt: skip
# transformers' model classes of the same architectures (`ConvNextForImageClassification`, `ResNetModel`).
CONV_NET_CLASSES = ("ConvNext", "ResNet", "RegNet", "EfficientNet", "MobileNetV1", "MobileNetV2")
_NAMED_BUILDERS = {"timm.create_model": 0, "timm.models.create_model": 0, "torch.hub.load": 1}


def names_conv_net(name: str) -> bool:
    """`"resnet50d"`, `"facebook/convnext-tiny-224"`, `"microsoft/resnet-50"`: a conv net's model name or checkpoint."""
    last = name.rsplit("/", 1)[-1].lower().replace("-", "_")
    return last.startswith(CONV_NET_NAMES)


def library_conv_net(qualified: str, named: str | None) -> bool:
    """A library call that builds a conv net: `qualified` is the call's name, `named` the model name or checkpoint
    string it is given (None when not known)."""
    if qualified.startswith("transformers."):
        parts = qualified.split(".")[1:]
        if any(part.startswith(CONV_NET_CLASSES) for part in parts):
            return True  # `ConvNextForImageClassification.from_pretrained(...)`, `ResNetModel(config)`
        # `AutoModelForImageClassification.from_pretrained("facebook/convnext-tiny-224")` (not its image processor)
        model_class = len(parts) == 2 and parts[1] == "from_pretrained" and ("Model" in parts[0] or "Backbone" in parts[0])
        return model_class and named is not None and names_conv_net(named)
    return qualified in _NAMED_BUILDERS and named is not None and names_conv_net(named)


def named_model(qualified: str) -> int | None:
    """Which positional argument names the model: `create_model`'s first, `hub.load`'s second, `from_pretrained`'s first."""
    if qualified in _NAMED_BUILDERS:
        return _NAMED_BUILDERS[qualified]
    return 0 if qualified.endswith(".from_pretrained") else None
