"""A data set built where the default device may be CUDA holds GPU tensors (`analysis/default_device.py`):
workers cannot fork them, `pin_memory` cannot pin them, GPU101 / GPU102 stay silent for loaders over it.

Shape after pyro's MuE examples (sixteenth corpus, both judges: wrong): a script sets `torch.set_default_device
("cuda")` under its `--cuda` flag, then builds the data set and hands it to a model class of a library module,
whose `fit` wraps it in a `DataLoader`. Negatives beside it: the default set to the CPU, never set, set after
the data set is built, and a test that sets it (a test says nothing of how the program runs).
"""

from __future__ import annotations

from tests.projects_helper import lint_written

LIBRARY = """
import torch
from torch.utils.data import DataLoader


class SeqModel:
    def __init__(self, cuda=False):
        self.net = torch.nn.Linear(8, 1)
        self.is_cuda = cuda
        if cuda:
            self.net = self.net.cuda()
        self.opt = torch.optim.Adam(self.net.parameters())

    def fit(self, dataset, epochs):
        loader = DataLoader(dataset, batch_size=32, shuffle=True)
        for epoch in range(epochs):
            for x, y in loader:
                if self.is_cuda:
                    x, y = x.cuda(), y.cuda()
                loss = (self.net(x) - y).pow(2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
"""

DATA = """
from torch.utils.data import Dataset
from PIL import Image
import torchvision.transforms as T


class Folder(Dataset):
    def __init__(self, paths):
        self.paths = paths
        self.tf = T.ToTensor()

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        image = Image.open(self.paths[i]).convert("RGB")
        return self.tf(image), 0
"""


def script(setup: str, before: str = "", after: str = "") -> str:
    return f"""
import argparse
import torch
from lib.data import Folder
from lib.models import SeqModel


def main(args):
{before}    dataset = Folder(args.paths)
{after}    model = SeqModel(cuda=args.cuda)
    model.fit(dataset, 10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cuda", action="store_true")
    parser.add_argument("paths", nargs="+")
    args = parser.parse_args()
{setup}    main(args)
"""


FLAG = '    if args.cuda:\n        torch.set_default_device("cuda")\n'


def _lint(tmp_path, monkeypatch, main_text: str, **more) -> list[str]:
    files = {"lib/__init__.py": "", "lib/models.py": LIBRARY, "lib/data.py": DATA, "run.py": main_text, **more}
    return [f for f in lint_written(tmp_path, files, monkeypatch) if f.split()[-1] in ("GPU101", "GPU102")]


REPORTED = ["lib/models.py:15 GPU101", "lib/models.py:15 GPU102"]


def test_reported_without_a_default_device(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, script("")) == REPORTED


def test_default_device_set_under_the_flag_before_main(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, script(FLAG)) == []


def test_default_tensor_type_set_before_the_data_set(tmp_path, monkeypatch):
    before = '    torch.set_default_tensor_type("torch.cuda.FloatTensor")\n'
    assert _lint(tmp_path, monkeypatch, script("", before=before)) == []


def test_device_context_around_the_data_set(tmp_path, monkeypatch):
    text = script("").replace(
        "    dataset = Folder(args.paths)\n", '    with torch.device("cuda"):\n        dataset = Folder(args.paths)\n'
    )
    assert _lint(tmp_path, monkeypatch, text) == []


def test_default_device_set_by_an_imported_config_module(tmp_path, monkeypatch):
    config = 'import torch\n\nDEVICE = "cuda" if torch.cuda.is_available() else "cpu"\ntorch.set_default_device(DEVICE)\n'
    text = script("").replace("import torch\n", "import torch\nimport config\n", 1)
    assert _lint(tmp_path, monkeypatch, text, **{"config.py": config}) == []


def test_cpu_default_device_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, script('    torch.set_default_device("cpu")\n')) == REPORTED


def test_default_dtype_keeps_the_finding(tmp_path, monkeypatch):
    assert _lint(tmp_path, monkeypatch, script("    torch.set_default_dtype(torch.float64)\n")) == REPORTED


def test_default_device_set_after_the_data_set_keeps_the_finding(tmp_path, monkeypatch):
    after = '    torch.set_default_device("cuda")\n'
    assert _lint(tmp_path, monkeypatch, script("", after=after)) == REPORTED


def test_cuda_default_set_back_to_the_cpu_keeps_the_finding(tmp_path, monkeypatch):
    before = '    torch.set_default_device("cuda")\n    torch.set_default_device("cpu")\n'
    assert _lint(tmp_path, monkeypatch, script("", before=before)) == REPORTED


def test_a_test_that_sets_the_default_keeps_the_finding(tmp_path, monkeypatch):
    test = """
import torch
from lib.data import Folder
from lib.models import SeqModel


def test_fit():
    torch.set_default_device("cuda")
    SeqModel(cuda=True).fit(Folder(["a.png"]), 1)
"""
    assert _lint(tmp_path, monkeypatch, script(""), **{"tests/test_fit.py": test}) == REPORTED


def test_module_level_data_set_after_the_default(tmp_path, monkeypatch):
    text = """
import torch
from torch.utils.data import DataLoader
from lib.data import Folder

torch.set_default_device("cuda")
net = torch.nn.Linear(8, 1)
opt = torch.optim.Adam(net.parameters())
loader = DataLoader(Folder(["a.png"] * 1000), batch_size=32, shuffle=True)
for epoch in range(10):
    for x, y in loader:
        loss = net(x.cuda()).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
    files = {"lib/__init__.py": "", "lib/data.py": DATA, "run.py": text}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU10" in f] == []
    files["run.py"] = text.replace('torch.set_default_device("cuda")\n', "")
    assert [f for f in lint_written(tmp_path / "b", files, monkeypatch) if f.split()[-1] in ("GPU101", "GPU102")] == [
        "run.py:8 GPU101",
        "run.py:8 GPU102",
    ]
