"""Frameworks as data: Lightning, Fabric, accelerate, ignite and HF Trainer code gets the existing rules through
the model's facts (per-step methods, loaders handed to a framework, device-placing wrappers, GPU context)."""

from __future__ import annotations

import textwrap

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.loader_flow import EVAL, TRAIN
from gpulint.diagnostics import Severity
from tests.conftest import diagnostics, findings, fixed

LIGHTNING_SCRIPT = """\
    import lightning as L
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.data import DataLoader
    from torchvision.datasets import MNIST


    class LitClassifier(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 10))

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = F.cross_entropy(self.net(x), y)
            self.log("train_loss", loss.item())
            return loss

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.log("val_loss", F.cross_entropy(self.net(x), y))

        def train_dataloader(self):
            return DataLoader(MNIST("data", train=True), batch_size=8, shuffle=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)


    if __name__ == "__main__":
        trainer = L.Trainer(accelerator="gpu", max_epochs=10, precision="bf16-mixed")
        trainer.fit(LitClassifier())
    """


def model_of(source: str) -> SemanticModel:
    return SemanticModel(cst.parse_module(textwrap.dedent(source)))


# ---- Lightning -----------------------------------------------------------------------------------------


def test_lightning_module_gets_the_data_loading_and_sync_rules():
    # The example: no workers, no pinning, a small batch, and `loss.item()` in `training_step`.
    # GPU101 covers the missing `pin_memory` of a torchvision dataset loaded without workers (analysis/loader_bound.py).
    assert findings(LIGHTNING_SCRIPT) == ["17:32 GPU303", "25:16 GPU101", "25:16 GPU103"]
    found = {d.code: d for d in diagnostics(LIGHTNING_SCRIPT)}
    assert "also set `pin_memory=True`" in found["GPU101"].help
    workers = LIGHTNING_SCRIPT.replace("batch_size=8, shuffle=True)", "batch_size=8, shuffle=True, num_workers=2)")
    # no GPU104: MNIST's 60,000 samples at batch 8 make a pass long enough for a restart of 2 workers (epoch_length)
    assert findings(workers) == ["17:32 GPU303", "25:16 GPU102", "25:16 GPU103"]
    found = {**{d.code: d for d in diagnostics(workers)}, **found}
    assert found["GPU303"].message.startswith(
        "`loss.item()` waits for the GPU every training step (`training_step` at line 14, run by Lightning for each batch)"
    )
    assert found["GPU303"].severity == Severity.WARNING
    assert "copied to the GPU by the Lightning Trainer (`train_dataloader` at line 24)" in found["GPU102"].message
    assert found["GPU101"].severity == Severity.WARNING  # the training loader


def test_logging_a_tensor_is_not_a_sync_and_a_guarded_item_is_silent():
    source = LIGHTNING_SCRIPT.replace(
        'self.log("train_loss", loss.item())',
        'self.log("train_loss", loss)\n        if batch_idx % 100 == 0:\n            print(loss.item())',
    )
    assert "GPU303" not in " ".join(findings(source))


def test_well_configured_lightning_module_is_clean():
    source = """\
        import lightning as L
        import torch
        import torch.nn.functional as F
        from torch import nn
        from torch.utils.data import DataLoader


        class LitClassifier(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(32, 10)

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self.net(x), y)
                self.log("train_loss", loss, prog_bar=True)
                return loss

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=1e-3, fused=True)


        class Data(L.LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.train_set, batch_size=256, shuffle=True, num_workers=8, pin_memory=True, persistent_workers=True)

            def val_dataloader(self):
                return DataLoader(self.val_set, batch_size=512, num_workers=4, pin_memory=True, persistent_workers=True)


        if __name__ == "__main__":
            torch.set_float32_matmul_precision("high")
            L.Trainer(accelerator="gpu", max_epochs=30, precision="bf16-mixed").fit(LitClassifier(), datamodule=Data())
        """
    assert findings(source, preview=True) == []


def test_loaders_given_to_trainer_fit_and_workers_restarted_every_epoch():
    source = """\
        import lightning as L
        from torch.utils.data import DataLoader

        train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4)
        val_loader = DataLoader(val_set, batch_size=64, num_workers=4, pin_memory=True, persistent_workers=True)
        trainer = L.Trainer(max_epochs=5, precision="16-mixed")
        trainer.fit(model, train_loader, val_dataloaders=val_loader)
        """
    assert findings(source) == ["4:16 GPU102", "4:16 GPU104"]
    persistent = next(d for d in diagnostics(source) if d.code == "GPU104")
    assert "every epoch (`trainer.fit(...)` at line 7 iterates it once per epoch)" in persistent.message


