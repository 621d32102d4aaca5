"""What a DataLoader's batches cost: to make (the work each item takes) and to copy (the bytes of a batch).

Workers (GPU101) only pay off when making a batch is real work: reading files, decoding, augmenting,
tokenizing. A dataset whose `__getitem__` only indexes data already held in memory (a `TensorDataset`, a
list of tensors, a class holding pre-tokenized ids) has nothing for workers to take off the training
process; they add start-up, pickling and inter-process copies instead. Pinning (GPU102) pays off with the
bytes of a batch: a batch of token ids is a few kilobytes to a megabyte, tiny next to the model work it
feeds, and data written out in the code (a toy dataset) is tinier still.

Both facts are proved from the code in this module, never guessed: a dataset whose source gpulint cannot
follow (built in another module, read from a YAML file, passed in from outside) is neither cheap nor small.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.dataloaders import ITERABLE_DATASET, TENSOR_DATASET, DataLoaderCall
from gpulint.analysis.held_data import CHEAP_BUILTINS, CHEAP_METHODS, CHEAP_NUMPY, CHEAP_TORCH, TENSOR_ONLY_METHODS
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.loop_bounds import FEW_ITERATIONS, break_bound
from gpulint.analysis.value_resolution import ARGS_PARAMETER_NAMES

if TYPE_CHECKING:
    from gpulint.analysis.loader_flow import LoaderInfo
    from gpulint.analysis.model import ClassInfo, SemanticModel

_MAX_DEPTH = 8
_HELPER_DEPTH = 3  # how deep a mapped function's calls to this module's functions are followed to a tokenizer
_SUBSET = frozenset({"torch.utils.data.Subset", "torch.utils.data.dataset.Subset", "torch.utils.data.random_split",
                     "torch.utils.data.dataset.random_split"})  # fmt: skip
_DEFAULT_COLLATE = frozenset({"torch.utils.data.default_collate", "torch.utils.data.dataloader.default_collate",
                              "torch.utils.data._utils.collate.default_collate"})  # fmt: skip
# Hugging Face collators that stack or pad token ids (the batch work of pre-tokenized text).
_TOKEN_COLLATORS = frozenset({
    "default_data_collator", "DefaultDataCollator", "DataCollatorWithPadding", "DataCollatorForSeq2Seq",
    "DataCollatorForLanguageModeling", "DataCollatorForTokenClassification", "DataCollatorForMultipleChoice",
    "DataCollatorForWholeWordMask", "DataCollatorWithFlattening",
})  # fmt: skip
# Tensor methods that compute a new tensor from one held in memory (done once, when the dataset is built).
_TENSOR_REDUCTIONS = frozenset({"sum", "mean", "std", "max", "min", "argmax", "argmin", "abs", "flip", "t", "squeeze",
                                "unsqueeze", "repeat", "expand", "masked_fill", "where", "clamp", "round", "sort"})  # fmt: skip
# Values that are loaded whole into memory (indexing them later reads no file).
_IN_MEMORY_BUILTINS = frozenset({"list", "tuple", "dict", "set", "sorted", "len", "int", "float", "str", "range", "sum", "max", "min"})
_IN_MEMORY_MODULES = ("torch.", "numpy.", "pandas.", "json.", "pickle.")
_LAZY = frozenset({"numpy.memmap", "numpy.lib.format.open_memmap", "torch.utils.data.DataLoader"})
_MATERIALIZING_METHODS = frozenset({"read", "readlines", "read_text", "tolist", "to_numpy", "numpy", "split", "splitlines",
                                    "values", "keys", "items", "copy", "long", "float", "int", "view", "reshape"})  # fmt: skip
# pandas methods that return a new table computed from one in memory.
_TABLE_METHODS = frozenset({"drop", "dropna", "fillna", "rename", "sample", "sort_values", "reset_index", "set_index"})
# Hugging Face `datasets` methods that build a new table once (not per item, unlike `set_transform`).
_EAGER_DATASET_METHODS = frozenset({"map", "filter", "with_format", "set_format", "select", "shuffle", "remove_columns",
                                    "rename_column", "rename_columns", "select_columns", "sort", "flatten_indices",
                                    "train_test_split", "shard", "add_column"})  # fmt: skip
# `datasets.Dataset` built from columns held in memory: its rows are what the columns hold.
_TABLE_FROM_COLUMNS = frozenset({"datasets.Dataset.from_dict", "datasets.Dataset.from_list", "datasets.arrow_dataset.Dataset.from_dict",
                                 "datasets.arrow_dataset.Dataset.from_list"})  # fmt: skip
_DATAPIPES = ("torchdata.", "torch.utils.data.datapipes.", "torch.utils.data.IterDataPipe", "torch.utils.data.MapDataPipe")
_TOKENIZER = re.compile(r"tokeni[sz]er|(^|_)tok($|_)", re.IGNORECASE)
# A token-to-id table handed to an encoding function: its output is ids.
_VOCABULARY = re.compile(r"(^|[._])(\w+_)?(stoi|vocab|vocabulary|word2idx|word2index|word_to_ix|token2id|tok2id|char2idx)$", re.IGNORECASE)
_TOKENIZING_METHODS = frozenset({"encode", "encode_plus", "batch_encode_plus", "convert_tokens_to_ids", "encode_batch"})
# Words that mark image, audio or video data: a dataset that holds them is not token data.
_MEDIA = re.compile(
    r"pixel|image|img|audio|wav|video|(?<![a-z])frames?(?![a-z])|spectrogram|(?<![a-z])mel(?![a-z])|PIL|cv2|torchvision|torchaudio|librosa",
    re.IGNORECASE,
)


# A `datasets` table saved to disk by another script (a preparation step) and loaded whole.
_SAVED_TABLES = frozenset({"datasets.load_from_disk", "datasets.Dataset.load_from_disk", "datasets.DatasetDict.load_from_disk",
                           "datasets.load.load_from_disk", "datasets.arrow_dataset.Dataset.load_from_disk"})  # fmt: skip
# Tensor methods that arrange the rows of a tensor held in memory (a view or a copy, made once).
_TENSOR_VIEWS = frozenset({"narrow", "view", "reshape", "contiguous", "long", "float", "int", "clone", "detach"})
# `datasets` methods whose result keeps the table's format (its rows are made the same way).
_FORMAT_KEEPING = frozenset({"select", "shuffle", "filter", "shard", "sort", "flatten_indices", "train_test_split"})
# Tensor methods (and `torch.permute`) that arrange a tensor's axes: their axis count is the batch's rank.
_ARRANGING = frozenset({"permute", "view", "reshape"})


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class BatchCost:
    """Per-module answers: `items_are_cheap(loader)`, `batches_are_small(loader)`, `is_toy_data(loader)`,
    `reads_a_few_batches(info)`."""

    def __init__(self, model: SemanticModel) -> None:
        self.m = model
        self._in_memory_cache: dict[int, tuple[cst.CSTNode, bool]] = {}
        self._held_calls: set[int] = set()  # calls that stand for one element of what they return

    # ---- public queries --------------------------------------------------------------------------

    def items_are_cheap(self, loader: DataLoaderCall) -> bool:
        """Every item is in-memory indexing and conversion, and so is the collate function: workers would
        have nothing to take off the training process."""
        return self._cheap_items(loader.value("dataset"), loader.value("collate_fn"))

    def trainer_items_are_cheap(self, arguments: cst.Call) -> bool:
        """Every HF Trainer of this module given these `TrainingArguments` reads rows made up front (a
        dataset mapped with a tokenizer) through a collator that only pads or stacks (the Trainer's
        default does): its loaders' workers would have nothing to take off the training process."""
        inputs = self._trainer_inputs(arguments)
        return bool(inputs) and all(self._cheap_items(dataset, collator) for dataset, collator in inputs)

    def trainer_batches_are_small(self, arguments: cst.Call) -> bool:
        """Every HF Trainer given these arguments trains on token ids: a few kilobytes a batch to pin."""
        inputs = self._trainer_inputs(arguments)
        return bool(inputs) and all(self._small(dataset) for dataset, _ in inputs)

    def batches_are_small(self, loader: DataLoaderCall) -> bool:
        """A batch is provably a few bytes per sample: token ids (with their masks and labels), or data
        written out in the code; or its size is known and at most `SMALL_BATCH_BYTES` (`analysis/batch_bytes.py`)."""
        from gpulint.analysis.batch_bytes import SMALL_BATCH_BYTES, batch_bytes

        if self.is_toy_data(loader) or self._small(loader.value("dataset")):
            return True
        size = batch_bytes(self.m, loader)
        return size is not None and size <= SMALL_BATCH_BYTES

    def is_toy_data(self, loader: DataLoaderCall) -> bool:
        """The dataset holds only numbers written in the code (`torch.tensor([[-1.2, 3.1], ...])`)."""
        dataset = loader.value("dataset")
        sources = self.expression_sources(dataset) if dataset is not None else None
        return bool(sources) and all(self._literal_dataset(s) for s in sources)

    def reads_a_few_batches(self, info: LoaderInfo) -> bool:
        """Every place the loader is read hands out one batch or a handful: `next(iter(loader))` outside a
        loop, a `for` over it whose body always ends in `break`, or one that breaks by its counter after a few
        batches (`if i > 5: break`, `analysis/loop_bounds.py`), at most once per epoch. Worker start-up, pinning
        and batch-size advice are about many batches."""
        if not info.iterations or info.feeds:
            return False  # (a loader handed to a framework, `trainer.test(dataloaders=loader)`, is read in full there)
        m = self.m
        for iteration in info.iterations:
            loop = iteration.loop
            if iteration.is_for and not (isinstance(loop, cst.For) and (_always_breaks(loop) or _breaks_soon(m, loop))):
                return False
            if not iteration.is_for and iteration.loop is not None:
                return False
            anchor = iteration.loop if iteration.loop is not None else iteration.regions[0]
            outer = m.enclosing_loops(anchor) or next((m.enclosing_loops(c) for c in iteration.via if m.enclosing_loops(c)), [])
            if outer and not self._once_per_epoch(outer[0]):
                return False  # once per pass of an outer loop that is no epoch loop (a training step's `next(iter(...))`)
        return True

    def takes_one_batch(self, iteration) -> bool:
        """The loop over the loader always breaks after its first batch (a validation pass that shows one
        example): a copy there runs once per pass, with nothing to overlap it with."""
        return isinstance(iteration.loop, cst.For) and iteration.is_for and _always_breaks(iteration.loop)

    def _once_per_epoch(self, loop: cst.CSTNode) -> bool:
        """`loop` is an epoch loop (each iteration runs a whole training loop, `residency.loop_role`): a few
        batches read once per epoch (a validation pass that shows two examples) are next to nothing beside it."""
        from gpulint.analysis.residency import EPOCH  # (residency asks this module's facts)

        return self.m.residency.loop_role(loop) == EPOCH

    def samples_are_volumes(self, info: LoaderInfo) -> bool:
        """The loop that takes the batches arranges them with five axes or more (`torch.permute(x, (0, 1, 4, 2,
        3))`, `x.view(b, t, c, h, w)`): one sample is a volume, a clip or a space-time field, large on its own
        (a neural operator's 2-D fields over time, a video), so a small batch is the memory-bound choice."""
        from gpulint.analysis.loader_flow import Assignments, reads_any, target_names

        m = self.m
        for iteration in info.iterations:
            if iteration.loop is None:
                continue
            derived = set(iteration.batch_names)  # and what is computed from them: `x = batch["fields"].to(device)`
            assignments = Assignments.find(iteration.loop)
            for _ in range(4):
                before = len(derived)
                for assignment in assignments:
                    if reads_any(assignment.value, derived):
                        derived |= target_names([t.target for t in assignment.targets])
                if len(derived) == before:
                    break
            for call in m.calls_inside(iteration.loop):
                func = call.func
                if not isinstance(func, cst.Attribute) or func.attr.value not in _ARRANGING:
                    continue
                if m.call_name(call) == "torch.permute" and len(call.args) == 2:
                    tensor, axes = call.args[0].value, [call.args[1]]
                elif isinstance(func.value, cst.Name) and func.value.value != "torch":
                    tensor, axes = func.value, list(call.args)
                else:
                    continue
                if len(axes) == 1 and isinstance(axes[0].value, (cst.Tuple, cst.List)):
                    count = len(axes[0].value.elements)
                else:
                    count = len(axes) if not any(a.star for a in axes) else 0
                if count >= 5 and reads_any(tensor, derived):
                    return True
        return False

    def dataset_length(self, loader: DataLoaderCall) -> Optional[int]:
        """The number of samples, when the code shows it: a list of samples written out, a `TensorDataset` (or a list) of the first `n` rows
        (`X[:n]`, `X[indices[:n]]`, with `n` a literal or a constant), or an instance of a project data set class
        whose `__len__` returns an integer literal (`return 1`: `ClassSummary.length`)."""
        dataset = loader.value("dataset")
        sources = self.expression_sources(dataset) if dataset is not None else None
        if not sources or len(sources) != 1:
            return None
        source = sources[0]
        if isinstance(source, (cst.List, cst.Tuple)) and not any(isinstance(e, cst.StarredElement) for e in source.elements):
            return len(source.elements)  # samples written out: `[(x1, y1), (x2, y2)]`
        if isinstance(source, cst.Call):
            callee = self.m.callee(source)
            if callee is not None and callee.kind == "class" and callee.length is not None:
                return callee.length
        if isinstance(source, cst.Call) and self.m.call_name(source) == TENSOR_DATASET and source.args and not source.args[0].star:
            source = source.args[0].value  # its tensors share their first dimension
        return self._rows(source, 0)

    def one_batch_per_pass(self, loader: DataLoaderCall) -> bool:
        """`batch_size` is the whole dataset (`DataLoader(ds, batch_size=len(ds))`, or a number at least the
        rows `dataset_length` counts): each pass is one batch, loaded after `iter()` with nothing to overlap."""
        if not loader.known("batch_size", "batch_sampler", "dataset") or loader.argument("batch_sampler") is not None:
            return False
        dataset, size = loader.value("dataset"), loader.value("batch_size")
        if dataset is None:
            return False
        if size is not None and isinstance(size, cst.Call) and isinstance(size.func, cst.Name) and size.func.value == "len":
            return len(size.args) == 1 and not size.args[0].star and self.m.code(size.args[0].value) == self.m.code(dataset)
        if not loader.known("sampler") or loader.argument("sampler") is not None:
            return False  # a sampler may draw any number of samples a pass
        rows = self.dataset_length(loader)
        if rows == 1:
            return True  # one sample: any batch holds all of it (Tune-A-Video's one video, 500 one-step epochs)
        resolved = self.m.values.resolve(size) if size is not None else None
        return rows is not None and resolved is not None and _is_int(resolved.value) and resolved.value >= rows

    def _rows(self, expr: cst.BaseExpression, depth: int) -> Optional[int]:
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Name):
            writes = self.m.dataflow.reaching_writes(expr.value, expr)
            if len(writes) == 1 and writes[0].value is not None and not writes[0].is_augmented:
                return self._rows(writes[0].value, depth + 1)
            return None
        if not isinstance(expr, cst.Subscript) or len(expr.slice) != 1:
            return None
        index = expr.slice[0].slice
        if isinstance(index, cst.Slice):
            if index.step is not None or index.upper is None:
                return None
            lower = self.m.values.resolve(index.lower) if index.lower is not None else None
            upper = self.m.values.resolve(index.upper)
            start = lower.value if lower is not None else (0 if index.lower is None else None)
            if upper is None or not _is_int(upper.value) or not _is_int(start) or start < 0 or upper.value < start:
                return None
            return upper.value - start
        if isinstance(index, cst.Index):
            return self._rows(index.value, depth + 1) if isinstance(index.value, (cst.Subscript, cst.Name)) else None  # `X[idx[:n]]`
        return None

    def holds_cuda_tensors(self, loader: DataLoaderCall) -> bool:
        """The dataset is built from tensors already on the GPU (`TensorDataset(x.cuda())`, a dataset class
        given a list that `append`s `torch.tensor(..., device=device)`): workers and pinning cannot help."""
        dataset = loader.value("dataset")
        if dataset is not None and self._formatted_on_gpu(dataset):
            return True
        for source in self.expression_sources(dataset) or () if dataset is not None else ():
            if isinstance(source, cst.Call) and (self.m.call_name(source) == TENSOR_DATASET or self.m.local_class_of(self.m.call_name(source))):
                if any(not a.star and self._cuda_data(a.value) for a in source.args):
                    return True
            elif self._cuda_data(source):
                return True
        return False

    def dataset_sources(self, loader: DataLoaderCall) -> Optional[list[cst.BaseExpression]]:
        """The expressions that build the loader's dataset (`_sources`); None when one cannot be followed."""
        dataset = loader.value("dataset")
        return None if dataset is None else self.expression_sources(dataset)

    def _formatted_on_gpu(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Hugging Face rows formatted as tensors on the GPU: `ds.with_format("torch", device="cuda")`, or
        `ds.set_format(type="torch", device=device)` on the same table (or the table it is a split or a
        subset of). Every row the loader reads is then made on the GPU."""
        m = self.m
        if depth > _MAX_DEPTH:
            return False
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method == "with_format":
                return _formats_on_gpu(m, expr)
            return method in _FORMAT_KEEPING and self._formatted_on_gpu(expr.func.value, depth + 1)
        if isinstance(expr, cst.Subscript):  # `tokenized["train"]`: a split keeps the table's format
            return self._formatted_on_gpu(expr.value, depth + 1)
        if not isinstance(expr, cst.Name):
            return False
        writes = m.dataflow.reaching_writes(expr.value, expr)
        formats = [
            c for c in m.dataflow.method_calls.get(expr.value, ())
            if c.func.attr.value in ("set_format", "reset_format") and m.dataflow.reaching_writes(expr.value, c) == writes
        ]  # fmt: skip
        if formats:  # the last format set on this table decides
            last = max(formats, key=lambda c: m.dataflow.order[c])
            return last.func.attr.value == "set_format" and _formats_on_gpu(m, last)
        return bool(writes) and all(
            w.value is not None and not w.is_augmented and self._formatted_on_gpu(w.value, depth + 1) for w in writes
        )

    def _cuda_data(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Certainly a GPU tensor, or a list of them (its elements, or what is `append`ed to it)."""
        m = self.m
        if depth > _MAX_DEPTH:
            return False
        residency = m.residency
        if residency.is_gpu(expr, certain=True):
            return True
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            return residency.is_gpu(expr.elt, certain=True)
        if isinstance(expr, (cst.List, cst.Tuple)):
            return any(residency.is_gpu(e.value, certain=True) for e in expr.elements if not isinstance(e, cst.StarredElement))
        if isinstance(expr, cst.Call):
            function = self._module_function(expr)
            return function is not None and any(r.value is not None and self._cuda_data(r.value, depth + 1) for r in m.returns_of(function))
        if isinstance(expr, cst.Name):
            writes = m.dataflow.reaching_writes(expr.value, expr)
            if len(writes) == 1 and writes[0].value is not None and not writes[0].is_augmented:
                value = writes[0].value
                if isinstance(value, cst.List) and not value.elements:  # `x = []`, then `x.append(t)`
                    scope = m.scope_of(writes[0].statement)
                    return any(
                        c.func.attr.value == "append" and c.args and m.scope_of(c) is scope and residency.is_gpu(c.args[0].value, certain=True)
                        for c in m.dataflow.method_calls.get(expr.value, ())
                    )  # fmt: skip
                return self._cuda_data(value, depth + 1) if isinstance(value, (cst.ListComp, cst.List)) else False
        return False

    def _cheap_items(self, dataset: Optional[cst.BaseExpression], collate: Optional[cst.BaseExpression]) -> bool:
        sources = self.expression_sources(dataset) if dataset is not None else None
        if sources:  # `ds = make() if enabled else None`: a loader of None is never built, the other source decides
            sources = [s for s in sources if not (isinstance(s, cst.Name) and s.value == "None")] or sources
        return bool(sources) and all(self._cheap_dataset(s) for s in sources) and self.cheap_collate(collate)

    def _small(self, dataset: Optional[cst.BaseExpression]) -> bool:
        sources = self.expression_sources(dataset) if dataset is not None else None
        return bool(sources) and all(self._token_dataset(s) for s in sources)

    def _trainer_inputs(self, arguments: cst.Call) -> list[tuple[cst.BaseExpression, Optional[cst.BaseExpression]]]:
        """(dataset, collator) of every loader the HF Trainers given `arguments` build; empty when one of
        them cannot be followed (no such Trainer here, datasets passed by position, arguments chosen at run time)."""
        found: list[tuple[cst.BaseExpression, Optional[cst.BaseExpression]]] = []
        frameworks = self.m.frameworks
        for trainer in frameworks.hf_trainers:
            inputs = frameworks.hf_trainer_inputs(trainer)
            if inputs is None:
                return []  # a Trainer whose loaders cannot be followed may be the one given `arguments`
            sources = self.expression_sources(inputs.args) if inputs.args is not None else None
            if sources is None or not any(s is arguments for s in sources):
                continue
            if len(sources) != 1:
                return []
            found.extend((dataset, inputs.collator) for dataset in inputs.datasets)
        return found

    def streams_unsharded(self, dataset: Optional[cst.BaseExpression]) -> bool:
        """The dataset is built by a class deriving from `IterableDataset` whose code (and its bases' in this
        module, and this module's functions they call) never asks `get_worker_info()`, or by such a class of
        another project module (none of its modules mentions `get_worker_info`): every worker would replay the
        whole stream, or read a stale copy of live state (a replay buffer, the policy network)."""
        if dataset is None:
            return False
        sources = self.expression_sources(dataset) or [dataset]
        return any(isinstance(s, cst.Call) and self._unsharded_stream_class(s) for s in sources)

    def trainer_streams_unsharded(self, arguments: cst.Call) -> bool:
        """An HF Trainer given these `TrainingArguments` reads an `IterableDataset` that does not shard by worker."""
        return any(self.streams_unsharded(dataset) for dataset, _ in self._trainer_inputs(arguments))

    def _unsharded_stream_class(self, call: cst.Call) -> bool:
        m = self.m
        info = m.local_class_of(m.call_name(call))
        if info is None or not m.is_subclass_of(info.node.name.value, ITERABLE_DATASET):
            # a class of another project module, or one whose stream base is there (analysis/project.py)
            callee = m.callee(call)
            return callee is not None and callee.kind == "class" and callee.returns == ("stream",)
        chain, seen = [info], set()
        while chain:
            current = chain.pop()
            if current.node.name.value in seen:
                continue
            seen.add(current.node.name.value)
            if m.through_calls("asks get_worker_info", current.node, lambda node: "get_worker_info" in m.code(node)):
                return False
            chain.extend(m.classes[b] for b in current.bases if b in m.classes)
        return True

    # ---- where a value comes from ----------------------------------------------------------------

    def expression_sources(self, expr: cst.BaseExpression, depth: int = 0, updates: bool = False) -> Optional[list[cst.BaseExpression]]:
        """The expressions that build the value of `expr`, through names, `self.` attributes, parameters
        (the arguments this module's calls pass), this module's functions (their returns) and subsets
        (`Subset`, `random_split`); None when one of them cannot be followed. With `updates`, an augmented
        write (`data += noise`) adds its operand to the sources of the value it updates (where the data
        lives, not which object it is)."""
        if depth > _MAX_DEPTH:
            return None
        m = self.m
        if isinstance(expr, cst.Name) and expr.value in ("None", "True", "False"):
            return [expr]
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            if key is None:
                return [expr]
            writes = m.dataflow.reaching_writes(key, expr)
            if writes:
                found: list[cst.BaseExpression] = []
                for write in writes:
                    if write.is_augmented and not (updates and write.value is not None):
                        return None
                    if write.is_augmented:
                        earlier = self._sources_before(write, depth + 1)
                        operand = self.expression_sources(write.value, depth + 1, updates)  # type: ignore[arg-type]
                        inner = None if earlier is None or operand is None else [*earlier, *operand]
                    elif write.value is not None:
                        inner = self.expression_sources(write.value, depth + 1, updates)
                    elif isinstance(write.source, cst.Call) and m.call_name(write.source) in _SUBSET and write.source.args:
                        inner = self.expression_sources(write.source.args[0].value, depth + 1)  # `train, val = random_split(ds, ...)`
                    elif isinstance(write.source, cst.Call) and (element := self._returned_element(write, depth)) is not None:
                        inner = element  # `vocab, dataset = read_data(n)`: the matching part of what it returns
                    elif isinstance(write.source, cst.Call) and self._held_element(write):
                        inner = [write.source]  # `train, val = make_datasets(...)` of another module, each in memory
                    elif updates and isinstance(write.source, cst.Call) and write.unpacked_position is not None:
                        inner = [write.source]  # `data, mask = pickle.load(f)`: each part lives where the whole does
                    else:
                        return None
                    if inner is None:
                        return None
                    found.extend(inner)
                if isinstance(expr, cst.Name) and not any(isinstance(w.statement, cst.For) or m.dataflow._surely_runs_before(w.statement, expr) for w in writes):
                    binders = [b for b in m.bindings_of(expr.value, expr) if isinstance(b, cst.Param)]
                    if binders:  # `if data is None: data = []` then `return data`: what the caller gave may reach too
                        given = self._parameter_sources(binders[0], depth) if len(binders) == 1 else None
                        return None if given is None else [*found, *given]
                return found
            if isinstance(expr, cst.Name):
                binders = m.bindings_of(expr.value, expr)
                if len(binders) == 1 and isinstance(binders[0], cst.Param):
                    return self._parameter_sources(binders[0], depth)
                return None
            return None if key.startswith("self.") else [expr]
        if isinstance(expr, cst.IfExp):  # `make() if enabled else None`: one of the two
            body, orelse = self.expression_sources(expr.body, depth + 1, updates), self.expression_sources(expr.orelse, depth + 1, updates)
            return None if body is None or orelse is None else [*body, *orelse]
        if isinstance(expr, cst.Call):
            name = m.call_name(expr)
            if name in _SUBSET and expr.args:
                return self.expression_sources(expr.args[0].value, depth + 1)
            function = self._module_function(expr) or self._own_method(expr)
            if function is not None:
                returns = [r.value for r in m.returns_of(function)]
                if not returns or any(r is None for r in returns):
                    return None
                found = []
                for value in returns:
                    inner = self.expression_sources(value, depth + 1)  # type: ignore[arg-type]
                    if inner is None:
                        return None
                    found.extend(inner)
                return found
        return [expr]

    def _held_element(self, write) -> bool:
        """For `a, b = f(...)` with `f` a project function of another module: its summary says the element
        `write` names is a dataset held in memory (`analysis/held_data.py`); the call then stands for it."""
        index = write.unpacked_position
        callee = self.m.callee(write.source)
        held = callee.held if callee is not None and callee.kind == "function" else None
        if index is None or not (isinstance(held, (list, tuple)) and len(held) == 2 and held[0] == "tuple"):
            return False
        parts = held[1]
        if len(parts) != len(write.statement.targets[0].target.elements) or parts[index] != "cheap":
            return False
        self._held_calls.add(id(write.source))
        return True

    def _held_dataset(self, call: cst.Call) -> bool:
        """A project function or class of another module whose summary says it hands out a dataset held in
        memory: a function returning one, or a dataset class given data in memory for what it holds."""
        if id(call) in self._held_calls:
            return True
        local = self.m.local_class_of(self.m.call_name(call))
        if local is not None and any(cls == local.node.name.value for cls, _ in self.m.assigned_methods):
            return False  # its methods are replaced by functions the module assigns: what the class body says is not what runs
        callee = self.m.callee(call)
        if callee is None or not callee.held:
            return False
        if callee.kind == "function":
            return callee.held == "cheap"
        needs = callee.held.get("items") if isinstance(callee.held, dict) else None
        if needs is None:
            return False
        given = {name: arg.value for arg, name in self.m.arguments_to(call, callee)}
        return all(name in given and self._in_memory(given[name]) for name in needs)

    def _sources_before(self, write, depth: int) -> Optional[list[cst.BaseExpression]]:
        """The sources of the value an augmented write updates: the writes that reach it."""
        earlier = self.m.dataflow.reaching_writes(write.key, write.statement)
        if not earlier or write in earlier or depth > _MAX_DEPTH:
            return None
        found: list[cst.BaseExpression] = []
        for previous in earlier:
            if previous.value is None or previous.is_augmented:
                return None
            inner = self.expression_sources(previous.value, depth + 1, True)
            if inner is None:
                return None
            found.extend(inner)
        return found

    def _returned_element(self, write, depth: int) -> Optional[list[cst.BaseExpression]]:
        """For `a, b = f(...)` with `f` a function of this module that returns tuples of that length: the
        sources of the element `write` names in each of them; None otherwise."""
        function = self._module_function(write.source)
        statement = write.statement
        if function is None or not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
            return None
        target = statement.targets[0].target
        if not isinstance(target, (cst.Tuple, cst.List)) or any(isinstance(e, cst.StarredElement) for e in target.elements):
            return None
        index = next((i for i, e in enumerate(target.elements) if e.value is write.target), None)
        returns = [r.value for r in self.m.returns_of(function)]
        if index is None or not returns:
            return None
        found: list[cst.BaseExpression] = []
        for value in returns:
            if not isinstance(value, cst.Tuple) or len(value.elements) != len(target.elements):
                return None
            if isinstance(value.elements[index], cst.StarredElement):
                return None
            inner = self.expression_sources(value.elements[index].value, depth + 1)
            if inner is None:
                return None
            found.extend(inner)
        return found

    def _parameter_sources(self, param: cst.Param, depth: int) -> Optional[list[cst.BaseExpression]]:
        """What this module's calls pass for `param` (its default where a call leaves it out)."""
        m = self.m
        func = m.parent.get(m.parent.get(param))
        if not isinstance(func, cst.FunctionDef):
            return None
        positional = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
        method = isinstance(m.parent.get(m.parent.get(func)), cst.ClassDef)
        if method and positional and positional[0] in ("self", "cls"):
            positional = positional[1:]
        name = param.name.value
        calls = self._calls_of(func)
        if not calls:
            return None
        found: list[cst.BaseExpression] = []
        for call in calls:
            if any(a.star for a in call.args):
                return None
            given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == name), None)
            if given is None and name in positional:
                index = positional.index(name)
                plain = [a for a in call.args if a.keyword is None]
                given = plain[index].value if index < len(plain) else None
            given = given if given is not None else param.default
            inner = self.expression_sources(given, depth + 1) if given is not None else None
            if inner is None:
                return None
            found.extend(inner)
        return found

    def _calls_of(self, func: cst.FunctionDef) -> list[cst.Call]:
        """Calls of a module function by name, of a method as `self.name(...)` in its class, of `__init__`
        as the class's constructor."""
        m = self.m
        owner = m.parent.get(m.parent.get(func))
        name = func.name.value
        if isinstance(owner, cst.ClassDef):
            if name == "__init__":
                return [c for c in m.calls if m.local_class_of(m.call_name(c)) is m.classes.get(owner.name.value)]
            return [
                c for c in m.calls
                if isinstance(c.func, cst.Attribute) and c.func.attr.value == name and isinstance(c.func.value, cst.Name)
                and c.func.value.value == "self" and m.is_inside(c, owner)
            ]  # fmt: skip
        if len(m.functions.get(name, [])) != 1:
            return []
        return [c for c in m.calls if isinstance(c.func, cst.Name) and c.func.value == name]

    def _own_method(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """The method of the enclosing class (or one it inherits from a class of this module) that
        `self.name(...)` runs: `self.data = self.batchify(data)` holds what it returns."""
        m = self.m
        func = call.func
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return None
        owner = m.dataflow.enclosing_class(call)
        info = m.classes.get(owner.name.value) if owner is not None else None
        if info is None or info.node is not owner:
            return None
        return self._method(info, func.attr.value)

    def _module_function(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """The one function of this module (not a method) that `call` runs by name."""
        m = self.m
        if not isinstance(call.func, cst.Name) or m.local_class_of(m.call_name(call)) is not None:
            return None
        functions = m.functions.get(call.func.value, [])
        if len(functions) != 1 or isinstance(m.parent.get(m.parent.get(functions[0])), cst.ClassDef):
            return None
        return functions[0]

    # ---- data held in memory ---------------------------------------------------------------------

    def _in_memory(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """The value is data loaded whole into memory: indexing it reads no file and decodes nothing."""
        known = self._in_memory_cache.get(id(expr))
        if known is not None and known[0] is expr:
            return known[1]
        self._in_memory_cache[id(expr)] = (expr, False)  # a cycle proves nothing
        sources = self.expression_sources(expr, depth, updates=True)
        result = sources is not None and all(self._in_memory_source(s, depth + 1) for s in sources)
        self._in_memory_cache[id(expr)] = (expr, result)
        return result

    def _in_memory_source(self, expr: cst.BaseExpression, depth: int) -> bool:
        if depth > _MAX_DEPTH:
            return False
        m = self.m
        if isinstance(expr, (cst.BaseNumber, cst.BaseString, cst.List, cst.Tuple, cst.Set, cst.Dict, cst.ListComp,
                             cst.SetComp, cst.DictComp)):  # fmt: skip
            return True
        if isinstance(expr, cst.Name):
            return expr.value in ("True", "False", "None")
        if isinstance(expr, cst.Attribute) and self._command_line(expr.value):
            return True  # a command-line option: a string or a number
        if isinstance(expr, (cst.Subscript, cst.Attribute)):
            return self._in_memory(expr.value, depth)
        if isinstance(expr, cst.BinaryOperation):
            return self._in_memory(expr.left, depth) and self._in_memory(expr.right, depth)
        if isinstance(expr, cst.Comparison):  # `(data.sum(1) == 1)`: a mask computed from the data
            return self._in_memory(expr.left, depth) and all(self._in_memory(c.comparator, depth) for c in expr.comparisons)
        if isinstance(expr, cst.UnaryOperation):
            return self._in_memory(expr.expression, depth)
        if isinstance(expr, cst.IfExp):
            return self._in_memory(expr.body, depth) and self._in_memory(expr.orelse, depth)
        if not isinstance(expr, cst.Call):
            return False
        func = expr.func
        name = m.call_name(expr) or ""
        root = func
        while isinstance(root, cst.Attribute):
            root = root.value
        if root is not func and isinstance(root, cst.Name) and m.dataflow.reaching_writes(root.value, expr):
            name = ""  # `data.sum(1)` with a local `data` that shadows `import torch.utils.data as data`
        if isinstance(func, cst.Name) and func.value in _IN_MEMORY_BUILTINS and not m.module_bindings(func.value):
            return True
        if _is_tokenizing(m, expr):
            return True  # token ids (a BatchEncoding, a list of ids)
        if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_ONLY_METHODS and not (name and m.module_bindings(name.split(".")[0])):
            return True  # `data.view(b, -1).t().contiguous()`: a torch tensor, rows in memory
        if name:
            if name in _LAZY or any(a.keyword is not None and a.keyword.value in ("mmap", "mmap_mode") for a in expr.args):
                return False
            return name.startswith(_IN_MEMORY_MODULES) and not name.startswith("torch.utils.data.")
        if isinstance(func, cst.Attribute) and func.attr.value in ("read", "readlines", "read_text"):
            return True
        if isinstance(func, cst.Attribute) and func.attr.value in ("fit_transform", "transform") and len(expr.args) == 1:
            return self._in_memory(expr.args[0].value, depth)  # a fitted encoder or scaler returns an array
        if isinstance(func, cst.Attribute) and (func.attr.value in _MATERIALIZING_METHODS or func.attr.value in CHEAP_METHODS
                                                or func.attr.value in _TABLE_METHODS
                                                or func.attr.value in _TENSOR_REDUCTIONS):  # fmt: skip
            return self._in_memory(func.value, depth)  # `(mask).to(torch.long)`, `data.sum(dim=1)`: derived in memory
        return False

    def _command_line(self, expr: cst.BaseExpression) -> bool:
        """The parsed command line: `parser.parse_args()`, or a parameter named like it (`args`, `opt`)."""
        if self.m.values.is_parsed_args(expr):
            return True
        if isinstance(expr, cst.Name) and expr.value in ARGS_PARAMETER_NAMES:
            binders = self.m.bindings_of(expr.value, expr)
            return len(binders) == 1 and isinstance(binders[0], cst.Param)
        return False

    # ---- cheap items -----------------------------------------------------------------------------

    def _cheap_dataset(self, source: cst.BaseExpression, depth: int = 0) -> bool:
        m = self.m
        if isinstance(source, (cst.List, cst.Tuple, cst.ListComp)):
            return True  # a list of tensors or samples: indexing a Python list
        if isinstance(source, cst.Subscript) and depth < _MAX_DEPTH:  # `tokenized["train"]`: a split of it
            return self._all_cheap(source.value, depth + 1)
        if not isinstance(source, cst.Call):
            return False
        name = m.call_name(source) or ""
        if name == TENSOR_DATASET:
            return True
        if isinstance(source.func, cst.Name) and source.func.value in ("list", "tuple") and not m.module_bindings(source.func.value):
            return True
        if name.startswith("torch.") and not name.startswith("torch.utils."):
            return True  # a tensor: rows indexed in memory
        if self._held_dataset(source):
            return True  # built in another module from data held in memory (its summary says so)
        if name in _TABLE_FROM_COLUMNS and source.args and not source.args[0].star and self._token_dataset(source.args[0].value):
            return True  # `Dataset.from_dict(tokenizer(texts))`: rows of token ids, tokenized once
        if _maps_tokenizer(m, source) and not self.streamed_dataset(source.func.value) and not self._datapipe(source.func.value):
            return True  # a Hugging Face dataset tokenized once by `.map(...)`: rows of token ids
        if self._saved_text_table(source):
            return True  # prepared and saved by another script: rows of ids read back from Arrow
        func = source.func
        if isinstance(func, cst.Attribute) and func.attr.value in _EAGER_DATASET_METHODS and depth < _MAX_DEPTH:
            return self._all_cheap(func.value, depth + 1)  # `.with_format("torch")` of cheap rows is cheap rows
        if isinstance(func, cst.Attribute) and func.attr.value in _TENSOR_VIEWS and depth < _MAX_DEPTH:
            return self._all_cheap(func.value, depth + 1)  # `tensor.narrow(0, 0, n).view(-1, block)`: the same rows, arranged
        info = m.local_class_of(name) or self._partial_class(source)
        getitem = self._method(info, "__getitem__") if info is not None else None
        return getitem is not None and self._cheap_body(getitem, 0)

    def _partial_class(self, call: cst.Call) -> Optional[ClassInfo]:
        """The class of this module that `make(n)` builds, when every write of `make` is
        `functools.partial(TheClass, ...)` (a dataset class with its first arguments bound)."""
        m = self.m
        if not isinstance(call.func, cst.Name):
            return None
        sources = self.expression_sources(call.func)
        if not sources or sources == [call.func]:
            return None
        found = set()
        for source in sources:
            if not (isinstance(source, cst.Call) and m.call_name(source) == "functools.partial" and source.args):
                return None
            target = source.args[0].value
            info = m.local_class_of(m.qualified_name(target)) if isinstance(target, (cst.Name, cst.Attribute)) else None
            if info is None:
                return None
            found.add(info.node.name.value)
        return m.classes[found.pop()] if len(found) == 1 else None

    def _all_cheap(self, expr: cst.BaseExpression, depth: int) -> bool:
        if isinstance(expr, (cst.Call, cst.Subscript)):  # `tokenized["train"].shuffle(...)`: the split's rows decide
            return self._cheap_dataset(expr, depth)
        if self._splits_replaced(expr, depth):
            return True
        sources = self.expression_sources(expr)
        return bool(sources) and all(s is not expr and self._cheap_dataset(s, depth) for s in sources)

    def _splits_replaced(self, expr: cst.BaseExpression, depth: int) -> bool:
        """`for split in ds.keys(): ds[split] = ds[split].map(tokenize, ...)`: every split of the dataset dict
        is replaced by cheap rows (the Hugging Face idiom), whatever `ds` was loaded as."""
        m = self.m
        key = dotted_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        statements = m.dataflow.item_writes.get(key, []) if key is not None else []
        if not statements or depth >= _MAX_DEPTH:
            return False
        for statement in statements:
            if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
                return False
            target = statement.targets[0].target
            loop = next(iter(m.enclosing_loops(statement)), None)
            if not (isinstance(target, cst.Subscript) and isinstance(loop, cst.For) and isinstance(loop.target, cst.Name)):
                return False
            index = target.slice[0].slice if len(target.slice) == 1 else None
            iterated = loop.iter.func.value if isinstance(loop.iter, cst.Call) and isinstance(loop.iter.func, cst.Attribute) \
                and loop.iter.func.attr.value == "keys" and not loop.iter.args else loop.iter
            if not (isinstance(index, cst.Index) and isinstance(index.value, cst.Name) and index.value.value == loop.target.value):
                return False
            named = isinstance(iterated, (cst.Name, cst.Attribute)) and dotted_name(iterated) == key
            if not (named or _literal_names(iterated)):
                return False  # (`for split in ["train", "valid"]:` names the splits it replaces)
            if any(later is not statement and m.dataflow.before(statement, later) and m.is_inside(later, loop) for later in statements):
                continue  # a step on the way: a later write in the same loop is what the split holds
            if not (isinstance(statement.value, cst.Call) and self._cheap_dataset(statement.value, depth + 1)):
                return False
        return True

    def _datapipe(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """A torchdata / `torch.utils.data` pipeline, whose `.map` runs per item as the loader reads it."""
        sources = [expr] if isinstance(expr, cst.Call) else self.expression_sources(expr) or ()
        for source in sources:
            if not isinstance(source, cst.Call):
                continue
            if (self.m.call_name(source) or "").startswith(_DATAPIPES):
                return True
            if isinstance(source.func, cst.Attribute) and depth < _MAX_DEPTH and self._datapipe(source.func.value, depth + 1):
                return True
        return False

    def streamed_dataset(self, dataset: cst.BaseExpression, depth: int = 0) -> bool:
        """The dataset whose `.map` this is may be streamed (its `.map` then runs per item, lazily): it is built
        from a `load_dataset(..., streaming=True)` or a `to_iterable_dataset()`, or it cannot be followed in a
        module that streams one. A notebook that streams one corpus to filter it and trains on another
        (`load_dataset(name, split="train")`) maps the other once."""
        sources = self.expression_sources(dataset) if depth <= _MAX_DEPTH else None
        if sources is None:
            return self._streams
        for source in sources:
            parts: list[cst.BaseExpression] = []
            if isinstance(source, cst.Subscript):
                parts.append(source.value)  # `ds["train"]`: a split of it
            elif isinstance(source, cst.Call):
                if _streaming_call(source):
                    return True
                library = self.m.call_name(source) is not None
                if isinstance(source.func, cst.Attribute) and not library:
                    parts.append(source.func.value)  # `ds.map(...).filter(...)`: what it is called on
                elif library:  # `DatasetDict({...})`, `concatenate_datasets([a, b])`, `load_dataset(name)`: what it is given
                    parts.extend(a.value for a in source.args if a.keyword is None)
                else:
                    return self._streams  # a function of another module, a parameter: not followed
            elif isinstance(source, (cst.Dict, cst.List, cst.Tuple)):  # `DatasetDict({"train": ds_train, ...})`
                parts.extend(e.value for e in source.elements if isinstance(e, (cst.DictElement, cst.Element)))
            elif isinstance(source, cst.Name) and source.value in ("None", "True", "False"):
                continue
            elif isinstance(source, (cst.Name, cst.Attribute)):
                return self._streams  # a value bound elsewhere: not followed
            for part in parts:
                if isinstance(part, cst.Name) and not self._holds_value(part):
                    continue  # a function, a class or a builtin handed to the call: no data
                if isinstance(part, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Dict, cst.List, cst.Tuple)) and self.streamed_dataset(part, depth + 1):
                    return True
        return False

    def _holds_value(self, name: cst.Name) -> bool:
        """`name` is a variable or a parameter here (not an import, a function, a class or a builtin)."""
        m = self.m
        if m.dataflow.reaching_writes(name.value, name):
            return True
        binders = m.bindings_of(name.value, name)
        return bool(binders) and all(isinstance(b, cst.Param) for b in binders)

    @cached_property
    def _streams(self) -> bool:
        """The module streams a dataset (`load_dataset(..., streaming=True)`): its `.map` runs per item, lazily."""
        for call in self.m.calls:
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "to_iterable_dataset":
                return True
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "streaming" and not _is_false(arg.value):
                    return True
        return False

    def cheap_collate(self, collate: Optional[cst.BaseExpression], depth: int = 0) -> bool:
        m = self.m
        if collate is None or isinstance(collate, cst.Name) and collate.value == "None":
            return True  # (`data_collator=None`: the Trainer's default, which stacks)
        if isinstance(collate, cst.Name) and not m.functions.get(collate.value) and depth < _MAX_DEPTH:
            writes = m.dataflow.reaching_writes(collate.value, collate)
            if len(writes) == 1 and isinstance(writes[0].value, (cst.Name, cst.Attribute)) and not writes[0].is_augmented:
                return self.cheap_collate(writes[0].value, depth + 1)  # `data_collator = default_data_collator`
        if isinstance(collate, cst.Name) and not m.functions.get(collate.value):
            sources = self.expression_sources(collate)
            if sources is None or len(sources) != 1 or sources[0] is collate:
                return self._known_collate(collate)
            collate = sources[0]
        if self._known_collate(collate):
            return True
        if isinstance(collate, cst.Call) and self._cheap_collate_class(collate):
            return True
        if isinstance(collate, cst.Call) and m.call_name(collate) == "functools.partial" and collate.args:
            collate = collate.args[0].value
        if isinstance(collate, cst.Lambda):
            return self._cheap_body(collate, 0)
        if isinstance(collate, cst.Name):
            functions = m.functions.get(collate.value, [])  # (a notebook may define it again: each must be cheap)
            return bool(functions) and all(self._cheap_body(f, 0) for f in functions)
        return False

    def _cheap_collate_class(self, call: cst.Call) -> bool:
        """`collate_fn=Collator()`: an instance of a class whose `__call__` only stacks, pads or joins the
        samples (this module's class, or another module's by its summary)."""
        m = self.m
        info = m.local_class_of(m.call_name(call))
        if info is not None:
            method = self._method(info, "__call__")
            return method is not None and self._cheap_body(method, 0)
        callee = m.callee(call)
        return callee is not None and callee.kind == "class" and isinstance(callee.held, dict) and bool(callee.held.get("collate"))

    def _known_collate(self, collate: cst.BaseExpression) -> bool:
        target = collate.func if isinstance(collate, cst.Call) else collate
        name = self.m.qualified_name(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
        if name is None:
            return False
        return name in _DEFAULT_COLLATE or (name.startswith("transformers.") and name.rsplit(".", 1)[-1] in _TOKEN_COLLATORS)

    def _method(self, info: ClassInfo, name: str, depth: int = 0) -> Optional[cst.FunctionDef]:
        """`info`'s own method `name` (or the module's function a statement puts in its place: `Data.__getitem__
        = __getitem__`), or the one it inherits from a class of this module."""
        assigned = self.m.assigned_methods.get((info.node.name.value, name))
        if assigned is not None:
            return assigned
        if name in info.methods:
            return info.methods[name]
        for base in info.bases:
            parent = self.m.classes.get(base)
            if parent is not None and depth < 4:
                found = self._method(parent, name, depth + 1)
                if found is not None:
                    return found
        return None

    def _cheap_body(self, func: cst.FunctionDef | cst.Lambda, depth: int) -> bool:
        """`func` only indexes data held in memory and converts it: no file, no decoding, no transform,
        no tokenizer, no arithmetic on the sample."""
        m = self.m
        if depth > 3 or _has_io_statement(func):
            return False
        for call in m.calls_inside(func):
            if not self._cheap_call(call, func, depth):
                return False
        for node in m.attributes:
            if isinstance(node.value, cst.Name) and node.value.value == "self" and m.is_inside(node, func):
                parent = m.parent.get(node)
                if isinstance(parent, cst.Call) and parent.func is node:
                    continue  # `self.method(...)`: checked as a call
                if _handed_out_whole(parent):
                    continue  # `example["prompt"] = self.prompt`: the same object every item, whatever it is
                if self._index_position(node, func):
                    continue  # `self.data[start : start + self.seq_len]`: a bound of the index, not data read
                if not self._in_memory(node):
                    return False
        return not _computes(func)

    def _index_position(self, node: cst.CSTNode, func: cst.FunctionDef | cst.Lambda) -> bool:
        """`node` is part of an index or slice bound (`data[i : i + self.n]`) or of a random index draw's
        bounds (`torch.randint(0, len(data) - self.n, (1,))`): a number that says where to read, not data."""
        m = self.m
        current = node
        for ancestor in m.ancestors(node):
            if ancestor is func:
                return False
            if isinstance(ancestor, cst.SubscriptElement):
                return True
            if isinstance(ancestor, cst.Call) and current is not ancestor.func and _index_draw(_draw_name(ancestor), ancestor):
                return True
            current = ancestor
        return False

    def _cheap_call(self, call: cst.Call, func: cst.FunctionDef | cst.Lambda, depth: int) -> bool:
        m = self.m
        callee = call.func
        if isinstance(callee, cst.Name):
            if callee.value in CHEAP_BUILTINS and not m.module_bindings(callee.value):
                return True
            local = self._module_function(call)
            if local is not None:
                return self._cheap_body(local, depth + 1)
        if isinstance(callee, cst.Attribute) and callee.attr.value == "pad" and _names_tokenizer(m, callee.value):
            return True  # `tokenizer.pad(examples)`: pads ids that are already tokens
        name = m.call_name(call) or ""
        if _index_draw(name, call):
            return True  # `torch.randint(0, len(self.data) - n, (1,))`: a random start to index the data at
        if name.startswith("torch."):
            return name[len("torch.") :] in CHEAP_TORCH
        if name.startswith("numpy."):
            return name[len("numpy.") :] in CHEAP_NUMPY
        if name:
            return False
        if not isinstance(callee, cst.Attribute):
            return False
        if isinstance(callee.value, cst.Name) and callee.value.value == "self":
            owner = next((a for a in m.ancestors(func) if isinstance(a, cst.ClassDef)), None)
            info = m.classes.get(owner.name.value) if owner is not None else None
            method = self._method(info, callee.attr.value) if info is not None else None
            if method is None and self._always_none(callee):
                return True  # `self.T(sample)` under `if self.T:` with every constructor call leaving `t=None`: never runs
            return method is not None and self._cheap_body(method, depth + 1)  # `self.transform(x)` is not a method
        return callee.attr.value in CHEAP_METHODS

    def _always_none(self, expr: cst.BaseExpression) -> bool:
        sources = self.expression_sources(expr)
        return bool(sources) and all(isinstance(s, cst.Name) and s.value == "None" for s in sources)

    # ---- small batches ---------------------------------------------------------------------------

    def _token_dataset(self, source: cst.BaseExpression) -> bool:
        """The dataset hands out token ids (and the masks and labels that go with them), and nothing in it
        is an image, audio or video."""
        m = self.m
        if _MEDIA.search(m.code(source)):
            return False
        if isinstance(source, cst.Call):
            name = m.call_name(source) or ""
            if name == TENSOR_DATASET:
                return all(not a.star and self._from_tokens(a.value, 0) for a in source.args)
            info = m.local_class_of(name)
            if info is not None:
                return not _MEDIA.search(m.code(info.node)) and (
                    self._tokenizes(info.node) or any(_names_tokenizer(m, a.value) for a in source.args)
                    or self._given_only_tokens(source)
                )
        return self._saved_text_table(source) or self._from_tokens(source, 0)

    def _saved_text_table(self, source: cst.BaseExpression) -> bool:
        """`datasets.load_from_disk(path)` in a module that handles no image, audio or video and transforms no
        row as it is read (`set_transform`): a table another script prepared and saved, whose rows are ids and
        labels read back from Arrow (a table of raw text could not go through a collator that only pads)."""
        m = self.m
        if not (isinstance(source, cst.Call) and m.call_name(source) in _SAVED_TABLES):
            return False
        return self.text_only_module

    @cached_property
    def text_only_module(self) -> bool:
        """The module mentions no image, audio or video and sets no per-row transform."""
        m = self.m
        return not _MEDIA.search(m.code(m.module)) and not any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value in ("set_transform", "with_transform") for c in m.calls
        )

    def _given_only_tokens(self, call: cst.Call) -> bool:
        """A dataset class of this module given tokenizer output and nothing else but literals
        (`IMDBDataset(imdb_tokenized, partition_key="train")`, a wrapper that indexes the split it is given)."""
        data = [a.value for a in call.args if not isinstance(a.value, (cst.BaseNumber, cst.BaseString))]
        return bool(data) and not any(a.star for a in call.args) and all(self._from_tokens(d, 0) for d in data)

    def _from_tokens(self, expr: cst.BaseExpression, depth: int) -> bool:
        """Some way the value is built reaches tokenizer output (a cache of it, read back on another path,
        holds the same thing)."""
        if depth > _MAX_DEPTH:
            return False
        m = self.m
        if isinstance(expr, cst.Call):
            if _is_tokenizing(m, expr) or _maps_tokenizer(m, expr) or any(_names_tokenizer(m, a.value) for a in expr.args):
                return True
            function = self._module_function(expr)
            if function is not None:
                return any(r.value is not None and self._from_tokens(r.value, depth + 1) for r in m.returns_of(function))
            parts = [a.value for a in expr.args]
            if isinstance(expr.func, cst.Attribute):
                parts.append(expr.func.value)
            return any(self._from_tokens(p, depth + 1) for p in parts)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            if key is None:
                return False
            writes = m.dataflow.reaching_writes(key, expr)
            return any(w.value is not None and self._from_tokens(w.value, depth + 1) for w in writes)
        if isinstance(expr, cst.Subscript):
            return self._from_tokens(expr.value, depth + 1)
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self._from_tokens(expr.elt, depth + 1) or self._from_tokens(expr.for_in.iter, depth + 1)
        if isinstance(expr, (cst.List, cst.Tuple)):
            return bool(expr.elements) and all(self._from_tokens(e.value, depth + 1) for e in expr.elements)
        return False

    def _tokenizes(self, node: cst.CSTNode) -> bool:
        """A call in `node` tokenizes: a tokenizer, or a function of this module that looks tokens up in the
        vocabulary it is given (`encode(text, src_stoi)` with `stoi.get(token, UNK)` in its body)."""
        m = self.m
        return any(_is_tokenizing(m, c) or self._looks_up_vocabulary(c) for c in m.calls_inside(node))

    def _looks_up_vocabulary(self, call: cst.Call) -> bool:
        function = self._module_function(call)
        if function is None or not any(_VOCABULARY.search(dotted_name(a.value) or "") for a in call.args):
            return False
        given = {name for arg, name in zip(call.args, [p.name.value for p in function.params.params]) if _VOCABULARY.search(dotted_name(arg.value) or "")}
        for inner in self.m.calls_inside(function):  # `stoi.get(token, UNK)`
            func = inner.func
            if isinstance(func, cst.Attribute) and func.attr.value == "get" and isinstance(func.value, cst.Name) and func.value.value in given:
                return True
        return _subscripts_any(function, given)  # `stoi[token]`

    # ---- toy data --------------------------------------------------------------------------------

    def _literal_dataset(self, source: cst.BaseExpression) -> bool:
        m = self.m
        if isinstance(source, cst.Call):
            name = m.call_name(source) or ""
            if name == TENSOR_DATASET:
                return bool(source.args) and all(not a.star and self._literal_data(a.value) for a in source.args)
            info = m.local_class_of(name)
            if info is not None:
                getitem = self._method(info, "__getitem__")
                return (
                    getitem is not None and self._cheap_body(getitem, 0) and bool(source.args)
                    and all(not a.star and self._literal_data(a.value) for a in source.args)
                )  # fmt: skip
        return self._literal_data(source)

    def _literal_data(self, expr: cst.BaseExpression) -> bool:
        """Numbers written in the code: a nested list literal, or `torch.tensor(...)` / `np.array(...)` of one."""
        sources = self.expression_sources(expr)
        return bool(sources) and all(self._literal_source(s) for s in sources)

    def _literal_source(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            name = self.m.call_name(expr) or ""
            if name.rsplit(".", 1)[-1] in ("tensor", "as_tensor", "array", "asarray") and name.startswith(("torch.", "numpy.")):
                return bool(expr.args) and _literal_rows(expr.args[0].value)
            return False
        return _literal_rows(expr)


# ---- helpers ------------------------------------------------------------------------------------


def _formats_on_gpu(model: SemanticModel, call: cst.Call) -> bool:
    """`set_format(...)` / `with_format(...)` given a CUDA `device` (the formatter makes each row's tensors there)."""
    from gpulint.analysis.residency import CUDA

    device = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
    return device is not None and model.residency.device_kind(device) == CUDA


def _literal_names(expr: cst.BaseExpression) -> bool:
    """A list or tuple of strings written out (`["train", "valid"]`)."""
    return isinstance(expr, (cst.List, cst.Tuple)) and bool(expr.elements) and all(
        isinstance(e, cst.Element) and isinstance(e.value, cst.SimpleString) for e in expr.elements
    )


def _streaming_call(call: cst.Call) -> bool:
    """`load_dataset(..., streaming=True)` (or a streaming flag not written False), `ds.to_iterable_dataset()`."""
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "to_iterable_dataset":
        return True
    return any(a.keyword is not None and a.keyword.value == "streaming" and not _is_false(a.value) for a in call.args)


def _is_tokenizing(model: SemanticModel, call: cst.Call) -> bool:
    """`tokenizer(...)`, `tokenizer.encode(...)`, `self.tok.batch_encode_plus(...)`, `t(...)` where
    `t = GPT2TokenizerFast.from_pretrained(...)`."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in _TOKENIZING_METHODS:
        return True
    target = func.value if isinstance(func, cst.Attribute) and func.attr.value in ("__call__",) else func
    return _names_tokenizer(model, target)


def _names_tokenizer(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """The argument is a tokenizer (`convert_examples_to_features(examples, tokenizer, ...)`): named like
    one, or a name bound once to a tokenizer class's instance (`t = AutoTokenizer.from_pretrained(...)`)."""
    key = dotted_name(expr)
    if key is None:
        return False
    if _TOKENIZER.search(key.rsplit(".", 1)[-1]) is not None:
        return True
    if not isinstance(expr, cst.Name):
        return False
    binders = model.bindings_of(expr.value, expr)
    if len(binders) != 1 or not isinstance(binders[0], cst.Assign) or not isinstance(binders[0].value, cst.Call):
        return False
    built = binders[0].value
    owner = built.func.value if isinstance(built.func, cst.Attribute) and built.func.attr.value == "from_pretrained" else built.func
    name = model.qualified_name(owner) if isinstance(owner, (cst.Name, cst.Attribute)) else None
    return name is not None and _TOKENIZER.search(name.rsplit(".", 1)[-1]) is not None


def _maps_tokenizer(model: SemanticModel, call: cst.Call) -> bool:
    """`dataset.map(tokenize_function, ...)` where the function tokenizes: the rows become token ids."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "map" and call.args):
        return False
    mapped = call.args[0].value
    if isinstance(mapped, cst.Name):  # (a notebook may define it again: each definition must tokenize)
        functions = model.functions.get(mapped.value, [])
        return bool(functions) and all(_tokenizes_rows(model, f) for f in functions)
    elif isinstance(mapped, cst.Attribute) and isinstance(mapped.value, cst.Name) and mapped.value.value == "self":
        owner = next((a for a in model.ancestors(call) if isinstance(a, cst.ClassDef)), None)  # `self.convert_to_features`
        info = model.classes.get(owner.name.value) if owner is not None else None
        mapped = info.methods.get(mapped.attr.value) if info is not None else None
    return isinstance(mapped, (cst.Lambda, cst.FunctionDef)) and _tokenizes_rows(model, mapped)


def _tokenizes_rows(model: SemanticModel, mapped: cst.Lambda | cst.FunctionDef, depth: int = 0) -> bool:
    """The mapped function tokenizes: it calls a tokenizer, hands one to the function it calls
    (`lambda ex: tokenize_fn(ex, tokenizer, ...)`), or calls a function of this module that does
    (`generate_and_tokenize_prompt(row)` building a prompt and returning `tokenize(prompt)`)."""
    for c in model.calls_inside(mapped):
        if _is_tokenizing(model, c) or any(_names_tokenizer(model, a.value) for a in c.args):
            return True
        if depth < _HELPER_DEPTH and isinstance(c.func, cst.Name):
            helpers = model.functions.get(c.func.value, [])  # (each definition a notebook gives it must tokenize)
            if helpers and all(h is not mapped and _tokenizes_rows(model, h, depth + 1) for h in helpers):
                return True
    return False


def _handed_out_whole(parent: Optional[cst.CSTNode]) -> bool:
    """An attribute returned or put into the sample as it is: not indexed, called or converted per item."""
    if isinstance(parent, (cst.Return, cst.DictElement, cst.Element)):
        return True
    return isinstance(parent, cst.Assign) and all(isinstance(t.target, cst.Subscript) for t in parent.targets)


def _is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _literal_rows(expr: cst.BaseExpression) -> bool:
    """A list or tuple of numbers written out; a lone number is a size (`RandomImages(1024)`), not data."""
    return isinstance(expr, (cst.List, cst.Tuple)) and _literal_numbers(expr)


def _literal_numbers(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _literal_numbers(expr.expression)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(not isinstance(e, cst.StarredElement) and _literal_numbers(e.value) for e in expr.elements)
    return False


def _always_breaks(loop: cst.For) -> bool:
    """A `break` among the loop body's own statements (not under an `if`): the body runs once."""
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else []
    for statement in body:
        if isinstance(statement, cst.SimpleStatementLine) and any(isinstance(s, cst.Break) for s in statement.body):
            return True
    if isinstance(loop.body, cst.SimpleStatementSuite):
        return any(isinstance(s, cst.Break) for s in loop.body.body)
    return False


def _breaks_soon(model: SemanticModel, loop: cst.For) -> bool:
    bound = break_bound(model, loop)
    return bound is not None and bound <= FEW_ITERATIONS


class _Finder(cst.CSTVisitor):
    def __init__(self, kinds: tuple[type, ...]) -> None:
        self.kinds = kinds
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kinds):
            self.found = True
        return not self.found


def _subscripts_any(node: cst.CSTNode, names: set[str]) -> bool:
    """`node` indexes one of `names` (`stoi[token]`)."""

    class Lookups(cst.CSTVisitor):
        found = False

        def visit_Subscript(self, sub: cst.Subscript) -> None:
            if isinstance(sub.value, cst.Name) and sub.value.value in names:
                self.found = True

    visitor = Lookups()
    node.visit(visitor)
    return visitor.found


def _has_io_statement(func: cst.CSTNode) -> bool:
    """`with` (an open file, a lock), `yield` or `await` in the body."""
    finder = _Finder((cst.With, cst.Yield, cst.Await))
    func.visit(finder)
    return finder.found


def _computes(func: cst.FunctionDef | cst.Lambda) -> bool:
    """Arithmetic on the sample (normalising, adding noise): work, however small. Arithmetic on the index
    (`index % n`, `i * self.block_size`, bounds inside a subscript) is not."""
    params = func.params
    index_names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)} - {"self"}

    def index_like(expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Integer) or isinstance(expr, cst.Name) and expr.value in index_names:
            return True
        if isinstance(expr, cst.BinaryOperation):
            return index_like(expr.left) and (index_like(expr.right) or _is_self_attribute(expr.right)) or (
                _is_self_attribute(expr.left) and index_like(expr.right)
            )
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "item":
            return index_like(expr.func.value)  # `torch.randint(0, n, (1,)).item()`
        if isinstance(expr, cst.Call) and _index_draw(_draw_name(expr), expr):
            return True  # a random index (its bounds are checked as arguments of a call)
        if _size_of(expr):
            return True  # `self.data.size(0)`, `self.data.shape[0]`: how many rows there are
        if isinstance(expr, cst.Float):
            return True  # `positions * 1.0`: a constant scaling positions, not a sample
        if isinstance(expr, cst.Call) and _draw_name(expr) in _POSITION_RANGES:
            # `np.arange(self.seq_len)`, `torch.arange(start, end)`: the positions of a window, not its data
            return all(index_like(a.value) or _is_self_attribute(a.value) for a in expr.args if a.keyword is None)
        return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "len"

    class _Arithmetic(cst.CSTVisitor):
        found = False

        def visit_Assign(self, node: cst.Assign) -> None:
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name) and index_like(node.value):
                index_names.add(node.targets[0].target.value)  # `start = index * self.stride`

        def visit_Subscript(self, node: cst.Subscript) -> bool:
            node.value.visit(self)
            return False  # the index and slice bounds

        def visit_Call(self, node: cst.Call) -> bool:
            if _index_draw(_draw_name(node), node):
                return False  # the bounds of a random index: arithmetic on the index, not on the sample
            return True

        def visit_BinaryOperation(self, node: cst.BinaryOperation) -> bool:
            if _joins_lists(node):
                return True  # `[f[0] for f in rows] + [f[2] for f in rows]`, `[0] * len(rows)`: a list built, no sample changed
            if not index_like(node):
                self.found = True
            return False

    finder = _Arithmetic()
    func.visit(finder)
    return finder.found


