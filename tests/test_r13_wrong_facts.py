"""Round 13's wrong findings on the fifteenth corpus (`docs/precision.md`), minimal shapes of our own:

- GPU405 under a decorator of the module whose wrapper runs the function under `torch.no_grad()` (`@nograd` over
  `def nograd(f): def new_f(*a, **k): with torch.no_grad(): return f(*a, **k)`, `analysis/grad_decorators.py`).
"""

from __future__ import annotations

from tests.conftest import findings, run_gpulint

PREDICT = """\
import torch
from torch import nn


def nograd(f):
    def new_f(*args, **kwargs):
        with torch.no_grad():
            return f(*args, **kwargs)
    return new_f


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        return self.net(x)

    @nograd
    def predict(self, images):
        self.eval()
        outputs = []
        for image in images:
            outputs.append(self(image.cuda()))
        return outputs
"""


def test_a_project_decorator_that_runs_the_function_under_no_grad_is_no_grad():
    assert findings(PREDICT, select=("GPU405",)) == []


def test_a_decorator_that_also_calls_the_function_with_autograd_keeps_the_finding():
    source = PREDICT.replace(
        "        with torch.no_grad():\n            return f(*args, **kwargs)\n",
        "        if kwargs.pop('train', False):\n            return f(*args, **kwargs)\n"
        "        with torch.no_grad():\n            return f(*args, **kwargs)\n",
    )
    assert [f.split()[1] for f in findings(source, select=("GPU405",))] == ["GPU405"]


def test_a_decorator_without_no_grad_keeps_the_finding():
    source = PREDICT.replace("with torch.no_grad():", "with torch.autocast('cuda'):")
    assert [f.split()[1] for f in findings(source, select=("GPU405",))] == ["GPU405"]


LIGHTNING = """\
import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


class Net(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(784, 10)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.layer(x.view(x.size(0), -1)), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters())


class FashionMNIST(pl.LightningDataModule):
    def setup(self, stage=None):
        self.train = datasets.FashionMNIST(".", train=True, download=True, transform=transforms.ToTensor())
        self.test = datasets.FashionMNIST(".", train=False, download=True, transform=transforms.ToTensor())

    def train_dataloader(self):
        return DataLoader(self.train, batch_size=128, shuffle=True, pin_memory=True)

    def test_dataloader(self):
        return DataLoader(self.test, batch_size=128, pin_memory=True)


def objective():
    trainer = pl.Trainer(max_epochs=10, accelerator="gpu")
    trainer.fit(Net(), datamodule=FashionMNIST())
    RUN_TEST


if __name__ == "__main__":
    objective()
"""


def lightning(run_test: str = "") -> str:
    return LIGHTNING.replace("    RUN_TEST\n", f"    {run_test}\n" if run_test else "")


def test_a_test_dataloader_the_script_never_tests_with_is_silent():
    # `fit` reads train_dataloader (and val_dataloader) only: the test hook's loader is never built
    assert findings(lightning(), select=("GPU101",)) == ["26:16 GPU101"]


def test_a_test_dataloader_run_by_trainer_test_in_a_loop_keeps_its_finding():
    # (one `trainer.test(...)` after the fit is a one-off pass, `analysis/one_off_passes.py`: silent either way)
    tested = "for round in range(10):\n        trainer.test(Net(), datamodule=FashionMNIST())"
    assert findings(lightning(tested), select=("GPU101",)) == ["26:16 GPU101", "29:16 GPU101"]


def test_a_test_dataloader_of_an_imported_module_keeps_its_finding(tmp_path):
    # another module may run `trainer.test(...)` with the data module
    (tmp_path / "train.py").write_text(lightning())
    (tmp_path / "evaluate.py").write_text("import lightning.pytorch as pl\nfrom train import FashionMNIST, Net\npl.Trainer().test(Net(), datamodule=FashionMNIST())\n")
    result = run_gpulint("check", "--select", "GPU101", "--output-format", "concise", str(tmp_path / "train.py"), cwd=tmp_path)
    assert "train.py:29:16: GPU101" in result.stdout.decode(), result.stdout.decode()


CONTROL = """\
import pytorch_lightning as pl
from torch.utils.data import DataLoader
from project.data import PairedImages
from project.model import create_model, load_state_dict

resume_path = "./models/control_init.ckpt"
batch_size = 4

model = create_model("./models/control_v15.yaml").cpu()
model.load_state_dict(load_state_dict(resume_path, location="cpu"))
loader = DataLoader(PairedImages(), num_workers=8, batch_size=batch_size, shuffle=True)
trainer = pl.Trainer(accelerator="gpu", devices=1)
trainer.fit(model, loader)
"""


def test_a_pretrained_model_built_from_its_config_fills_the_gpu_at_a_small_batch():
    # a network of its config's size, initialized from a checkpoint (like `from_pretrained`): batch 4 is memory's choice
    assert findings(CONTROL, select=("GPU103",)) == []


def test_a_model_built_from_a_config_without_a_checkpoint_keeps_the_finding():
    source = CONTROL.replace('model.load_state_dict(load_state_dict(resume_path, location="cpu"))\n', "")
    assert findings(source, select=("GPU103",)) == ["10:10 GPU103"]


def test_a_checkpoint_loaded_into_a_model_of_the_code_keeps_the_finding():
    source = CONTROL.replace('create_model("./models/control_v15.yaml")', "create_model(channels=64)")
    assert findings(source, select=("GPU103",)) == ["11:10 GPU103"]


SEQUENCES = """\
import argparse
import pytorch_lightning as pl
from torch.utils.data import DataLoader
from src.dataset import TokenWindows
from src.model import LM

parser = argparse.ArgumentParser()
parser.add_argument("--ctx_len", default=1024, type=int)
parser.add_argument("--micro_bsz", default=12, type=int)
args = parser.parse_args()
model = LM(args)
loader = DataLoader(TokenWindows(args), batch_size=args.micro_bsz, num_workers=1, pin_memory=True, drop_last=True)
pl.Trainer(accelerator="gpu").fit(model, loader)
"""


def test_a_small_batch_of_long_sequences_is_a_large_step():
    # 12 sequences of 1024 tokens: every matmul has 12,288 rows
    assert findings(SEQUENCES, select=("GPU103",)) == []


def test_a_small_batch_of_short_sequences_keeps_the_finding():
    assert findings(SEQUENCES.replace("default=1024", "default=128"), select=("GPU103",)) == ["12:10 GPU103"]


def test_a_small_batch_without_a_sequence_length_keeps_the_finding():
    source = SEQUENCES.replace('parser.add_argument("--ctx_len", default=1024, type=int)\n', "")
    assert findings(source, select=("GPU103",)) == ["11:10 GPU103"]
