"""GPU103 small-batch-size: a training `DataLoader` with batch size 1 (the default) or a small one."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.dataloaders import ITERABLE_DATASET, LOADER_TEXT, dataset_class
from gpulint.analysis.item_sizes import folds_items_into_batch, squeezes_the_batch_away, varies_in_size
from gpulint.analysis.loader_flow import EVAL, TRAIN, UNKNOWN
from gpulint.analysis.memory_bound_batches import fills_the_gpu
from gpulint.analysis.shipped_commands import passed_values
from gpulint.analysis.value_resolution import ARGPARSE_DEFAULT, LITERAL
from gpulint.checks.base import Option, Rule, value_origin
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import replace_node, with_keyword_argument

_MEDICAL_IMAGING = frozenset({"monai", "nnunet", "nnunetv2", "torchio"})
_SGD = ("torch.optim.SGD",)
_ADAPTIVE = ("torch.optim.Adam", "torch.optim.AdamW", "torch.optim.Adamax", "torch.optim.NAdam", "torch.optim.RAdam")


class SmallBatchSize(Rule):
    code = "GPU103"
    name = "small-batch-size"
    summary = "Training `DataLoader` uses a small batch size (or the default of 1)"
    fix_applicability = Applicability.UNSAFE
    requires = (LOADER_TEXT,)
    options = (
        Option("min-batch-size", 16, "Batch sizes below this are reported."),
        Option("target-batch-size", 64, "The batch size the fix sets."),
        Option("check-eval-loaders", False, "Also report loaders that only feed evaluation loops (as info)."),
    )

    @classmethod
    def validate_options(cls, values: dict) -> None:
        minimum = values.get("min-batch-size", 16)
        target = values.get("target-batch-size", 64)
        if minimum < 1 or target < 1:
            raise ValueError("`min-batch-size` and `target-batch-size` must be positive")
        if target < minimum:
            raise ValueError("`target-batch-size` must not be below `min-batch-size`")

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        if any(isinstance(c.func, cst.Attribute) and c.func.attr.value == "from_pretrained" for c in model.calls):
            return  # a pretrained (usually large) model: small batches can saturate the GPU by design
        if _volumetric(model):
            return  # 3D / whole-slide medical imaging: one sample is a volume or a bag of tiles (nnU-Net uses 2)
        for info in model.loader_flow.infos:
            if model.batch_cost.is_toy_data(info.loader) or model.batch_cost.reads_a_few_batches(info) or model.loader_flow.stays_on_cpu(info):
                continue  # a few rows written in the code, a single batch, or a CPU lesson: no GPU batch size to tune
            resolved = self._small_batch(info)
            given = self._given_by_callers(info) if resolved is False else None
            if resolved is False and given is None:
                continue
            if model.batch_cost.samples_are_volumes(info):
                continue  # one sample is a volume or a space-time field: the batch is small by memory
            if varies_in_size(model, info.loader):
                continue  # each item resized by its own aspect ratio: the default collate cannot stack two
            if resolved_one(model, info.loader) and info.iterations and all(squeezes_the_batch_away(model, it) for it in info.iterations):
                continue  # `data.squeeze(0)` of each batch: every item is a whole step's input (a few-shot task)
            if info.iterations and all(folds_items_into_batch(model, it, info.loader) for it in info.iterations):
                continue  # `x.view(batch_size * k, ...)`: each item is k samples, the GPU's batch is k times larger
            rows = model.batch_cost.dataset_length(info.loader)
            size = given[0] if given is not None else resolved.value if resolved is not None else 1
            if rows is not None and rows <= size:
                continue  # the whole dataset is one batch: a larger batch size changes nothing
            if fills_the_gpu(model, size):
                continue  # a pretrained model built from its config, or long sequences: the batch is the memory limit
            if given is not None:
                yield self._report_for_callers(info, given)
            else:
                yield self._report(info, resolved)

    def _given_by_callers(self, info):
        """(size, where it is set, the call giving it) when the loader is built by a factory of this module whose
        `batch_size` parameter the call of another module a training loop takes its batches from fills with a
        small value (`batch_size=config.batch_size`, `--batch_size` defaulting to 1), None otherwise."""
        model = self.model
        loader = info.loader
        if info.iterations or info.role != UNKNOWN or not loader.known("batch_size", "batch_sampler", "collate_fn"):
            return None  # the loops here say what the loader does
        if loader.argument("batch_sampler") is not None or _list_collate(model, loader.value("collate_fn")):
            return None
        for consumption, size, where in model.loader_flow.batch_size_given_by_callers(info):
            if 1 <= size < self.settings["min-batch-size"]:
                return size, where, consumption.called_at
        return None

    def _report_for_callers(self, info, given) -> Diagnostic:
        size, where, called_at = given
        minimum = self.settings["min-batch-size"]
        origin = f"the call at {called_at}" if where == called_at else f"{ARGPARSE_DEFAULT} at {where}, given by the call at {called_at}"
        what = f"`DataLoader` uses `batch_size={size}` ({origin}), below {minimum}"
        help = (
            f"Small batches leave the GPU idle between short kernels; raise it where it is set and "
            f"{self._lr_advice()}, or use `torch.compile(mode=\"reduce-overhead\")` for a small model"
        )
        return self.diagnostic(info.loader.call, what, severity=Severity.WARNING, help=help)

    def _small_batch(self, info):
        """None when the batch size is missing (1), its ResolvedValue when small, False otherwise."""
        model = self.model
        flow = model.loader_flow
        loader = info.loader
        if not loader.known("batch_size", "batch_sampler", "collate_fn") or loader.argument("batch_sampler") is not None:
            return False
        # Only a loop that visibly trains counts: `shuffle=True` alone also marks beam-search evaluation.
        if info.role == TRAIN:
            if any(it.loop is not None and flow.accumulates_gradients(it.loop) for it in info.iterations):
                return False  # the effective batch is larger; accumulation is the memory-limited choice
            if any(feed.accumulates for feed in info.feeds):
                return False  # `Trainer(accumulate_grad_batches=k)`, ignite's `gradient_accumulation_steps`
            if info.iterations and all(flow.trains_on_first_sample(it, loader) for it in info.iterations):
                return False  # an unbatched model fed `batch[0]`: a larger batch would drop the rest
            if resolved_one(model, loader) and info.iterations and all(flow.feeds_a_first_sample(it, loader) for it in info.iterations):
                return False  # `batch_size=1` and `sentence = sentence[0]`: one variable-length sample a step by design
        elif not (self.settings["check-eval-loaders"] and info.role == EVAL):
            return False
        if _list_collate(model, loader.value("collate_fn")):
            return False  # variable-sized samples (detection, segmentation): small batches by design
        arg = loader.argument("batch_size")
        if arg is None:
            dataset = dataset_class(model, loader)
            if dataset is not None and model.is_subclass_of(dataset.node.name.value, ITERABLE_DATASET):
                return False  # an IterableDataset may yield whole batches
            return None
        resolved = model.values.setting(arg.value)
        if resolved is None or not isinstance(resolved.value, int) or isinstance(resolved.value, bool):
            return False
        if resolved.value >= self.settings["min-batch-size"] or resolved.value < 1:
            return False
        if resolved.origin == ARGPARSE_DEFAULT and self._shipped_runs_larger(arg.value):
            return False  # a command the repository ships passes a larger batch size: the default is not what runs
        return resolved

    def _shipped_runs_larger(self, expr) -> bool:
        """A shipped command (a shell script, a README, a notebook building a job's arguments) passes the option a
        value that is not a small integer (`"--batch-size", "256"`, or `$BS`: not known to be small)."""
        values = passed_values(self.model, expr) or []
        minimum = self.settings["min-batch-size"]
        return any(not (type(v) is int and v < minimum) for v in values)

    def _report(self, info, resolved) -> Diagnostic:
        model = self.model
        minimum = self.settings["min-batch-size"]
        if resolved is None:
            what = "`DataLoader` has no `batch_size`, so every batch is a single sample"
        else:
            where = resolved.describe(model)
            what = f"`DataLoader` uses `batch_size={resolved.value}`" + (f" ({where})" if where else "")
            what += f", below {minimum}"
        help = (
            f"Small batches leave the GPU idle between short kernels; raise it and "
            f"{self._lr_advice()}, or use `torch.compile(mode=\"reduce-overhead\")` for a small model"
        )
        severity = Severity.WARNING if info.role == TRAIN else Severity.INFO
        return self.diagnostic(info.loader.call, what, severity=severity, fix=self._fix(info, resolved), related=value_origin(resolved), help=help)

    def _lr_advice(self) -> str:
        names = {self.model.call_name(c) for c in self.model.calls}
        sgd, adaptive = any(n in names for n in _SGD), any(n in names for n in _ADAPTIVE)
        if sgd and not adaptive:
            return "scale the learning rate linearly with it (SGD, with warm-up)"
        if adaptive and not sgd:
            return "scale the learning rate by the square root of the factor (Adam)"
        return "scale the learning rate with it (linearly for SGD, by the square root for Adam)"

    def _fix(self, info, resolved):
        model = self.model
        target = self.settings["target-batch-size"]
        call = info.loader.call
        if resolved is None:
            edit = replace_node(model, call, with_keyword_argument(call, "batch_size", cst.Integer(str(target))))
            return self.fix(f"Set `batch_size={target}` (scale the learning rate with it)", [edit], Applicability.UNSAFE)
        if not isinstance(resolved.node, cst.Integer) or target <= resolved.value:
            return None
        if resolved.origin != LITERAL and self._read_for_other_things(info.loader.argument("batch_size").value):
            return None  # the same setting also sizes something else: changing it there is its author's call
        edit = replace_node(model, resolved.node, str(target))
        where = "" if resolved.origin == LITERAL else f" at the {resolved.describe(model)}"
        return self.fix(f"Raise the batch size to {target}{where} (scale the learning rate with it)", [edit], Applicability.UNSAFE)

    def _read_for_other_things(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """`args.batch_size` / `BATCH_SIZE` is also read outside a `batch_size=` argument (an iteration count,
        a learning-rate rule, a buffer shape): a fix of its definition would change those too."""
        model = self.model
        if isinstance(expr, cst.Attribute):
            reads = [a for a in model.attributes if a.attr.value == expr.attr.value and isinstance(a.value, cst.Name)]
            reads += [c for c in model.calls if isinstance(c.func, cst.Name) and c.func.value == "getattr"
                      and len(c.args) > 1 and model.code(c.args[1].value).strip("'\"") == expr.attr.value]  # fmt: skip
        elif isinstance(expr, cst.Name):
            reads = list(model.dataflow.reads.get(expr.value, ()))
        else:
            return True
        batch_sizes = {id(arg.value) for loader in model.dataloaders if (arg := loader.argument("batch_size")) is not None}
        for read in reads:
            parent = model.parent.get(read)
            if id(read) in batch_sizes or isinstance(parent, cst.Arg) and parent.keyword is not None and parent.keyword.value == "batch_size":
                continue
            if isinstance(parent, cst.Assign) and parent.value is read and len(parent.targets) == 1 and depth < 2:
                if not self._read_for_other_things(parent.targets[0].target, depth + 1):
                    continue  # `bs = args.batch_size` used only as a batch size
            return True
        return False


def _volumetric(model) -> bool:
    """Medical-imaging frameworks, or 3D convolutions built in this module."""
    if any(full.split(".")[0] in _MEDICAL_IMAGING for full in model.imports.bindings.values()):
        return True
    return any(model.call_name(c) == "torch.nn.Conv3d" for c in model.calls)


def resolved_one(model, loader) -> bool:
    arg = loader.argument("batch_size")
    resolved = model.values.setting(arg.value) if arg is not None else None
    return arg is None or (resolved is not None and resolved.value == 1 and not isinstance(resolved.value, bool))


def _list_collate(model, collate: cst.BaseExpression | None) -> bool:
    """A `collate_fn` that keeps samples as lists (`tuple(zip(*batch))`, `lambda b: b`), or one defined
    elsewhere (`utils.collate_fn` in detection references) that may."""
    if collate is None:
        return False
    if isinstance(collate, cst.Name) and model.functions.get(collate.value):
        return any("zip(*" in model.code(f).replace(" ", "") for f in model.functions[collate.value])
    if isinstance(collate, (cst.Name, cst.Attribute)):
        return model.qualified_name(collate) != "torch.utils.data.default_collate"
    if isinstance(collate, cst.Lambda):
        body = collate.body
        params = [p.name.value for p in collate.params.params]
        if isinstance(body, cst.Name) and body.value in params:
            return True
        return "zip(*" in model.code(body).replace(" ", "")
    return False
