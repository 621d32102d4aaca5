"""What an evaluation forward with autograd on costs (GPU405), and whether the code shows it.

With autograd on, a forward in eval mode records one graph node per operation and keeps the tensors the backward
pass would read until the output is freed. Both are a fraction of the forward itself:

- host time: recording costs about a microsecond per operation (bench/results/cost_facts.md section 7, measured on
  the host: +2.4 µs for a 128-wide `Linear`+`ReLU` at one row, +10 µs for four of them, +4 µs for a bag-of-words
  lookup, sum and `Linear`), a fifth of what the operation itself costs the host and less beside a CUDA launch. On
  a launch-bound forward (a tiny model fed one sentence or one sample) that is a few microseconds a forward: a pass
  of ~1,000 sentences through a bag-of-words or n-gram model pays some milliseconds an epoch, against an epoch of
  ~10,000 training steps of forward, backward and update of the same model. Nothing a reader can measure;
- memory: the activations the backward would need stay alive for the whole forward (peak memory as in training,
  instead of a layer or two), which limits the evaluation's batch size, and they are the real cost of an
  evaluation over batches of images, sequences or graphs.

So the cost is worth a report where the evaluation runs real forwards: `shown_cost(model, found)` names the evidence
the code shows, or None:

- the evaluation iterates batches of a data set: a data loader (`torch.utils.data.DataLoader`, a project or library
  loader class, PyG's `DataLoader`, torchtext's `BucketIterator`; a call or a name bound to one, or a name or
  attribute the code calls a loader, an iterator or a queue: `self.valid_loader`, `val_iter`), or batches it cuts from a
  data list by the loop's index (`instances[batch_id * batch_size:(batch_id + 1) * batch_size]`);
- the forward is shown not to be launch-bound: a model of more than `LAUNCH_BOUND_PARAMETERS` parameters counted
  from literal layer sizes, or one with convolutions among its known layers (activations of images).

A per-call evaluation (`found.caller`: one forward outside any loop in a function a loop calls) has no loop of its
own to read batches from: it needs the second kind of evidence.

It is not shown for an evaluation that feeds the model one sample at a time from a Python list (`for sentence,
tag in test_data: model(torch.tensor(sentence))`), a sampling or generation loop over `range(steps)`, or a
`while` loop, with a model whose size the code does not show: per-sentence tutorial evaluations of bag-of-words
and n-gram language models (4 findings of the fourteenth corpus, all four judged noise by both judges) and a
few decoder forwards while sampling rows (nineteenth corpus, noise by both). Both judges called every evaluation
they read right that iterates a data loader (a U-Net's validation and test passes, ResNet-18 on CIFAR-10's test
loader, PyG's MNIST-superpixel and QM9 test loaders, TabNet's `predict` and `_predict_epoch` over their own
`DataLoader`: 7 of 7 on the fourteenth to twentieth corpora). Such findings are left out unless the rule's option
`unproven-cost` is set.

A model handed in eval mode by another module (`found.eval_call is None`) is read at those calls
(`eval_share.handed_sliver`), not here: the size and data of the handed model are the caller's.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst
import libcst.matchers as matchers

from gpulint.analysis.dataloaders import is_loader_call
from gpulint.analysis.hot_loops import wrapper_kind
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.model_size import LAUNCH_BOUND_PARAMETERS

if TYPE_CHECKING:
    from gpulint.analysis.evaluation import EvalForward
    from gpulint.analysis.model import SemanticModel

HANDED = "a model handed in eval mode by another module"
LOADER = "batches of a data loader"
SLICED = "batches cut from a data list"
LARGE_MODEL = "a model of more than 300k parameters"
CONVOLUTIONS = "a convolutional model"

# A name the code gives a batch iterator: `train_loader`, `self.valid_loader`, `dataloader`, `val_iter`,
# `BucketIterator(...)`, `get_loader(...)`, DARTS's `valid_queue`, fastai's `valid_dl`.
_BATCH_ITERATOR = re.compile(r"loader|iterator|(^|_)(iter|queue|dl)$", re.IGNORECASE)
_MAX_DEPTH = 6


def shown_cost(model: SemanticModel, found: EvalForward) -> Optional[str]:
    """The evidence of the evaluation's cost the code shows (see the module docstring), or None."""
    if found.eval_call is None:
        return HANDED
    loop = found.loop
    if isinstance(loop, cst.For) and found.caller is None:
        if _batch_iterator(model, loop.iter, 0):
            return LOADER
        if _sliced_batches(model, loop):
            return SLICED
    evaluated = found.eval_call.func.value
    sizes = model.model_size
    count = sizes.parameters(evaluated)
    if count is not None and count > LAUNCH_BOUND_PARAMETERS:
        return LARGE_MODEL
    if sizes.shows_convolutions(evaluated):
        return CONVOLUTIONS
    return None


def _batch_iterator(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> bool:
    """Iterating `expr` hands out batches of a data set: a loader call or a name bound to one, through `enumerate`,
    `tqdm`, `zip` and the like, or a name the code gives a loader or an iterator."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, cst.Call):
        if is_loader_call(model, expr):
            return True
        name = model.call_name(expr) or dotted_name(expr.func) or ""
        if _BATCH_ITERATOR.search(name.rsplit(".", 1)[-1]):
            return True
        positional = [a.value for a in expr.args if a.keyword is None and not a.star]
        kind = wrapper_kind(model, expr)
        if kind in ("passthrough", "enumerate") and positional:
            return _batch_iterator(model, positional[0], depth + 1)
        if kind == "zip":
            return any(_batch_iterator(model, a, depth + 1) for a in positional)
        return False
    if isinstance(expr, (cst.Name, cst.Attribute)):
        identifier = expr.value if isinstance(expr, cst.Name) else expr.attr.value
        if _BATCH_ITERATOR.search(identifier):
            return True
        key = dotted_name(expr)
        if key is None:
            return False
        writes = model.dataflow.reaching_writes(key, expr)
        return any(w.value is not None and _batch_iterator(model, w.value, depth + 1) for w in writes)
    return False


def _sliced_batches(model: SemanticModel, loop: cst.For) -> bool:
    """The loop's body slices a sequence by bounds computed from the loop's target (`start = batch_id * batch_size;
    instance = instances[start:end]`): each iteration a batch of a data list."""
    names = {n.value for n in matchers.findall(loop.target, matchers.Name())}
    if not names:
        return False
    assignments = [a for a in matchers.findall(loop.body, matchers.Assign()) if isinstance(a, cst.Assign)]
    for _ in range(3):  # names computed from the index, then from those
        for assign in assignments:
            if {n.value for n in matchers.findall(assign.value, matchers.Name())} & names:
                for target in assign.targets:
                    if isinstance(target.target, cst.Name):
                        names.add(target.target.value)
    for subscript in matchers.findall(loop.body, matchers.Subscript()):
        for element in subscript.slice:  # type: ignore[attr-defined]
            bounds = element.slice
            if not isinstance(bounds, cst.Slice):
                continue
            used = {n.value for part in (bounds.lower, bounds.upper) if part is not None for n in matchers.findall(part, matchers.Name())}
            if used & names:
                return True
    return False


# The help of an evaluation reported only because of `unproven-cost = true` (GPU405).
UNPROVEN_HELP = (
    "its cost is unproven: the code shows no data loader, no batches and no model of known size, and recording a "
    "graph costs the host about a microsecond an operation"
)
