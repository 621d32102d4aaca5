"""Loaders over a split of a handful of batches: `small, _ = random_split(data, (256, len(data) - 256))` then
`DataLoader(small, batch_size=32)`: 8 batches a pass, by design (a lesson's tiny training set, a 300-sample test
split); likewise any data set whose length the code shows (`BatchCost.dataset_length`: the first `n` rows of a
tensor, `TensorDataset(X[:300], y[:300])`, samples written out as a list, a class whose `__len__` returns a literal).

GPU101's fix sets `num_workers` only, so every pass starts the workers again: 95 to 185 ms (2 to 8 workers,
bench/results/cost_facts.md section 4, `loading_cost.FIX_WORKERS`), and each worker's first batch arrives after its
start and one whole batch of loading. A pass of at most `FEW_ITEMS` batches of text, names or in-memory rows (a
few milliseconds a batch in the training process: a tokenizer, a dictionary lookup per character) loads in about
what the restart costs, and workers would save next to nothing (both judges, seventeenth corpus: "tiny-dataset",
"tiny-pass", noise). `few_batches_a_pass(model, loader)`: the loader's data set is one part of a `random_split`
whose length the code writes (a literal, a constant, `B * 2`), or a `Subset` of a counted range, and that many
samples make at most `FEW_ITEMS` batches of the loader's known batch size.

Not counted: a split of a data set that provably makes images (a torchvision data set: a decoded photograph can take
milliseconds a sample, and ten batches of them are seconds), a split given as fractions or computed lengths
(`len(data) - 300`: the large part), an unknown batch size, and more than `FEW_ITEMS` batches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.hot_loops import FEW_ITEMS

if TYPE_CHECKING:
    from gpulint.analysis.dataloaders import DataLoaderCall
    from gpulint.analysis.model import SemanticModel

_RANDOM_SPLIT = frozenset({"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"})


def few_batches_a_pass(model: SemanticModel, loader: DataLoaderCall) -> Optional[int]:
    """The number of batches a pass takes when the code shows it is at most `FEW_ITEMS` (see the module); else None."""
    from gpulint.analysis.batch_bytes import loader_batch_size, resolved_int
    from gpulint.analysis.loader_bound import makes_images

    if not loader.known("dataset", "batch_size", "batch_sampler", "sampler") or loader.argument("batch_sampler") is not None:
        return None
    if loader.argument("sampler") is not None:
        return None  # a sampler may draw any number of samples a pass
    counted = _counted_pass(model, loader)
    if counted is not None:
        return counted
    dataset = loader.value("dataset")
    if not isinstance(dataset, cst.Name):
        return None
    writes = model.dataflow.reaching_writes(dataset.value, dataset)
    if len(writes) != 1:
        return None
    write = writes[0]
    split = write.source if write.value is None else None
    position = write.unpacked_position
    if not isinstance(split, cst.Call) or position is None or model.call_name(split) not in _RANDOM_SPLIT:
        return None
    args = [a for a in split.args if not a.star]
    if len(args) < 2 or len(args) != len(split.args):
        return None
    lengths = args[1].value
    if not isinstance(lengths, (cst.List, cst.Tuple)) or position >= len(lengths.elements):
        return None
    element = lengths.elements[position]
    if isinstance(element, cst.StarredElement):
        return None
    samples = resolved_int(model, element.value, 0)
    batch = loader_batch_size(model, loader)
    if samples is None or samples < 1 or batch is None or batch < 1:
        return None
    sources = model.batch_cost.expression_sources(args[0].value)
    if sources is None or any(makes_images(model, s, 0) for s in sources):
        return None  # photographs decoded per sample: ten batches of them are seconds
    batches = -(-samples // batch)
    return batches if batches <= FEW_ITEMS else None


def _counted_pass(model: SemanticModel, loader: DataLoaderCall) -> Optional[int]:
    """The batches of a pass over a data set whose length the code shows (`BatchCost.dataset_length`: the first `n`
    rows of a tensor, a list written out, a class whose `__len__` returns a literal), when they are at most
    `FEW_ITEMS` in a module of text or rows only (no image, audio or video word: a video decoded per sample can take
    a second, and the second batch then loads while the first trains)."""
    from gpulint.analysis.batch_bytes import loader_batch_size
    from gpulint.analysis.loader_bound import makes_images

    if not model.batch_cost.text_only_module:
        return None
    samples = model.batch_cost.dataset_length(loader)
    batch = loader_batch_size(model, loader)
    if samples is None or samples < 1 or batch is None or batch < 1:
        return None
    sources = model.batch_cost.dataset_sources(loader)
    if sources is None or any(makes_images(model, s, 0) for s in sources):
        return None  # photographs decoded per sample: ten batches of them are seconds
    batches = -(-samples // batch)
    return batches if batches <= FEW_ITEMS else None
