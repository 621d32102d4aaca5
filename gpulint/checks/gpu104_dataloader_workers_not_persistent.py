"""GPU104 dataloader-workers-not-persistent: worker processes are started again for every epoch."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.dataloaders import LOADER_TEXT, is_unsharded_iterable_dataset
from gpulint.analysis.epoch_count import epoch_count
from gpulint.analysis.epoch_length import long_pass, one_sample_training_pass, pass_length, restart_interval
from gpulint.analysis.loader_flow import TRAIN
from gpulint.analysis.long_steps import loads_billion_parameter_model
from gpulint.analysis.value_resolution import LITERAL
from gpulint.checks.base import Option, Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import replace_node, with_keyword_argument

# `persistent_workers` appeared in torch 1.7.
PERSISTENT_WORKERS_SINCE = (1, 7)


class DataLoaderWorkersNotPersistent(Rule):
    code = "GPU104"
    name = "dataloader-workers-not-persistent"
    summary = "`DataLoader` with workers is iterated once per epoch without `persistent_workers=True`"
    fix_applicability = Applicability.UNSAFE
    requires = (LOADER_TEXT, r"num_workers")
    options = (
        Option("min-epochs", 3, "Epoch loops that the code shows run fewer passes are not reported."),
        Option(
            "unproven-cost", False,
            "Also report loaders whose pass (or interval between restarts) the code does not show, so that the "
            "restart's share of it is unknown (by default only those shown to restart for 3 % or more of it).",
        ),
    )  # fmt: skip

    @classmethod
    def validate_options(cls, values: dict) -> None:
        if values.get("min-epochs", 3) < 1:
            raise ValueError("`min-epochs` must be positive")

    def check(self) -> Iterator[Diagnostic]:
        if self.pinned_below(PERSISTENT_WORKERS_SINCE):
            return  # the project's torch has no `persistent_workers`
        model = self.model
        flow = model.loader_flow
        for info in flow.infos:
            loader = info.loader
            workers_positive, _ = flow.workers(loader)
            # a factory's `num_workers` parameter: the loops of its callers that pass a count above 0
            from_callers = [] if workers_positive or info.iterations else flow.workers_given_by_callers(info)
            if not loader.known("num_workers", "persistent_workers") or not (workers_positive or from_callers):
                continue
            if model.batch_cost.items_are_cheap(loader) or flow.stays_on_cpu(info):
                continue  # in-memory rows (the workers have no work to keep), or a CPU lesson (no GPU waits)
            if loads_billion_parameter_model(model):
                continue  # epochs of steps of a billion-parameter model: a worker start-up per epoch is under 1 %
            if is_unsharded_iterable_dataset(model, loader):
                continue  # the workers replay one stream each: keeping them is not the advice to give
            if long_pass(model, info) is not None:
                continue  # a pass long enough that starting its workers again is under 3 % of it
            if one_sample_training_pass(model, info):
                continue  # a training step per sample over a dataset of unknown size: judged a long pass
            interval = restart_interval(model, info)
            if interval is not None and interval.is_long:
                continue  # an evaluation loader restarted once an epoch, after a training pass long enough
            if not self.settings["unproven-cost"] and interval is None and pass_length(model, info) is None:
                continue  # neither the pass nor the interval is shown: the restart's share is unknown
            arg = loader.argument("persistent_workers")
            if arg is not None:
                resolved = model.values.resolve(arg.value)
                if resolved is None or resolved.value is not False or resolved.origin != LITERAL:
                    continue
            # a framework that iterates it every epoch of a run long enough to count (the training hand-over first)
            every_epoch = [f for f in info.feeds if f.per_epoch and (f.epochs is None or f.epochs >= self.settings["min-epochs"])]
            feed = min(every_epoch, key=lambda f: f.role != TRAIN, default=None)
            if from_callers:
                if not info.feeds:
                    yield from self._report_for_callers(info, from_callers, arg)
                continue
            if feed is not None:
                yield self._report(info, f"every {feed.every} ({feed.describe(model)} iterates it once per {feed.every})", arg)
                continue
            for iteration in info.iterations:
                outer = flow.epoch_loop(info, iteration)
                if outer is None or self._dataset_changes_in(info, outer):
                    continue
                epochs = flow.epoch_count(iteration, outer)
                if epochs is not None and epochs < self.settings["min-epochs"]:
                    continue  # one or two epochs: the workers start once or twice, whatever `persistent_workers` says
                yield self._report(info, f"every pass of the loop at line {model.line_of(outer)}", arg)
                break
            else:
                # iterated in another module (`train_loader, _ = get_loader(args)` in train.py) inside a loop there,
                # also when this module iterates it once itself (a `__main__` block that prints a few batches)
                here = model.project.path
                again = next(
                    (c for c in flow.consumed_elsewhere(info) if c.epoch is not None and (not info.iterations or c.where.rpartition(":")[0] != here)),
                    None,
                )  # (this module's own loops were read above, with their epoch counts)
                if again is not None:
                    outer = self._loop_here(again.epoch)
                    epochs = None if outer is None else epoch_count(model, outer)
                    if epochs is not None and epochs < self.settings["min-epochs"]:
                        continue
                    if outer is None or not self._dataset_changes_in(info, outer):
                        yield self._report(info, f"every pass of the loop at {again.epoch} (its batches are taken at {again.where})", arg)

    def _report_for_callers(self, info, from_callers: list, arg) -> Iterator[Diagnostic]:
        """The first loop of another module that runs again with the batches of a factory call passing workers."""
        for again, count in from_callers:
            if again.epoch is None or not again.called_at:
                continue
            outer = self._loop_here(again.epoch)
            epochs = None if outer is None else epoch_count(self.model, outer)
            if epochs is not None and epochs < self.settings["min-epochs"]:
                continue
            if outer is not None and self._dataset_changes_in(info, outer):
                continue
            when = f"every pass of the loop at {again.epoch} (its batches are taken at {again.where}; the call at {again.called_at} gives it {count} workers)"
            yield self._report(info, when, arg)
            return

    def _loop_here(self, where: str):
        """The loop of this module at `where` (`main.py:420`), if it is in this module."""
        model = self.model
        path, _, line = where.rpartition(":")
        if path != model.project.path or not line.isdigit():
            return None
        return next((loop for loop in model.loops if model.line_of(loop) == int(line)), None)

    def _dataset_changes_in(self, info, outer: cst.CSTNode) -> bool:
        """A method call on the dataset whose result is dropped (`set_epoch(epoch)`: called for its effect, not a
        query such as `decode_target(pred)`) or an attribute assignment to it inside the epoch loop: persistent
        workers would keep their stale copy of the dataset."""
        model = self.model
        dataset = info.loader.value("dataset")
        names = {model.code(dataset)} if isinstance(dataset, (cst.Name, cst.Attribute)) else set()
        for call in model.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and isinstance(model.parent.get(call), cst.Expr) and model.is_inside(call, outer):
                receiver = model.code(func.value)
                if receiver in names or receiver.endswith(".dataset"):
                    return True
        for node in model.attributes:
            parent = model.parent.get(node)
            is_target = isinstance(parent, cst.AssignTarget) or (isinstance(parent, (cst.AugAssign, cst.AnnAssign)) and parent.target is node)
            if is_target and model.is_inside(node, outer):
                receiver = model.code(node.value)
                if receiver in names or receiver.endswith(".dataset"):
                    return True
        return False

    def _report(self, info, when: str, arg) -> Diagnostic:
        model = self.model
        flow = model.loader_flow
        message = f"`DataLoader` workers are shut down and started again for {when}"
        length = pass_length(model, info)
        interval = restart_interval(model, info)
        # what the code shows of the pass goes to the help: the message stays one short line (what and where)
        shown = interval.describe() if interval is not None else length.describe() if length is not None else None
        help = ("Pass `persistent_workers=True` to keep them between epochs; a restart costs 50-160 ms for 2-8 workers "
                "on an H200 host (more with a heavy dataset object), a real share of short epochs")
        if shown is not None:
            help = f"{shown[0].upper()}{shown[1:]}. {help}"
        # `--workers 0`, or a factory parameter another call may fill with 0 (`persistent_workers=True` raises there)
        if flow.workers_from_command_line(info.loader) or flow.workers_from_parameter(info.loader):
            value = f"{model.code(info.loader.value('num_workers'))} > 0"  # `--workers 0` must still work
        else:
            value = "True"
        call = info.loader.call
        if arg is None:
            edit = replace_node(model, call, with_keyword_argument(call, "persistent_workers", cst.parse_expression(value)))
        else:
            edit = replace_node(model, arg.value, value)
        severity = Severity.WARNING if flow.feeds_training(info) else Severity.INFO
        fix = self.fix(f"Set `persistent_workers={value}`", [edit], Applicability.UNSAFE)
        return self.diagnostic(call, message, severity=severity, fix=fix, help=help)
