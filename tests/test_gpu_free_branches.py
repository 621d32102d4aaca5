"""Branches that run only without a GPU (`analysis/gpu_free_branches.py`): the `else:` of
`if torch.cuda.is_available():`, the body of `if not torch.cuda.is_available():`, `if device == "cpu":`,
`if torch.cuda.device_count() == 0:`. A GPU-underuse finding there is about a run with no GPU, so none is
reported; the GPU branch keeps its findings, and so do branches that may still run on a GPU (the `else:` of
`if args.cuda and torch.cuda.is_available():`, of `if torch.cuda.device_count() > 1:`, an MPS `elif`).

The repros are minimal shapes of our own (issue 13: GPU401 on both arms of `if torch.cuda.is_available():`).
"""

from __future__ import annotations

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.gpu_free_branches import gpu_free_rows, means_no_gpu
from tests.conftest import diagnostics
from tests.test_notebooks import concise, notebook


def found(source: str, path: str = "train.py") -> list[str]:
    return [f"{d.location.row} {d.code}" for d in diagnostics(source, path)]


def wrapped(test: str, gpu: str = "model = nn.DataParallel(model).cuda()", other: str = "model = nn.DataParallel(model)") -> str:
    return f"""\
import argparse

import torch
import torchvision
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_true")
args = parser.parse_args()
model = torchvision.models.resnet50()
if {test}:
    {gpu}
else:
    {other}
"""


def test_issue_13_the_else_of_is_available_is_silent():
    assert found(wrapped("torch.cuda.is_available()")) == ["12 GPU401"]


def test_a_name_bound_to_is_available_is_the_same_test():
    source = wrapped("use_cuda").replace("model = torchvision", "use_cuda = torch.cuda.is_available()\nmodel = torchvision")
    assert found(source) == ["13 GPU401"]


# The CPU arm first: `if <no GPU>: model = nn.DataParallel(model)` / `else: ... .cuda()`.
CPU_FIRST = {"gpu": "model = nn.DataParallel(model)", "other": "model = nn.DataParallel(model).cuda()"}


def test_the_body_of_not_is_available_is_silent():
    assert found(wrapped("not torch.cuda.is_available()", **CPU_FIRST)) == ["14 GPU401"]


def test_a_device_count_of_zero_is_no_gpu():
    assert found(wrapped("torch.cuda.device_count() == 0", **CPU_FIRST)) == ["14 GPU401"]
    assert found(wrapped("torch.cuda.device_count() > 0")) == ["12 GPU401"]


