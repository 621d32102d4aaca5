"""Loaders that reach their loops through flows the model used to drop (issue 14, sixteenth corpus): a loader a
setup function assigns to a module global (`global trainloader`) and the functions an epoch loop calls read; a
loader a data module returns to another module's epoch loop while its own `__main__` block prints a batch."""

from __future__ import annotations

import textwrap

from tests.conftest import gpu104_text, findings
from tests.projects_helper import lint_written

ONLY = {"select": ("GPU102", "GPU104")}

_GLOBAL_SETUP = textwrap.dedent("""\
    import torch
    import torchvision
    from torch.utils.data import DataLoader

    trainloader = None
    device = "cuda"


    def prepare():
        global trainloader
        trainset = torchvision.datasets.ImageFolder("data/train", transform=transform)
        trainloader = DataLoader(trainset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)


    def train(epoch):
        global trainloader
        for inputs, targets in trainloader:
            inputs, targets = inputs.to(device), targets.to(device)
            loss = criterion(net(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    if __name__ == "__main__":
        prepare()
        for epoch in range(100):
            train(epoch)
""")


def test_a_loader_a_setup_function_binds_to_a_global_is_the_one_the_epoch_loop_reads():
    assert findings(_GLOBAL_SETUP, **ONLY) == ["12:19 GPU104"]
    # the batches are moved where the global is read: GPU102 follows the same flow
    assert findings(_GLOBAL_SETUP.replace(", pin_memory=True", ""), **ONLY) == ["12:19 GPU102", "12:19 GPU104"]


def test_a_global_loader_built_again_in_each_epoch_restarts_nothing_persistent_workers_would_keep():
    source = _GLOBAL_SETUP.replace("    prepare()\n    for epoch in range(100):\n", "    for epoch in range(100):\n        prepare()\n")
    assert "        prepare()\n        train(epoch)" in source
    assert findings(source, **ONLY) == []


def test_a_global_that_another_function_rebinds_or_a_local_name_stays_unknown():
    rebound = _GLOBAL_SETUP.replace(
        "def train(epoch):",
        'def reload():\n    global trainloader\n    trainloader = DataLoader(ds, num_workers=0)\n\n\ndef train(epoch):',
    )
    assert findings(rebound, **ONLY) == []
    # without the `global` statement the setup function's name is its own: nothing reads it
    assert findings(_GLOBAL_SETUP.replace("def prepare():\n    global trainloader\n", "def prepare():\n"), **ONLY) == []


def test_a_module_global_bound_to_something_else_than_none_or_a_loader_is_not_followed():
    source = _GLOBAL_SETUP.replace("trainloader = None", "trainloader = []")
    assert findings(source, **ONLY) == []


_DATA_MODULE = """
    from torch.utils.data import DataLoader
    from torchvision import datasets


    def get_train_loader(batch_size=8):
        train_set = datasets.ImageFolder("data/train", transform=transform)
        return DataLoader(train_set, batch_size=batch_size, shuffle=True, num_workers=4, pin_memory=True)


    if __name__ == "__main__":
        loader = get_train_loader()
        for images, labels in loader:
            print(images.size(), labels.size())
            break
"""

_TRAIN_MODULE = """
    from data import get_train_loader


    def train(model, optimizer):
        model.cuda()
        loader = get_train_loader(batch_size=32)
        for epoch in range({epochs}):
            for images, labels in loader:
                images, labels = images.cuda(), labels.cuda()
                loss = model(images, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
"""


def test_a_data_module_that_prints_a_batch_itself_still_reports_the_other_modules_epoch_loop(tmp_path, monkeypatch):
    found = lint_written(tmp_path, {"data.py": _DATA_MODULE, "train.py": _TRAIN_MODULE.format(epochs=100)}, monkeypatch)
    assert [f for f in found if "GPU104" in f] == ["data.py:8 GPU104"]


def test_a_loader_the_other_module_reads_once_stays_silent_with_the_self_test(tmp_path, monkeypatch):
    once = _TRAIN_MODULE.format(epochs=1).replace("        for epoch in range(1):\n", "        if True:\n")
    found = lint_written(tmp_path, {"data.py": _DATA_MODULE, "train.py": once}, monkeypatch)
    assert [f for f in found if "GPU104" in f] == []


# Transforms a helper of another module returns (`analysis/returned_transforms.py`): the batch's bytes (GPU102) and
# the pass's least work (GPU104) read them as they read a transform written out in the module.
_TRANSFORMS_MODULE = """
    import torchvision.transforms as transforms


    def data_transforms(args):
        train_transform = transforms.Compose([transforms.RandomCrop(28, padding=4), transforms.ToTensor()])
        if args.cutout:
            train_transform.transforms.append(Cutout(args.cutout_length))
        valid_transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])
        return train_transform, valid_transform
"""

