"""The rules for framework settings and distributed training: GPU107, GPU307, GPU406, GPU407, GPU408, GPU904."""

from __future__ import annotations

import pytest

import textwrap

from gpulint.diagnostics import Applicability, Severity
from tests.conftest import diagnostics, findings, fixed

# ---- GPU107 trainer-dataloader-settings -----------------------------------------------------------------

GPU107 = {"select": ("GPU107",)}

HF_SCRIPT = """\
    from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments

    model = AutoModelForSequenceClassification.from_pretrained("roberta-base", num_labels=3)
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=32, num_train_epochs=3, bf16=True)
    Trainer(model=model, args=args, train_dataset=train_dataset).train()
    """


def test_default_workers_are_reported_with_a_fix_that_keeps_them():
    (found,) = diagnostics(HF_SCRIPT, **GPU107)
    assert (found.location.row, found.location.column, found.severity) == (4, 8, Severity.WARNING)
    assert found.message == "`TrainingArguments` leaves `dataloader_num_workers` at its default 0"
    assert found.help == (
        "The HF Trainer loads every batch in the training process while the GPU waits; set `dataloader_num_workers` "
        "to a worker count and `dataloader_persistent_workers=True` to keep them between epochs"
    )
    assert found.fix.applicability == Applicability.UNSAFE
    assert "num_train_epochs=3, bf16=True, dataloader_num_workers=min(8, " in fixed(HF_SCRIPT, **GPU107)
    assert fixed(HF_SCRIPT, **GPU107).endswith("dataloader_persistent_workers=True)\nTrainer(model=model, args=args, train_dataset=train_dataset).train()\n")


def test_literal_zero_workers_is_replaced_in_the_call():
    source = 'from transformers import TrainingArguments\n\nargs = TrainingArguments("out", dataloader_num_workers=0, bf16=True)\n'
    (found,) = diagnostics(source, **GPU107)
    assert "sets `dataloader_num_workers=0`" in found.message
    result = fixed(source, **GPU107)
    assert 'TrainingArguments("out", dataloader_num_workers=min(8, ' in result
    assert result.endswith("- 1)), bf16=True, dataloader_persistent_workers=True)\n")


def test_zero_workers_from_argparse_is_fixed_at_its_default_and_persistence_follows_the_flag():
    source = """\
        import argparse

        from transformers import Seq2SeqTrainingArguments

        parser = argparse.ArgumentParser()
        parser.add_argument("--workers", type=int, default=0)
        args = parser.parse_args()
        training_args = Seq2SeqTrainingArguments("out", dataloader_num_workers=args.workers, fp16=True)
        """
    (found,) = diagnostics(source, **GPU107)
    assert "sets `dataloader_num_workers=0` (argparse default at train.py:6)" in found.message
    result = fixed(source, **GPU107)
    assert 'parser.add_argument("--workers", type=int, default=min(8, ' in result
    assert "fp16=True, dataloader_persistent_workers=args.workers > 0)" in result


def test_pin_memory_off_and_workers_restarted_are_reported_without_a_fix():
    source = """\
        from transformers import TrainingArguments

        args = TrainingArguments("out", dataloader_num_workers=4, dataloader_pin_memory=False, bf16=True)
        """
    (found,) = diagnostics(source, **GPU107)
    assert "sets `dataloader_pin_memory=False`" in found.message and "Every batch is copied to the GPU from pageable memory" in found.help
    assert "leaves `dataloader_persistent_workers` at its default False" in found.message and "The worker processes are started again" in found.help
    assert found.fix is None


@pytest.mark.parametrize(
    "arguments",
    [
        'TrainingArguments("out", dataloader_num_workers=8, dataloader_persistent_workers=True)',
        'TrainingArguments("out", dataloader_num_workers=8, num_train_epochs=1)',  # one epoch: nothing to restart
        "TrainingArguments(**config)",  # values from a file
        "TrainingArguments(output_dir, dataloader_num_workers=cfg.workers)",  # cannot be resolved
        'TrainingArguments("out", use_cpu=True)',
    ],
)
def test_known_good_or_unknown_settings_are_silent(arguments):
    source = f"from transformers import TrainingArguments\n\nargs = {arguments}\n"
    assert findings(source, **GPU107) == []


def test_test_files_are_silent():
    assert findings(HF_SCRIPT, path="tests/test_training.py", **GPU107) == []


def test_hf_argument_parser_values_are_unknown():
    source = """\
        from transformers import HfArgumentParser, Trainer, TrainingArguments

        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        Trainer(model=model, args=training_args, train_dataset=train_dataset).train()
        """
    assert findings(source, **GPU107) == []


