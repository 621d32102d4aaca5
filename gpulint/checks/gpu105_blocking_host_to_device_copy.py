"""GPU105 blocking-host-to-device-copy: a pinned batch copied without `non_blocking=True` stalls the host."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.batch_bytes import one_sample_batches
from gpulint.analysis.copy_cost import BLOCKING_HELP, blocking_copy_estimate, blocking_copy_known_cheap, copy_bytes
from gpulint.analysis.dataloaders import LOADER_TEXT, produces_cuda_batches
from gpulint.analysis.graph_batches import graph_batches
from gpulint.analysis.loader_flow import EVAL
from gpulint.analysis.loop_bounds import runs_a_few_times
from gpulint.analysis.one_off_passes import one_off_pass
from gpulint.analysis.step_syncs import read_before_copy
from gpulint.analysis.step_waits import drained_after
from gpulint.checks.base import Option, Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import replace_node, with_keyword_argument

NON_BLOCKING_SINCE = (0, 4)  # 0.4 renamed the copy flag `async=` to `non_blocking=`
# Positional arguments `.to(device, dtype)` / `.cuda(device)` may take before `non_blocking`.
_MAX_POSITIONAL = {"to": 2, "cuda": 1, "type": 1}


class BlockingHostToDeviceCopy(Rule):
    code = "GPU105"
    name = "blocking-host-to-device-copy"
    summary = "A batch from a pinned `DataLoader` is copied to CUDA without `non_blocking=True`"
    fix_applicability = Applicability.SAFE
    fix_always = False  # not for a copy inside a project helper (`to_device(batch)`): the fix belongs there
    requires = (LOADER_TEXT, r"pin_memory")
    # `train_loader, _ = get_loader(args)` from a data module; `train(model, loader)` called from another module
    project_tags = ("pinned-loader-returned", "pinned-loader-received")
    options = (
        Option(
            "unproven-cost",
            False,
            "Also report copies of batches whose bytes the code does not show (no evidence of their cost; by default "
            "only a batch the code shows at 16 MiB or more is reported).",
        ),
    )

    def check(self) -> Iterator[Diagnostic]:
        if self.pinned_below(NON_BLOCKING_SINCE):
            return  # the project's torch has no `non_blocking=`: the fix would raise a TypeError there
        model = self.model
        flow = model.loader_flow
        reported: set[int] = set()
        for info in flow.infos:
            loader = info.loader
            if not loader.known("pin_memory", "dataset", "collate_fn") or not flow.pinned(loader) or produces_cuda_batches(model, loader):
                continue
            if model.batch_cost.batches_are_small(loader):
                continue  # token ids or a batch of at most a few hundred KB: the copy takes microseconds either way
            if blocking_copy_known_cheap(model, loader):
                continue  # under 16 MiB a batch: one drain and under ~0.3 ms of copy, below a measurable share of a step
            size = copy_bytes(model, loader)
            if size is None and not self.settings["unproven-cost"]:
                continue  # a batch of unknown bytes is no evidence of a cost (both judges: noise wherever read)
            if graph_batches(model, loader):
                continue  # a DGL graph stays in pageable memory on a pinned loader: `non_blocking` cannot overlap its copy
            if one_sample_batches(model, info):
                continue  # `batch_size=1`: overlapping one sample's copy saves well under a millisecond a step
            custom_collate = loader.argument("collate_fn") is not None
            for move in info.moves:
                call = move.call
                if move.via is not None:
                    if id(call) not in reported and move.iteration.loop is not None and not move.non_blocking:
                        reported.add(id(call))
                        yield self._through_helper(move, loader, flow, size)
                    continue
                if id(call) in reported or move.iteration.loop is None or not self._can_add(call):
                    continue
                if model.batch_cost.takes_one_batch(move.iteration):
                    continue  # one batch per pass: nothing to overlap the copy with
                if runs_a_few_times(model, call):
                    continue  # a probe of a few batches, run once: the copies add up to nothing
                if one_off_pass(model, move.iteration.loop):
                    continue  # one evaluation pass beside many training epochs (a final test pass): no share of the run
                if drained_after(model, call, move.iteration.loop):
                    continue  # `torch.cuda.synchronize()` right after the copy (a per-batch timer): the host waits for it anyway
                if read_before_copy(model, call, move.iteration.loop) is not None:
                    continue  # the step reads the GPU every iteration with no step work queued since: the copy waits for no queue
                if move.whole_batch and custom_collate:
                    continue  # a custom batch type's `.to()` may not accept `non_blocking`
                reported.add(id(call))
                yield self._blocking_copy(call, f"line {model.line_of(loader.call)}", flow.iteration_role(move.iteration) == EVAL, size)

        if not self.settings["unproven-cost"]:
            return  # a loader of another module: its batch's bytes are out of sight here (no evidence of a cost)
        received = flow.received_loaders
        for returned in flow.returned_loaders + received:
            if returned.facts.get("pin_memory") is not True:
                continue
            same_parameter = [other for other in received if other.iterations == returned.iterations]
            if returned in received and any(other.facts.get("pin_memory") is not True for other in same_parameter):
                continue  # another call hands the same parameter an unpinned loader
            # with the default collate_fn a whole batch is a tensor; a custom one may make a type whose `.to()` takes no `non_blocking`
            custom_batches = returned.facts.get("collate_fn") or returned.facts.get("unpacking")
            for move in returned.moves:
                call = move.call
                if move.via is not None or (move.whole_batch and custom_batches) or id(call) in reported or move.iteration.loop is None or not self._can_add(call):
                    continue
                if model.batch_cost.takes_one_batch(move.iteration) or runs_a_few_times(model, call):
                    continue
                if one_off_pass(model, move.iteration.loop):
                    continue  # a final test pass beside the training epochs
                if drained_after(model, call, move.iteration.loop):
                    continue  # the host waits for the copy at the drain right after it
                if read_before_copy(model, call, move.iteration.loop) is not None:
                    continue  # a per-step read drains the queue before the copy: nothing to overlap
                reported.add(id(call))
                yield self._blocking_copy(call, returned.where, flow.iteration_role(move.iteration) == EVAL, None)

    def _blocking_copy(self, call: cst.Call, where: str, eval_only: bool, size) -> Diagnostic:
        """`size`: the batch's bytes where the code shows them (the evidence the help names first)."""
        help = "The host waits until the copy ends; pass `non_blocking=True` to overlap it with compute"
        return self.diagnostic(
            call,
            f"`{self.model.code(call)}` copies a batch of a pinned `DataLoader` ({where}) and blocks",
            help=_with_evidence(help, size),
            severity=Severity.INFO if eval_only else Severity.WARNING,
            fix=self.fix(
                "Add `non_blocking=True`",
                [replace_node(self.model, call, with_keyword_argument(call, "non_blocking", cst.Name("True")))],
                Applicability.SAFE,
            ),
        )

    def _through_helper(self, move, loader, flow, size) -> Diagnostic:
        """`to_device(batch, device)` whose copy (in the helper) blocks: reported at the call; the fix belongs
        in the helper, which other callers may use with unpinned tensors, so none is offered."""
        model = self.model
        eval_only = flow.iteration_role(move.iteration) == EVAL
        help = "The host waits for every copy; pass `non_blocking=True` there to overlap it with compute"
        return self.diagnostic(
            move.call,
            f"`{model.code(move.call)}` copies a batch of a pinned `DataLoader` (line {model.line_of(loader.call)}) "
            f"at {move.via} without `non_blocking=True`",
            help=_with_evidence(help, size),
            severity=Severity.INFO if eval_only else Severity.WARNING,
        )

    @staticmethod
    def _can_add(call: cst.Call) -> bool:
        if any(arg.star or (arg.keyword is not None and arg.keyword.value in ("non_blocking", "async")) for arg in call.args):
            return False
        assert isinstance(call.func, cst.Attribute)
        positional = sum(1 for arg in call.args if arg.keyword is None)
        return positional <= _MAX_POSITIONAL[call.func.attr.value]


def _with_evidence(help: str, size) -> str:
    """The copy's cost first (messages stay short), or what is not known about it."""
    if size is None:
        return f"{help} (the code does not show the batch's bytes: {BLOCKING_HELP})"
    estimate = blocking_copy_estimate(size)
    return f"{estimate[0].upper()}{estimate[1:]}. {help}"
