"""Whether an HF Trainer run starts its loaders' workers more than once (GPU107's persistent-workers advice).

Without `dataloader_persistent_workers=True` the Trainer's training loader starts its workers again at every epoch
(95 to 185 ms for 2 to 8 workers, bench/results/cost_facts.md section 4). A run that never reaches a second epoch
pays that start once, and keeping the workers saves nothing:

- `num_train_epochs` of 1 or less;
- a `max_steps` (it overrides `num_train_epochs`) whose samples, `max_steps x per_device_train_batch_size x
  gradient_accumulation_steps` (x the processes `epoch_length._processes` counts where the code gives them), are
  no more than the rows of every training set given with these arguments, where the code sizes them
  (`table_rows`): `load_dataset(..., split="train[:1000]")`, `.select(range(n))`, a literal list, a slice `[:n]`,
  and what keeps the row count (a comprehension over one of them, `.rename_column`, a `.map` that is not batched,
  `.shuffle`, ...). Unsloth's DeepSeek-OCR notebooks: 60 steps x 2 x 4 = 480 of 1,000 rows (the twenty-fourth
  corpus, both judges: "run-shorter-than-epoch", wrong).

An evaluation the Trainer repeats (`eval_dataset` given and `eval_strategy` / `evaluation_strategy` other than
"no", or not known) starts its loader's workers at every evaluation: that run repeats passes whatever its length.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.frameworks import call_argument

if TYPE_CHECKING:
    from gpulint.analysis.frameworks import TrainerArguments
    from gpulint.analysis.model import SemanticModel

# `datasets.Dataset` methods that return a table of the same rows (a non-batched `map` maps each row to one row).
_ROW_KEEPING_METHODS = frozenset({"rename_column", "rename_columns", "remove_columns", "select_columns", "cast_column",
                                  "cast", "with_format", "set_format", "shuffle", "sort", "flatten_indices", "add_column",
                                  "map"})  # fmt: skip
# `split="train[:1000]"`, `"train[100:600]"`: the rows a sliced split holds (percentages are not counted).
_SLICED_SPLIT = re.compile(r"^\s*\w+\s*\[\s*(\d*)\s*:\s*(\d+)\s*\]\s*$")
_MAX_DEPTH = 8


def repeats_loader_passes(model: SemanticModel, arguments: TrainerArguments) -> bool:
    """The Trainers given these arguments may start a loader's workers more than once (see the module)."""
    values = arguments.values
    epochs = values["num_train_epochs"]
    max_steps = values["max_steps"]
    steps = max_steps.value if max_steps is not None and type(max_steps.value) is int else None
    if epochs is not None and isinstance(epochs.value, (int, float)) and epochs.value <= 1:
        return False
    if steps is None or steps <= 0:
        return True
    samples = _samples_per_step(model, arguments)
    if samples is None:
        return True
    rows = _training_rows(model, arguments)
    return rows is None or steps * samples > rows or _evaluates_repeatedly(model, arguments)


def _samples_per_step(model: SemanticModel, arguments: TrainerArguments) -> Optional[int]:
    """Samples one optimizer step reads: the per-device batch x the accumulation x the processes."""
    from gpulint.analysis.epoch_length import _processes

    batch, accumulation = arguments.values["per_device_train_batch_size"], arguments.values["gradient_accumulation_steps"]
    if batch is None or accumulation is None or type(batch.value) is not int or type(accumulation.value) is not int:
        return None
    return batch.value * accumulation.value * _processes(model)


def _training_rows(model: SemanticModel, arguments: TrainerArguments) -> Optional[int]:
    """The fewest rows of the training sets given to the Trainers these arguments configure; None when one is not
    sized or no Trainer is followed."""
    from gpulint.analysis.trainer_loading import _trainer_inputs

    trainers = {id(trainer): trainer for trainer, _, _ in _trainer_inputs(model, arguments.call)}
    sizes = []
    for trainer in trainers.values():
        inputs = model.frameworks.hf_trainer_inputs(trainer)
        rows = table_rows(model, inputs.datasets[0]) if inputs is not None else None
        if rows is None:
            return None
        sizes.append(rows)
    return min(sizes) if sizes else None


