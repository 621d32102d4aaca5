"""Code that never runs as the project ships it (issue 13, eighth corpus N1): a helper module's function that
nothing in a script-style project calls (`analysis/uncalled.py`), and a library module's `__main__` self-test
(`analysis/self_tests.py`). Findings there are dropped; API (packaged projects, `__all__`), functions reached
by name, a module nobody imports and `__main__` blocks that train or load weights stay reported.
Minimal projects of our own."""

from __future__ import annotations

import json

from tests.projects_helper import found, lint, lint_written, write

HELPERS = """\
    from torch.utils.data import DataLoader
    from torchvision import datasets
    from torchvision.transforms import ToTensor


    def _dataset(name):
        return getattr(datasets, name)("data", transform=ToTensor())


    def get_mnist(batch_size):
        return DataLoader(datasets.MNIST("data", transform=ToTensor()), batch_size=batch_size)


    def get_cifar(batch_size):
        return DataLoader(datasets.CIFAR10("data", transform=ToTensor()), batch_size=batch_size)


    def get_celeba(batch_size):
        return DataLoader(_dataset("CelebA"), batch_size=batch_size)
"""
TRAIN = """\
    import torch
    from helper_data import get_mnist, get_cifar{extra}

    model = torch.nn.Linear(784, 10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in get_mnist(256):
        loss = model(x.cuda().view(-1, 784)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
MNIST = "helper_data.py:11 GPU101"
CIFAR = "helper_data.py:15 GPU101"
CELEBA = "helper_data.py:19 GPU101"


def _project(tmp_path, monkeypatch, helpers: str = HELPERS, extra: str = "", **more: str) -> list[str]:
    return lint_written(tmp_path, {"helper_data.py": helpers, "train.py": TRAIN.format(extra=extra), **more}, monkeypatch)


def test_a_helper_nothing_calls_is_not_reported(tmp_path, monkeypatch):
    findings = _project(tmp_path, monkeypatch)
    assert MNIST in findings  # the loader the training script uses
    assert CIFAR not in findings and CELEBA not in findings  # imported (cifar) or not, never called


def test_a_helper_only_an_uncalled_helper_calls_is_dead_too(tmp_path, monkeypatch):
    helpers = HELPERS + """
    def celeba_dataloader():
        return DataLoader(_dataset("CelebA"), batch_size=64)


    def get_both():
        return get_celeba(64), celeba_dataloader()
"""
    findings = _project(tmp_path, monkeypatch, helpers)
    assert "helper_data.py:23 GPU101" not in findings and CELEBA not in findings


def test_a_packaged_project_keeps_its_api_reported(tmp_path, monkeypatch):
    findings = _project(tmp_path, monkeypatch, **{"pyproject.toml": "[project]\nname = 'lessons'\n"})
    assert CIFAR in findings and CELEBA in findings


def test_a_function_listed_in_all_is_api(tmp_path, monkeypatch):
    findings = _project(tmp_path, monkeypatch, HELPERS + '\n    __all__ = ["get_mnist", "get_cifar"]\n')
    assert CIFAR in findings and CELEBA not in findings


def test_a_function_handed_on_as_a_value_may_run(tmp_path, monkeypatch):
    findings = _project(tmp_path, monkeypatch, extra="\n    LOADERS = {'cifar': get_cifar}")
    assert CIFAR in findings and CELEBA not in findings


def test_a_module_whose_functions_are_looked_up_by_name_keeps_them(tmp_path, monkeypatch):
    extra = "\n    import helper_data\n    loader = getattr(helper_data, 'get_' + 'celeba')(64)"
    findings = _project(tmp_path, monkeypatch, extra=extra)
    assert CIFAR in findings and CELEBA in findings


def test_a_decorated_function_is_called_by_its_decorator(tmp_path, monkeypatch):
    helpers = HELPERS.replace("    def get_cifar", "    @register\n    def get_cifar")
    helpers = helpers.replace("from torchvision.transforms", "from registry import register\n    from torchvision.transforms")
    findings = _project(tmp_path, monkeypatch, helpers, **{"registry.py": "def register(f):\n    return f\n"})
    assert "helper_data.py:17 GPU101" in findings and "helper_data.py:21 GPU101" not in findings


def test_a_project_that_imports_functions_by_name_keeps_them(tmp_path, monkeypatch):
    findings = _project(tmp_path, monkeypatch, extra="\n    import importlib")
    assert CIFAR in findings and CELEBA in findings


def test_the_functions_of_a_script_nothing_imports_stay_reported(tmp_path, monkeypatch):
    script = TRAIN.format(extra="") + """
    def smoke_test():
        for x, y in get_cifar(64):
            print(model(x.cuda().view(-1, 784)).sum().item())
