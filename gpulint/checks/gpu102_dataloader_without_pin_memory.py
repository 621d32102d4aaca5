"""GPU102 dataloader-without-pin-memory: batches go to CUDA from pageable memory, a blocking staged copy."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.copy_cost import UNPROVEN_PINNING_HELP, pageable_copy_estimate
from gpulint.analysis.dataloaders import LOADER_TEXT, produces_cuda_batches
from gpulint.analysis.graph_loaders import host_graph_batches
from gpulint.analysis.loader_bound import copies_worth_pinning, loading_dominates
from gpulint.analysis.value_resolution import LITERAL
from gpulint.checks.base import Option, Rule, value_origin
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import replace_node, with_keyword_argument


class DataLoaderWithoutPinMemory(Rule):
    code = "GPU102"
    name = "dataloader-without-pin-memory"
    summary = "`DataLoader` batches are moved to CUDA (or feed GPU training) but `pin_memory` is missing or False"
    fix_applicability = Applicability.SAFE
    fix_sometimes_unsafe = True
    requires = (LOADER_TEXT,)
    options = (
        Option(
            "unproven-cost",
            False,
            "Also report loaders whose batch's bytes the code does not show (no evidence of their cost; by default only "
            "a batch the code shows above 512 KiB is reported).",
        ),
    )

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        flow = model.loader_flow
        for info in flow.infos:
            loader = info.loader
            moves = [move for move in info.moves if move.iteration.loop is not None]  # a lone batch: no gain
            placed = None if moves else info.placed_by  # a framework copies the batches
            feeds = None if moves or placed else flow.feeds_gpu_training(info)  # the copy is out of sight
            # a library loader that sets its own dataset and collate (PyG's `ClusterLoader`) is known where the
            # code shows its graph on the host (`analysis/graph_loaders.py`)
            known = loader.known("pin_memory", "dataset", "collate_fn") or (loader.known("pin_memory") and host_graph_batches(model, loader))
            if not known or not (moves or placed or feeds) or produces_cuda_batches(model, loader):
                continue
            if not copies_worth_pinning(model, info):
                continue  # a few batches, tiny ones, one sample each, graphs, long steps, a loader-bound loop
            if pageable_copy_estimate(model, loader) is None and not self.settings["unproven-cost"]:
                continue  # a batch of unknown bytes is no evidence of a cost (four corpora's judges: mostly noise)
            if flow.no_workers(loader) and model.batch_cost.items_are_cheap(loader):
                # In-memory rows and no workers (nor any to add: GPU101 is silent): pinning would run in the
                # training process, the same host copy the pageable transfer makes.
                continue
            if loading_dominates(model, loader):
                continue  # GPU101 reports the loader (making images in the training process); its help says to pin
            arg = loader.argument("pin_memory")
            resolved = None
            if arg is not None:
                resolved = model.values.setting(arg.value)
                if resolved is None or resolved.value is not False:
                    continue
            yield self._report(info, moves, resolved, feeds)

    def _report(self, info, moves, resolved, feeds) -> Diagnostic:
        model = self.model
        flow = model.loader_flow
        if moves:
            move = next((m for m in moves if m.via is None), moves[0])  # a copy in sight names it best
            where = f"`{model.code(move.call)}` at line {model.line_of(move.call)}"
            if move.via is not None:
                where += f", which copies at {move.via}"
            copied = f"its batches are copied to the GPU ({where})"
        elif feeds is None:
            copied = f"its batches are copied to the GPU by {info.placed_by.describe(model)}"
        else:
            copied = "its batches reach the GPU"
        if resolved is None:
            what = "`DataLoader` has no `pin_memory`"
        elif resolved.origin == LITERAL:
            what = "`DataLoader` uses `pin_memory=False`"
        else:
            what = f"`DataLoader` uses `pin_memory=False` ({resolved.describe(model)})"
        estimate = pageable_copy_estimate(model, info.loader)  # the evidence, where the code shows the bytes
        message = f"{what} but {copied}"
        help = "Pageable memory makes every copy block" + (f" ({feeds[0]})" if feeds and not moves else "")
        if estimate is not None:
            help = f"{estimate[0].upper()}{estimate[1:]}. {help}"  # the evidence first; messages stay short
        else:  # shown only because of `unproven-cost = true`: say so, as GPU105 and GPU303 do
            help += f"; {UNPROVEN_PINNING_HELP}"
        workers_positive, _ = flow.workers(info.loader)
        if not workers_positive:
            help += "; pinning pays off with `num_workers > 0` (GPU101)"
        severity = Severity.WARNING if (feeds[1] if feeds else flow.feeds_training(info)) else Severity.INFO
        fix = self._fix(moves, resolved, workers_positive, info.loader.call)
        return self.diagnostic(info.loader.call, message, severity=severity, fix=fix, related=value_origin(resolved), help=help)

    def _fix(self, moves, resolved, workers_positive: bool, call: cst.Call):
        model = self.model
        if resolved is not None and resolved.origin != LITERAL:
            return None  # a command-line flag or constant the user chose: editing it would change its meaning
        torch_alias = next((local for local, full in model.imports.bindings.items() if full == "torch"), None)
        # Where the copy is out of sight (a framework's or another module's), so is the device: pinning only
        # where CUDA is there (Lightning's default accelerator is "auto").
        if torch_alias is not None and (not moves or model.loader_flow.device_chosen_at_run_time(moves)):
            value = f"{torch_alias}.cuda.is_available()"
        else:
            value = "True"
        if resolved is None:
            edit = replace_node(model, call, with_keyword_argument(call, "pin_memory", cst.parse_expression(value)))
        else:
            edit = replace_node(model, resolved.node, value)
        # Unsafe without workers (pinning then runs synchronously in the training process) and when the
        # user wrote `pin_memory=False` on purpose.
        safe = workers_positive and resolved is None
        return self.fix(f"Set `pin_memory={value}`", [edit], Applicability.SAFE if safe else Applicability.UNSAFE)
