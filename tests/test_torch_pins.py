"""The newest torch a project's own metadata allows (`analysis/torch_pins.py`), and the rules whose advice or fix
needs a newer one: GPU403, GPU404, GPU104, GPU902, GPU904."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpulint.analysis.torch_pins import ANY_MINOR, installed_torch, torch_pin, upper_bound
from gpulint.fixer import fix_source
from tests.conftest import settings
from tests.projects_helper import found, lint, write

# These tests are about which copies of a pinned loader's batches GPU105 recognizes, at batch sizes the code
# does not show: reported with `unproven-cost` (by default GPU105 needs a batch shown at 16 MiB or more).
pytestmark = pytest.mark.usefixtures("unproven_cost")

AMP = """\
import torch
from torch.cuda.amp import autocast, GradScaler

scaler = GradScaler()
with autocast():
    y = torch.ones(2).cuda()
"""
GPU403 = {"select": ("GPU403",)}
CUSTOM_FWD = """\
import torch
from torch.cuda.amp import custom_fwd


class F(torch.autograd.Function):
    @staticmethod
    @custom_fwd
    def forward(ctx, x):
        return x
"""
ZERO_GRAD = """\
import torch

model = torch.nn.Linear(8, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x in batches:
    opt.zero_grad(set_to_none=False)
    model(x).sum().backward()
    opt.step()
"""


@pytest.mark.parametrize(
    "spec, newest",
    [
        ("==1.6.0", (1, 6)),
        ("==1.13.1+cu117", (1, 13)),
        ("<=1.6", (1, 6)),
        ("<2.3", (2, 2)),
        ("<2.3.1", (2, 3)),
        ("<2.0", (1, ANY_MINOR)),
        ("~=1.6", (1, ANY_MINOR)),
        ("~=1.6.0", (1, 6)),
        (">=1.6,<2.3", (2, 2)),
        ("==1.6.*", (1, 6)),
        ("^1.6", (1, ANY_MINOR)),  # Poetry
        ("~1.6", (1, 6)),  # Poetry
        (">=1.6", None),
        ("!=1.7", None),
        (">1.6", None),
    ],
)
def test_upper_bound_of_a_specifier(spec, newest):
    assert upper_bound(spec) == newest


@pytest.mark.parametrize(
    "name, text",
    [
        ("requirements.txt", "numpy\ntorch==1.6.0  # the cluster's CUDA 10.1\n"),
        ("setup.py", 'from setuptools import setup\nsetup(name="x", install_requires=["numpy", "torch==1.6.0"])\n'),
        ("setup.cfg", "[options]\ninstall_requires =\n    torch==1.6.0\n"),
        ("pyproject.toml", '[project]\nname = "x"\ndependencies = ["torch==1.6.0"]\n'),
        ("pyproject.toml", '[tool.poetry.dependencies]\npython = "^3.8"\ntorch = "1.6.0"\n'),
        ("environment.yml", "dependencies:\n  - python=3.8\n  - pytorch=1.6.0=py3.8_cuda10.1\n"),
        ("requirements/base.txt", "torch==1.6.0\n"),
        ("requirements.txt", "torch==1.6.0+cu101 -f https://download.pytorch.org/whl/torch_stable.html\n"),
    ],
)
def test_pin_is_read_from_each_kind_of_metadata(tmp_path, name, text):
    write(tmp_path, {name: text, "src/train.py": AMP})
    assert torch_pin(str(tmp_path / "src/train.py")).newest == (1, 6)
    assert fix_source(AMP, str(tmp_path / "src/train.py"), settings(**GPU403), unsafe=True).text == AMP


def test_lower_bound_only_and_other_packages_are_not_pins(tmp_path):
    write(tmp_path, {"requirements.txt": "torch>=1.6\ntorchvision==0.7.0\npytorch-lightning==1.0.0\n# torch==1.4\n"})
    assert torch_pin(str(tmp_path / "train.py")) is None


def test_the_tightest_pin_wins_and_says_where(tmp_path):
    write(tmp_path, {"requirements.txt": "torch<2.5\n", "environment.yml": "dependencies:\n  - pytorch==2.0.1\n"})
    pin = torch_pin(str(tmp_path / "train.py"))
    assert (pin.newest, pin.where, pin.spec) == ((2, 0), "environment.yml:2", "pytorch==2.0.1")


def test_a_package_setup_module_is_not_the_projects_top(tmp_path):
    # `eval/setup.py` inside a package is a module: the pin at the repository's top still applies
    files = {"setup.py": "", "conda.yaml": "dependencies:\n  - pytorch=2.0.0\n", "pkg/__init__.py": "", "pkg/eval/__init__.py": ""}
    write(tmp_path, {**files, "pkg/eval/setup.py": "def setup(): ...\n"})
    assert torch_pin(str(tmp_path / "pkg/eval/ops/attn.py")).newest == (2, 0)


def test_a_requirements_file_named_for_a_part_of_the_repository_pins(tmp_path):
    # `det/det-requirements.txt` beside `det/setup.py`: the detection part's own list (round 24b, Vim)
    write(tmp_path, {"det/setup.py": "", "det/det-requirements.txt": "numpy==1.26.4\ntorch==2.1.2+cu121\n"})
    pin = torch_pin(str(tmp_path / "det/detectron2/engine/train_loop.py"))
    assert (pin.newest, pin.where, pin.spec) == ((2, 1), "../../det-requirements.txt:2", "torch==2.1.2+cu121")


NESTED = {"README.md": "Install:\n\n    pip install torch==2.1.1 torchvision==0.16.1\n    pip install -e mamba\n", "mamba/setup.py": ""}


def test_a_vendored_sub_project_runs_on_the_torch_its_repository_installs(tmp_path):
    # `mamba/setup.py` is the sub-project's own metadata; the repository's README installs the torch it runs on
    write(tmp_path, {**NESTED, ".git/HEAD": "", "mamba/mamba_ssm/__init__.py": ""})
    installed = installed_torch(str(tmp_path / "mamba/mamba_ssm/ops/scan.py"))
    assert (installed.newest, installed.where) == ((2, 1), "../../../README.md:3")
    assert torch_pin(str(tmp_path / "mamba/mamba_ssm/ops/scan.py")) is None  # an install, no bound


def test_gpu403_custom_fwd_of_a_vendored_sub_project_on_the_repositorys_torch_2_1(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {**NESTED, ".git/HEAD": "", "mamba/ops.py": CUSTOM_FWD})
    assert found(lint(root, monkeypatch, **GPU403)) == []  # `torch.amp.custom_fwd` is new in 2.4
    alone = write(tmp_path / "q", {"mamba/setup.py": "", "mamba/ops.py": CUSTOM_FWD})
    assert found(lint(alone, monkeypatch, **GPU403)) == ["mamba/ops.py:7 GPU403"]


def test_only_the_install_notes_above_a_sub_project_are_read(tmp_path):
    # the repository's own requirements bind the repository's code; the sub-project has its own metadata
    write(tmp_path, {".git/HEAD": "", "requirements.txt": "torch==1.13.1\n", "mamba/setup.py": ""})
    assert torch_pin(str(tmp_path / "mamba/ops.py")) is None


# ---- GPU403 ---------------------------------------------------------------------------------------


def test_gpu403_silent_when_the_project_pins_torch_1_6(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {"requirements.txt": "torch==1.6.0\n", "train.py": AMP})
    assert found(lint(root, monkeypatch, **GPU403)) == []


def test_gpu403_pin_below_grad_scaler_keeps_autocast_without_a_fix(tmp_path, monkeypatch):
    # torch 2.0 has `torch.amp.autocast` but not `torch.amp.GradScaler`: one import rewrite cannot do half
    root = write(tmp_path / "p", {"requirements.txt": "torch==2.0.1\n", "train.py": AMP})
    (diagnostic,) = lint(root, monkeypatch, **GPU403)
    assert diagnostic.location.row == 5
    assert diagnostic.message == (
        '`torch.cuda.amp.autocast` is deprecated; use `torch.amp.autocast("cuda", ...)` '
        "(no fix: needs torch >= 2.3, the project pins `torch==2.0.1` (requirements.txt:1))"
    )
    assert diagnostic.fix is None


@pytest.mark.parametrize("requirements", [None, "torch>=1.6\n", "torch==2.5.1\n"])
def test_gpu403_finds_and_fixes_as_before_without_an_old_pin(tmp_path, monkeypatch, requirements):
    files = {"train.py": AMP, **({"requirements.txt": requirements} if requirements else {})}
    root = write(tmp_path / "p", files)
    assert found(lint(root, monkeypatch, **GPU403)) == ["train.py:4 GPU403", "train.py:5 GPU403"]
    fixed = fix_source(AMP, str(root / "train.py"), settings(**GPU403), unsafe=False).text
    assert fixed == AMP.replace("torch.cuda.amp import", "torch.amp import").replace("GradScaler()", 'GradScaler("cuda")').replace(
        "autocast():", 'autocast("cuda"):'
    )


def test_gpu403_custom_fwd_silent_below_2_4(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["torch<2.4"]\n', "ops.py": CUSTOM_FWD})
    assert found(lint(root, monkeypatch, **GPU403)) == []


def test_editing_requirements_rechecks_the_module(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {"requirements.txt": "torch==2.5.1\n", "train.py": AMP})
    assert found(lint(root, monkeypatch, use_cache=True, **GPU403)) == ["train.py:4 GPU403", "train.py:5 GPU403"]
    assert found(lint(root, monkeypatch, use_cache=True, **GPU403)) == ["train.py:4 GPU403", "train.py:5 GPU403"]  # warm
    requirements = root / "requirements.txt"
    requirements.write_text("torch==1.6.0\n", encoding="utf-8")
    os.utime(requirements, ns=(requirements.stat().st_atime_ns, requirements.stat().st_mtime_ns + 10**9))
    assert found(lint(root, monkeypatch, use_cache=True, **GPU403)) == []


# ---- other rules whose advice needs a newer torch --------------------------------------------------

ADAM = """\
import torch

model = torch.nn.Linear(2, 2).cuda()
opt = torch.optim.Adam(model.parameters())
for x in range(10):
    loss = model(torch.ones(2, 2).cuda()).sum()
    loss.backward()
    opt.step()
"""


@pytest.mark.parametrize(
    "pin, expected", [("torch==1.7.0\n", []), ("torch==1.13.1\n", ["train.py:4 GPU904"]), (None, ["train.py:4 GPU904"])]
)
def test_gpu904_fused_adam_needs_torch_1_13(tmp_path, monkeypatch, pin, expected):
    root = write(tmp_path / "p", {"train.py": ADAM, **({"requirements.txt": pin} if pin else {})})
    assert found(lint(root, monkeypatch, select=("GPU904",), preview=True)) == expected


def _classifier_script() -> str:
    """fixtures/train_classifier.py with a 798k-parameter MLP: its own (99.7k parameters) is a toy (launch-bound),
    for which GPU901/GPU902 are silent whatever the pin."""
    script = (Path(__file__).parent.parent / "fixtures/train_classifier.py").read_text(encoding="utf-8")
    return script.replace("nn.Linear(3 * 16 * 16, 128), nn.ReLU(), nn.Linear(128, 10)", "nn.Linear(3 * 16 * 16, 1024), nn.ReLU(), nn.Linear(1024, 10)")


@pytest.mark.parametrize("pin, expected", [("torch==1.7.0\n", []), ("torch==1.12.1\n", ["train.py:41 GPU902"])])
def test_gpu902_tf32_advice_needs_torch_1_12(tmp_path, monkeypatch, pin, expected):
    # before 1.12 matmuls ran TF32 by default, and `set_float32_matmul_precision` did not exist
    root = write(tmp_path / "p", {"train.py": _classifier_script(), "requirements.txt": pin})
    assert found(lint(root, monkeypatch, select=("GPU902",), preview=True)) == expected


@pytest.mark.parametrize("pin, expected", [("torch==1.4.0\n", []), ("torch==1.6.0\n", ["train.py:60 GPU901"])])
def test_gpu901_autocast_advice_needs_torch_1_6(tmp_path, monkeypatch, pin, expected):
    # torch.cuda.amp arrived in 1.6: a project pinned below it (YOLOv4's torch==1.4.0) cannot follow the advice
    root = write(tmp_path / "p", {"train.py": _classifier_script(), "requirements.txt": pin})
    assert found(lint(root, monkeypatch, select=("GPU901",), preview=True)) == expected


LOADER = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(range(100), batch_size=64, num_workers=4)
for epoch in range(10):
    for batch in loader:
        batch.cuda()
"""


@pytest.mark.parametrize("pin, expected", [("torch==1.6.0\n", []), ("torch==1.7.1\n", ["train.py:4 GPU104"])])
def test_gpu104_persistent_workers_needs_torch_1_7(tmp_path, monkeypatch, pin, expected):
    root = write(tmp_path / "p", {"train.py": LOADER, "requirements.txt": pin})
    assert found(lint(root, monkeypatch, select=("GPU104",))) == expected


def test_gpu404_fix_spells_set_to_none_when_the_pin_predates_its_default(tmp_path):
    write(tmp_path, {"requirements.txt": "torch==1.13.1\n"})
    # on torch 1.13 dropping the argument would keep the zeros: the fix says `True`
    result = fix_source(ZERO_GRAD, str(tmp_path / "train.py"), settings(select=("GPU404",)), unsafe=True).text
    assert "opt.zero_grad(set_to_none=True)" in result
    write(tmp_path, {"requirements.txt": "torch==2.1.0\n"})
    result = fix_source(ZERO_GRAD, str(tmp_path / "train.py"), settings(select=("GPU404",)), unsafe=True).text
    assert "opt.zero_grad()" in result


def test_gpu404_silent_when_the_pin_predates_set_to_none(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {"train.py": ZERO_GRAD, "requirements.txt": "torch==1.6.0\n"})
    assert found(lint(root, monkeypatch, select=("GPU404",))) == []
    (root / "requirements.txt").write_text("torch==1.7.1\n", encoding="utf-8")
    assert found(lint(root, monkeypatch, select=("GPU404",))) == ["train.py:6 GPU404"]


# ---- a legacy torch named by a Dockerfile or a README ---------------------------------------------

WHEEL = "http://download.pytorch.org/whl/cu80/torch-0.2.0.post3-cp27-cp27mu-manylinux1_x86_64.whl"
EVAL = """\
import torch
from torch.autograd import Variable

model = torch.nn.Linear(8, 2).cuda()


def evaluate(loader):
    model.eval()
    for inputs in loader:
        inputs = Variable(inputs, volatile=True).cuda()
        model(inputs)
"""


@pytest.mark.parametrize(
    "name, text, newest",
    [
        ("docker/Dockerfile.gpu", f"FROM nvidia/cuda:9.0-cudnn7-devel-ubuntu16.04\nRUN pip install h5py \\\n    {WHEEL} \\\n    torchvision\n", (0, 2)),
        ("Dockerfile", "ARG BASE=pytorch/pytorch:0.3.1-cuda9-cudnn7\nFROM ${BASE}\n", (0, 3)),
        ("Dockerfile", "FROM python:3.6\nRUN pip install torch==0.3.1 torchvision==0.2.0\n", (0, 3)),
        ("README.md", "## Requirements\n- Python >= 3.5.5, PyTorch == 0.3.1, torchvision == 0.2.0\n", (0, 3)),
        ("README.md", "Install with\n\n    conda install pytorch=0.2.0 -c soumith\n", (0, 2)),
    ],
)
def test_a_dockerfile_or_readme_pins_a_torch_before_0_4(tmp_path, name, text, newest):
    write(tmp_path, {name: text})
    assert torch_pin(str(tmp_path / "train.py")).newest == newest


@pytest.mark.parametrize(
    "files",
    [
        # an image or a README from 0.4 on names what the project was built or tested with, not a bound
        {"Dockerfile": "ARG FROM_IMAGE_NAME=pytorch/pytorch:1.7.1-cuda11.0-cudnn8-runtime\nFROM ${FROM_IMAGE_NAME}\n"},
        {"README.md": "## Requirements\n* pytorch 0.4.0\n"},
        # NGC's `yy.mm` tags name no torch release
        {"Dockerfile": "FROM nvcr.io/nvidia/pytorch:18.01-py3\n"},
        # the newest version a README names is its torch: an older branch's install line is history
        {"README.md": "+ Install PyTorch 0.4\n\nThe original code needs PyTorch 0.1.12:\n`conda install pytorch=0.1.12 -c soumith`.\n"},
        # prose that names an old torch is often stale; a lower bound is no pin
        {"README.md": "Make sure you have Python 3.6 and PyTorch 0.3.0.\n"},
        {"README.md": "- PyTorch >= 0.3\n- pytorch 0.2+\n"},
        {"Dockerfile": "# FROM pytorch/pytorch:0.3.1-cuda9\nFROM pytorch/pytorch:1.10.0-cuda11.3-cudnn8-devel\n"},
        # a Dockerfile in a sibling folder governs that folder only
        {"speech/docker/Dockerfile": f"RUN pip install {WHEEL}\n", "speech/Dockerfile": "FROM pytorch/pytorch:0.3.1\n"},
    ],
)
def test_modern_unknown_stale_or_sibling_torch_is_no_pin(tmp_path, files):
    write(tmp_path, {**files, "rnnt/.keep": ""})
    assert torch_pin(str(tmp_path / "rnnt/train.py")) is None


# ---- the torch a README or Dockerfile installs (from 0.4 on): no bound, but the pure API rules read it ------------

INSTALLS_1_11 = "## Install\n* Install pytorch by `pip install torch==1.11.0 --extra-index-url https://download.pytorch.org/whl/cu113`\n"


@pytest.mark.parametrize(
    "files, installed",
    [
        ({"README.md": INSTALLS_1_11}, (1, 11)),
        ({"Dockerfile": "FROM pytorch/pytorch:1.7.1-cuda11.0-cudnn8-runtime\n"}, (1, 7)),
        ({"README.md": "## Requirements\n- PyTorch >= 1.11\n"}, None),  # a lower bound installs nothing exact
        ({"README.md": "Tested with PyTorch 1.11 and CUDA 11.3.\n"}, None),  # prose: often stale
        ({"README.md": "Requires PyTorch == 0.3.1\n"}, None),  # a legacy torch is a bound (torch_pin), not this
    ],
)
def test_the_torch_a_readme_or_dockerfile_installs_is_kept_apart_from_the_pins(tmp_path, files, installed):
    write(tmp_path, files)
    pin = installed_torch(str(tmp_path / "train.py"))
    assert (pin.newest if pin else None) == installed
    assert torch_pin(str(tmp_path / "train.py")) is None or installed is None


def test_gpu403_silent_where_the_readme_installs_a_torch_without_the_replacement(tmp_path, monkeypatch):
    # torch 1.11 has no `torch.amp.autocast` (1.12) nor `torch.amp.GradScaler` (2.3): the old API is right there
    root = write(tmp_path / "p", {"README.md": INSTALLS_1_11, "train.py": AMP})
    assert found(lint(root, monkeypatch, **GPU403)) == []


@pytest.mark.parametrize(
    "files, installed",
    [
        # an image tag that states the torch it ships
        ({"README.md": "Run in the image [rocm/pytorch:rocm6.1_ubuntu22.04_py3.10_pytorch_2.1.2](https://hub.docker.com)\n"}, (2, 1)),
        ({"Dockerfile": "FROM rocm/pytorch:rocm6.1.2_ubuntu22.04_py3.10_pytorch_release-2.3.0\n"}, (2, 3)),
        ({"README.md": "docker pull rocm/pytorch:latest\n"}, None),  # no version in the tag
        ({"Dockerfile": "FROM nvcr.io/nvidia/pytorch:23.08-py3\n"}, None),  # a year and month, no torch release
        # a pinned package whose releases import only on an old torch: timm 0.3 needs `torch._six.container_abcs`
        ({"README.md": "- [timm](https://github.com/huggingface/pytorch-image-models), pip install timm==0.3.4\n"}, (1, 8)),
        ({"requirements.txt": "timm==0.3.2\n"}, (1, 8)),
        ({"requirements.txt": "timm==0.4.12\ntimm>=0.3\n"}, None),
    ],
)
def test_image_tags_and_capping_packages_name_the_installed_torch(tmp_path, files, installed):
    write(tmp_path, files)
    pin = installed_torch(str(tmp_path / "train.py"))
    assert (pin.newest if pin else None) == installed
    assert torch_pin(str(tmp_path / "train.py")) is None


def test_gpu403_keeps_the_scaler_where_a_rocm_image_ships_torch_2_1(tmp_path, monkeypatch):
    # torch 2.1 has `torch.amp.autocast` (1.12) but no `torch.amp.GradScaler` (2.3): only autocast is reported
    readme = "Use the image rocm/pytorch:rocm6.1_ubuntu22.04_py3.10_pytorch_2.1.2\n"
    root = write(tmp_path / "p", {"README.md": readme, "train.py": AMP})
    assert found(lint(root, monkeypatch, **GPU403)) == ["train.py:5 GPU403"]


def test_gpu403_silent_where_the_readme_pins_timm_0_3(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {"README.md": "pip install timm==0.3.4\n", "train.py": AMP})
    assert found(lint(root, monkeypatch, **GPU403)) == []


def test_gpu403_reports_where_the_readme_installs_a_torch_with_the_replacement(tmp_path, monkeypatch):
    readme = INSTALLS_1_11.replace("1.11.0", "2.5.1")
    root = write(tmp_path / "p", {"README.md": readme, "train.py": AMP})
    assert found(lint(root, monkeypatch, **GPU403)) == ["train.py:4 GPU403", "train.py:5 GPU403"]


def test_gpu402_silent_where_a_dockerfile_image_predates_the_new_names(tmp_path, monkeypatch):
    root = write(tmp_path / "p", {"Dockerfile": "FROM pytorch/pytorch:1.2-cuda10.0-cudnn7-runtime\n", "train.py": MEMORY})
    assert found(lint(root, monkeypatch, select=("GPU402",))) == []


def test_advice_rules_do_not_read_the_installed_torch_as_a_bound(tmp_path, monkeypatch):
    # code from 0.4 on mostly runs on newer torch: advice that needs one is still worth giving (GPU104 needs 1.7)
    root = write(tmp_path / "p", {"README.md": INSTALLS_1_11.replace("1.11.0", "1.6.0"), "train.py": LOADER})
    assert found(lint(root, monkeypatch, select=("GPU104",))) == ["train.py:4 GPU104"]


def test_a_wheel_in_requirements_pins_its_version(tmp_path):
    write(tmp_path, {"requirements.txt": "https://download.pytorch.org/whl/cu101/torch-1.6.0%2Bcu101-cp37-cp37m-linux_x86_64.whl\n"})
    assert torch_pin(str(tmp_path / "train.py")).newest == (1, 6)


@pytest.mark.parametrize(
    "docker, expected",
    [
        ({"docker/Dockerfile": f"RUN pip install {WHEEL}\n"}, []),  # volatile is the no-grad of torch 0.2
        ({"docker/Dockerfile": "FROM pytorch/pytorch:1.0.1-cuda10.0-cudnn7-runtime\n"}, ["train.py:11 GPU405"]),
        ({"other/docker/Dockerfile": f"RUN pip install {WHEEL}\n"}, ["train.py:11 GPU405"]),
    ],
)
def test_gpu405_silent_under_a_legacy_torch_without_no_grad(tmp_path, monkeypatch, docker, expected):
    root = write(tmp_path / "p", {"train.py": EVAL, **docker})
    assert found(lint(root, monkeypatch, select=("GPU405",))) == expected


@pytest.mark.parametrize("pin, expected", [("torch==0.3.1\n", []), ("torch==1.0.1\n", ["train.py:4 GPU104"])])
def test_gpu104_silent_under_a_dockerfile_legacy_torch(tmp_path, monkeypatch, pin, expected):
    root = write(tmp_path / "p", {"train.py": LOADER, "Dockerfile": f"FROM python:3.6\nRUN pip install {pin}"})
    assert found(lint(root, monkeypatch, select=("GPU104",))) == expected


BLOCKING = """\
import torch
from torch.utils.data import DataLoader

loader = DataLoader(dataset, batch_size=256, num_workers=4, pin_memory=True)
for epoch in range(10):
    for images, labels in loader:
        images = images.cuda()
        labels = labels.cuda()
"""


@pytest.mark.parametrize("pin, expected", [("torch==0.3.1\n", []), ("torch==0.4.1\n", ["train.py:7 GPU105", "train.py:8 GPU105"])])
def test_gpu105_silent_below_0_4_where_non_blocking_does_not_exist(tmp_path, monkeypatch, pin, expected):
    # torch 0.3 spells it `async=True`, a syntax error from Python 3.7: the fix would raise a TypeError there
    root = write(tmp_path / "p", {"train.py": BLOCKING, "requirements.txt": pin})
    assert found(lint(root, monkeypatch, select=("GPU105",))) == expected


MEMORY = """\
import torch

print(torch.cuda.memory_cached())
"""


@pytest.mark.parametrize("pin, expected", [("torch==1.3.1\n", []), ("torch==1.4.0\n", ["train.py:3 GPU402"])])
def test_gpu402_silent_below_1_4_where_the_new_names_do_not_exist(tmp_path, monkeypatch, pin, expected):
    root = write(tmp_path / "p", {"train.py": MEMORY, "requirements.txt": pin})
    assert found(lint(root, monkeypatch, select=("GPU402",))) == expected
    fixed = fix_source(MEMORY, str(root / "train.py"), settings(select=("GPU402",))).text
    assert ("memory_reserved" in fixed) == bool(expected)


def test_a_dockerfile_governs_its_folder_and_those_below(tmp_path):
    write(tmp_path, {"speech/Dockerfile": "FROM pytorch/pytorch:0.3.1-cuda9\n", "speech/models/__init__.py": ""})
    assert torch_pin(str(tmp_path / "speech/models/net.py")).where == "../Dockerfile:1"
    assert torch_pin(str(tmp_path / "train.py")) is None