def test_cpu_trainer_is_not_gpu_context():
    source = """\
        import pytorch_lightning as pl
        from torch.utils.data import DataLoader


        class Model(pl.LightningModule):
            def train_dataloader(self):
                return DataLoader(self.data, batch_size=64)


        pl.Trainer(accelerator="cpu").fit(Model())
        """
    assert findings(source, preview=True) == []
    assert not model_of(source).uses_cuda


def test_step_functions_and_their_batch_parameter():
    model = model_of(LIGHTNING_SCRIPT)
    steps = {func.name.value: step for func, step in model.frameworks.step_functions.items()}
    assert {name: (s.role, s.batch) for name, s in steps.items()} == {
        "training_step": ("training", "batch"),
        "validation_step": ("evaluation", "batch"),
    }


def test_accumulate_grad_batches_silences_the_small_batch_rule():
    source = LIGHTNING_SCRIPT.replace('L.Trainer(accelerator="gpu"', 'L.Trainer(accelerator="gpu", accumulate_grad_batches=8')
    assert "GPU103" not in " ".join(findings(source))


def test_pinning_fix_for_a_framework_placed_loader():
    source = """\
        import lightning as L
        import torch
        from torch.utils.data import DataLoader


        class Data(L.LightningDataModule):
            def train_dataloader(self):
                return DataLoader(self.train_set, batch_size=256, shuffle=True, num_workers=8, persistent_workers=True)
        """
    assert "pin_memory=torch.cuda.is_available()" in fixed(source, unsafe=False, select=("GPU102",))


def test_trainer_precision_is_amp_evidence_for_gpu901():
    source = """\
        import lightning as L

        trainer = L.Trainer(accelerator="gpu", max_epochs=3)
        trainer.fit(model, datamodule=data)
        """
    (found,) = diagnostics(source, select=("GPU901",), preview=True)
    assert (found.location.row, found.location.column) == (3, 11)
    assert found.message.startswith("the Lightning Trainer trains in float32 (`precision` is not set)")
    for setting in ('precision="bf16-mixed"', "precision=16", 'precision="64-true"', "precision=args.precision"):
        assert findings(source.replace('max_epochs=3', setting), select=("GPU901",), preview=True) == []
    assert findings(source.replace("max_epochs=3", 'precision="32-true"'), select=("GPU901",), preview=True) == ["3:11 GPU901"]


# ---- Fabric ---------------------------------------------------------------------------------------------


def test_fabric_setup_dataloaders_places_batches_and_its_loop_is_per_step():
    source = """\
        import lightning as L
        import torch
        from torch.utils.data import DataLoader


        def main():
            fabric = L.Fabric(accelerator="cuda", precision="bf16-mixed")
            model, optimizer = fabric.setup(Net(), torch.optim.SGD(params, lr=0.1))
            loader = fabric.setup_dataloaders(DataLoader(dataset, batch_size=128, shuffle=True, num_workers=4))
            for epoch in range(10):
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    fabric.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
                    print(loss.item())
        """
    assert findings(source) == ["9:39 GPU102", "9:39 GPU104", "16:19 GPU303"]


def test_fabric_move_to_device_false_does_not_place():
    source = """\
        import lightning as L
        from torch.utils.data import DataLoader

        fabric = L.Fabric()
        loader = fabric.setup_dataloaders(DataLoader(dataset, batch_size=128, num_workers=4), move_to_device=False)
        for batch in loader:
            fabric.backward(model(batch).sum())
        """
    assert "GPU102" not in " ".join(findings(source))


# ---- accelerate ----------------------------------------------------------------------------------------

ACCELERATE_SCRIPT = """\
    import torch
    from accelerate import Accelerator
    from torch.utils.data import DataLoader


    def main():
        accelerator = Accelerator(mixed_precision="bf16")
        train_dataloader = DataLoader(train_set, batch_size=32, shuffle=True, num_workers=4)
        model = Model()
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
        model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
        for epoch in range(3):
            for batch in train_dataloader:
                outputs = model(**batch)
                accelerator.backward(outputs.loss)
                optimizer.step()
                optimizer.zero_grad()
                accelerator.log({"loss": outputs.loss.item()})
    """


def test_accelerate_prepare_places_batches_and_the_loop_is_followed():
    # accelerate copies `pin_memory` from the loader it is given (data_loader.py), so GPU102 applies.
    assert findings(ACCELERATE_SCRIPT) == ["8:24 GPU102", "8:24 GPU104", "18:38 GPU303"]
    pinned = next(d for d in diagnostics(ACCELERATE_SCRIPT) if d.code == "GPU102")
    assert "copied to the GPU by `accelerator.prepare(...)` at line 11" in pinned.message


