"""Evaluation loops bound by an in-process index loader: `for perm in DataLoader(range(n), 64 * 1024):`.

A `DataLoader` over `range(n)` with no workers hands out index tensors that the loop's own process builds: per
batch the sampler yields `batch_size` Python ints, the fetcher lists them and `default_collate` turns the list
into a tensor, tens of nanoseconds an index, milliseconds a batch at 10^4-10^5 indices (OGB's link-prediction
and SIGN scripts). An evaluation step over such a batch queues a forward only (no backward pass, no optimizer
step), mostly of rows gathered from embeddings computed before the loop: well under that. A per-batch copy of its
outputs (`preds += [predictor(h[e[perm, 0]], h[e[perm, 1]]).cpu()]`) then waits for less than the host spends on
the next batch anyway, and GPU101 reports the loader, the loop's real cost (workers, or a device `arange` split).

`loader_bound_evaluation(model, loop)`: `loop` is a `for` over such a loader (a literal `range(...)` dataset,
`num_workers` certainly 0, a batch size known as shipped of at least `LARGE_INDEX_BATCH`) and trains nothing,
directly or through the functions it calls. A training step keeps its reads (its GPU work is the backward pass and
the optimizer step too), and so do loops over small index batches (`DataLoader(range(n), 32)`: microseconds of
Python, the forward is the cost), loaders with workers, loaders over datasets, and batch sizes not known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.hot_loops import trains

if TYPE_CHECKING:
    from gpulint.analysis.dataloaders import DataLoaderCall
    from gpulint.analysis.model import Loop, SemanticModel

# Indices a batch from which sampling, listing and collating them in Python takes about a millisecond.
LARGE_INDEX_BATCH = 10_000


def loader_bound_evaluation(model: SemanticModel, loop: Loop) -> bool:
    if not isinstance(loop, cst.For) or trains(model, loop):
        return False
    flow = model.loader_flow
    for loader in model.dataloaders:
        if not any(it.is_for and it.loop is loop for it in flow.info(loader).iterations):
            continue
        if _over_indices(model, loader) and flow.no_workers(loader) and _large_batches(model, loader):
            return True
    return False


def _over_indices(model: SemanticModel, loader: DataLoaderCall) -> bool:
    """The dataset is `range(...)` itself (the builtin, not a name rebound in the module)."""
    dataset = loader.value("dataset")
    return (
        isinstance(dataset, cst.Call)
        and isinstance(dataset.func, cst.Name)
        and dataset.func.value == "range"
        and not model.bindings_of("range", dataset)
    )


def _large_batches(model: SemanticModel, loader: DataLoaderCall) -> bool:
    if not loader.known("batch_size"):
        return False
    value = loader.value("batch_size")
    sizes = _sizes(model, value) if value is not None else []
    return bool(sizes) and all(
        isinstance(size, int) and not isinstance(size, bool) and size >= LARGE_INDEX_BATCH for size in sizes
    )


def _sizes(model: SemanticModel, value: cst.BaseExpression) -> list[object]:
    """The value as shipped, or, for a parameter of the enclosing function, what each call of it in the module
    passes (`test(model, ..., args.batch_size)` with `--batch_size` defaulting to `64 * 1024`). Empty: not known."""
    size = _integer(model, value)
    if size is not None:
        return [size]
    function = model.enclosing_function(value)
    if not isinstance(value, cst.Name) or function is None or model.enclosing_function(function) is not None:
        return []
    if any(isinstance(a, cst.ClassDef) for a in model.ancestors(function)):
        return []  # a method: its calls are not spelled `name(...)`
    params = function.params
    positional = [p.name.value for p in (*params.posonly_params, *params.params)]
    if value.value not in positional + [p.name.value for p in params.kwonly_params]:
        return []
    if any(not isinstance(b, cst.Param) for b in model.bindings_of(value.value, value)):
        return []  # rebound in the function
    sizes: list[object] = []
    for call in model.calls:
        if not (isinstance(call.func, cst.Name) and call.func.value == function.name.value):
            continue
        if any(arg.star for arg in call.args):
            return []
        given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == value.value), None)
        if given is None and value.value in positional:
            plain = [a for a in call.args if a.keyword is None]
            index = positional.index(value.value)
            given = plain[index].value if index < len(plain) else None
        size = _integer(model, given) if given is not None else None
        if size is None:
            return []
        sizes.append(size)
    return sizes


def _integer(model: SemanticModel, expr: cst.BaseExpression, depth: int = 0) -> object:
    """The value as shipped: resolved, an option's default (`--batch_size`, `default=64 * 1024`), or a product or
    sum of such integers. None: not known."""
    resolved = model.values.resolve(expr)
    if resolved is not None:
        return resolved.value
    if depth > 3:
        return None
    default = model.values.argparse_default(expr)
    if default is not None:
        return _integer(model, default, depth + 1)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Multiply, cst.Add, cst.Power)):
        left, right = _integer(model, expr.left, depth + 1), _integer(model, expr.right, depth + 1)
        if type(left) is not int or type(right) is not int:
            return None
        if isinstance(expr.operator, cst.Power):
            return left**right if 0 <= right < 64 else None
        return left * right if isinstance(expr.operator, cst.Multiply) else left + right
    return None
