"""GPU902/GPU903 where a framework runs the training (issue 14, eighth corpus class G): a Lightning `Trainer`
that leaves `benchmark` unset keeps cuDNN's heuristic algorithm choice for a convolutional model (asteroid's
ConvTasNet recipe), and HF `TrainingArguments` that leave `tf32` unset keep float32 matmuls off the Tensor Cores
(rasbt's DistilBERT with the Trainer). Negatives: the framework's own setting given (either way), the torch
setting in the file, a CPU run, a model without convolutions, mixed precision."""

from __future__ import annotations

import pytest

from tests.conftest import diagnostics, fixed

PREVIEW = {"select": ("GPU9",)}

LIGHTNING = """\
import torch
import lightning.pytorch as pl
from torch import nn
{setup}

class Separator(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Conv1d(1, 256, 16, stride=8)
        self.decoder = nn.ConvTranspose1d(256, 1, 16, stride=8)

    def training_step(self, batch, batch_idx):
        mix, clean = batch
        return (self.decoder(self.encoder(mix)) - clean).square().mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main(loader):
    trainer = pl.Trainer(accelerator="gpu", devices="auto", max_epochs=200{arguments})
    trainer.fit(Separator(), loader)


if __name__ == "__main__":
    main(None)
"""


def _by_code(source: str, code: str):
    return [(d.location.row, d.message) for d in diagnostics(source, **PREVIEW) if d.code == code]


def test_a_lightning_trainer_that_leaves_benchmark_unset_for_a_conv_model_gets_gpu903_at_the_trainer():
    assert _by_code(LIGHTNING.format(setup="", arguments=""), "GPU903") == [
        (21, "a convolutional model trains on CUDA with cuDNN's heuristic algorithm choice (the Lightning Trainer leaves `benchmark` unset)")
    ]


def test_the_start_up_fix_is_offered_for_lightning_2_and_not_for_a_lightning_1_trainer():
    source = LIGHTNING.format(setup="", arguments="")
    assert "torch.backends.cudnn.benchmark = True" in fixed(source, **PREVIEW)
    old = source.replace('accelerator="gpu", devices="auto"', "gpus=1")
    assert _by_code(old, "GPU903") == [
        (21, "a convolutional model trains on CUDA with cuDNN's heuristic algorithm choice (the Lightning Trainer leaves `benchmark` unset)")
    ]
    assert "cudnn.benchmark" not in fixed(old, **PREVIEW)


@pytest.mark.parametrize("setup, arguments", [
    ("", ", benchmark=True"),
    ("", ", benchmark=False"),
    ("", ", deterministic=True"),
    ("torch.backends.cudnn.benchmark = True", ""),
    ("torch.use_deterministic_algorithms(True)", ""),
])  # fmt: skip
def test_a_lightning_trainer_or_a_file_that_decides_about_cudnn_has_no_gpu903(setup, arguments):
    assert _by_code(LIGHTNING.format(setup=setup, arguments=arguments), "GPU903") == []


def test_a_lightning_trainer_on_the_cpu_or_without_convolutions_has_no_gpu903():
    cpu = LIGHTNING.format(setup="", arguments="").replace('accelerator="gpu"', 'accelerator="cpu"')
    assert _by_code(cpu, "GPU903") == []
    linear = LIGHTNING.format(setup="", arguments="").replace("nn.Conv1d(1, 256, 16, stride=8)", "nn.Linear(16, 256)")
    linear = linear.replace("nn.ConvTranspose1d(256, 1, 16, stride=8)", "nn.Linear(256, 16)")
    assert _by_code(linear, "GPU903") == []


HF = """\
import torch
from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments
{setup}
model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased")
{move}
training_args = TrainingArguments(
    output_dir="./results",
    num_train_epochs=3,
    per_device_train_batch_size=16{arguments},
)
trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)
trainer.train()
"""


def test_training_arguments_that_leave_tf32_unset_get_gpu902_at_the_call_or_at_the_model_move():
    assert _by_code(HF.format(setup="", move="", arguments=""), "GPU902") == [
        (6, "`TrainingArguments` runs float32 matrix multiplications on CUDA without TF32")
    ]
    moved = HF.format(setup="", move='model.to(torch.device("cuda"))', arguments="")
    assert _by_code(moved, "GPU902") == [
        (5, "`TrainingArguments` runs float32 matrix multiplications on CUDA without TF32 (`TrainingArguments(...)` at line 6)")
    ]


def test_a_move_for_inference_after_the_trainer_is_not_where_gpu902_is_placed():
    after = HF.format(setup="", move="", arguments="") + 'model.to(torch.device("cuda"))\n'
    assert _by_code(after, "GPU902") == [(6, "`TrainingArguments` runs float32 matrix multiplications on CUDA without TF32")]


@pytest.mark.parametrize("setup, arguments", [
    ("", ",\n    tf32=True"),
    ("", ",\n    tf32=False"),
    ("", ",\n    bf16=True"),
    ("", ",\n    use_cpu=True"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", ""),
    ('torch.set_float32_matmul_precision("high")', ""),
])  # fmt: skip
def test_training_arguments_that_decide_about_tf32_or_precision_have_no_gpu902(setup, arguments):
    assert _by_code(HF.format(setup=setup, move="", arguments=arguments), "GPU902") == []


APEX = """\
import torch
{imports}
from torch import nn


def main(loader):
    model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 1000)).cuda()
    {use}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main(None)
"""


@pytest.mark.parametrize("imports, use", [
    ("import apex", "model = apex.parallel.convert_syncbn_model(model)"),
    ("from apex.parallel.LARC import LARC", "model = model"),
    ("import apex\nfrom apex.parallel.LARC import LARC", "model = apex.parallel.convert_syncbn_model(model)"),
])  # fmt: skip
def test_apex_for_sync_batch_norm_or_larc_says_nothing_of_the_precision(imports, use):
    source = APEX.format(imports=imports, use=use)
    backward = source.splitlines().index("        loss.backward()") + 1
    assert _by_code(source, "GPU901") == [(backward, "this script trains on CUDA in float32 only")]


@pytest.mark.parametrize("imports, use", [
    ("import apex", 'model, optimizer = apex.amp.initialize(model, optimizer, opt_level="O1")'),
    ("from apex import amp", 'model, optimizer = amp.initialize(model, optimizer, opt_level="O1")'),
    ("from apex.fp16_utils import FP16_Optimizer", "model = model"),
])  # fmt: skip
def test_apex_amp_or_fp16_utils_is_mixed_precision(imports, use):
    assert _by_code(APEX.format(imports=imports, use=use), "GPU901") == []