def test_accelerate_device_placement_off_or_cpu_does_not_place():
    for accelerator in ("Accelerator(device_placement=False)", "Accelerator(cpu=True)"):
        source = ACCELERATE_SCRIPT.replace('Accelerator(mixed_precision="bf16")', accelerator)
        assert "GPU102" not in " ".join(findings(source)), accelerator


def test_a_loader_the_framework_places_but_nothing_trains_on_is_not_reported():
    # dreambooth's prompt loader: strings for a generation pipeline, nothing to pin.
    source = """\
        from accelerate import Accelerator
        from torch.utils.data import DataLoader

        accelerator = Accelerator()
        sample_dataloader = accelerator.prepare(DataLoader(PromptDataset(prompt, 100), batch_size=4, num_workers=2))
        for example in sample_dataloader:
            images = pipeline(example["prompt"]).images
        """
    assert "GPU102" not in " ".join(findings(source))


def test_prepared_model_is_a_gpu_module():
    model = model_of(ACCELERATE_SCRIPT)
    residency = model.residency
    call = next(c for c in model.calls if model.code(c) == "model(**batch)")
    assert residency.is_gpu_module(call.func)


# ---- ignite ---------------------------------------------------------------------------------------------

IGNITE_SCRIPT = """\
    import torch
    from ignite.engine import Engine, Events, create_supervised_evaluator
    from torch.utils.data import DataLoader

    device = torch.device("cuda")


    def train_step(engine, batch):
        model.train()
        x, y = batch[0].to(device), batch[1].to(device)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.item()


    trainer = Engine(train_step)
    evaluator = create_supervised_evaluator(model, metrics=metrics, device=device)
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4)
    val_loader = DataLoader(val_set, batch_size=256, num_workers=4, pin_memory=True, persistent_workers=True)


    @trainer.on(Events.EPOCH_COMPLETED)
    def validate(engine):
        evaluator.run(val_loader)


    @trainer.on(Events.ITERATION_COMPLETED)
    def log_loss(engine):
        print(torch.cuda.max_memory_allocated())


    trainer.run(train_loader, max_epochs=20)
    """


def test_ignite_engine_step_function_and_run_are_the_loop():
    # `return loss.item()`: a sync every step; `trainer.run(..., max_epochs=20)` restarts the workers every epoch.
    assert findings(IGNITE_SCRIPT) == ["15:12 GPU303", "20:16 GPU102", "20:16 GPU104"]
    model = model_of(IGNITE_SCRIPT)
    roles = {getattr(f, "name", None) and f.name.value: s.role for f, s in model.frameworks.step_functions.items()}
    assert roles == {"train_step": "training", "log_loss": "training"}  # not `validate` (once per epoch)
    (info,) = [i for i in model.loader_flow.infos if model.line_of(i.loader.call) == 20]
    assert info.role == TRAIN and [f.per_epoch for f in info.feeds] == [True]
    (val,) = [i for i in model.loader_flow.infos if model.line_of(i.loader.call) == 21]
    assert val.role == EVAL


def test_filtered_ignite_events_are_not_per_step():
    source = IGNITE_SCRIPT.replace("Events.ITERATION_COMPLETED)", "Events.ITERATION_COMPLETED(every=100))")
    steps = {getattr(f, "name", None) and f.name.value for f in model_of(source).frameworks.step_functions}
    assert steps == {"train_step"}


# ---- HF Trainer -----------------------------------------------------------------------------------------


def test_trainer_subclass_compute_loss_is_per_step_code_on_the_device():
    source = """\
        import torch
        from transformers import Trainer


        class WeightedTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
                labels = inputs.pop("labels")
                logits = model(**inputs).logits
                loss = torch.nn.functional.cross_entropy(logits, labels, weight=self.class_weights)
                if torch.isnan(loss):
                    raise ValueError("nan loss")
                return (loss, logits) if return_outputs else loss
        """
    (found,) = diagnostics(source, select=("GPU303",))
    assert found.location.row == 10
    assert "every training step (`compute_loss` at line 6, run by the HF Trainer for each batch)" in found.message


def test_gpu_context_comes_from_framework_facts():
    assert model_of("import lightning as L\ntrainer = L.Trainer()\n").uses_cuda
    assert model_of("from accelerate import Accelerator\nacc = Accelerator()\n").uses_cuda
    assert model_of("from transformers import TrainingArguments\na = TrainingArguments('out')\n").uses_cuda
    assert not model_of("from transformers import TrainingArguments\na = TrainingArguments('out', use_cpu=True)\n").uses_cuda
    assert not model_of("from transformers import AutoTokenizer\nt = AutoTokenizer.from_pretrained('bert')\n").uses_cuda
    assert not model_of("import lightning as L\nL.Trainer(accelerator='cpu')\n").uses_cuda