def test_a_subclass_field_default_counts_and_trl_defaults_are_not_assumed():
    source = """\
        from dataclasses import dataclass, field

        from transformers import TrainingArguments
        from trl import SFTConfig


        @dataclass
        class MyArguments(TrainingArguments):
            dataloader_num_workers: int = field(default=0)
            bf16: bool = True


        args = MyArguments("out")
        sft = SFTConfig("out")
        explicit = SFTConfig("out", dataloader_num_workers=0)
        """
    assert findings(source, **GPU107) == ["13:8 GPU107", "15:12 GPU107"]
    (subclass, _) = diagnostics(source, **GPU107)
    assert "sets `dataloader_num_workers=0` (local variable" not in subclass.message
    assert "dataloader_num_workers: int = field(default=min(8, " in fixed(source, **GPU107)


# ---- GPU307 checkpoint-every-step ------------------------------------------------------------------------

GPU307 = {"select": ("GPU307",)}


def test_checkpoint_every_step_of_a_loop_and_of_a_lightning_step():
    source = """\
        import lightning as L
        import torch


        def train(model, loader, optimizer, accelerator, rank):
            for step, (x, y) in enumerate(loader):
                loss = model(x.cuda()).sum()
                loss.backward()
                optimizer.step()
                if rank == 0:
                    torch.save(model.state_dict(), "last.pt")
                accelerator.save_state("ckpt")


        class Lit(L.LightningModule):
            def training_step(self, batch, batch_idx):
                loss = self.model(batch).sum()
                self.trainer.save_checkpoint("last.ckpt")
                return loss
        """
    assert findings(source, **GPU307) == ["11:13 GPU307", "12:9 GPU307", "18:9 GPU307"]
    lightning = diagnostics(source, **GPU307)[2]
    assert lightning.message.startswith(
        "`self.trainer.save_checkpoint(...)` writes a checkpoint every training step (`training_step` at line 16"
    )


def test_checkpoints_under_an_interval_a_condition_or_per_epoch_are_silent():
    source = """\
        import torch


        def train(model, loader, optimizer, epochs, save_every=1000):
            best = float("inf")
            for epoch in range(epochs):
                for step, (x, y) in enumerate(loader):
                    loss = model(x.cuda()).sum()
                    loss.backward()
                    optimizer.step()
                    if step % save_every == 0:
                        torch.save(model.state_dict(), "last.pt")
                    if loss < best:
                        torch.save(model.state_dict(), "best.pt")
                torch.save(model.state_dict(), f"epoch{epoch}.pt")
            model.save_pretrained("final")
        """
    assert findings(source, **GPU307) == []


def test_a_checkpoint_helper_the_step_loop_calls_under_a_condition_is_silent():
    source = """\
        import torch


        class Workspace:
            def save_snapshot(self):
                torch.save(self.model.state_dict(), "snapshot.pt")

            def save_last(self):
                torch.save(self.model.state_dict(), "last.pt")

            def train(self, env, optimizer):
                time_step = env.reset()
                while True:
                    if time_step.last():
                        time_step = env.reset()
                        self.save_snapshot()
                    loss = self.model(torch.as_tensor(time_step.observation).cuda()).sum()
                    loss.backward()
                    optimizer.step()
                    self.save_last()
                    time_step = env.step(0)
        """
    # the snapshot is written at episode ends only; the last checkpoint every step
    assert findings(source, **GPU307) == ["9:9 GPU307"]


# ---- GPU406 ddp-accumulation-without-no-sync -----------------------------------------------------------

GPU406 = {"select": ("GPU406",)}

DDP_ACCUMULATION = """\
    import os

    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP


    def train(model, loader, optimizer, accumulation_steps=4):
        rank = int(os.environ["LOCAL_RANK"])
        model = DDP(model.cuda(rank), device_ids=[rank])
        for step, (x, y) in enumerate(loader):
            loss = model(x.cuda(rank)).sum() / accumulation_steps
            loss.backward()
            if (step + 1) % accumulation_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    """


def test_ddp_accumulation_without_no_sync():
    (found,) = diagnostics(DDP_ACCUMULATION, **GPU406)
    assert (found.location.row, found.location.column, found.severity) == (12, 9, Severity.WARNING)
    assert found.message == "`loss.backward()` all-reduces gradients every micro-step of an accumulation"
    assert found.help == (
        "The data-parallel model (`DDP(...)` at line 9) communicates every micro-step, but the optimizer steps only "
        "every few (`optimizer.step()` at line 14): run the backward of the first k-1 micro-steps under "
        "`with model.no_sync():`, so only the last micro-step communicates"
    )
    assert found.fix is None


