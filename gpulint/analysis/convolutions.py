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
