"""analysis/matmul_work.py: where a training script's float32 work runs, and the preview rules GPU901-903 that read it.

- GPU902 (TF32 for matmuls) is silent on a conv net: cuDNN's convolutions use TF32 by default
  (`torch.backends.cudnn.allow_tf32`), the matmul setting reaches only the head. It stays where matmuls show.
- GPU901/GPU902/GPU903 are silent where every model is launch-bound (`model_size.launch_bound_model`: at most 300k
  parameters on MNIST/CIFAR-size images), convolutions or not.
- GPU901/GPU903 are silent for a torchvision ImageNet network trained on CIFAR-size images at a batch whose pass
  is at most 50 GFLOP (ResNet-18 on 32x32 images at batch 256: 28 GFLOP): a host-bound step.
"""

from __future__ import annotations

import re
import textwrap

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.matmul_work import conv_net, convolutions_only, matmul_evidence, small_image_network_pass
from tests.conftest import findings

PREVIEW = {"select": ("GPU9",)}


def codes(source: str) -> list[str]:
    return [re.sub(r"^\d+:\d+ ", "", f) for f in findings(source, **PREVIEW) if " GPU904" not in f]


def model_of(source: str) -> SemanticModel:
    text = textwrap.dedent(source)
    return SemanticModel(cst.parse_module(text), "train.py", text)


# ---- GPU902 and conv nets ------------------------------------------------------------------------------------