def test_micro_batch_loop_with_accelerate_suggests_accumulate():
    source = """\
        from accelerate import Accelerator

        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            for micro in batch.split(4):
                accelerator.backward(model(micro).sum())
            optimizer.step()
            optimizer.zero_grad()
        """
    (found,) = diagnostics(source, **GPU406)
    assert "`with accelerator.accumulate(model):`" in found.help


@pytest.mark.parametrize(
    "change",
    [
        ("        loss.backward()\n", "        with model.no_sync():\n            loss.backward()\n"),
        ("        loss.backward()\n", "        model.require_backward_grad_sync = (step + 1) % accumulation_steps == 0\n        loss.backward()\n"),
        ("        if (step + 1) % accumulation_steps == 0:\n            optimizer.step()", "        if True:\n            optimizer.step()"),
        ("        loss.backward()\n", "        with (model.no_sync if (step + 1) % accumulation_steps else contextlib.nullcontext)():\n            loss.backward()\n"),
        ("DDP(model.cuda(rank), device_ids=[rank])", "model.cuda(rank)"),  # one GPU: nothing to all-reduce
    ],
)
def test_no_sync_every_step_updates_or_no_ddp_are_silent(change):
    old, new = change
    source = textwrap.dedent(DDP_ACCUMULATION)
    assert old in source
    assert findings(source.replace(old, new), **GPU406) == []


ACCELERATE_SCRIPT = """\
{header}from accelerate import Accelerator

accelerator = Accelerator()
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    for micro in batch.split(4):
        accelerator.backward(model(micro).sum())
    optimizer.step()
    optimizer.zero_grad()
"""
PEP_723 = '# /// script\n# dependencies = [\n#   "accelerate",\n# ]\n# ///\n\n'


def test_accelerate_in_a_single_file_script_with_inline_metadata_is_one_process():
    # x-transformers' train_enwik8.py: `uv run train_enwik8.py` starts one process; `Accelerator` wraps nothing in
    # DDP there, so no micro-step all-reduces (analysis/inline_scripts.py).
    assert findings(ACCELERATE_SCRIPT.format(header=PEP_723), **GPU406) == []


@pytest.mark.parametrize(
    ("header", "row"),
    [
        ("", 7),  # a plain script: `accelerate launch` may start it on several GPUs
        (PEP_723.replace("# /// script", "# /// pyproject"), 13),  # not a script block
        (PEP_723.replace("# ///\n\n", "\n"), 12),  # not closed
        ("if True:\n" + "".join("    " + line + "\n" for line in PEP_723.splitlines()) + "    pass\n", 15),  # indented
    ],
)
def test_accelerate_without_a_script_block_stays_reported(header, row):
    assert findings(ACCELERATE_SCRIPT.format(header=header), **GPU406) == [f"{row}:9 GPU406"]


def test_ddp_the_script_builds_itself_stays_reported_in_a_single_file_script():
    source = PEP_723 + textwrap.dedent(DDP_ACCUMULATION)
    assert len(findings(source, **GPU406)) == 1


def test_accelerate_accumulate_is_silent():
    source = """\
        from accelerate import Accelerator

        accelerator = Accelerator(gradient_accumulation_steps=4)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for step, batch in enumerate(loader):
            with accelerator.accumulate(model):
                accelerator.backward(model(**batch).loss)
                if step % 4 == 0:
                    optimizer.step()
        """
    assert findings(source, **GPU406) == []


# ---- GPU407 ddp-find-unused-parameters -----------------------------------------------------------------

# (the models these settings train are out of sight: reported only with `unproven-models = true`,
# tests/test_forward_coverage.py has the default)
GPU407 = {"select": ("GPU407",), "rule_options": (("GPU407", (("unproven-models", True),)),)}


