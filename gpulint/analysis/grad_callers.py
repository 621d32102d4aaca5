"""Functions that every caller in the project runs with autograd decided (GPU405 across modules).

MelGAN's `utils/validation.py` defines `validate(...)`, which puts the generator in eval mode and runs it over the
validation loader; its only caller, `utils/train.py`, calls it inside `with torch.no_grad():`. The helper's module
alone shows an evaluation loop with autograd on; the project shows that no call of it records a graph (both judges of
the twenty-second corpus: wrong, "caller-wraps-no-grad").

`grad_decided_functions(index, record)`: the module-level functions of `record` that the project calls, where every
call is made with autograd off or decided by the caller (`with torch.no_grad():` / `torch.inference_mode()` /
`torch.set_grad_enabled(...)` around it, the calling function decorated with one, or `torch.set_grad_enabled(False)`
earlier there: `FunctionSummary.grad_decided`, what GPU405 reads within a module), or is made from a module-level
function that is itself so (up to `_MAX_DEPTH` callers up). A function nothing in the project calls (a public API),
one called from a method or a module body without such a context, or one handed on as a value anywhere in the
project (`callbacks=[validate]`: called out of sight) is not listed: today's reading stands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

_MAX_DEPTH = 4  # callers of callers followed up; a longer chain stays unknown


def grad_decided_functions(index: ProjectIndex, record: ModuleRecord) -> list[str]:
    handed = index.computed("functions handed as values", lambda: _handed_functions(index))
    return sorted(
        name for name in record.summary.functions
        if "." not in name and not name.startswith("<") and (id(record), name) not in handed
        and _decided(index, record, name, handed, frozenset(), 0)
    )  # fmt: skip


def _decided(index: ProjectIndex, record: ModuleRecord, name: str, handed: set, seen: frozenset, depth: int) -> bool:
    callers = index.callers(record, name)
    if not callers or depth > _MAX_DEPTH:
        return False  # nothing in sight calls it (its callers are out of sight), or too long a chain
    seen = seen | {(id(record), name)}
    for caller, key, position in callers:
        f = caller.summary.functions.get(key)
        if f is None:
            return False
        if position in f.grad_decided:
            continue
        if "." in key or key.startswith("<") or (id(caller), key) in seen or (id(caller), key) in handed:
            return False  # a method (called through instances out of sight), the module body, a cycle
        if not _decided(index, caller, key, handed, seen, depth + 1):
            return False
    return True


def _handed_functions(index: ProjectIndex) -> set[tuple[int, str]]:
    """(module, function) of every project function some module reads other than as a callee (`ModuleSummary.handed`)."""
    found = set()
    for record in index.records.values():
        for name in record.summary.handed:
            target = index.symbol(record, name)
            if target is not None and target[0] == "function":
                found.add((id(target[1]), target[2]))
    return found
