"""GPU101 dataloader-without-workers: batches are loaded in the training process while the GPU waits."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.dataloaders import LOADER_TEXT, defined_for_workers
from gpulint.analysis.loader_bound import copies_worth_pinning, loading_dominates, loads_in_training_process
from gpulint.analysis.loading_cost import in_process_loading, text_rows_for_long_steps
from gpulint.analysis.small_splits import few_batches_a_pass
from gpulint.analysis.value_resolution import HELD_DEFAULT, LITERAL, SETTINGS_ORIGINS
from gpulint.checks.base import Option, Rule, value_origin
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import add_import, import_roots, replace_node, with_keyword_argument

# Capped at 8, one core left for the main process, CPU affinity (containers, SLURM) where the OS has it.
DEFAULT_WORKERS = (
    'min(8, max(1, (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") '
    "else os.cpu_count() or 2) - 1))"
)


class DataLoaderWithoutWorkers(Rule):
    code = "GPU101"
    name = "dataloader-without-workers"
    summary = "`DataLoader` loads batches in the training process (`num_workers` missing or 0)"
    fix_applicability = Applicability.UNSAFE
    requires = (LOADER_TEXT,)
    options = (Option("workers", DEFAULT_WORKERS, "The expression the fix inserts as `num_workers`."),)

    @classmethod
    def validate_options(cls, values: dict) -> None:
        validate_workers(values)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        for loader in model.dataloaders:
            if not loads_in_training_process(model, loader):
                continue  # workers given, items in memory, one batch, no GPU waiting (`analysis/loader_bound.py`)
            loading = in_process_loading(model, model.loader_flow.info(loader))
            if loading is not None and loading.cheap:
                continue  # a pass loads faster than the fix's workers start again for it (`analysis/loading_cost.py`)
            if text_rows_for_long_steps(model, model.loader_flow.info(loader)):
                continue  # rows of text for a model of billions of parameters: loading is under 1 % of its step
            if few_batches_a_pass(model, loader) is not None:
                continue  # a split of a handful of batches of text or rows: about what restarting workers costs (`analysis/small_splits.py`)
            arg = loader.argument("num_workers")
            resolved = model.values.setting(arg.value) if arg is not None else None
            yield self._report(loader, resolved, loading)

    def _severity(self, loader) -> Severity:
        flow = self.model.loader_flow
        return Severity.WARNING if flow.feeds_training(flow.info(loader)) else Severity.INFO

    def _report(self, loader, resolved, loading=None) -> Diagnostic:
        model = self.model
        where = resolved.describe(model) if resolved is not None else ""
        if resolved is None:
            what = "`DataLoader` has no `num_workers`"
        elif where:
            what = f"`DataLoader` uses `num_workers=0` ({where})"
        else:
            what = "`DataLoader` uses `num_workers=0`"
        what += ": batches load in the training process"
        if loading is not None:
            what += f", {loading.describe()}"
        help = "The GPU waits while the training process loads each batch"
        if self._copies_pageable(loader):
            # GPU102 stays silent on this loader (one finding per problem): pinning pays once workers load.
            help += "; with workers, also set `pin_memory=True` so that they pin the batches for the GPU copy"
        fix = None
        if model.is_notebook:  # no `__main__` guard to add: a kernel never re-runs the notebook in a worker
            defined = defined_for_workers(model, loader)
            if defined:
                names, them = " and ".join(f"`{name}`" for name in defined), "it" if len(defined) == 1 else "them"
                help += (
                    f"; workers can use {names} (defined in the notebook) only when they start by `fork` (Linux before "
                    f"Python 3.14): under `spawn` (macOS, Windows) move {them} into a module and import {them}"
                )
            fix = self._fix(loader, resolved, where)
        elif model.is_module_level_code(loader.call) and not model.has_main_guard:
            help += '; put the script under `if __name__ == "__main__":` before adding workers'
        else:
            fix = self._fix(loader, resolved, where)
        restarted = model.loader_flow.restarted_each_step(model.loader_flow.info(loader))
        if restarted is not None:
            # Workers alone would make it slower: each `iter()` starts them again (or drains what they prefetched).
            help += (
                f"; the loop at {restarted} takes each batch from a new iterator (`next(iter(...))`): with workers, every "
                "step would start them again (with `persistent_workers=True`, drain what they prefetched for the old "
                "iterator and still wait for the new one's first batch); keep one iterator across steps (`batches = "
                "iter(loader)` before the loop, `next(batches)` in it, a new one on `StopIteration`), then set `num_workers`"
            )
            fix = None
        return self.diagnostic(loader.call, what, severity=self._severity(loader), fix=fix, related=value_origin(resolved), help=help)

    def _copies_pageable(self, loader) -> bool:
        """GPU102 is silent on the loader because this finding covers it (`loading_dominates`): the batches go
        to the GPU in a loop (or a framework places them), `pin_memory` is not on, and pinning them would pay
        once workers load them (GPU102's facts, `analysis/loader_bound.py`)."""
        flow = self.model.loader_flow
        info = flow.info(loader)
        if flow.pinned(loader) or not loading_dominates(self.model, loader) or not copies_worth_pinning(self.model, info):
            return False
        moved = any(move.iteration.loop is not None for move in info.moves) or info.placed_by is not None
        return moved or flow.feeds_gpu_training(info) is not None  # (or a loop of another module copies them)

    def _fix(self, loader, resolved, where: str):
        model = self.model
        if resolved is not None and resolved.origin in (*SETTINGS_ORIGINS, HELD_DEFAULT):
            return None  # the value is a settings file's, or another module's default: not an edit here
        expression = self.settings["workers"]
        value = cst.parse_expression(expression)
        if resolved is None:
            edit = replace_node(model, loader.call, with_keyword_argument(loader.call, "num_workers", value))
            message = "Set `num_workers` to a worker count"
        elif resolved.origin == LITERAL:
            edit = replace_node(model, resolved.node, expression)
            message = "Use a worker count for `num_workers`"
        else:
            edit = replace_node(model, resolved.node, expression)
            message = f"Change the {where} to a worker count"
        imports = [add_import(model, name) for name in import_roots(expression)]
        return self.fix(message, [edit, *(e for e in imports if e is not None)], Applicability.UNSAFE)


def validate_workers(values: dict) -> None:
    """The `workers` option (GPU101, GPU107) must be a Python expression."""
    try:
        cst.parse_expression(values.get("workers", DEFAULT_WORKERS))
    except cst.ParserSyntaxError as error:
        raise ValueError(f"`workers` is not a Python expression: {error.message}") from None
