"""GPU104 and `analysis/step_layers.py`: a training pass whose steps run a model of many layers (each step at least
0.7 ms + 0.12 ms a layer, the host-bound steps measured on the H200 host) is long enough that restarting its workers
is under 3 % of it; the same pass over a model of a few layers stays reported. And `analysis/epoch_count.py`: a
`while step < num_steps` loop shipped with `num_steps = 0` runs no pass."""

from __future__ import annotations

import libcst as cst

from tests.conftest import gpu104_text, diagnostics, findings

ONLY = {"select": ("GPU104",)}

# 18 layers (a Sequential of 2, 8 convolutions and norms, 7 transposed ones and norms, a ModuleList built by a
# comprehension counted once): at least 0.7 + 0.12 x 18 = 2.9 ms a step, 1,875 steps: ~5.4 s; 4 workers ~125 ms: 2.3 %.
SCORE_NET = """\
import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

device = torch.device("cuda")


class ScoreNet(nn.Module):
    def __init__(self, channels=(32, 64, 128, 256)):
        super().__init__()
        self.embed = nn.Sequential(nn.Linear(1, 256), nn.SiLU())
        self.conv1 = nn.Conv2d(1, channels[0], 3)
        self.gnorm1 = nn.GroupNorm(4, channels[0])
        self.conv2 = nn.Conv2d(channels[0], channels[1], 3)
        self.gnorm2 = nn.GroupNorm(32, channels[1])
        self.conv3 = nn.Conv2d(channels[1], channels[2], 3)
        self.gnorm3 = nn.GroupNorm(32, channels[2])
        self.conv4 = nn.Conv2d(channels[2], channels[3], 3)
        self.gnorm4 = nn.GroupNorm(32, channels[3])
        self.tconv4 = nn.ConvTranspose2d(channels[3], channels[2], 3)
        self.tgnorm4 = nn.GroupNorm(32, channels[2])
        self.tconv3 = nn.ConvTranspose2d(channels[2], channels[1], 3)
        self.tgnorm3 = nn.GroupNorm(32, channels[1])
        self.tconv2 = nn.ConvTranspose2d(channels[1], channels[0], 3)
        self.tgnorm2 = nn.GroupNorm(32, channels[0])
        self.tconv1 = nn.ConvTranspose2d(channels[0], 1, 3)
        self.dense = nn.ModuleList([nn.Linear(256, c) for c in channels])

    def forward(self, x):
        return self.tconv1(self.conv1(x))


def loss_fn(net, x):
    return net(x).pow(2).mean()


model = ScoreNet().to(device)
optimizer = torch.optim.Adam(model.parameters())
dataset = datasets.MNIST(".", train=True, transform=transforms.ToTensor(), download=True)
loader = DataLoader(dataset, batch_size=32, shuffle=True, num_workers=4)
for epoch in range(50):
    for x, y in loader:
        x = x.to(device)
        loss = loss_fn(model, x)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""

SMALL_MODEL = "model = nn.Sequential(nn.Flatten(), nn.Linear(784, 10)).to(device)"


def test_a_pass_of_steps_of_a_many_layer_model_is_long():
    """1,875 steps of an 18-layer model handed to a helper that runs it: ~5.4 s a pass, the restart ~2.3 %."""
    assert findings(SCORE_NET, **ONLY) == []


def test_the_model_called_in_the_loop_counts_too():
    assert findings(SCORE_NET.replace("loss = loss_fn(model, x)", "loss = model(x).mean()"), **ONLY) == []


def test_the_same_pass_of_a_two_layer_model_stays_reported():
    """2 layers: the 1 ms floor of a training step, 1,875 steps ~1.9 s; the restart ~6.6 %."""
    [d] = diagnostics(SCORE_NET.replace("model = ScoreNet().to(device)", SMALL_MODEL), **ONLY)
    assert gpu104_text(d).endswith(
        "a pass is 1,875 steps of 32 over MNIST's train split (60,000 samples), at least ~1.9 s; restarting 4 workers costs ~125 ms a pass, ~7 % of it"
    )


def test_fewer_steps_of_the_many_layer_model_stay_reported():
    """Batch 128: 469 steps of ~2.9 ms, ~1.3 s; the restart ~9 % of it."""
    [d] = diagnostics(SCORE_NET.replace("batch_size=32", "batch_size=128"), **ONLY)
    assert gpu104_text(d).endswith(
        "a pass is 469 steps of 128 of a model of 18 layers (~2.9 ms a step at least) over MNIST's train split (60,000 samples), "
        "at least ~1.3 s; restarting 4 workers costs ~125 ms a pass, ~9 % of it"
    )


def test_layers_of_a_class_of_another_module_are_not_known():
    """`from nets import ScoreNet`: its layers are not read here, so the step stays at its 1 ms floor."""
    source = SCORE_NET.replace("class ScoreNet(nn.Module):", "class Unused(nn.Module):").replace(
        "device = torch.device", "from nets import ScoreNet\n\ndevice = torch.device"
    )
    assert findings(source, **ONLY) == ["43:10 GPU104"]


def test_an_evaluation_loader_keeps_the_short_step_floor():
    """The test split's loader feeds no training step: its pass is 313 evaluation steps (at least 0.2 ms each). It runs
    after each epoch's 469 training steps of 128 (~1.3 s), so the interval between its restarts is ~1.4 s: reported."""
    source = SCORE_NET.replace("batch_size=32", "batch_size=128").replace("for epoch in range(50):", (
        'test_loader = DataLoader(datasets.MNIST(".", train=False, transform=transforms.ToTensor()), batch_size=32, num_workers=4)\n'
        "for epoch in range(50):"
    )) + """\
    model.eval()
    with torch.no_grad():
        for x, y in test_loader:
            model(x.to(device))
"""
    train, test = diagnostics(source, **ONLY)
    assert gpu104_text(test).endswith(
        "between two passes the epoch trains over 469 steps of 128 of MNIST's train split (at least ~1.3 s) and its own "
        "pass of 313 steps (at least ~63 ms); restarting 4 workers costs ~125 ms, at most ~9 % of that (more than all of its own pass)"
    )


