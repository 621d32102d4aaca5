"""Launch-bound steps (`model_size.launch_bound_loop` / `launch_bound_model`): in a module that loads torchvision's
MNIST/CIFAR-family data sets, a step that runs only a model of at most `LAUNCH_BOUND_PARAMETERS` known parameters (a
LeNet, a 784-128-10 MLP) is done in microseconds, so GPU303/GPU306 reads and GPU405's autograd graph cost nothing
worth a report (issue 13, noise class N3: thirteenth corpus 46 findings, eighth to twelfth ~60). Sizes are read through
the arguments a function's callers pass (`def train(model, loader)`) and through DataParallel/DDP wrappers; a
convolutional model counts only when a `nn.Linear` head with no adaptive or global pooling fixes its image size."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import findings

LENET = """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))
"""

# A ResNet-style net of about 25M parameters: the same shapes, real work.
BIG = """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 512, 3)
        self.conv2 = nn.Conv2d(512, 2048, 3)
        self.conv3 = nn.Conv2d(2048, 1024, 3)
        self.fc = nn.Linear(1024 * 26 * 26, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.conv3(self.conv2(self.conv1(x))), 1))
"""

MLP = """\
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.view(-1, 784))))
"""

SCRIPT = """\
import torch
import torch.nn.functional as F
import torchvision
from torch import nn
from torch.utils.data import DataLoader

{net}

def train(model, loader, optimizer):
    model.train()
    for images, labels in loader:
        images, labels = images.cuda(non_blocking=True), labels.cuda(non_blocking=True)  # no sync point: see step_syncs
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        print(loss.item())