def test_a_cpu_device_is_no_gpu():
    for test in ('device == "cpu"', 'device.type == "cpu"', 'str(device) == "cpu"'):
        source = wrapped(test, gpu="model = nn.DataParallel(model)", other="model = nn.DataParallel(model).to(device)")
        source = source.replace("model = torchvision", 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nmodel = torchvision')
        assert found(source) == ["15 GPU401"], test


def test_a_device_set_only_to_cuda_or_cpu_is_the_cpu_when_it_is_not_cuda():
    source = wrapped('device == "cuda"', other="model = nn.DataParallel(model)").replace(
        "model = torchvision", 'device = "cuda" if torch.cuda.is_available() else "cpu"\nmodel = torchvision'
    )
    assert found(source) == ["13 GPU401"]


def test_an_attribute_set_to_is_available_in_init_is_the_same_test():
    source = """\
    import torch
    from torch import nn

    class Trainer:
        def __init__(self, model):
            self.use_cuda = torch.cuda.is_available()
            self.model = model

        def wrap(self):
            if self.use_cuda:
                self.model = nn.DataParallel(self.model).cuda()
            else:
                self.model = nn.DataParallel(self.model)
    """
    assert found(source) == ["11 GPU401"]


def test_a_notebook_cell_with_the_cpu_branch_is_silent():
    cells = (
        "import torch\nimport torchvision\nfrom torch import nn\nmodel = torchvision.models.resnet50()",
        "use_cuda = torch.cuda.is_available()\nif use_cuda:\n    model = nn.DataParallel(model).cuda()\nelse:\n    model = nn.DataParallel(model)",
    )
    lines = concise(notebook(*cells))
    assert [line.split(" ", 2)[:2] for line in lines if "GPU401" in line] == [["nb.ipynb:cell", "2:3:13:"]]


def test_loader_settings_in_the_cpu_branch_are_silent():
    source = """\
    import torch
    from torch.utils.data import DataLoader

    def loaders(dataset):
        if torch.cuda.is_available():
            return DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True, persistent_workers=True)
        else:
            return DataLoader(dataset, batch_size=64)
    """
    assert found(source) == []


# ---- branches that may still run on a GPU keep their findings ------------------------------------------------


def test_the_else_of_a_user_switch_and_is_available_keeps_its_finding():
    # `--cuda` left off on a GPU machine: the else branch runs there too
    assert found(wrapped("args.cuda and torch.cuda.is_available()")) == ["12 GPU401", "14 GPU401"]
    source = wrapped("use_cuda").replace("model = torchvision", "use_cuda = args.cuda and torch.cuda.is_available()\nmodel = torchvision")
    assert found(source) == ["13 GPU401", "15 GPU401"]


def test_the_else_of_several_gpus_is_one_gpu_and_keeps_todays_behaviour():
    source = wrapped("torch.cuda.device_count() > 1", other="model = nn.DataParallel(model, device_ids=[0, 1]).cuda()")
    assert found(source) == ["12 GPU401", "14 GPU401"]


def test_code_after_the_gpu_branch_runs_on_every_machine():
    source = """\
    import torch
    import torchvision
    from torch import nn

    model = torchvision.models.resnet50()
    if torch.cuda.is_available():
        model = model.cuda()
    model = nn.DataParallel(model)
    """
    assert found(source) == ["8 GPU401"]


def test_an_mps_elif_keeps_its_findings_and_the_last_else_is_silent():
    source = """\
    import torch
    import torchvision
    from torch import nn

    model = torchvision.models.resnet50()
    if torch.cuda.is_available():
        model = nn.DataParallel(model).cuda()
    elif torch.backends.mps.is_available():
        model = nn.DataParallel(model).to("mps")
    else:
        model = nn.DataParallel(model)
    """
    assert found(source) == ["7 GPU401", "9 GPU401"]


def test_a_tensor_on_the_cpu_is_not_a_run_without_a_gpu():
    # `batch.device` asks where one batch is: the branch runs on GPU machines
    model = SemanticModel(cst.parse_module('import torch\nif batch.device.type == "cpu":\n    batch = batch.cuda()\n'), "train.py", "")
    assert gpu_free_rows(model) == []


def test_what_each_test_means():
    def means(test: str, when: bool, prelude: str = "") -> bool:
        module = cst.parse_module(f"import torch\n{prelude}if {test}:\n    pass\n")
        model = SemanticModel(module, "train.py", module.code)
        return means_no_gpu(model, module.body[-1].test, when)

    assert means("torch.cuda.is_available()", False) and not means("torch.cuda.is_available()", True)
    assert means("torch.cuda.device_count() < 1", True) and means("not torch.cuda.device_count()", True)
    assert not means("torch.cuda.device_count() > 1", False) and not means("torch.cuda.device_count() >= 2", False)
    assert means("n_gpu == 0", True, "n_gpu = torch.cuda.device_count()\n")
    assert means("torch.cuda.is_available() or args.cuda", False)  # both false: no GPU
    assert not means("torch.cuda.is_available() and args.cuda", False)
    assert means("not torch.cuda.is_available() and args.warn", True)
    assert not means("args.cuda", False) and not means('args.device == "cuda"', False)
    assert means("cuda", False, "cuda = True if torch.cuda.is_available() else False\n")
    assert not means("cuda", False, "cuda = True if torch.cuda.device_count() > 1 else False\n")
    assert means('cfg.MODEL.DEVICE == "cpu"', True) and means('self.args.device.type == "cpu"', True)
    assert not means('self.weights.device.type == "cpu"', True) and not means('x.device == "cpu"', True)
    assert means('args.device == "cpu"', True) and means('self.device != "cpu"', False)