def _evaluates_repeatedly(model: SemanticModel, arguments: TrainerArguments) -> bool:
    """A Trainer given these arguments has an `eval_dataset` and an evaluation strategy that is not known to be "no"."""
    from gpulint.analysis.trainer_loading import _trainer_inputs

    if not any(len(inputs.datasets) > 1 for inputs in (model.frameworks.hf_trainer_inputs(t) for t, _, _ in _trainer_inputs(model, arguments.call)) if inputs is not None):
        return False
    strategies = [arguments.values[name] for name in ("eval_strategy", "evaluation_strategy")]
    return not all(s is not None and s.value == "no" for s in strategies)


def table_rows(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> Optional[int]:
    """The rows of a dataset expression, where the code shows them (see the module); None otherwise."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Name):
        writes = model.dataflow.reaching_writes(expr.value, expr)
        if len(writes) != 1 or writes[0].value is None or writes[0].is_augmented:
            return None
        return table_rows(model, writes[0].value, depth + 1)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return None if any(isinstance(e, cst.StarredElement) for e in expr.elements) else len(expr.elements)
    if isinstance(expr, cst.ListComp):
        loop = expr.for_in  # one `for` with no `if`: a row for each row of what it iterates
        return table_rows(model, loop.iter, depth + 1) if loop.inner_for_in is None and not loop.ifs and loop.asynchronous is None else None
    if isinstance(expr, cst.Subscript):
        return _sliced_rows(model, expr)
    if not isinstance(expr, cst.Call):
        return None
    name = model.call_name(expr) or ""
    builtin = expr.func.value if isinstance(expr.func, cst.Name) and not model.bindings_of(expr.func.value, expr) else None
    if builtin == "range":
        return _range_length(model, expr)
    if builtin == "list" and len(expr.args) == 1 and not expr.args[0].star:
        return table_rows(model, expr.args[0].value, depth + 1)
    if name.rsplit(".", 1)[-1] == "load_dataset":
        split = call_argument(expr, "split")
        resolved = model.values.resolve(split) if split is not None else None
        match = _SLICED_SPLIT.match(resolved.value) if resolved is not None and isinstance(resolved.value, str) else None
        return int(match.group(2)) - int(match.group(1) or 0) if match and int(match.group(2)) >= int(match.group(1) or 0) else None
    if not isinstance(expr.func, cst.Attribute):
        return None
    method = expr.func.attr.value
    if method == "select" and len(expr.args) == 1 and not expr.args[0].star:
        return table_rows(model, expr.args[0].value, depth + 1)  # `.select(range(n))`, `.select([3, 7])`
    if method in _ROW_KEEPING_METHODS:
        if method == "map" and _batched(model, expr):
            return None  # a batched map may return any number of rows (`group_texts`)
        return table_rows(model, expr.func.value, depth + 1)
    return None


def _batched(model: SemanticModel, call: cst.Call) -> bool:
    given = call_argument(call, "batched")
    if given is None:
        return False
    resolved = model.values.resolve(given)
    return resolved is None or resolved.value is not False


def _range_length(model: SemanticModel, call: cst.Call) -> Optional[int]:
    if any(a.star or a.keyword is not None for a in call.args) or not 1 <= len(call.args) <= 2:
        return None
    bounds = [model.values.resolve(a.value) for a in call.args]
    if any(b is None or type(b.value) is not int for b in bounds):
        return None
    start, stop = (0, bounds[0].value) if len(bounds) == 1 else (bounds[0].value, bounds[1].value)  # type: ignore[union-attr]
    return max(0, stop - start)


def _sliced_rows(model: SemanticModel, expr: cst.Subscript) -> Optional[int]:
    """`data[:n]`, `data[a:b]` with literal or constant bounds: the rows the slice keeps (the code slices to that many)."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Slice):
        return None
    index = expr.slice[0].slice
    if index.step is not None or index.upper is None:
        return None
    upper = model.values.resolve(index.upper)
    lower = model.values.resolve(index.lower) if index.lower is not None else None
    start = 0 if index.lower is None else (lower.value if lower is not None else None)
    if upper is None or type(upper.value) is not int or type(start) is not int or start < 0 or upper.value < start:
        return None
    return upper.value - start