_MNIST_SCRIPT = """
    import argparse

    import torch
    import torchvision
    import utils

    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default={batch})
    parser.add_argument("--cutout", action="store_true")
    args = parser.parse_args()
    device = "cuda"
    train_t, valid_t = utils.data_transforms(args)
    trainset = torchvision.datasets.FashionMNIST(root="data", train=True, transform=train_t)
    trainloader = torch.utils.data.DataLoader(trainset, batch_size=args.batch_size, shuffle=True, num_workers=2)
    testset = torchvision.datasets.FashionMNIST(root="data", train=False, transform=valid_t)
    testloader = torch.utils.data.DataLoader(testset, batch_size=args.batch_size, shuffle=False, num_workers=2)
    for epoch in range(100):
        for x, y in trainloader:
            loss = criterion(net(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            for x, y in testloader:
                net(x.to(device))
"""


def test_a_transform_another_module_returns_shows_the_batch_bytes(tmp_path, monkeypatch):
    files = {"utils.py": _TRANSFORMS_MODULE, "train.py": _MNIST_SCRIPT.format(batch=128)}
    found = [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU102" in f]
    # 128 test images of 1x28x28 float32 (~0.4 MB): too small to pin; the train transform may append a step of the
    # project's own (`Cutout`, under `if args.cutout:`): its bytes are not known, the finding stays
    assert found == ["train.py:15 GPU102"]
    # 1,024 images a batch (~3.2 MB): the test loader's batches are worth pinning too
    files["train.py"] = _MNIST_SCRIPT.format(batch=1024)
    found = [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU102" in f]
    assert found == ["train.py:15 GPU102", "train.py:17 GPU102"]


def test_a_changed_or_unknown_returned_transform_stays_unknown(tmp_path, monkeypatch):
    changed = _TRANSFORMS_MODULE.replace("        return train_transform", "        valid_transform.transforms = []\n        return train_transform")
    files = {"utils.py": changed, "train.py": _MNIST_SCRIPT.format(batch=128)}
    found = [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU102" in f]
    assert found == ["train.py:15 GPU102", "train.py:17 GPU102"]


def test_returned_transforms_are_recorded_per_element():
    import ast

    from gpulint.analysis.returned_transforms import returned_transforms

    tree = ast.parse(textwrap.dedent(_TRANSFORMS_MODULE))

    def qualify(node):
        return {"transforms.Compose": "torchvision.transforms.Compose", "transforms.RandomCrop": "torchvision.transforms.RandomCrop",
                "transforms.ToTensor": "torchvision.transforms.ToTensor", "transforms.Normalize": "torchvision.transforms.Normalize"}.get(ast.unparse(node))

    assert returned_transforms(tree, qualify) == {
        "data_transforms": ["tuple", [
            [["torchvision.transforms.RandomCrop", [28, 28], True, False], ["torchvision.transforms.ToTensor", None, False, False],
             ["?", None, False, True]],
            [["torchvision.transforms.ToTensor", None, False, False], ["torchvision.transforms.Normalize", None, False, False]],
        ]],
    }  # fmt: skip


def test_the_least_work_of_a_pass_leaves_out_a_step_only_some_settings_append(tmp_path, monkeypatch):
    from tests.projects_helper import lint, write

    script = _MNIST_SCRIPT.format(batch=128).replace("FashionMNIST", "CIFAR10")
    transforms = _TRANSFORMS_MODULE.replace("RandomCrop(28", "RandomCrop(32").replace(
        "transforms.ToTensor()])", "transforms.RandomHorizontalFlip(), transforms.ToTensor(), transforms.Normalize((0.5,), (0.5,))])", 1
    )
    diagnostics = lint(write(tmp_path, {"utils.py": transforms, "train.py": script}), monkeypatch)
    [train] = [d for d in diagnostics if d.code == "GPU104" and d.location.row == 15]
    # 391 steps of CIFAR10 at four transforms a sample (not the `Cutout` that `if args.cutout:` may append): a pass of
    # ~1.4 s at least, where restarting 2 workers is above 3 % of the pass as measured
    assert "a pass is 391 steps of 128 over CIFAR10's train split (50,000 samples), at least ~1.4 s" in gpu104_text(train)


_CUTOUT = """

    class Cutout:
        def __init__(self, length):
            self.length = length

        def __call__(self, img):
            mask = torch.ones(img.size(1), img.size(2))
            mask[: self.length, : self.length] = 0.0
            img *= mask.expand_as(img)
            return img
"""


def test_a_step_of_the_helpers_module_that_changes_the_image_in_place_keeps_its_bytes(tmp_path, monkeypatch):
    helper = _TRANSFORMS_MODULE.replace("import torchvision", "import torch\n    import torchvision") + _CUTOUT
    files = {"utils.py": helper, "train.py": _MNIST_SCRIPT.format(batch=128)}
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU102" in f] == []
    # a step that hands back a new tensor (`return img * mask`) may be of any shape: unknown, the finding stays
    files["utils.py"] = helper.replace("img *= mask.expand_as(img)\n            return img", "return img * mask.expand_as(img)")
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU102" in f] == ["train.py:15 GPU102"]
    # nor a step that binds the image again before handing it back
    files["utils.py"] = helper.replace("img *= mask.expand_as(img)", "img = img[:, :14]")
    assert [f for f in lint_written(tmp_path, files, monkeypatch) if "GPU102" in f] == ["train.py:15 GPU102"]