def test_find_unused_parameters_in_ddp_and_framework_settings():
    source = """\
        import lightning as L
        from accelerate import Accelerator, DistributedDataParallelKwargs
        from lightning.pytorch.strategies import DDPStrategy
        from torch.nn.parallel import DistributedDataParallel
        from transformers import TrainingArguments

        FIND_UNUSED = True
        model = DistributedDataParallel(net.cuda(), device_ids=[rank], find_unused_parameters=FIND_UNUSED)
        L.Trainer(strategy="ddp_spawn_find_unused_parameters_true")
        L.Trainer(strategy=DDPStrategy(find_unused_parameters=True))
        Accelerator(kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=True)])
        TrainingArguments("out", ddp_find_unused_parameters=True)
        """
    assert findings(source, **GPU407) == ["8:87 GPU407", "9:20 GPU407", "10:55 GPU407", "11:83 GPU407", "12:53 GPU407"]
    assert findings(source, select=("GPU407",)) == []  # by default: `net` and the trainers' models are out of sight
    ddp = diagnostics(source, **GPU407)[0]
    assert ddp.message.startswith("`DistributedDataParallel(find_unused_parameters=True)` (module constant at train.py:7) makes DDP")


def test_find_unused_parameters_off_or_unknown_is_silent():
    source = """\
        import lightning as L
        from torch.nn.parallel import DistributedDataParallel
        from transformers import TrainingArguments

        model = DistributedDataParallel(net.cuda(), find_unused_parameters=False)
        model = DistributedDataParallel(net.cuda(), find_unused_parameters=args.find_unused)
        L.Trainer(strategy="ddp_find_unused_parameters_false")
        TrainingArguments("out", ddp_find_unused_parameters=False if ddp else None)
        """
    assert findings(source, **GPU407) == []


# ---- GPU408 debug-api-in-training ----------------------------------------------------------------------

GPU408 = {"select": ("GPU408",)}

def test_debug_switches_left_on_are_reported_and_statements_removed_by_the_unsafe_fix():
    source = """\
        import os

        import torch

        os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
        torch.autograd.set_detect_anomaly(True)
        torch.cuda.set_sync_debug_mode("warn")


        def train(model, loader, optimizer):
            for x, y in loader:
                model(x.cuda()).sum().backward()
                optimizer.step()
        """
    found = diagnostics(source, **GPU408)
    assert [(d.location.row, d.location.column) for d in found] == [(5, 1), (6, 1), (7, 1)]
    assert found[0].message == "`CUDA_LAUNCH_BLOCKING=1` is left on in training code"
    assert found[0].help.startswith("It makes every kernel launch wait")
    assert all(d.fix is not None and d.fix.applicability == Applicability.UNSAFE for d in found)
    result = fixed(source, **GPU408)
    assert "CUDA_LAUNCH_BLOCKING" not in result and "set_detect_anomaly" not in result and "set_sync_debug_mode" not in result
    assert "def train(model, loader, optimizer):" in result


PROFILED = """\
    import argparse

    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--enable-profiling", action="store_true", default=False)
    args = parser.parse_args()


    def train(model, loader, optimizer):
        with torch.autograd.profiler.profile({enabled}, use_cuda=True) as prof:
            for x, y in loader:
                model(x.cuda()).sum().backward()
                optimizer.step()
    """


def test_a_profiler_turned_off_by_its_first_positional_argument_is_not_reported():
    # `enabled` is `profile`'s first parameter: a flag that defaults to False keeps it off as shipped (round 24b)
    assert diagnostics(PROFILED.format(enabled="args.enable_profiling"), **GPU408) == []
    assert diagnostics(PROFILED.format(enabled="False"), **GPU408) == []


def test_a_profiler_turned_on_by_its_first_positional_argument_is_reported():
    [found] = diagnostics(PROFILED.format(enabled="True"), **GPU408)
    assert (found.location.row, found.message) == (11, "the autograd profiler (`profile`) is left on in training code")


def test_anomaly_context_profiler_around_the_loop_and_lightning_detect_anomaly():
    source = """\
        import lightning as L
        import torch


        def train(model, loader, optimizer):
            with torch.autograd.profiler.profile(use_cuda=True) as prof:
                for x, y in loader:
                    with torch.autograd.detect_anomaly():
                        model(x.cuda()).sum().backward()
                    optimizer.step()


        trainer = L.Trainer(detect_anomaly=True)
        trainer.fit(model)
        """
    assert findings(source, **GPU408) == ["6:10 GPU408", "8:18 GPU408", "13:36 GPU408"]
    assert all(d.fix is None for d in diagnostics(source, **GPU408))


