"""Attributes a project base class in another module places on the GPU in its own methods (issue 14, the project
model; tabnet's `TabModel` in the seventeenth corpus): `self.device = torch.device(define_device(...))` in the
constructor and `self.network = TabNet(...).to(self.device)` in `_set_network`. Its subclasses in other modules
(`TabNetClassifier.predict_proba`, `TabNetPretrainer.predict`) use both: their prediction loops run the GPU network
on batches of an in-process loader after `eval()` without `no_grad` (GPU405, GPU101), as the base's own `predict`
does, and their module is GPU code through them (`inherited_members.placed_attributes`).

Negatives: a base class that keeps the network on the CPU (`torch.device("cpu")`), and a subclass that sets its
own CPU device and network (what the class sets itself is its own, whatever its base sets).
"""

from __future__ import annotations

from tests.projects_helper import lint_written

UTILS = """
import torch


def define_device(name):
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name
"""

NET = """
import torch


class Net(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = torch.nn.Linear(d, 2)

    def forward(self, x):
        return self.fc(x)
"""

BASE = """
import numpy as np
import torch
from torch.utils.data import DataLoader

from pkg import net
from pkg.utils import define_device


class Model:
    def __init__(self, device_name="auto", batch_size=1024):
        self.device_name = device_name
        self.batch_size = batch_size
        self.device = {device}

    def fit(self, X, y):
        self._set_network(X.shape[1])
        loader = DataLoader(list(zip(X, y)), batch_size=self.batch_size, num_workers=4)
        opt = torch.optim.Adam(self.network.parameters())
        for epoch in range(100):
            self.network.train()
            for xb, yb in loader:
                out = self.network(xb.to(self.device).float())
                loss = torch.nn.functional.cross_entropy(out, yb.to(self.device))
                opt.zero_grad()
                loss.backward()
                opt.step()

    def _set_network(self, d):
        self.network = net.Net(d).to(self.device)
"""

SUB = """
import numpy as np
import torch
from torch.utils.data import DataLoader

from pkg.base import Model


class Classifier(Model):{own}
    def predict_proba(self, X):
        self.network.eval()
        loader = DataLoader(X, batch_size=self.batch_size)
        results = []
        for data in loader:
            data = data.to(self.device).float()
            output = self.network(data)
            results.append(torch.softmax(output, 1).cpu().detach().numpy())
        return np.vstack(results)
"""

CUDA = "torch.device(define_device(self.device_name))"


def _project(device: str = CUDA, own: str = "") -> dict[str, str]:
    return {
        "pkg/__init__.py": "",
        "pkg/utils.py": UTILS,
        "pkg/net.py": NET,
        "pkg/base.py": BASE.format(device=device),
        "pkg/sub.py": SUB.format(own=own),
    }


def test_subclass_in_another_module_uses_the_network_its_base_moved(tmp_path, monkeypatch):
    found = lint_written(tmp_path, _project(), monkeypatch)
    # the in-process loader of the prediction loop (GPU101, GPU102), its forward with autograd on after `eval()`
    # (GPU405), and the copy of each batch's output (GPU303, every read reported in these tests)
    assert [f for f in found if f.startswith("pkg/sub.py")] == [
        "pkg/sub.py:12 GPU101", "pkg/sub.py:12 GPU102", "pkg/sub.py:16 GPU405", "pkg/sub.py:17 GPU303",
    ]


def test_subclass_silent_when_the_base_keeps_the_network_on_the_cpu(tmp_path, monkeypatch):
    found = lint_written(tmp_path, _project(device='torch.device("cpu")'), monkeypatch)
    assert not [f for f in found if f.startswith("pkg/sub.py")]


CPU_OWN = """
    def __init__(self, batch_size=1024):
        super().__init__("cpu", batch_size)
        self.device = torch.device("cpu")

    def _set_network(self, d):
        self.network = torch.nn.Linear(d, 2).to(self.device)
"""


def test_subclass_that_sets_its_own_cpu_device_and_network_stays_silent(tmp_path, monkeypatch):
    found = lint_written(tmp_path, _project(own=CPU_OWN), monkeypatch)
    assert [f for f in found if f.startswith("pkg/sub.py")] == []