def main():
    data = torchvision.datasets.CIFAR10("data", train=True, download=True, transform=torchvision.transforms.ToTensor())
    loader = DataLoader(data, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
    model = {model}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(10):
        train(model, loader, optimizer)


main()
"""


def gpu303(net: str, model: str = "Net().cuda()") -> list[str]:
    return read_findings(SCRIPT.format(net=net, model=model))


def read_findings(source: str) -> list[str]:
    """GPU303's findings, `READ` standing for the per-step `print(loss.item())` it reports."""
    row = source.splitlines().index("        print(loss.item())") + 1
    return [f.replace(f"{row}:15 ", "READ ") for f in findings(source, select=("GPU303",))]


def test_a_lenet_passed_to_the_training_function_is_launch_bound():
    """The 62k-parameter CIFAR LeNet: its `fc1 = nn.Linear(16 * 5 * 5, 120)` fixes a 32x32 image."""
    assert gpu303(LENET) == []


@pytest.mark.parametrize("dataset", ["ImageFolder", "ImageNet", "CocoDetection"])
def test_the_same_model_on_a_data_set_not_known_to_be_small_keeps_the_read(dataset):
    """Only torchvision's MNIST/CIFAR-family data sets say the job is teaching-scale (`loads_small_images`)."""
    source = SCRIPT.format(net=MLP, model="Net().cuda()").replace("torchvision.datasets.CIFAR10(", f"torchvision.datasets.{dataset}(")
    assert read_findings(source) == ["READ GPU303"]


def test_an_mnist_mlp_is_launch_bound():
    assert gpu303(MLP) == []  # 101,770 parameters


def test_a_one_linear_model_is_launch_bound():
    assert gpu303("", model="nn.Linear(784, 10).cuda()") == []


def test_a_model_wrapped_in_data_parallel_keeps_its_size():
    assert gpu303(LENET, model="nn.DataParallel(Net()).cuda()") == []


def test_a_25m_parameter_network_keeps_the_read():
    assert gpu303(BIG) == ["READ GPU303"]


# An autoencoder sized by a module constant written as arithmetic (`num_features = 28*28`), as teaching notebooks write it.
AUTOENCODER = """\
num_features = {pixels}

class Net(nn.Module):
    def __init__(self, hidden_units, latent_features=2):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(in_features=num_features, out_features=hidden_units), nn.ReLU(),
            nn.Linear(in_features=hidden_units, out_features=latent_features),
        )
        self.decoder = nn.Sequential(
            nn.Linear(in_features=latent_features, out_features=hidden_units), nn.ReLU(),
            nn.Linear(in_features=hidden_units, out_features=num_features),
        )

    def forward(self, x):
        return torch.sigmoid(self.decoder(self.encoder(x)))
"""


def test_a_model_sized_by_a_constant_written_as_arithmetic_is_launch_bound():
    """784-128-2-128-784: 202k parameters, `num_features = 28*28` read as 784."""
    assert gpu303(AUTOENCODER.format(pixels="28*28"), model="Net(hidden_units=128).cuda()") == []


def test_the_same_constant_making_a_large_model_keeps_the_read():
    """3x224x224 images: the first layer alone has 19M parameters."""
    assert gpu303(AUTOENCODER.format(pixels="3 * 224 * 224"), model="Net(hidden_units=128).cuda()") == ["READ GPU303"]


@pytest.mark.parametrize(
    "model",
    [
        "torchvision.models.resnet18().cuda()",  # a library model: no estimate
        "build_model(cfg).cuda()",  # a factory: unknown
        "nn.Sequential(nn.Linear(784, args.hidden), nn.Linear(args.hidden, 10)).cuda()",  # a size from the command line
        "nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda()",  # 814k parameters: real work
    ],
)
def test_a_model_of_unknown_or_real_size_keeps_the_read(model):
    assert gpu303("", model=model) == ["READ GPU303"]


def test_a_small_convolutional_model_with_global_pooling_keeps_the_read():
    """`AdaptiveAvgPool2d` frees the image size: 60k parameters can run over 1024x1024 images."""
    net = LENET.replace("nn.MaxPool2d(2, 2)", "nn.AdaptiveAvgPool2d(5)")
    assert gpu303(net) == ["READ GPU303"]


def test_a_fully_convolutional_toy_keeps_the_read():
    net = "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.conv = nn.Conv2d(3, 8, 3)\n\n    def forward(self, x):\n        return self.conv(x)\n"
    assert gpu303(net) == ["READ GPU303"]


def test_a_function_whose_callers_pass_different_models_takes_the_largest():
    source = SCRIPT.format(net=BIG + "\n\nclass Small(nn.Module):\n    pass\n", model="Net().cuda()").replace(
        "    for epoch in range(10):\n", "    train(nn.Linear(4, 2).cuda(), loader, optimizer)\n    for epoch in range(10):\n"
    )
    assert read_findings(source) == ["READ GPU303"]


def test_a_small_module_beside_a_model_handed_to_a_helper_keeps_the_read():
    """The loop calls a small head itself and hands a library backbone to a helper: the step is not launch-bound."""
    source = textwrap.dedent(
        """\
        import torch
        import torchvision
        from torch import nn

        data = torchvision.datasets.CIFAR10("data", download=True)
        backbone = torchvision.models.resnet50().cuda()
        head = nn.Linear(1000, 10).cuda()
        optimizer = torch.optim.SGD(head.parameters(), lr=0.1)

        def features(net, x):
            return net(x)

        for x, y in loader:
            loss = nn.functional.cross_entropy(head(features(backbone, x.cuda())), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(loss.item())
        """
    )
    assert [f.split()[1] for f in findings(source, select=("GPU303",))] == ["GPU303"]


def test_a_small_module_called_on_self_is_launch_bound():
    source = textwrap.dedent(
        """\
        import torch
        import torchvision
        from torch import nn

        data = torchvision.datasets.MNIST("data", download=True)

        class Trainer:
            def __init__(self):
                self.model = nn.Linear(784, 10).cuda()
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)

            def fit(self, loader):
                for x, y in loader:
                    loss = nn.functional.cross_entropy(self.model(x.cuda()), y.cuda())
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                    print(loss.item())
        """
    )
    assert findings(source, select=("GPU303",)) == []


EVAL = """\
import torch
import torch.nn.functional as F
import torchvision
from torch import nn

test_loader = torch.utils.data.DataLoader(torchvision.datasets.CIFAR10("data", train=False), batch_size=1000)

{net}

model = Net().cuda()
model.eval()
total = 0
for x, y in test_loader:
    out = model(x.cuda())
    total += F.cross_entropy(out, y.cuda())
"""


def test_gpu405_is_silent_for_a_launch_bound_model():
    assert findings(EVAL.format(net=LENET), select=("GPU405",)) == []


def test_gpu405_keeps_a_real_model():
    assert [f.split()[1] for f in findings(EVAL.format(net=BIG), select=("GPU405",))] == ["GPU405"]


DP = """\
import torch
from torch import nn

{net}

model = Net().cuda()
if distributed:
    model = nn.parallel.DistributedDataParallel(model)
else:
    model = nn.DataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_gpu401_keeps_the_data_parallel_fallback_of_a_ddp_script_even_for_a_lenet():
    """Judged right on the eleventh corpus (SageMaker's MNIST example): the script has a DDP path."""
    assert [f.split()[1] for f in findings(DP.format(net=LENET), select=("GPU401",))] == ["GPU401"]


def test_gpu401_is_silent_for_a_toy_lenet_without_a_ddp_path():
    source = DP.format(net=LENET).replace("if distributed:\n    model = nn.parallel.DistributedDataParallel(model)\nelse:\n    model", "model")
    assert findings(source, select=("GPU401",)) == []


FACTORY = """\
import torch
import torchvision
from collections import OrderedDict
from torch import nn

loader = torch.utils.data.DataLoader(torchvision.datasets.MNIST("data", download=True), batch_size=64)

INPUT_SIZE = 784
HIDDEN_SIZES = [128, {hidden}]
OUTPUT_SIZE = 10


def build_model():
    model = nn.Sequential(
        OrderedDict(
            [
                ("linear0", nn.Linear(INPUT_SIZE, HIDDEN_SIZES[0])),
                ("relu0", nn.ReLU()),
                ("linear1", nn.Linear(HIDDEN_SIZES[0], HIDDEN_SIZES[1])),
                ("linear2", nn.Linear(HIDDEN_SIZES[1], OUTPUT_SIZE)),
            ]
        )
    )
    return model


model = build_model().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(loss.item())
"""


def test_a_model_from_a_factory_of_named_layers_sized_by_a_constant_list_is_launch_bound():
    assert findings(FACTORY.format(hidden=64), select=("GPU303",)) == []  # 109k parameters


def test_the_same_factory_of_a_real_model_keeps_the_read():
    assert [f.split()[1] for f in findings(FACTORY.format(hidden=4096), select=("GPU303",))] == ["GPU303"]  # 666k


def test_a_model_that_initializes_its_own_layers_keeps_its_estimate():
    """`self.fc.weight.detach().normal_(0.0, 0.1)` in `__init__` builds nothing: the 79.5k-parameter MLP is launch-bound."""
    net = MLP.replace(
        "        self.fc2 = nn.Linear(128, 10)\n",
        "        self.fc2 = nn.Linear(128, 10)\n        self.fc1.weight.detach().normal_(0.0, 0.1)\n        self.fc1.bias.detach().zero_()\n",
    )
    assert gpu303(net) == []


def test_layer_sizes_from_a_settings_dict_constant():
    net = "SETTINGS = {'hidden': 128, 'classes': 10}\n\n" + MLP.replace("128", "SETTINGS['hidden']").replace(", 10)", ", SETTINGS['classes'])")
    assert gpu303(net) == []
    assert gpu303(net.replace("'hidden': 128", "'hidden': 4096")) == ["READ GPU303"]  # 3.3M parameters
