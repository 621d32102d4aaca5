"""Model size facts (`analysis/model_size.py`) and the rules that ask them: toy models and toy data (GPU901,
GPU902, GPU303), optimizers over a handful of trainable tensors (GPU904), and syncs that are the point of
the code (GPU303: timing each prediction, a first-batch branch)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from gpulint.analysis import SemanticModel
from tests.conftest import findings

ALL = {"select": ("GPU9", "GPU303")}


def toy_script(model: str, data: str = "X = torch.rand(100, 2, device='cuda')\ny = torch.rand(100, 1, device='cuda')") -> str:
    """A full-batch training script: `model` (code binding `model`), trained on `data` (code binding X and y)."""
    return textwrap.dedent(
        """\
        import torch
        from torch import nn

        {data}
        {model}
        model = model.to("cuda")
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        for epoch in range(1000):
            loss = ((model(X) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(epoch, loss.item())
        """
    ).format(model=model, data=data)


def codes(source: str) -> list[str]:
    return [f.split()[1] for f in findings(source, **ALL)]


# ---- parameter estimates ----------------------------------------------------------------------------


def estimate(source: str, name: str = "model"):
    module = cst.parse_module(textwrap.dedent(source))
    model = SemanticModel(module, "m.py")
    target = next(s for s in module.body if isinstance(s, cst.SimpleStatementLine) and model.code(s).strip().startswith(f"{name} ="))
    return model.model_size.parameters(target.body[0].value)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import torch.nn as nn\nmodel = nn.Linear(2, 10)", 30),
        ("import torch.nn as nn\nmodel = nn.Linear(2, 10, bias=False)", 30),  # an upper bound is enough
        ("import torch.nn as nn\nmodel = nn.Sequential(nn.Linear(2, 10), nn.ReLU(), nn.Linear(10, 1))", 41),
        ("import torch.nn as nn\nD, H = 2, 100\nmodel = nn.Linear(D * 3, H)", None),  # tuple unpacking: not read
        ("import torch.nn as nn\nD = 2\nH = 100\nmodel = nn.Linear(D * 3, H)", 700),
        ("import torch.nn as nn\nD = 28 * 28\nmodel = nn.Linear(D, 10)", 7850),  # a constant written as arithmetic
        ("import torch.nn as nn\nD = 28 * 28\nD = args.size * 2\nmodel = nn.Linear(D, 10)", None),  # bound twice: unknown
        ("import torch.nn as nn\nD = args.size * 2\nmodel = nn.Linear(D, 10)", None),
        ("import torch.nn as nn\nmodel = nn.Sequential(nn.Linear(1, 100), nn.ReLU() if relu else nn.Tanh(), nn.Linear(100, 1))", 301),
        ("import torch.nn as nn\nmodel = nn.Linear(2, 10) if small else nn.Linear(2, 4096)", 12288),
        ("import torch.nn as nn\nmodel = nn.Conv2d(3, 8, 3)", 224),
        ("import torch.nn as nn\nmodel = nn.Conv2d(3, 8, (3, 1), groups=1)", 80),
        ("import torch.nn as nn\nmodel = nn.Embedding(1000, 16)", 16000),
        ("import torch.nn as nn\nmodel = nn.LSTM(10, 20, num_layers=2)", 4 * 20 * (10 + 20 + 2) + 4 * 20 * (20 + 20 + 2)),
        ("import torch.nn as nn\nmodel = nn.GRU(10, 20, bidirectional=True)", 2 * 3 * 20 * (10 + 20 + 2)),
        ("import torch.nn as nn\nmodel = nn.Sequential(nn.Linear(4096, 4096))", 4096 * 4096 + 4096),
        ("import torch.nn as nn\nmodel = nn.Linear(args.features, 10)", None),
        ("import torch.nn as nn\nmodel = nn.TransformerEncoderLayer(64, 4)", None),
        ("import torchvision\nmodel = torchvision.models.resnet18()", None),
        ("from transformers import AutoModel\nmodel = AutoModel.from_pretrained('bert-base-uncased')", None),
        ("from mymodels import Net\nmodel = Net()", None),  # a class of another module: no estimate
    ],
)
def test_parameter_estimates_from_literal_layer_sizes(source, expected):
    assert estimate(source) == expected


CLASS = """\
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self, n_feature, n_hidden, n_output=1):
        super().__init__()
        self.hidden = nn.Linear(n_feature, n_hidden)
        self.out = nn.Linear(n_hidden, n_output)
        self.scale = nn.Parameter(torch.ones(n_output))
        nn.init.zeros_(self.out.bias)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x))) * self.scale
