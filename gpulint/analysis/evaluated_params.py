"""Models handed to a function of another module in eval mode, with autograd on (GPU405 across modules).

A training script switches its model to eval mode and hands it to an evaluation helper of another module
(SASRec's `main.py`: `model.eval(); t_test = evaluate(model, dataset, args)`, where `utils.evaluate` runs
`model.predict(...)` for each of thousands of users). Neither module alone shows the problem: the helper does not
see the `.eval()`, the script does not see the loop. The module summary records, for each call, the arguments
that are a module switched to eval mode earlier in the calling function, with no `torch.no_grad()` /
`inference_mode()` around the call (`FunctionSummary.evaluated`); `evaluated_params` gives the helper's module, for
each parameter of its module-level functions, every such call in the project:

    "evaluate.model" -> [["main.py:124", "main.py:100", guard, epoch], ...]

- where the call is;
- the loop the call sits in (`main.py:100`, the epoch loop), or "" when it runs once in its function;
- whether the call sits under a rate-limit guard of that loop (`if epoch % 20 == 0:`, `FunctionSummary.calls`'
  `guarded`);
- whether that loop runs a training loop of its own, in its body (an epoch loop: each pass is an epoch of
  steps, not one step);
- for a call outside any loop: whether it is a one-off pass beside training (the calling function trains, and
  no call of it sits in a loop);
- whether the call evaluates a handful of items typed on the command line (`FunctionSummary.typed`: a demo that
  decodes the wav files named on its command line, `nargs="+"`, and trains nothing).

GPU405 reads them in the helper's module (`evaluation.find_eval_forwards`) and judges the share as it does within
a module (`eval_share.handed_sliver`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex
    from gpulint.analysis.summary import FunctionSummary

_MAX_CALLS = 8


def evaluated_params(index: ProjectIndex, record: ModuleRecord) -> dict[str, list]:
    """`function.param` -> [[call, loop, guarded, epoch loop, one-off beside training], ...] for the calls of another module
    that hand this module's function `function` a model in eval mode, with autograd on, for `param`."""
    from gpulint.analysis.summary import MODULE_BODY

    found: dict[str, list] = {}
    for key, f in record.summary.functions.items():
        if key == MODULE_BODY or "." in key:
            continue  # module-level functions only (a method's `self` shifts the positions)
        for caller, caller_key, position in index.callers(record, key):
            if caller is record:
                continue  # within the module: `find_eval_forwards` follows the `.eval()` itself
            caller_f = caller.summary.functions[caller_key]
            for slot in caller_f.evaluated.get(position, ()):
                param = _param(f, slot)
                if param is None:
                    continue
                entries = found.setdefault(f"{key}.{param}", [])
                if len(entries) < _MAX_CALLS:
                    entries.append(_entry(index, caller, caller_key, caller_f, position))
    return found


def _param(f: FunctionSummary, slot: object) -> Optional[str]:
    if isinstance(slot, int):
        return f.params[slot] if 0 <= slot < len(f.params) else None
    return slot if isinstance(slot, str) and (slot in f.params or slot in f.kwonly) else None


def _entry(index: ProjectIndex, caller: ModuleRecord, key: str, f: FunctionSummary, position: int) -> list:
    call = f.calls[position]
    loop = call[4]
    where = f"{caller.shown}:{call[1]}"
    if position in f.typed and not _trains(f):
        return [where, "", False, False, False, True]  # a handful of items typed on the command line
    if loop < 0:
        # once in its function: a pass beside the function's own training, unless the function runs again and again
        again = any(c[4] >= 0 for caller_of, key_of, i in index.callers(caller, key) for c in [caller_of.summary.functions[key_of].calls[i]])
        return [where, "", False, False, _trains(f) and not again]
    inner_training = any(other[1] and _inside(f, j, loop) for j, other in enumerate(f.loops)) or any(
        (c[4] == loop or _inside(f, c[4], loop)) and (callee := index.callee(caller, c[0])) is not None and callee.trains and callee.epoch
        for c in f.calls
    )  # a training loop in its body, or a call of a function that runs an epoch of training steps
    return [where, f"{caller.shown}:{f.loops[loop][0]}", bool(call[5]), inner_training, _trains(f)]


def _inside(f: FunctionSummary, loop: int, outer: int) -> bool:
    """Loop `loop` of `f` sits (at any depth) inside loop `outer`."""
    seen = 0
    while loop >= 0 and seen <= len(f.loops):
        loop = f.loops[loop][2]
        if loop == outer:
            return True
        seen += 1
    return False


def _trains(f: FunctionSummary) -> bool:
    return f.trains or any(loop[1] for loop in f.loops)