@pytest.mark.parametrize(
    "switch",
    [
        "if args.debug:\n    torch.autograd.set_detect_anomaly(True)",
        "torch.autograd.set_detect_anomaly(args.detect_anomaly)",
        "torch.autograd.set_detect_anomaly(False)",
        "torch.cuda.set_sync_debug_mode(0)",
        "torch.autograd.profiler.profile(enabled=False)",  # not a context: does nothing
        'os.environ["CUDA_LAUNCH_BLOCKING"] = "0"',
    ],
)
def test_debug_flags_and_switches_turned_off_are_silent(switch):
    source = "import os\n\nimport torch\n\n" + switch + "\n\n\ndef train(model, loader, optimizer):\n    for x in loader:\n        model(x.cuda()).sum().backward()\n        optimizer.step()\n"
    assert findings(source, **GPU408) == []


def test_a_switch_the_same_function_turns_off_again_is_a_scoped_region_not_left_on():
    """Seen writing the GPU ground-truth script: sync debug mode on for 20 measured steps, then back to default."""
    source = """\
        import torch


        def train(model, loader, optimizer):
            torch.cuda.set_sync_debug_mode("warn")
            torch.autograd.set_detect_anomaly(True)
            for x in loader:
                model(x.cuda()).sum().backward()
                optimizer.step()
            torch.cuda.set_sync_debug_mode("default")
            torch.autograd.set_detect_anomaly(False)


        def train_again(model, loader, optimizer):
            torch.cuda.set_sync_debug_mode("warn")
            for x in loader:
                model(x.cuda()).sum().backward()
                optimizer.step()


        def reset():
            torch.cuda.set_sync_debug_mode(0)
        """
    # turned off in another function (or only before it) is not scoped: that switch is still reported
    assert findings(source, **GPU408) == ["15:5 GPU408"]


def test_a_module_that_does_not_train_is_silent():
    source = "import torch\n\ntorch.autograd.set_detect_anomaly(True)\n\n\ndef check(model, x):\n    return model(x.cuda())\n"
    assert findings(source, **GPU408) == []


# ---- GPU904 optimizer-not-fused -------------------------------------------------------------------------

GPU904 = {"select": ("GPU904",), "preview": True}


def test_adam_on_cuda_parameters_without_fused():
    source = """\
        import torch
        from torch import nn

        model = nn.Linear(4096, 4096).cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        slow = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
        """
    found = diagnostics(source, **GPU904)
    assert [(d.location.row, d.severity) for d in found] == [(5, Severity.INFO), (6, Severity.INFO)]
    assert "With `foreach=False` it loops over the parameters in Python" in found[1].help
    result = fixed(source, **GPU904)
    assert "torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)" in result
    assert "torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)" in result


def test_parameters_placed_later_get_a_fix_only_from_torch_2_4():
    source = """\
        import torch
        from accelerate import Accelerator

        accelerator = Accelerator()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model, optimizer = accelerator.prepare(model, optimizer)
        """
    (found,) = diagnostics(source, **GPU904)
    assert found.fix is None  # torch < 2.4 checks `fused` in the constructor, while the parameters are on the CPU
    (found,) = diagnostics(source, target_torch=(2, 4), **GPU904)
    assert found.fix is not None


def test_lightning_configure_optimizers_parameter_groups_are_on_the_gpu():
    source = """\
        import lightning as L
        import torch


        class Lit(L.LightningModule):
            def configure_optimizers(self):
                groups = [{"params": self.parameters(), "weight_decay": 0.1}]
                return torch.optim.AdamW(groups, lr=1e-3)
        """
    assert findings(source, **GPU904) == ["8:16 GPU904"]


@pytest.mark.parametrize(
    "construction",
    [
        "torch.optim.AdamW(model.parameters(), fused=True)",
        "torch.optim.AdamW(model.parameters(), fused=False)",
        "torch.optim.AdamW(model.parameters(), foreach=True)",
        "torch.optim.AdamW(model.parameters(), differentiable=True)",
        "torch.optim.AdamW(cpu_model.parameters())",
        "torch.optim.SGD(model.parameters(), lr=0.1)",
    ],
)
def test_fused_chosen_other_optimizers_or_cpu_parameters_are_silent(construction):
    source = f"import torch\nfrom torch import nn\n\nmodel = nn.Linear(8, 2).cuda()\ncpu_model = nn.Linear(8, 2)\nopt = {construction}\n"
    assert findings(source, **GPU904) == []


def test_deepspeed_owns_the_optimizer():
    source = """\
        import torch
        from accelerate import Accelerator

        accelerator = Accelerator()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model, optimizer = accelerator.prepare(model, optimizer)
        if accelerator.state.deepspeed_plugin is not None:
            print("zero stage", accelerator.state.deepspeed_plugin.zero_stage)
        """
    assert findings(source, **GPU904) == []
