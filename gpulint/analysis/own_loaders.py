"""HF Trainers that bring their own data loaders: a subclass whose `get_train_dataloader` (and
`get_eval_dataloader`, where it evaluates) return loaders the code built itself (`return train_dataloader`).
`TrainingArguments`' `dataloader_num_workers`, `dataloader_pin_memory` and `dataloader_persistent_workers` only
shape the loaders the Trainer builds: given to such Trainers alone, they configure nothing (the loaders' own
`DataLoader(...)` calls are where GPU101-GPU104 look).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.frameworks import HF, HF_TRAINER, call_argument, qualified_is

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_TRAIN, _EVAL = "get_train_dataloader", "get_eval_dataloader"


def trainers_bring_own_loaders(model: SemanticModel, arguments: cst.Call) -> bool:
    """At least one Trainer of this module is given `arguments`, and every one that is overrides the methods
    that build its loaders (the evaluation one too when it is given an evaluation set)."""
    given = [call for call in _trainer_calls(model) if _gives(model, call, arguments)]
    return bool(given) and all(_overrides_loaders(model, call) for call in given)


def _trainer_calls(model: SemanticModel) -> list[cst.Call]:
    frameworks = model.frameworks
    found = []
    for call in model.calls:
        name = model.call_name(call)
        info = model.local_class_of(name)
        if qualified_is(name, HF, HF_TRAINER.names) or (info is not None and frameworks.class_kind(info.node.name.value) is HF_TRAINER):
            found.append(call)
    return found


def _gives(model: SemanticModel, trainer: cst.Call, arguments: cst.Call) -> bool:
    """The Trainer's `args` is `arguments`, written there or through a name bound to it; unknown counts as given."""
    given: Optional[cst.BaseExpression] = call_argument(trainer, "args", 1)
    if given is None:
        return False  # (the Trainer's own default arguments)
    if given is arguments:
        return True
    if isinstance(given, cst.Name):
        writes = model.dataflow.reaching_writes(given.value, given)
        return not writes or any(w.value is arguments or w.value is None for w in writes)
    return True


def _overrides_loaders(model: SemanticModel, trainer: cst.Call) -> bool:
    info = model.local_class_of(model.call_name(trainer))
    if info is None:
        return False  # the HF Trainer itself builds its loaders from the arguments
    methods = _methods(model, info.node.name.value)
    evaluates = call_argument(trainer, "eval_dataset") is not None
    return _returns_a_value(model, methods.get(_TRAIN)) and (not evaluates or _returns_a_value(model, methods.get(_EVAL)))


def _methods(model: SemanticModel, class_name: str, depth: int = 0) -> dict[str, cst.FunctionDef]:
    """The class's methods with those it inherits from classes of this module (its own first)."""
    info = model.classes.get(class_name)
    if info is None or depth > 4:
        return {}
    found: dict[str, cst.FunctionDef] = {}
    for base in info.bases:
        found.update(_methods(model, base, depth + 1))
    found.update(info.methods)
    return found


def _returns_a_value(model: SemanticModel, method: Optional[cst.FunctionDef]) -> bool:
    """The override returns a loader of its own and never defers to the Trainer's (`super().get_train_dataloader()`)."""
    if method is None or "super()" in model.code(method):
        return False
    return any(isinstance(s, cst.Return) and s.value is not None for s in _returns(method))


def _returns(method: cst.FunctionDef) -> list[cst.Return]:
    class Finder(cst.CSTVisitor):
        def __init__(self) -> None:
            self.found: list[cst.Return] = []

        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is method

        def visit_Return(self, node: cst.Return) -> None:
            self.found.append(node)

    finder = Finder()
    method.visit(finder)
    return finder.found
