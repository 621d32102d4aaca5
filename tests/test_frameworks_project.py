"""Frameworks across modules: a LightningModule in model.py trained by the Trainer of train.py, its base class
in another file or package; GPU context from framework set-up, never from the word "cuda"."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.conftest import ALL_LOADERS, ALL_READS
from gpulint.analysis.project import lone_context
from gpulint.analysis.summary import summarize
from gpulint.config import Settings
from gpulint.linter import lint_files
from tests.projects_helper import write

BASE = """\
    import lightning as L


    class Base(L.LightningModule):
        def configure_optimizers(self):
            import torch
            return torch.optim.SGD(self.parameters(), lr=0.1)
    """

MODEL = """\
    import torch
    from torch.utils.data import DataLoader

    {import_base}


    class LitModel({base}):
        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.cross_entropy(self(x), y)
            self.log("loss", loss.item())
            return loss

        def train_dataloader(self):
            return DataLoader(self.dataset, batch_size=64, shuffle=True)
    """

TRAIN = """\
    import lightning as L

    from model import LitModel

    trainer = L.Trainer(accelerator="gpu", max_epochs=10)
    trainer.fit(LitModel())
    """


def lint(root: Path, monkeypatch) -> list[str]:
    monkeypatch.chdir(root)
    results = lint_files(sorted(root.rglob("*.py")), Settings(root=root, rule_options=ALL_READS + ALL_LOADERS), jobs=1, use_cache=False)
    return [f"{d.filename}:{d.location.row} {d.code}" for r in results for d in r.diagnostics]


def test_a_lightning_module_whose_base_is_in_another_module_runs_per_step_and_hands_over_its_loader(tmp_path, monkeypatch):
    model = MODEL.format(import_base="from base import Base", base="Base")
    root = write(tmp_path, {"base.py": BASE, "model.py": model, "train.py": TRAIN})
    assert lint(root, monkeypatch) == ["model.py:11 GPU303", "model.py:15 GPU101", "model.py:15 GPU102"]


def test_the_base_may_come_from_a_package_by_relative_or_dotted_import(tmp_path, monkeypatch):
    relative = MODEL.format(import_base="from .base import Base", base="Base")
    dotted = MODEL.format(import_base="import models.base", base="models.base.Base")
    write(tmp_path / "a", {"pkg/__init__.py": "", "pkg/base.py": BASE, "pkg/model.py": relative})
    write(tmp_path / "b", {"models/__init__.py": "", "models/base.py": BASE, "model.py": dotted})
    assert lint(tmp_path / "a", monkeypatch) == ["pkg/model.py:11 GPU303", "pkg/model.py:15 GPU101", "pkg/model.py:15 GPU102"]
    assert lint(tmp_path / "b", monkeypatch) == ["model.py:11 GPU303", "model.py:15 GPU101", "model.py:15 GPU102"]


def test_a_project_base_that_is_a_plain_module_gives_no_framework_facts(tmp_path, monkeypatch):
    base = "import torch\n\n\nclass Base(torch.nn.Module):\n    pass\n"
    model = MODEL.format(import_base="from base import Base", base="Base")
    root = write(tmp_path, {"base.py": base, "model.py": model})
    assert lint(root, monkeypatch) == []


def test_framework_set_up_is_gpu_evidence_and_a_cpu_accelerator_is_not():
    def reason(source: str):
        return lone_context(summarize(textwrap.dedent(source)), "train.py").gpu_reason

    assert reason('import lightning as L\ntrainer = L.Trainer(accelerator="gpu")\n') == "a Lightning Trainer that may use a GPU at line 2"
    assert reason('import lightning as L\ntrainer = L.Trainer(accelerator="cpu")\n') is None
    assert reason("from accelerate import Accelerator\naccelerator = Accelerator()\n") == "an `Accelerator()` at line 2"
    assert reason("from accelerate import Accelerator\naccelerator = Accelerator(cpu=True)\n") is None
    assert reason("from transformers import TrainingArguments\nargs = TrainingArguments('out', use_cpu=True)\n") is None
    assert reason("from transformers import Trainer\n\n\nclass MyTrainer(Trainer):\n    pass\n") == (
        "`MyTrainer` (derived from the HF `Trainer`) at line 4"
    )
    # a LightningModule alone: its Trainer lives elsewhere, with the default accelerator `auto`
    assert reason("import lightning as L\n\n\nclass Lit(L.LightningModule):\n    pass\n") == (
        "`Lit` (derived from a Lightning LightningModule) at line 4"
    )
