"""GPU303 kinds the thirteenth corpus missed: numpy and `math` given a GPU tensor (WaveRNN's and Tacotron's
`np.isnan(grad_norm)` every step), and reads under an every-N guard whose N is 1 (llama2.c's
`if iter_num % log_interval == 0:` with `log_interval = 1`)."""

from __future__ import annotations

import pytest

from tests.conftest import UNPROVEN_READ, diagnostics, findings
from tests.projects_helper import found, lint, write

STEP = """\
import math
import numpy as np
import torch
from nets import Net

device = torch.device("cuda")
model = Net().to(device)


def train(loader, optimizer):
    running = 0.0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
"""


def step(body: str) -> str:
    return STEP + "".join(f"        {line}\n" for line in body.splitlines())


def gpu303(source: str, path: str = "train.py") -> list[str]:
    return findings(source, path=path, select=("GPU303",))


# ---- numpy and math given a GPU tensor -------------------------------------------------------------------


def test_numpy_isnan_of_the_clipped_grad_norm_is_a_host_read():
    source = step('if np.isnan(grad_norm):\n    print("grad_norm was NaN!")')
    assert gpu303(source) == ["19:12 GPU303"]
    [d] = diagnostics(source, select=("GPU303",))
    assert d.message.startswith("`np.isnan(grad_norm)` (numpy needs the GPU tensor `grad_norm` on the host) waits for the GPU every training step")
    assert "refuses a CUDA tensor (TypeError)" in d.help and "`torch.isnan(x)`" in d.help


@pytest.mark.parametrize("call", ["math.isnan(loss)", "math.isfinite(loss)", "math.sqrt(loss)"])
def test_math_of_a_gpu_loss_is_a_host_read(call):
    source = step(f"if {call}:\n    print('odd loss')")
    assert gpu303(source) == ["19:12 GPU303"]
    [d] = diagnostics(source, select=("GPU303",))
    assert d.message.startswith(f"`{call}` (`math` converts the GPU tensor `loss` on the host) waits for the GPU")


def test_numpy_mean_of_a_gpu_tensor_is_a_host_read():
    source = step("m = np.mean(loss)")
    assert gpu303(source) == ["19:13 GPU303"]


@pytest.mark.parametrize(
    "body",
    [
        "running += 1.0\nif math.isnan(running):\n    break",  # a host float
        "losses = [0.1, 0.2]\nm = np.mean(losses)",  # a Python list
        "if np.isnan(lr):\n    break",  # a parameter nobody moves
        "n = math.ceil(x.size(0) / 2)",  # a size: a host int
        "np.random.seed(0)",
        "assert len(y) > 0",  # an assert on host data
        "assert x.dim() == 4",
    ],
)
def test_host_values_given_to_numpy_math_or_assert_stay_silent(body):
    assert gpu303(step(body).replace("def train(loader, optimizer):", "def train(loader, optimizer, lr=0.1):")) == []


def test_a_grad_norm_from_a_host_model_stays_silent():
    source = step("if np.isnan(grad_norm):\n    break").replace("model = Net().to(device)", "model = Net()")
    assert gpu303(source) == []


# ---- every-N guards whose N is 1 -------------------------------------------------------------------------

LOOP = """\
import torch
from nets import Net
{settings}
model = Net().to("cuda")
opt = torch.optim.AdamW(model.parameters())


def train(batches):
    iter_num = 0
    for x, y in batches:
        x, y = x.to("cuda"), y.to("cuda")
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if iter_num % log_interval == 0:
            lossf = loss.item()
            print(f"{{iter_num}} | loss {{lossf:.4f}}")
        iter_num += 1
"""


def test_a_read_under_an_interval_of_one_runs_every_step():
    source = LOOP.format(settings="log_interval = 1")
    assert gpu303(source) == ["17:21 GPU303"]
    [d] = diagnostics(source, select=("GPU303",))
    assert d.message == (
        "`loss.item()` waits for the GPU every training step (loop at line 10), under `iter_num % log_interval` "
        "with `log_interval` set to 1 (the guard passes every step)"
    )
    assert d.help == "Give `log_interval` a default above 1 (say 10 or 100) so the guard thins the reads" + UNPROVEN_READ


def test_an_argparse_default_of_one_runs_every_step():
    settings = (
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--log_interval', type=int, default=1)\n"
        "args = parser.parse_args()\nlog_interval = args.log_interval"
    )
    assert [f.split()[1] for f in gpu303(LOOP.format(settings=settings))] == ["GPU303"]


def test_an_interval_of_ten_thins_the_reads():
    assert gpu303(LOOP.format(settings="log_interval = 10")) == []


@pytest.mark.parametrize(("shipped", "expected"), [(50, []), (1, ["train.py:19 GPU303"])])
def test_an_interval_from_a_shipped_config_decides(tmp_path, monkeypatch, shipped, expected):
    settings = 'import yaml\nlog_interval = 1\ncfg = yaml.safe_load(open("configs/train.yaml"))'
    source = LOOP.format(settings=settings).replace("% log_interval", '% cfg["log_interval"]')
    root = write(tmp_path / "p", {"train.py": source, "configs/train.yaml": f"log_interval: {shipped}\n"})
    assert [f for f in found(lint(root, monkeypatch)) if f.endswith("GPU303")] == expected


# ---- asserts on the batch a framework placed -------------------------------------------------------------

LIGHTNING = """\
import pytorch_lightning as pl
import torch
from nets import Net
from data import get_loaders


class PetModel(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = Net()

    def shared_step(self, batch, stage):
        image = batch["image"]
        assert image.ndim == 4
        mask = batch["mask"]
        {check}
        logits = self.model(image)
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, mask)

    def training_step(self, batch, batch_idx):
        return self.shared_step(batch, "train")

    def validation_step(self, batch, batch_idx):
        return self.shared_step(batch, "valid")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.0001)


train_loader, valid_loader = get_loaders()
trainer = pl.Trainer(accelerator="{accelerator}", max_epochs=5)
trainer.fit(PetModel(), train_loader, valid_loader)
"""


def test_an_assert_on_a_reduction_of_the_placed_batch_in_a_shared_step_is_a_host_read():
    source = LIGHTNING.format(check="assert mask.max() <= 1.0 and mask.min() >= 0", accelerator="gpu")
    assert gpu303(source) == ["16:16 GPU303"]
    [d] = diagnostics(source, select=("GPU303",))
    assert d.message == (
        "`assert mask.max() <= 1.0 and mask.min() >= 0` on a GPU tensor waits for the GPU every training step "
        "(`training_step` at line 20, run by Lightning for each batch)"
    )
    assert d.help.startswith("Check the data where it is made (the dataset, on the CPU)")


@pytest.mark.parametrize(
    ("check", "accelerator"),
    [
        ("assert mask.ndim == 4", "gpu"),  # a host attribute
        ("assert stage in ('train', 'valid')", "gpu"),  # host data
        ("assert mask.max() <= 1.0", "cpu"),  # the Trainer keeps the batch on the CPU
    ],
)
def test_asserts_on_host_data_or_a_cpu_trainer_stay_silent(check, accelerator):
    assert gpu303(LIGHTNING.format(check=check, accelerator=accelerator)) == []
