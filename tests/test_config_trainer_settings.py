"""Lightning `Trainer(**config["trainer_params"])` with the settings read from a YAML file of the repository
(issue 14, the sixth corpus's PyTorch-VAE): the keywords the mapping passes are those written in the file
the script loads by default and in every YAML file shipped beside it (any of which a user may pass instead).
When none of them sets `precision` or keeps the Trainer on the CPU, the Trainer trains in float32 on the GPU
(GPU901, GPU902); a file that sets either, a mapping that is not known, or `**kwargs` from elsewhere stays
unknown, never guessed."""

from __future__ import annotations

import os

from tests.projects_helper import found, lint, write

EXPERIMENT = """
import pytorch_lightning as pl
import torch


class Experiment(pl.LightningModule):
    def __init__(self, model, params):
        super().__init__()
        self.model = model
        self.params = params

    def training_step(self, batch, batch_idx):
        x, _ = batch
        return self.model(x).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.model.parameters(), lr=self.params["lr"])
"""

RUN = """
import argparse

import torch
import yaml
from pytorch_lightning import Trainer

from experiment import Experiment

parser = argparse.ArgumentParser()
parser.add_argument("--config", "-c", dest="filename", default="configs/vae.yaml")
args = parser.parse_args()
with open(args.filename, "r") as file:
    try:
        config = yaml.safe_load(file)
    except yaml.YAMLError as exc:
        print(exc)

experiment = Experiment(torch.nn.Linear(8, 8), config["exp_params"])
runner = Trainer(logger=None, **config["trainer_params"])
runner.fit(experiment)
"""

VAE = """\
exp_params:
  lr: 0.005
trainer_params:
  gpus: [1]
  max_epochs: 100
"""

BETA = """\
exp_params:
  lr: 0.001
trainer_params:
  gpus: [1]
  max_epochs: 50
"""

FLOAT32 = ["run.py:20 GPU901", "run.py:20 GPU902"]


def project(tmp_path, **configs: str):
    files = {"experiment.py": EXPERIMENT, "run.py": RUN, "configs/vae.yaml": VAE, "configs/beta_vae.yaml": BETA}
    files.update({f"configs/{name}.yaml": text for name, text in configs.items()})
    return write(tmp_path / "p", files)


def check(root, monkeypatch, **kw):
    return lint(root, monkeypatch, select=("GPU901", "GPU902"), preview=True, **kw)


def test_trainer_settings_from_every_shipped_yaml_show_float32_training(tmp_path, monkeypatch):
    diagnostics = check(project(tmp_path), monkeypatch)
    assert found(diagnostics) == FLOAT32
    amp, tf32 = diagnostics
    assert amp.message.startswith(
        "the Lightning Trainer trains in float32 "
        "(`precision` is not set, nor in `configs/vae.yaml` and the 1 settings file beside it)"
    )
    assert tf32.message == "the Lightning Trainer runs float32 matrix multiplications on CUDA without TF32"


def test_a_shipped_yaml_that_sets_precision_or_the_cpu_keeps_it_unknown(tmp_path, monkeypatch):
    for text in (
        BETA.replace("max_epochs: 50", "max_epochs: 50\n  precision: 16"),
        BETA.replace("gpus: [1]", "accelerator: cpu"),
        BETA.replace("gpus: [1]", "gpus: 0"),
        BETA.replace("gpus: [1]", "gpus: null"),
        BETA.replace("trainer_params:\n  gpus: [1]\n  max_epochs: 50", "trainer_params: ${oc.env:TRAINER}"),
    ):
        root = project(tmp_path)
        (root / "configs/beta_vae.yaml").write_text(text, encoding="utf-8")
        assert found(check(root, monkeypatch)) == [], text


def test_a_yaml_for_another_script_beside_it_is_not_an_alternative(tmp_path, monkeypatch):
    # no `trainer_params` at all: a settings file of another script, which this one cannot load
    root = project(tmp_path, dataset="root: /data\nnum_workers: 4\n")
    assert found(check(root, monkeypatch)) == FLOAT32


def test_settings_that_are_not_known_are_never_guessed(tmp_path, monkeypatch):
    unknown = {
        # the path is chosen at run time
        "run.py": RUN.replace('default="configs/vae.yaml"', "required=True"),
        # the default file has no such mapping
        "configs/vae.yaml": VAE.replace("trainer_params:", "trainer:"),
    }
    for name, text in unknown.items():
        root = project(tmp_path)
        (root / name).write_text(text, encoding="utf-8")
        assert found(check(root, monkeypatch)) == [], name
    # keywords from a dict built elsewhere, or a positional `*args`
    for call in ("Trainer(logger=None, **kwargs)", "Trainer(*extra, **config['trainer_params'])"):
        root = project(tmp_path)
        source = RUN.replace('Trainer(logger=None, **config["trainer_params"])', call)
        source = source.replace("experiment = Experiment", "kwargs = dict(vars(args))\nextra = []\nexperiment = Experiment")
        (root / "run.py").write_text(source, encoding="utf-8")
        assert found(check(root, monkeypatch)) == [], call


def test_editing_a_yaml_beside_the_default_rechecks_the_script(tmp_path, monkeypatch):
    root = project(tmp_path)
    assert found(check(root, monkeypatch, use_cache=True)) == FLOAT32
    assert found(check(root, monkeypatch, use_cache=True)) == FLOAT32  # warm
    beta = root / "configs/beta_vae.yaml"
    beta.write_text(BETA + "  precision: bf16-mixed\n", encoding="utf-8")
    os.utime(beta, ns=(beta.stat().st_atime_ns, beta.stat().st_mtime_ns + 10**9))
    assert found(check(root, monkeypatch, use_cache=True)) == []