"""


def test_a_module_class_counts_its_layers_with_the_constructor_arguments():
    assert estimate(CLASS + "model = Net(n_feature=2, n_hidden=10)") == 30 + 11 + 1
    assert estimate(CLASS + "model = Net(2, 1000, 3)") == 3000 + 3003 + 3
    assert estimate(CLASS + "model = Net(args.features, 10)") is None


@pytest.mark.parametrize(
    "init",
    [
        "self.backbone = torchvision.models.resnet18(pretrained=True)",  # a pretrained model
        "self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in plan])",  # layers built over data it is given
        "self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(depth) if _ % 2])",  # filtered
        "self.encoder = Encoder()",  # a class of another module
    ],
)
def test_a_module_class_that_builds_anything_unknown_has_no_estimate(init):
    source = f"""\
import torchvision
from torch import nn
from encoders import Encoder

class Net(nn.Module):
    def __init__(self, depth=2, plan=(4, 4)):
        super().__init__()
        {init}
        self.head = nn.Linear(4, 1)

model = Net()
"""
    assert estimate(source) is None


def test_a_subclass_of_another_model_class_has_no_estimate():
    source = """\
from torch import nn

class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4096, 4096)

class Net(Base):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(4096, 1)

model = Net()
"""
    assert estimate(source) is None
    assert estimate(source.replace("model = Net()", "model = Base()")) == 4096 * 4096 + 4096


def test_a_method_that_builds_layers_called_twice_has_no_estimate():
    source = """\
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = self.block()
        self.b = self.block()

    def block(self):
        return nn.Linear(4, 4)