CONV_NET = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 64, 3), nn.ReLU(), nn.Conv2d(64, 128, 3), nn.ReLU(), nn.Conv2d(128, 256, 3), nn.ReLU(),
                nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            )
            self.head = {head}

        def forward(self, x):
            return self.head(self.features(x))


    if __name__ == "__main__":
        model = Net().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """


def test_a_conv_net_with_a_small_head_gets_no_gpu902():
    source = CONV_NET.format(head="nn.Linear(256, 10)")
    assert conv_net(model_of(source)) and convolutions_only(model_of(source))
    assert codes(source) == ["GPU903", "GPU901"]  # bf16 and the autotuner still speed convolutions


def test_a_conv_net_with_a_large_linear_layer_keeps_gpu902():
    source = CONV_NET.format(head="nn.Sequential(nn.Linear(256, 4096), nn.ReLU(), nn.Linear(4096, 4096))")
    assert matmul_evidence(model_of(source)) and not convolutions_only(model_of(source))
    assert codes(source) == ["GPU902", "GPU903", "GPU901"]


def test_attention_beside_the_convolutions_keeps_gpu902():
    source = CONV_NET.format(head="nn.MultiheadAttention(256, 8)")
    assert matmul_evidence(model_of(source))
    assert "GPU902" in codes(source)
    written = CONV_NET.format(head="nn.Linear(256, 10)").replace("return self.head(self.features(x))", "f = self.features(x)\n            return self.head(f @ f.T @ f)")
    assert matmul_evidence(model_of(written)) and "GPU902" in codes(written)


def test_one_or_two_convolutions_are_no_conv_net():
    # a vision transformer's patch embedding is one convolution: its work is in the matmuls after it
    source = CONV_NET.format(head="nn.Linear(256, 10)").replace("nn.Conv2d(128, 256, 3), nn.ReLU(),", "")
    assert not conv_net(model_of(source))
    assert "GPU902" in codes(source)


def test_torchvision_conv_nets_and_transformers():
    script = """\
        import torch
        import torchvision

        model = torchvision.models.{net}().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            model(x.cuda()).sum().backward()
            optimizer.step()
        """
    assert "GPU902" not in codes(script.format(net="resnet50"))
    assert "GPU902" in codes(script.format(net="vit_b_16"))
    # a ResNet built beside a vision transformer: the transformer's matmuls count
    both = script.format(net="resnet50").replace("optimizer =", "teacher = torchvision.models.vit_b_16().cuda()\n        optimizer =")
    assert "GPU902" in codes(both)


def test_a_library_model_named_by_a_string():
    script = """\
        import timm
        import torch

        model = timm.create_model("{name}").cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x in loader:
            model(x.cuda()).sum().backward()
            optimizer.step()
        """
    assert "GPU902" not in codes(script.format(name="resnet50d"))
    assert "GPU902" in codes(script.format(name="vit_base_patch16_224"))


def test_a_lightning_trainer_of_a_conv_net_gets_no_gpu902():
    source = """\
        import lightning as L
        import torch
        import torchvision


        class Model(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = torchvision.models.resnet50()

            def training_step(self, batch, batch_idx):
                return self.net(batch[0]).sum()

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)


        trainer = L.Trainer(accelerator="gpu", devices=1)
        trainer.fit(Model(), loader)
        """
    assert "GPU902" not in codes(source)
    assert "GPU902" in codes(source.replace("resnet50", "vit_b_16"))


# ---- launch-bound models --------------------------------------------------------------------------------------

MNIST_MLP = """\
    import torch
    from torch import nn
    from torchvision import datasets, transforms

    train_set = datasets.FashionMNIST("data", train=True, download=True, transform=transforms.ToTensor())
    loader = torch.utils.data.DataLoader(train_set, batch_size=64, shuffle=True)


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(784, {hidden})
            self.fc2 = nn.Linear({hidden}, 10)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x.view(-1, 784))))


    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(10):
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """


def test_a_launch_bound_mnist_mlp_gets_no_precision_findings():
    # 784-256-10: 203k parameters, more than a toy (100k), launch-bound on MNIST-size images (at most 300k)
    assert codes(MNIST_MLP.format(hidden=256)) == []


def test_a_larger_mlp_on_the_same_data_keeps_them():
    # 784-1024-10: 814k parameters
    assert codes(MNIST_MLP.format(hidden=1024)) == ["GPU902", "GPU901"]


def test_a_launch_bound_mnist_cnn_gets_no_gpu903():
    source = """\
        import torch
        from torch import nn
        from torchvision import datasets, transforms

        train_set = datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
        loader = torch.utils.data.DataLoader(train_set, batch_size=64, shuffle=True)


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
                self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
                self.fc1 = nn.Linear(320, {hidden})
                self.fc2 = nn.Linear({hidden}, 10)

            def forward(self, x):
                x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
                x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
                return self.fc2(torch.relu(self.fc1(x.view(-1, 320))))


        model = Net().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """
    assert codes(source.format(hidden=50)) == []  # 22k parameters
    assert codes(source.format(hidden=2048)) == ["GPU902", "GPU903", "GPU901"]  # 680k parameters


# ---- an ImageNet network on CIFAR-size images -------------------------------------------------------------------

CIFAR_RESNET = """\
    import torch
    import torchvision
    from torchvision import transforms

    model = torchvision.models.{net}().cuda()
    dataset = torchvision.datasets.CIFAR10("data", download=True, transform={transform})
    loader = torch.utils.data.DataLoader(dataset, batch_size={batch}, shuffle=True, num_workers=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """


def cifar(net: str = "resnet18", batch: int = 256, transform: str = "transforms.ToTensor()") -> str:
    return CIFAR_RESNET.format(net=net, batch=batch, transform=transform)


def test_resnet18_on_cifar_images_is_a_host_bound_step():
    # 1.81 GFLOP at 224x224, 37 MFLOP at 32x32; 3 x 256 images: 28 GFLOP a pass
    assert small_image_network_pass(model_of(cifar())) == 28_368_979_591
    assert codes(cifar()) == []


def test_larger_images_batches_or_networks_keep_gpu901_and_gpu903():
    resized = "transforms.Compose([transforms.Resize(224), transforms.ToTensor()])"
    assert codes(cifar(transform=resized)) == ["GPU903", "GPU901"]  # upscaled to ImageNet size: 1.8 GFLOP an image
    assert codes(cifar(batch=1024)) == ["GPU903", "GPU901"]  # 113 GFLOP a pass
    assert codes(cifar(net="resnet152")) == ["GPU903", "GPU901"]  # 11.5 GFLOP at 224x224: 180 GFLOP a pass
    assert codes(cifar(net="resnext101_32x8d")) == ["GPU903", "GPU901"]  # not in the table: unknown work


def test_a_size_or_batch_that_is_not_a_number_keeps_them():
    assert codes(cifar(transform="transforms.Compose([transforms.Resize(args.size), transforms.ToTensor()])")) == [
        "GPU903",
        "GPU901",
    ]
    assert small_image_network_pass(model_of(cifar().replace("batch_size=256", "batch_size=args.batch_size"))) is None


def test_a_conv_layer_of_the_module_beside_the_network_keeps_them():
    source = cifar().replace("optimizer =", "stem = torch.nn.Conv2d(3, 3, 1).cuda()\n    optimizer =")
    assert small_image_network_pass(model_of(source)) is None


def test_a_size_that_is_not_an_image_size_is_not_read_as_one():
    # lightly's NNCLR keeps a memory bank of 4096 embeddings: no image is resized to 4096
    bank = cifar().replace("optimizer =", "bank = NNMemoryBankModule(size=(4096, 128))\n    optimizer =")
    assert small_image_network_pass(model_of(bank)) == 28_368_979_591
    # an image resized in the forward counts
    upsampled = cifar().replace("model(x.cuda())", "model(torch.nn.functional.interpolate(x.cuda(), size=224))")
    assert codes(upsampled) == ["GPU903", "GPU901"]