def test_an_evaluation_loader_after_a_long_training_pass_of_many_layers():
    """Batch 32: 1,875 training steps of the 18-layer model (~5.4 s) between two passes of the test loader: its
    restart (~125 ms) is ~2 % of that, but twice its own ~63 ms pass, which the code shows: reported."""
    source = SCORE_NET.replace("for epoch in range(50):", (
        'test_loader = DataLoader(datasets.MNIST(".", train=False, transform=transforms.ToTensor()), batch_size=32, num_workers=4)\n'
        "for epoch in range(50):"
    )) + """\
    model.eval()
    with torch.no_grad():
        for x, y in test_loader:
            model(x.to(device))
"""
    [test] = [d for d in diagnostics(source, **ONLY) if "between two passes" in gpu104_text(d)]
    assert "the epoch trains over 1,875 steps of 32 of a" not in gpu104_text(test)
    assert gpu104_text(test).endswith("and its own pass of 313 steps (at least ~63 ms); restarting 4 workers costs ~125 ms, at most ~2 % of that (more than all of its own pass)")


def test_a_model_handed_over_with_the_loader_to_another_module(tmp_path, monkeypatch):
    """`train_network(model, loss_func, loader)` of another module runs the 16-layer CNN built here: 1,875 steps of
    at least 2.6 ms, ~4.9 s a pass; restarting 5 workers (~140 ms) is ~2.9 % of it. Its test loader, iterated in the
    same epoch loop for evaluation, stays reported."""
    from tests.projects_helper import lint_written

    files = {
        "helpers.py": """\
            import torch

            def train_network(model, loss_func, train_loader, test_loader=None, epochs=20, device="cuda"):
                optimizer = torch.optim.AdamW(model.parameters())
                for epoch in range(epochs):
                    model.train()
                    for inputs, labels in train_loader:
                        loss = loss_func(model(inputs.to(device)), labels.to(device))
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                    model.eval()
                    with torch.no_grad():
                        for inputs, labels in test_loader:
                            model(inputs.to(device))
            """,
        "chapter.py": """\
            import torch.nn as nn
            import torchvision
            from torch.utils.data import DataLoader
            from torchvision import transforms
            from helpers import train_network

            import torch
            device = torch.device("cuda")
            C, filters, classes = 1, 16, 10
            train_set = torchvision.datasets.MNIST("./data", train=True, transform=transforms.ToTensor())
            test_set = torchvision.datasets.MNIST("./data", train=False, transform=transforms.ToTensor())
            train_loader = DataLoader(train_set, shuffle=True, batch_size=32, num_workers=5)
            test_loader = DataLoader(test_set, batch_size=32, num_workers=5)
            model = nn.Sequential(
                nn.Conv2d(C, filters, 3, padding=1), nn.Tanh(),
                nn.Conv2d(filters, filters, 3, padding=1), nn.Tanh(),
                nn.Conv2d(filters, filters, 3, padding=1), nn.Tanh(),
                nn.MaxPool2d(2),
                nn.Conv2d(filters, 2 * filters, 3, padding=1), nn.Tanh(),
                nn.Conv2d(2 * filters, 2 * filters, 3, padding=1), nn.Tanh(),
                nn.Conv2d(2 * filters, 2 * filters, 3, padding=1), nn.Tanh(),
                nn.MaxPool2d(2),
                nn.Flatten(),
                nn.Linear(2 * filters * 49, classes),
            )
            train_network(model, nn.CrossEntropyLoss(), train_loader, test_loader=test_loader, epochs=20, device=device)
            """,
    }
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU104" in f] == ["chapter.py:13 GPU104"]
    small = files["chapter.py"].split("            model = nn.Sequential(")[0] + (
        "            model = nn.Sequential(nn.Flatten(), nn.Linear(784, classes))\n"
        "            train_network(model, nn.CrossEntropyLoss(), train_loader, test_loader=test_loader, epochs=20, device=device)\n"
    )
    found = [f for f in lint_written(tmp_path, {**files, "chapter.py": small}, monkeypatch) if "GPU104" in f]
    assert found == ["chapter.py:12 GPU104", "chapter.py:13 GPU104"]


