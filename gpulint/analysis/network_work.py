"""The work of torchvision's classification networks, from torchvision's published model tables: what the loader
(`loader_bound`) and the preview precision rules (`matmul_work`) compare a step's GPU work with."""

# Forward GFLOPs of each network on one 224x224 image.
NETWORK_GFLOPS = {
    "resnet18": 1.81, "resnet34": 3.66, "resnet50": 4.09, "resnet101": 7.80, "resnet152": 11.51,
    "resnext50_32x4d": 4.23, "wide_resnet50_2": 11.40, "mobilenet_v2": 0.30, "mobilenet_v3_small": 0.06,
    "mobilenet_v3_large": 0.22, "efficientnet_b0": 0.39, "efficientnet_b1": 0.69, "shufflenet_v2_x0_5": 0.04,
    "shufflenet_v2_x1_0": 0.14, "squeezenet1_0": 0.82, "squeezenet1_1": 0.35, "mnasnet0_5": 0.10, "mnasnet1_0": 0.31,
    "regnet_y_400mf": 0.40, "regnet_x_400mf": 0.41, "regnet_y_800mf": 0.83, "regnet_x_800mf": 0.80,
    "alexnet": 0.71, "googlenet": 1.50, "densenet121": 2.83, "vgg11": 7.61, "vgg16": 15.47, "convnext_tiny": 4.46,
    "vit_b_32": 4.41, "vit_b_16": 17.56, "vit_l_16": 61.55, "swin_t": 4.49,
}  # fmt: skip
# Transformers: their work grows with the number of patches, not with the image's area as a conv net's does.
TRANSFORMERS = frozenset({"vit_b_32", "vit_b_16", "vit_l_16", "swin_t"})
CONV_NETWORK_GFLOPS = {name: work for name, work in NETWORK_GFLOPS.items() if name not in TRANSFORMERS}
