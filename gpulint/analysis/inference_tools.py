"""Model wrappers that only ever run inference: `nn.DataParallel` in an evaluation or sampling tool.

`DistributedDataParallel` is advice for training: it overlaps the gradient all-reduce with the backward pass and
drops the per-step replication of a training step. A script that loads a checkpoint, wraps it in `DataParallel`
and evaluates or samples (`model = nn.DataParallel(model); validate(loader, model)`) has no gradients to
all-reduce; spreading its batches over the visible GPUs is what it wants, and DDP would not do it.

`only_runs_inference(model, wrapper)`: the function (or script) that wraps the model trains nothing from the wrap
on, directly or through the functions it calls, and the wrapper never leaves it for code that might train it: it
is not returned, stored on an object or in a container, and the calls it is handed to are project functions that
do not train.
Unknown callees (a framework's `fit(model)`, a method gpulint cannot see) keep the finding.

It also holds for a wrap in the top-level code of an evaluation script (`in_script_that_trains_nothing`): a module
no other project module imports, that evaluates (`model.eval()`, `torch.no_grad()`) and trains nothing anywhere (no backward pass or optimizer step in its code or in
the project functions it calls, no `.train()` / `fit` call at all), whatever it does with the wrapper there (kept in
a list of models and run from it: temporal-shift-module's `test_models.py`, `net_list.append(net)` then
`for ..., net, ... in zip(..., net_list, ...)`). Nothing outside the script sees the wrapper, and nothing in it trains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.hot_loops import trains
from gpulint.analysis.parallel import wrapper_bound_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Builtins that only look at the model (`print(model)`, `type(model)`).
_INSPECTING_BUILTINS = frozenset({"print", "repr", "str", "type", "isinstance", "id", "len", "hasattr", "getattr"})


def only_runs_inference(model: SemanticModel, wrapper: cst.Call) -> bool:
    if in_script_that_trains_nothing(model, wrapper):
        return True
    name = wrapper_bound_name(model, wrapper)
    scope = model.scope_of(wrapper)
    start = model.line_of(wrapper)
    if name is None or any(trains(model, call) for call in model.calls_inside(scope) if model.line_of(call) >= start):
        return False  # (what ran before the wrap, loading a checkpoint, cannot train it)
    uses = 0
    for node in model.dataflow.reads.get(name, ()):
        if not isinstance(node, cst.Name) or model.scope_of(node) is not scope or model.line_of(node) < start:
            continue
        if any(model.is_inside(node, w.call) for w in model.data_parallel_calls):
            continue  # the module it wraps (here or in another branch)
        parent = model.parent.get(node)
        if isinstance(parent, cst.Attribute) and parent.value is node:
            uses += 1  # `model.eval()`, `model.load_state_dict(...)`, `model.module`
        elif isinstance(parent, cst.Call) and parent.func is node:
            uses += 1  # a forward here
        elif isinstance(parent, cst.Arg):
            if not _handed_to_inference(model, parent):
                return False
            uses += 1
        elif isinstance(parent, cst.Return) and _returned_for_inference(model, wrapper):
            uses += 1
        else:
            return False  # returned, stored, put in a container, rebound: who runs it is not known
    return uses > 0


def _returned_for_inference(model: SemanticModel, wrapper: cst.Call) -> bool:
    """The wrapper a module-level function returns, when every call of that function in the project hands the
    result only to project functions that train nothing, in code that trains nothing (`analysis/inference_results.py`):
    an inference model's loader, such as an FID helper's Inception network."""
    function = model.enclosing_function(wrapper)
    if function is None or any(isinstance(a, (cst.ClassDef, cst.FunctionDef)) for a in model.ancestors(function)):
        return False  # a method or a nested function: its callers are not in sight
    return function.name.value in model.project.inference_results


def _handed_to_inference(model: SemanticModel, arg: cst.Arg) -> bool:
    """The call `arg` is given to is a project function (this module's or another's) that trains nothing, or a
    builtin that only looks at it."""
    call = model.parent.get(arg)
    if not isinstance(call, cst.Call) or arg not in call.args:
        return False
    name = call.func.value if isinstance(call.func, cst.Name) else None
    if name in _INSPECTING_BUILTINS and not model.bindings_of(name, call):
        return True
    if name in model.functions:
        return not any(trains(model, function) for function in model.functions[name])
    callee = model.callee(call)
    return callee is not None and callee.kind == "function" and not callee.trains


# Calls whose name says they train (`trainer.fit(model)`, `train(model, loader)`, `model.train()`): the script may.
_TRAINING_NAMES = ("fit", "train")


def in_script_that_trains_nothing(model: SemanticModel, wrapper: cst.Call) -> bool:
    """`wrapper` sits in the top-level code of a module no project module imports, that evaluates (a `.eval()`, a
    `torch.no_grad()` / `inference_mode()`) and trains nothing: no training step in its code or in a project function
    it calls, no call named like training (`fit`, `train*`)."""
    if model.enclosing_function(wrapper) is not None or model.project.imported or model.is_notebook:
        return False
    evaluates = False
    for call in model.calls:
        name = (model.code(call.func) or "").rsplit(".", 1)[-1].lower()
        if name.startswith(_TRAINING_NAMES) or name.endswith("fit"):
            return False
        evaluates = evaluates or (name == "eval" and not call.args) or name in ("no_grad", "inference_mode")
    return evaluates and not trains(model, model.module)