def test_layers_at_least_counts_what_the_code_builds():
    from gpulint.analysis.model import SemanticModel
    from gpulint.analysis.step_layers import layers_at_least, step_ms

    source = """\
import torch.nn as nn
import torchvision

class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(n, n) for _ in range(4)])
        self.norm = nn.LayerNorm(n)
        self.loss = nn.CrossEntropyLoss()
        self.skip = nn.Identity()

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(64), Block(64)])
        self.head = nn.Linear(64, 10)

net = nn.DataParallel(Net().cuda())
backbone = torchvision.models.resnet18()
other = timm.create_model("resnet18")
"""
    model = SemanticModel(cst.parse_module(source), "m.py")
    value = {t.targets[0].target.value: t.value for t in _assignments(model.module)}
    assert layers_at_least(model, value["net"]) == 5  # 2 Blocks (a Linear and a LayerNorm each, at least), the head
    assert layers_at_least(model, value["backbone"]) == 52  # torchvision's ResNet-18: 52 leaf modules
    assert layers_at_least(model, value["other"]) == 0  # another library's network: not read, no floor raised
    assert step_ms(19) == 0.7 + 0.12 * 19


def _assignments(module: cst.Module) -> list[cst.Assign]:
    return [s.body[0] for s in module.body if isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Assign)]


WRAPPED_VIT = """\
import torch
import torchvision
from torch import nn
from lightly.models.modules import MaskedVisionTransformerTorchvision
from lightly.transforms import MAETransform


class SimMIM(nn.Module):
    def __init__(self, vit):
        super().__init__()
        self.backbone = MaskedVisionTransformerTorchvision(vit=vit)
        self.decoder = nn.Linear(vit.hidden_dim, vit.patch_size**2 * 3)

    def forward(self, images):
        return self.decoder(self.backbone.encode(images=images))


vit = torchvision.models.vit_b_32()
model = SimMIM(vit).to("cuda")
dataset = torchvision.datasets.VOCDetection("datasets/pascal_voc", download=True, transform=MAETransform())
dataloader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=True, drop_last=True, num_workers=8)
optimizer = torch.optim.AdamW(model.parameters(), lr=1.5e-4)
for epoch in range(10):
    for batch in dataloader:
        images = batch[0][0].to("cuda")
        loss = model(images).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
"""


def test_a_library_network_handed_to_the_model_class_counts():
    """`SimMIM(vit)` wraps torchvision's ViT-B/32 (112 leaf modules) and a Linear: 714 steps of at least ~14 ms,
    ~10 s a pass; restarting 8 workers (~185 ms) is ~1.8 % of it."""
    assert findings(WRAPPED_VIT, **ONLY) == []


def test_the_same_network_over_fewer_steps_stays_reported():
    """Batch 64: 89 steps, ~1.3 s of steps; the VOC photos' decoding (~0.8 s at least, ~1.6 s measured) is longer,
    and the restart ~11 % of it."""
    [d] = diagnostics(WRAPPED_VIT.replace("batch_size=8", "batch_size=64"), **ONLY)
    assert (
        "a pass is 89 steps of 64 of a model of 113 layers (~14.3 ms a step at least) over VOCDetection's 2012 train set "
        "(5,717 samples), at least ~1.3 s" in gpu104_text(d)
    )


EXERCISE = """\
import torch
from torch.utils.data import DataLoader

device = torch.device("cuda")


def train(model, optimiser, dataset):
    train_loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=2)
    num_steps = 0  # 5_000
    step = 0
    while step < num_steps:
        for batch in train_loader:
            optimiser.zero_grad()
            loss = model(batch.to(device)).mean()
            loss.backward()
            optimiser.step()
            step += 1
"""


def test_a_while_loop_shipped_with_no_steps_runs_no_pass():
    assert findings(EXERCISE, **ONLY) == []


def test_a_while_loop_with_steps_to_run_stays_reported():
    assert findings(EXERCISE.replace("num_steps = 0 ", "num_steps = 5000 "), **ONLY) == ["8:20 GPU104"]
    # a counter that starts at a value not known: unknown, reported
    assert findings(EXERCISE.replace("step = 0\n", "step = start_step\n"), **ONLY) == ["8:20 GPU104"]
