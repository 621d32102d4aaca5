"""The per-batch loading work of the loaders an HF Trainer builds: light, heavy or unknown.

The `Trainer` builds its loaders from `train_dataset` (and `eval_dataset`) and `data_collator`; with
`dataloader_num_workers=0` each batch is loaded in the training process. That costs a measurable share of the
step only when loading a batch is real work. It is LIGHT when every row is made up front and the collator only
pads, stacks or masks token ids:

- a `datasets` table mapped with a tokenizer, a `TensorDataset`, a class that indexes memory (what
  `batch_cost.trainer_items_are_cheap` proves, through this module's Trainer subclasses too);
- transformers' own text datasets, which tokenize the whole file when they are built and hand out the stored ids
  (`LineByLineTextDataset`, `TextDataset`, ... of `transformers/data/datasets/language_modeling.py`, whose
  `__getitem__` returns `self.examples[i]`; `GlueDataset` and `SquadDataset` convert their examples to features
  in `__init__` the same way);
- a `datasets` table that reaches an HF Trainer from code this module does not show (a method only such tables
  have, `.train_test_split(...)`, called on a split another module's function made) with a collator that only
  pads: such a collator can only read rows that already hold ids;
- a `datasets` table of text given to a TRL trainer that prepares it in its constructor (`SFTTrainer`,
  `DPOTrainer`, `RewardTrainer`, `KTOTrainer`, `ORPOTrainer`, `CPOTrainer` call `self._prepare_dataset(...)` in
  `__init__`: chat template, tokenization and truncation run once through `Dataset.map`, and their default
  collators pad the ids), in a module that handles no image, audio or video (a vision-language SFT collator
  processes the images of each batch), unless the dataset is streamed, packing is asked for, or preparation is
  skipped (`skip_prepare_dataset`).

It is HEAVY when a dataset is streamed (`load_dataset(..., streaming=True)`: download, decode and every `.map`
run as the loader reads), transformed per row as it is read (`with_transform`, `set_transform`), or holds images,
audio or video not proved cheap (a whisper notebook's 80x3000 log-mel features stored as Arrow lists, turned back
into Python lists and padded per batch). Otherwise (a dataset built in another module, raw text a collator
tokenizes) it is UNKNOWN; GPU107 keeps its finding for both.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.frameworks import HF, HF_TRAINER, call_argument, qualified_is

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

LIGHT, HEAVY, UNKNOWN = "light", "heavy", "unknown"

# transformers/data/datasets: datasets that tokenize (or convert to features) everything in `__init__`.
_PRETOKENIZED_CLASSES = frozenset({
    "TextDataset", "LineByLineTextDataset", "LineByLineWithRefDataset", "LineByLineWithSOPTextDataset",
    "TextDatasetForNextSentencePrediction", "GlueDataset", "SquadDataset",
})  # fmt: skip
# TRL trainers whose constructor tokenizes a `datasets` table once (`self._prepare_dataset(...)` in `__init__`).
_PREPARING_TRAINERS = frozenset({"SFTTrainer", "DPOTrainer", "RewardTrainer", "KTOTrainer", "ORPOTrainer", "CPOTrainer"})
# Trainer methods a subclass overrides to change what its loaders read or how rows are made.
_LOADER_METHODS = frozenset({"get_train_dataloader", "get_eval_dataloader", "_get_train_sampler", "_prepare_dataset",
                             "_remove_unused_columns", "_get_collator_with_removed_columns"})  # fmt: skip
# Methods only `datasets` tables have (a pandas frame, a torch dataset or a list has none of them).
_ARROW_ONLY_METHODS = frozenset({"train_test_split", "remove_columns", "rename_column", "rename_columns", "select_columns",
                                 "cast_column", "class_encode_column", "with_format", "set_format", "flatten_indices",
                                 "add_column"})  # fmt: skip
_ROW_TRANSFORMS = frozenset({"with_transform", "set_transform"})
_TABLE_METHODS = frozenset({"select", "shuffle", "filter", "shard", "sort", "flatten_indices", "train_test_split",
                            "map", "rename_column", "rename_columns", "remove_columns", "select_columns", "add_column",
                            "cast_column", "with_format", "set_format"})  # fmt: skip
_MAX_DEPTH = 8


def trainer_loading_work(model: SemanticModel, arguments: cst.Call) -> str:
    """LIGHT, HEAVY or UNKNOWN: the per-batch loading work of every loader the HF Trainers given these
    `TrainingArguments` build (module docstring); HEAVY if one of them is heavy, LIGHT only if all are light."""
    inputs = _trainer_inputs(model, arguments)
    if not inputs:
        return UNKNOWN
    works = [_work(model, arguments, trainer, dataset, collator) for trainer, dataset, collator in inputs]
    if HEAVY in works:
        return HEAVY
    return LIGHT if all(w == LIGHT for w in works) else UNKNOWN


def trainer_rows_are_token_ids(model: SemanticModel, arguments: cst.Call) -> bool:
    """Every loader the HF Trainers given these arguments build hands out token ids (a few kilobytes a batch):
    `batch_cost.trainer_batches_are_small`, or rows that a transformers text dataset or a TRL trainer tokenized."""
    if model.batch_cost.trainer_batches_are_small(arguments):
        return True
    inputs = _trainer_inputs(model, arguments)
    return bool(inputs) and all(_tokenized_elsewhere(model, arguments, trainer, dataset, collator) for trainer, dataset, collator in inputs)


# Arguments of a dataset or batch iterator applied to every batch or item it hands out.
_PER_BATCH_CALLABLES = frozenset({"collate_fn", "transform", "target_transform", "transforms"})


def trainer_batches_on_cuda(model: SemanticModel, arguments: cst.Call) -> bool:
    """An HF Trainer given these arguments is handed batches made on the GPU: its `data_collator`, or the
    `collate_fn` / `transform` of the iterator or dataset it is given (Ray Data's `iter_torch_batches(collate_fn=...)`),
    moves them to CUDA (`dataloaders.collate_moves_to_cuda`). Forked loader workers cannot run that code and pinning
    cannot take CUDA tensors: the Trainer's worker and pinning settings must stay as they are."""
    from gpulint.analysis.dataloaders import collate_moves_to_cuda

    for _, dataset, collator in _trainer_inputs(model, arguments):
        if collator is not None and collate_moves_to_cuda(model, collator):
            return True
        for source in model.batch_cost.expression_sources(dataset) or ():
            if isinstance(source, cst.Call) and any(
                a.keyword is not None and a.keyword.value in _PER_BATCH_CALLABLES and collate_moves_to_cuda(model, a.value) for a in source.args
            ):
                return True
    return False


def _work(model: SemanticModel, arguments: cst.Call, trainer: cst.Call, dataset: cst.BaseExpression, collator: Optional[cst.BaseExpression]) -> str:
    cost = model.batch_cost
    if _heavy(model, dataset, collator):
        return HEAVY
    if cost._cheap_items(dataset, collator):
        return LIGHT
    if _text_for_a_long_step(model, dataset, collator) and not (_from_trl(model, trainer) and not _prepares_text(model, trainer, arguments)):
        return LIGHT  # (TRL packing on the fly tokenizes a buffer of a thousand texts at a time in the loop)
    return LIGHT if _tokenized_elsewhere(model, arguments, trainer, dataset, collator) else UNKNOWN


def _text_for_a_long_step(model: SemanticModel, dataset: cst.BaseExpression, collator: Optional[cst.BaseExpression]) -> bool:
    """The module loads a model of billions of parameters (by its checkpoint's name, or in 4/8 bits:
    `long_steps.loads_billion_parameter_model`), handles no image, audio or video, the dataset is not streamed and
    the collator only pads, stacks or masks token ids: whatever a batch of rows costs to read (ids stored up front,
    or at most a few texts a fast tokenizer encodes in a millisecond or so) is well under 1 % of a step of
    hundreds of milliseconds."""
    from gpulint.analysis.long_steps import loads_billion_parameter_model

    cost = model.batch_cost
    return (
        cost.text_only_module and cost.cheap_collate(collator) and not cost.streamed_dataset(dataset)
        and loads_billion_parameter_model(model)
    )  # fmt: skip


def _tokenized_elsewhere(model: SemanticModel, arguments: cst.Call, trainer: cst.Call, dataset: cst.BaseExpression, collator) -> bool:
    """The collator only pads, stacks or masks token ids, and the rows it is handed are made once: a transformers
    text dataset (tokenized when built), or a Hugging Face `datasets` table of a module of text only that is not
    streamed, read by an HF Trainer (a collator that only pads can only read rows that already hold ids: whoever
    made them did it up front, in this module or in the one that built the table) or prepared by a TRL trainer's
    constructor."""
    cost = model.batch_cost
    if not cost.cheap_collate(collator):
        return False
    sources = cost.expression_sources(dataset)
    if not sources:
        return False
    if all(_pretokenized_class(model, s) for s in sources):
        return True
    if not cost.text_only_module or cost.streamed_dataset(dataset):
        return False  # a vision-language collator processes each batch's images; a stream maps rows as it reads
    if _from_trl(model, trainer):
        return all(_arrow_table(model, s, 0) for s in sources) and _prepares_text(model, trainer, arguments)
    return all(_made_elsewhere(model, s, 0) for s in sources)


def _pretokenized_class(model: SemanticModel, source: cst.BaseExpression) -> bool:
    """`LineByLineTextDataset(tokenizer=tokenizer, file_path=..., block_size=128)` and its kin."""
    if not isinstance(source, cst.Call):
        return False
    name = model.call_name(source) or ""
    return name.split(".", 1)[0] == "transformers" and name.rsplit(".", 1)[-1] in _PRETOKENIZED_CLASSES


def _from_trl(model: SemanticModel, trainer: cst.Call) -> bool:
    """A TRL trainer, or this module's subclass of one."""
    name = model.call_name(trainer)
    if (name or "").split(".", 1)[0] == "trl":
        return True
    info = model.local_class_of(name)
    return info is not None and model.derives_from(
        info.node.name.value, "derives from a TRL class", lambda bases: any(b.split(".", 1)[0] == "trl" for b in bases)
    )


def _prepares_text(model: SemanticModel, trainer: cst.Call, arguments: cst.Call) -> bool:
    """A TRL trainer that tokenizes its datasets in its constructor (or this module's subclass of one that leaves
    its dataset preparation alone), with no packing (older releases packed on the fly in a `ConstantLengthDataset`)
    and no skipped preparation."""
    name = model.call_name(trainer)
    if not qualified_is(name, ("trl",), _PREPARING_TRAINERS):
        info = model.local_class_of(name)
        if info is None or _overrides_loading(model, info.node.name.value):
            return False
        if not model.derives_from(info.node.name.value, "derives from a TRL trainer that prepares its data",
                                  lambda bases: any(qualified_is(b, ("trl",), _PREPARING_TRAINERS) for b in bases)):
            return False
    code = model.code(model.module)
    if "skip_prepare_dataset" in code or "ConstantLengthDataset" in code:
        return False
    return not _packs(trainer, arguments)


def _packs(trainer: cst.Call, arguments: cst.Call) -> bool:
    """`packing=True` (or a value not written False) on the trainer or on the config it is given."""
    for call in (trainer, arguments):
        packing = call_argument(call, "packing")
        if packing is not None and not (isinstance(packing, cst.Name) and packing.value == "False"):
            return True
    return False


def _arrow_table(model: SemanticModel, source: cst.BaseExpression, depth: int) -> bool:
    """A Hugging Face `datasets` table: loaded or built by the library (`load_dataset(...)`, `Dataset.from_list(...)`),
    a split of one, what a table method makes of one, or the result of a method only such tables have
    (`.train_test_split(...)`, `.remove_columns(...)`, `.with_format(...)`: whatever it was called on). Reading a row
    reads Arrow memory."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(source, cst.Subscript):
        return _table_of(model, source.value, depth + 1)
    if not isinstance(source, cst.Call):
        return False
    name = model.call_name(source) or ""
    if name.split(".", 1)[0] == "datasets":
        return True
    if model.batch_cost._cheap_dataset(source):
        return True  # (`ds.map(tokenize, batched=True)`)
    func = source.func
    if not isinstance(func, cst.Attribute) or name:
        return False
    if func.attr.value in _ARROW_ONLY_METHODS:
        return True
    return func.attr.value in _TABLE_METHODS and _table_of(model, func.value, depth + 1)


def _table_of(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> bool:
    if isinstance(expr, (cst.Call, cst.Subscript)):
        return _arrow_table(model, expr, depth)
    sources = model.batch_cost.expression_sources(expr)
    return bool(sources) and all(s is not expr and _arrow_table(model, s, depth) for s in sources)


def _made_elsewhere(model: SemanticModel, source: cst.BaseExpression, depth: int) -> bool:
    """A `datasets` table whose rows are tokenized in this module (`ds.map(tokenize, batched=True)`), or one whose
    making this module does not show: a method only such tables have called on a value it cannot follow (a split
    of what another module's function returned, a loop variable): a collator that only pads can only read rows
    that already hold ids. A table followed to its loading here with nothing that tokenizes it holds raw text."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(source, cst.Subscript):
        return _made_elsewhere_of(model, source.value, depth + 1)
    if not isinstance(source, cst.Call):
        return False
    if model.batch_cost._cheap_dataset(source):
        return True
    func = source.func
    if not isinstance(func, cst.Attribute) or model.call_name(source) or func.attr.value not in _TABLE_METHODS | _ARROW_ONLY_METHODS:
        return False
    receiver = func.value
    if isinstance(receiver, (cst.Name, cst.Attribute)) and model.batch_cost.expression_sources(receiver) is None:
        return func.attr.value in _ARROW_ONLY_METHODS
    return _made_elsewhere_of(model, receiver, depth + 1)


def _made_elsewhere_of(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> bool:
    if isinstance(expr, (cst.Call, cst.Subscript)):
        return _made_elsewhere(model, expr, depth)
    sources = model.batch_cost.expression_sources(expr)
    return bool(sources) and all(s is not expr and _made_elsewhere(model, s, depth) for s in sources)


def _heavy(model: SemanticModel, dataset: cst.BaseExpression, collator: Optional[cst.BaseExpression]) -> bool:
    """The dataset is streamed (`load_dataset(..., streaming=True)`, `to_iterable_dataset()`, or it cannot be followed
    in a module that streams one), transformed per row as it is read (`ds.with_transform(f)`, `ds.set_transform(f)`),
    or the module handles images, audio or video and the rows are not proved cheap (decoded media, or features
    stored as Python lists that each batch converts back into arrays)."""
    cost = model.batch_cost
    if cost.streamed_dataset(dataset):
        return True
    sources = cost.expression_sources(dataset)
    if sources is not None and any(_transformed(model, s, 0) for s in sources):
        return True
    return not cost.text_only_module and not cost._cheap_items(dataset, collator)


def _transformed(model: SemanticModel, source: cst.BaseExpression, depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(source, cst.Subscript):
        return _transformed(model, source.value, depth + 1)
    if isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute):
        if source.func.attr.value in _ROW_TRANSFORMS:
            return True
        if source.func.attr.value in _TABLE_METHODS - {"map"}:
            return _transformed(model, source.func.value, depth + 1)
        return False
    if isinstance(source, (cst.Name, cst.Attribute)):
        for call in model.calls:  # `ds.set_transform(f)`: changes `ds` in place
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "set_transform" and model.code(func.value) == model.code(source):
                return True
    return False


def _overrides_loading(model: SemanticModel, class_name: str) -> bool:
    """This module's Trainer subclass (or a local base of it) overrides a method that builds its loaders or rows."""
    seen, chain = set(), [class_name]
    while chain:
        current = chain.pop()
        info = model.classes.get(current)
        if info is None or current in seen:
            continue
        seen.add(current)
        if _LOADER_METHODS & set(info.methods):
            return True
        chain.extend(info.bases)
    return False


def _trainer_inputs(model: SemanticModel, arguments: cst.Call) -> list[tuple[cst.Call, cst.BaseExpression, Optional[cst.BaseExpression]]]:
    """(trainer, dataset, collator) of every loader the HF Trainers given `arguments` build: the library's
    Trainers and this module's subclasses of them that leave their loaders alone; empty when one Trainer of the
    module cannot be followed (datasets passed by position or unpacked, arguments chosen at run time)."""
    frameworks = model.frameworks
    cost = model.batch_cost
    found = []
    for trainer in model.calls:
        name = model.call_name(trainer)
        info = model.local_class_of(name)
        if not (qualified_is(name, HF, HF_TRAINER.names) or (info is not None and frameworks.class_kind(info.node.name.value) is HF_TRAINER)):
            continue
        if info is not None and _overrides_loading(model, info.node.name.value):
            given = frameworks.hf_trainer_inputs(trainer)
            args = cost.expression_sources(given.args) if given is not None and given.args is not None else None
            if args is None or any(s is arguments for s in args):
                return []
            continue
        inputs = frameworks.hf_trainer_inputs(trainer)
        if inputs is None:
            return []
        sources = cost.expression_sources(inputs.args) if inputs.args is not None else None
        if sources is None or not any(s is arguments for s in sources):
            continue
        if len(sources) != 1:
            return []
        found.extend((trainer, dataset, inputs.collator) for dataset in inputs.datasets)
    return found