"""
    findings = lint_written(tmp_path, {"helper_data.py": HELPERS, "train.py": script}, monkeypatch)
    assert CIFAR in findings and CELEBA not in findings  # the script's own uncalled function still calls it


def _notebook(source: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5})  # fmt: skip


def test_a_notebook_caller_counts_and_an_unchecked_notebook_may_call(tmp_path, monkeypatch):
    write(tmp_path, {"helper_data.py": HELPERS, "train.py": TRAIN.format(extra="")})
    (tmp_path / "lesson.ipynb").write_text(_notebook("from helper_data import get_cifar\nloader = get_cifar(64)\n"), encoding="utf-8")
    checked = found(lint(tmp_path, monkeypatch, ["helper_data.py", "train.py", "lesson.ipynb"]))
    assert CIFAR in checked and CELEBA not in checked  # the notebook calls the CIFAR helper
    unchecked = found(lint(tmp_path, monkeypatch, ["helper_data.py", "train.py"]))
    assert CIFAR in unchecked and CELEBA in unchecked  # the notebook is not in sight: anything may be called


DATASET = """\
    import numpy as np
    import torch
    from torch.utils.data import DataLoader, Dataset


    class Frames(Dataset):
        def __init__(self, files):
            self.files = files

        def __len__(self):
            return len(self.files)

        def __getitem__(self, i):
            return torch.from_numpy(np.load(self.files[i]))


    if __name__ == "__main__":
        device = torch.device("cuda")
        {body}
"""
SELF_TEST = """loader = DataLoader(Frames(["a.npy"]), batch_size=16, shuffle=True)
        n = 0
        for batch in loader:
            batch = batch.to(device)
            n += 1
        print(n)"""
USER = """\
    import torch
    from torch.utils.data import DataLoader
    from dataset import Frames

    model = torch.nn.Linear(80, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in DataLoader(Frames(["a.npy"]), batch_size=16, num_workers=4, pin_memory=True):
        loss = model(x.cuda(non_blocking=True)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
"""
SELF_TEST_LOADER = "dataset.py:19 GPU101"


def _dataset_project(tmp_path, monkeypatch, body: str = SELF_TEST, imported: bool = True) -> list[str]:
    files = {"dataset.py": DATASET.format(body=body)}
    if imported:
        files["train.py"] = USER
    return lint_written(tmp_path, files, monkeypatch)


def test_the_self_test_of_an_imported_module_is_not_reported(tmp_path, monkeypatch):
    assert not [f for f in _dataset_project(tmp_path, monkeypatch) if f.startswith("dataset.py")]


def test_the_main_block_of_a_module_nothing_imports_is_the_script(tmp_path, monkeypatch):
    assert SELF_TEST_LOADER in _dataset_project(tmp_path, monkeypatch, imported=False)


def test_a_main_block_that_trains_is_reported(tmp_path, monkeypatch):
    step = "loss = net(batch.to(device)).sum()\n            loss.backward()\n            opt.step()"
    body = SELF_TEST.replace("batch = batch.to(device)", step)
    body = "net = torch.nn.Linear(80, 1).cuda()\n        opt = torch.optim.SGD(net.parameters(), lr=0.1)\n        " + body
    assert "dataset.py:21 GPU101" in _dataset_project(tmp_path, monkeypatch, body)


def test_a_main_block_that_loads_weights_is_a_tool(tmp_path, monkeypatch):
    body = "net = torch.nn.Linear(80, 1).cuda()\n        net.load_state_dict(torch.load('net.pt'))\n        " + SELF_TEST
    assert "dataset.py:21 GPU101" in _dataset_project(tmp_path, monkeypatch, body)


def test_a_module_that_evaluates_names_keeps_its_functions_and_model_eval_is_no_such_call(tmp_path, monkeypatch):
    evaluated = HELPERS + """
    def by_name(name):
        return eval("get_" + name)(64)
"""
    assert CELEBA in _project(tmp_path / "a", monkeypatch, evaluated)
    assert CELEBA not in _project(tmp_path / "b", monkeypatch, HELPERS + "\n    def switch(model):\n        model.eval()\n")


def test_a_module_that_imports_itself_in_its_self_test_is_still_imported_by_others(tmp_path, monkeypatch):
    body = "from dataset import Frames as Again\n        " + SELF_TEST
    assert not [f for f in _dataset_project(tmp_path / "a", monkeypatch, body) if f.startswith("dataset.py")]
    assert "dataset.py:20 GPU101" in _dataset_project(tmp_path / "b", monkeypatch, body, imported=False)


def test_checked_from_a_folder_inside_a_project_the_callers_above_may_call(tmp_path, monkeypatch):
    write(tmp_path, {"run.py": "from lib.helper_data import get_celeba\nget_celeba(64)\n"})
    findings = _project(tmp_path / "lib", monkeypatch)
    assert CIFAR in findings and CELEBA in findings  # the root is `lib/`: run.py above it is out of sight


ORPHAN = """\
    import torch
    from .helper_data import get_mnist


    def score(model):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        total = 0.0
        for x, _ in get_mnist(256):
            loss = model(x.cuda().view(-1, 784)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        return total
"""


def test_a_package_member_whose_module_body_calls_its_function_stays_reported(tmp_path, monkeypatch):
    # `python -m pkg.score` runs its body, and the body runs `score`.
    orphan = ORPHAN + "\n\n    score(torch.nn.Linear(784, 10).cuda())\n"
    findings = _project(tmp_path, monkeypatch, **{"score.py": orphan})
    assert "score.py:13 GPU303" in findings


def test_a_script_nothing_imports_without_relative_imports_stays_reported(tmp_path, monkeypatch):
    # `python score.py` may run it (or the README names it): a plain script's functions are its API.
    findings = _project(tmp_path, monkeypatch, **{"score.py": ORPHAN.replace("from .helper_data", "from helper_data")})
    assert "score.py:13 GPU303" in findings