model = Net()
"""
    assert estimate(source) is None


# ---- GPU901 / GPU902 / GPU303 on toy models and toy data ------------------------------------------------


def test_toy_model_on_toy_data_is_silent():
    """GPU904 stays: every tensor of the model is updated, and `fused=True` costs nothing to add."""
    source = toy_script("model = nn.Sequential(nn.Linear(2, 10), nn.ReLU(), nn.Linear(10, 1))")
    assert codes(source) == ["GPU904"]


@pytest.mark.parametrize(
    "data",
    [
        "from sklearn.datasets import make_moons\nX, y = make_moons(n_samples=1000, noise=0.1)\nX = torch.from_numpy(X).float().cuda()\ny = torch.from_numpy(y).float().cuda()",
        "X = torch.unsqueeze(torch.linspace(-1, 1, 100), dim=1).cuda()\ny = X.pow(2) + 0.2 * torch.rand(X.size()).cuda()",
        "X = torch.arange(0, 1, 0.02).unsqueeze(1).cuda()\ny = 0.7 * X + 0.3",
    ],
)
def test_toy_data_generated_in_the_code_is_toy(data):
    assert codes(toy_script("model = nn.Sequential(nn.Linear(2, 10), nn.Linear(10, 1))", data)) == ["GPU904"]


def test_a_real_model_keeps_every_finding():
    source = toy_script("model = nn.Sequential(nn.Linear(2, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.Linear(4096, 1))")
    assert sorted(codes(source)) == ["GPU303", "GPU901", "GPU902", "GPU904"]


def test_a_model_of_unknown_size_keeps_every_finding():
    source = toy_script("model = nn.Sequential(nn.Linear(2, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 1))")
    assert sorted(codes(source)) == ["GPU303", "GPU901", "GPU902", "GPU904"]


def test_a_toy_model_on_loader_batches_keeps_the_per_step_sync():
    source = textwrap.dedent(
        """\
        import torch
        from torch import nn

        model = nn.Sequential(nn.Linear(2, 10), nn.ReLU(), nn.Linear(10, 1)).to("cuda")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in loader:
            x, y = x.cuda(), y.cuda()
            loss = ((model(x) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(loss.item())
        """
    )
    assert codes(source) == ["GPU303"]  # the model is toy (no GPU901/902), the data is not known to be (SGD: no GPU904)


def test_a_model_of_unknown_size_called_through_forward_keeps_the_sync():
    """The loss module is parameter-free (toy), the model is a pretrained one: not a toy loop."""
    source = textwrap.dedent(
        """\
        import torch
        import torchvision
        from torch import nn

        X = torch.rand(100, 3, 32, 32, device="cuda")
        y = torch.randint(0, 2, (100,), device="cuda")
        model = torchvision.models.densenet121(pretrained=True).cuda()
        criterion = nn.NLLLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        for epoch in range(1000):
            loss = criterion(model.forward(X), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(loss.item())
        """
    )
    assert "GPU303" in codes(source)


def test_a_model_class_without_layers_is_a_stub_not_a_toy_model():
    source = toy_script("class Stub(nn.Module):\n    def __init__(self):\n        super().__init__()\nmodel = Stub()")
    assert {"GPU901", "GPU902"} <= set(codes(source))


def test_a_toy_convolutional_model_keeps_gpu901_and_gpu902():
    """A convolution's work grows with the image, not with its parameters."""
    source = toy_script("model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten(), nn.LazyLinear(1))")
    assert {"GPU901", "GPU902"} <= set(codes(source))


# ---- GPU904: a handful of trainable tensors --------------------------------------------------------------

HEAD = """\
import torch
import torchvision
from torch import nn

model = torchvision.models.vgg16(weights="DEFAULT")
{freeze}
model.classifier[6] = nn.Linear(4096, 10)
model = model.cuda()
optimizer = torch.optim.Adam({params}, lr=1e-3)
"""


@pytest.mark.parametrize(
    "freeze, params",
    [
        ("for p in model.features.parameters():\n    p.requires_grad = False", "model.classifier.parameters()"),
        ("for name, p in model.named_parameters():\n    p.requires_grad = False", "model.classifier.parameters()"),
        ("model.requires_grad_(False)", "model.parameters()"),
        ("model.features.requires_grad_(False)", "filter(lambda p: p.requires_grad, model.parameters())"),
        ("model = get_peft_model(model, config)\nmodel.print_trainable_parameters()", "model.parameters()"),
        ("mark_only_lora_as_trainable(model)", "model.parameters()"),
    ],
)
def test_optimizer_over_a_frozen_model_head_or_adapters_is_silent(freeze, params):
    assert findings(HEAD.format(freeze=freeze, params=params), select=("GPU904",)) == []


@pytest.mark.parametrize(
    "freeze, params",
    [
        ("", "model.parameters()"),  # nothing frozen
        ("", "filter(lambda p: p.requires_grad, model.parameters())"),
        # A GAN toggles `requires_grad` on its nets: nothing stays frozen.
        ("for p in model.features.parameters():\n    p.requires_grad = False\nfor p in model.parameters():\n    p.requires_grad = True", "model.parameters()"),
        ("other.requires_grad_(False)", "model.parameters()"),  # another model is frozen
    ],
)
def test_optimizer_over_a_trainable_model_keeps_gpu904(freeze, params):
    assert [f.split()[1] for f in findings(HEAD.format(freeze=freeze, params=params), select=("GPU904",))] == ["GPU904"]


@pytest.mark.parametrize(
    "freeze, owner, few",
    [
        ("for p in model.features.parameters():\n    p.requires_grad = False", "model.classifier", True),
        ("self.backbone.requires_grad_(False)", "self.backbone", True),
        ("self.backbone.requires_grad_(False)", "self.head", False),  # `self.x` roots are told apart
        ("", "model.classifier", False),
        ("net = nn.Linear(2, 10)", "net", False),  # a toy model trains all its tensors (GPU904 stays)
    ],
)
def test_trains_few_tensors(freeze, owner, few):
    source = f"import torch\nfrom torch import nn\n{freeze}\nx = {owner}\n"
    module = cst.parse_module(source)
    model = SemanticModel(module, "m.py")
    expr = module.body[-1].body[0].value
    assert model.model_size.trains_few_tensors([expr]) is few


# ---- GPU303: syncs that are the point of the code --------------------------------------------------------

INFERENCE = """\
import time
import numpy as np
import torch
from torchvision.models import resnet50

model = resnet50().cuda().eval()
preds = None
with torch.no_grad():
    for x, y in loader:
        x = x.cuda()
{body}
"""


def test_timing_each_prediction_is_silent():
    body = """\
        start = time.perf_counter()
        out = model(x)
        label = out.argmax(1).item()
        latencies.append(time.perf_counter() - start)"""
    assert findings(INFERENCE.format(body=body), select=("GPU303",)) == []


def test_a_clock_read_only_before_the_model_keeps_the_finding():
    body = """\
        start = time.perf_counter()
        out = model(x)
        labels.append(out.argmax(1).item())"""
    assert findings(INFERENCE.format(body=body), select=("GPU303",)) == ["13:23 GPU303"]


def test_first_batch_branch_is_silent_and_the_else_branch_is_reported():
    body = """\
        out = model(x)
        if preds is None:
            preds = out.detach().cpu().numpy()
        else:
            preds = np.append(preds, out.detach().cpu().numpy(), axis=0)"""
    assert findings(INFERENCE.format(body=body), select=("GPU303",)) == ["15:38 GPU303"]


def test_a_none_test_that_stays_true_is_every_step():
    body = """\
        out = model(x)
        if mask is None:
            scores.append(out.cpu())"""
    source = INFERENCE.format(body=body).replace("preds = None", "mask = None")
    assert findings(source, select=("GPU303",)) == ["13:27 GPU303"]


def test_a_module_list_of_k_copies_counts_each_copy():
    source = """\
from torch import nn

class Net(nn.Module):
    def __init__(self, depth=2):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(depth)])
        self.head = nn.Linear(4, 1)

model = Net(depth=3)
"""
    assert estimate(source) == 3 * 20 + 5
