"""GPU107 trainer-dataloader-settings: `TrainingArguments` that make the HF Trainer load data in the training
process, without pinned memory, or restart its workers every epoch."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.frameworks import FRAMEWORK_DEFAULT, TrainerArguments
from gpulint.analysis.own_loaders import trainers_bring_own_loaders
from gpulint.analysis.trainer_epochs import repeats_loader_passes
from gpulint.analysis.trainer_loading import LIGHT, trainer_batches_on_cuda, trainer_loading_work, trainer_rows_are_token_ids
from gpulint.analysis.value_resolution import ARGPARSE_DEFAULT, SETTINGS_ORIGINS
from gpulint.checks.base import Option, Rule
from gpulint.checks.gpu101_dataloader_without_workers import DEFAULT_WORKERS, validate_workers
from gpulint.diagnostics import Applicability, Diagnostic
from gpulint.edits import add_import, import_roots, replace_node, with_keyword_argument, with_keyword_value

WORKERS, PINNED, PERSISTENT = "dataloader_num_workers", "dataloader_pin_memory", "dataloader_persistent_workers"


class TrainerDataloaderSettings(Rule):
    code = "GPU107"
    name = "trainer-dataloader-settings"
    summary = "HF `TrainingArguments` load batches in the training process, unpinned, or restart workers every epoch"
    fix_applicability = Applicability.UNSAFE
    requires = (r"TrainingArguments|(SFT|DPO|GRPO|Reward|KTO|ORPO|CPO)Config",)
    options = (Option("workers", DEFAULT_WORKERS, "The expression the fix inserts as `dataloader_num_workers`."),)

    @classmethod
    def validate_options(cls, values: dict) -> None:
        validate_workers(values)

    def check(self) -> Iterator[Diagnostic]:
        for arguments in self.model.frameworks.trainer_arguments:
            problems = self._problems(arguments)
            if problems:
                message = f"`{arguments.name}` " + "; ".join(what for what, _ in problems)
                help = ". ".join(why[0].upper() + why[1:] for _, why in problems)
                yield self.diagnostic(arguments.call, message, fix=self._fix(arguments), help=help)

    def _problems(self, arguments: TrainerArguments) -> list[tuple[str, str]]:
        """(what a setting does, why it costs and what to do) for each setting that leaves the GPU waiting."""
        values = arguments.values
        if arguments.on_cpu:
            return []
        problems = []
        workers, pinned, persistent = values[WORKERS], values[PINNED], values[PERSISTENT]
        restarts = _is(persistent, False) and repeats_loader_passes(self.model, arguments)
        cost = self.model.batch_cost
        if trainers_bring_own_loaders(self.model, arguments.call):
            return []  # the Trainers return loaders built in the code: these settings shape none of them
        if trainer_batches_on_cuda(self.model, arguments.call):
            return []  # batches made on the GPU: workers could not run the collator, pinning could not take them
        if trainer_loading_work(self.model, arguments.call) == LIGHT:
            workers = persistent = None  # rows tokenized up front, a collator that pads: workers would idle
        if cost.trainer_streams_unsharded(arguments.call):
            workers = persistent = None  # an IterableDataset that does not shard: each worker would replay it
        if _is(pinned, False) and trainer_rows_are_token_ids(self.model, arguments.call):
            pinned = None  # token ids: pinning a few kilobytes a batch saves nothing measurable
        if _is(workers, 0):
            problems.append((
                self._setting(arguments, WORKERS),
                "the HF Trainer loads every batch in the training process while the GPU waits; set "
                "`dataloader_num_workers` to a worker count"
                + (" and `dataloader_persistent_workers=True` to keep them between epochs" if restarts else ""),
            ))
        if _is(pinned, False):
            problems.append((
                self._setting(arguments, PINNED),
                "every batch is copied to the GPU from pageable memory, a blocking staged copy (the default, True, pins them)",
            ))
        workers_positive = workers is not None and type(workers.value) is int and workers.value > 0
        if workers_positive and restarts:
            problems.append((
                self._setting(arguments, PERSISTENT),
                "the worker processes are started again every epoch; set `dataloader_persistent_workers=True`",
            ))
        return problems

    def _setting(self, arguments: TrainerArguments, name: str) -> str:
        """What the arguments do with a setting: leave it at its default, or set it (and where the value comes from)."""
        resolved = arguments.values[name]
        if resolved.origin == FRAMEWORK_DEFAULT:
            return f"leaves `{name}` at its default {resolved.value}"
        where = resolved.describe(self.model)
        return f"sets `{name}={resolved.value}`" + (f" ({where})" if where else "")

    def _fix(self, arguments: TrainerArguments):
        """Give the Trainer workers (where the 0 is written, or as a new keyword) and keep them between epochs."""
        model = self.model
        workers, persistent = arguments.values[WORKERS], arguments.values[PERSISTENT]
        if not _is(workers, 0) or _is(arguments.values[PINNED], False):
            return None  # an explicit `dataloader_pin_memory=False` is a choice the fix cannot judge
        if workers.origin in SETTINGS_ORIGINS:
            return None  # a value a settings file or another module's parser writes: not an edit here
        expression = self.settings["workers"]
        call = arguments.call
        new_call = call
        edits = []
        keep = "True"
        given = next((a for a in call.args if a.keyword is not None and a.keyword.value == WORKERS), None)
        if workers.origin == FRAMEWORK_DEFAULT:
            new_call = with_keyword_argument(call, WORKERS, cst.parse_expression(expression))
        elif given is not None and given.value is workers.node:
            new_call = with_keyword_value(call, given, cst.parse_expression(expression))
        else:  # a constant, a field default, an argparse default: change it where it is defined
            edits.append(replace_node(model, workers.node, expression))
            if workers.origin == ARGPARSE_DEFAULT and given is not None:
                keep = f"{model.code(given.value)} > 0"  # `--workers 0` must still work: persistence needs workers
        if persistent is not None and persistent.origin == FRAMEWORK_DEFAULT and repeats_loader_passes(model, arguments):
            new_call = with_keyword_argument(new_call, PERSISTENT, cst.parse_expression(keep))
        if new_call is not call:
            edits.append(replace_node(model, call, new_call))
        edits.extend(edit for edit in (add_import(model, name) for name in import_roots(expression)) if edit is not None)
        return self.fix("Give the Trainer's data loaders worker processes that persist between epochs", edits, Applicability.UNSAFE)


def _is(resolved, value) -> bool:
    return resolved is not None and type(resolved.value) is type(value) and resolved.value == value