def _joins_lists(node: cst.BaseExpression) -> bool:
    """`[a for a in rows] + [b for b in rows]` or `[0] * len(rows)`: lists of the samples joined, or a list of
    constant labels repeated; the elements are not computed on."""
    if isinstance(node, (cst.List, cst.ListComp)):
        return True
    if not isinstance(node, cst.BinaryOperation):
        return False
    if isinstance(node.operator, cst.Add):
        return _joins_lists(node.left) and _joins_lists(node.right)
    if isinstance(node.operator, cst.Multiply):
        constant = isinstance(node.left, cst.List) and all(isinstance(e.value, (cst.Integer, cst.Float)) for e in node.left.elements)
        counted = isinstance(node.right, cst.Call) and isinstance(node.right.func, cst.Name) and node.right.func.value == "len"
        return constant and counted
    return False


def _is_self_attribute(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self"


# Calls that draw one random integer (or a one-element tensor of one): where to index in-memory data.
_INDEX_DRAWS = frozenset({"torch.randint", "random.randint", "random.randrange", "numpy.random.randint"})
_SIZE_METHODS = frozenset({"size", "numel", "__len__"})
_POSITION_RANGES = frozenset({"numpy.arange", "torch.arange"})


def _draw_name(call: cst.Call) -> str:
    """The dotted name a call is written with (`torch.randint`, `np.random.randint`, `random.randrange`);
    `np.` read as numpy (the module's imports decide elsewhere; here only the shape of the call matters)."""
    name = dotted_name(call.func) or ""
    return "numpy." + name[len("np.") :] if name.startswith("np.") else name


def _index_draw(name: str, call: cst.Call) -> bool:
    """`name(...)` draws one random integer: `random.randint(a, b)`, `random.randrange(n)`, or
    `torch.randint(lo, hi, (1,))` / `np.random.randint(lo, hi)` with no size or a size of one element. A
    draw of many (`torch.randint(0, 255, (3, 224, 224))`) makes a sample, and is work."""
    if name not in _INDEX_DRAWS:
        return False
    if name.startswith("random."):
        return True
    size = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "size"), None)
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if size is None and name == "torch.randint":
        size = positional[2].value if len(positional) > 2 else (positional[1].value if len(positional) == 2 else None)
        if len(positional) == 2 and not isinstance(size, (cst.Tuple, cst.List)):
            size = None  # `torch.randint(low, high, size=...)` given by keyword, checked above
    elif size is None and len(positional) > 2:
        size = positional[2].value
    if size is None:
        return name != "torch.randint"  # torch needs a size; numpy's default draws one integer
    if isinstance(size, cst.Integer):
        return size.value == "1"
    if isinstance(size, (cst.Tuple, cst.List)):
        return all(isinstance(e.value, cst.Integer) and e.value.value == "1" for e in size.elements)
    return False


def _size_of(expr: cst.BaseExpression) -> bool:
    """`x.size(0)`, `x.numel()`, `x.shape[0]`, `len(x)`: a count of rows, arithmetic on which is index arithmetic."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        return expr.func.attr.value in _SIZE_METHODS
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute):
        return expr.value.attr.value == "shape"
    return False
