"""Helpers a per-batch loop runs on every iteration, in any module: where their per-element reads are reported.

A metric or a decoder of another module walks a GPU tensor element by element on every call, and a validation or
training loop calls it once a batch, directly or through a helper of its own:

    # metrics.py
    def recalls_and_ndcgs(scores, labels, ks):
        answer_count = labels.sum(1)
        ...
        idcg = torch.Tensor([weights[:min(int(n), k)].sum() for n in answer_count])   # <- one read per row
    # main.py
    def _calculate_metrics(model, batch, ks):
        seqs, candidates, labels = batch
        return recalls_and_ndcgs(model(seqs), labels, ks)
    def _validate(model, val_loader, device, ks):
        for batch in val_loader:                        # <- a loop over the batches of a loader
            batch = [x.to(device) for x in batch]
            metrics = _calculate_metrics(model, batch, ks)

`batch_reached` lists the functions and methods of one module that a loop runs on every iteration (a call in the
loop, unguarded, or a call in a function that is itself run so, up to `_DEPTH` callers up; an override a base
class's loop calls on `self`), with where: the call that runs it and the loop. Any loop of a project function
counts (over batches, over epochs, over the samples of a test set: the walk waits once per element on each call
whatever the loop), but not a loop that runs once (its body ends in `break`: one demo batch), nor a unit test's.
The reads themselves are `forward_reach.repeated_reads` (one wait per element, on every call), with the
parameters' placement taken from the calls on the way from the loop (`forward_reach.given_level`), and only a walk
over a sequence's elements counts at the read (`forward_reach.per_element_reads`). Functions a per-step `forward`
reaches (`forward_reach`) or a step loop runs (`stepped`) are listed there, not here. A call of a listed function
is reported there (`batch_read_places`), not at the call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from gpulint.analysis.inherited_members import _called_from_kept_method, project_bases
from gpulint.analysis.summary import MODULE_BODY

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

_DEPTH = 3  # callers followed up from a helper to the loop that runs it per batch


def batch_reads(index: ProjectIndex, record: ModuleRecord) -> tuple[dict[str, list], list[str]]:
    """(key of `record` -> [the call that runs it, the per-batch loop, its per-element reads as [line, kind]], for
    the functions a per-batch loop runs that read once per element; the places of those reads in every module of
    the project: a call of such a function is reported there, not at the call)."""
    found = index.computed("batch_reach.reads", lambda: _all_reads(index))
    return found.get(id(record), {}), index.computed("batch_reach.places", lambda: _places(index, found))


def _places(index: ProjectIndex, found: dict[int, dict[str, list]]) -> list[str]:
    """Where the listed functions and those a per-step `forward` reaches read once per element, `utils.py:6`."""
    from gpulint.analysis.forward_reach import repeated_reads

    places = set()
    for other in index.records.values():
        places.update(f"{other.shown}:{line}" for entry in found.get(id(other), {}).values() for line, _ in entry[2])
        for key in index.reached_of(other):
            places.update(f"{other.shown}:{line}" for line, _ in repeated_reads(index, other, key))
    return sorted(places)


def _all_reads(index: ProjectIndex) -> dict[int, dict[str, list]]:
    from gpulint.analysis.forward_reach import repeated_reads

    found: dict[int, dict[str, list]] = {}
    for record in index.records.values():
        if not record.summary.functions:
            continue
        forward = index.reached_of(record).keys() | (index.stepped_of(record).keys() if record.summary.classes else set())
        for key, where in batch_reached(index, record).items():
            if key in forward:
                continue  # a per-step `forward` reaches it: `forward_reach` reports its reads
            reads = repeated_reads(index, record, key, batch=True)
            if reads:
                found.setdefault(id(record), {})[key] = [*where, reads]
    return found


def batch_reached(index: ProjectIndex, record: ModuleRecord) -> dict[str, tuple[str, str]]:
    """Function or method key of `record` -> (the call that runs it, `main.py:248`; the per-batch loop that runs
    that call, `main.py:343`), for those a per-batch loop runs on every iteration."""
    found: dict[str, tuple[str, str]] = {}
    for key in record.summary.functions:
        if key == MODULE_BODY:
            continue
        where = batch_root(index, record, key)
        if where is not None:
            found[key] = where
    return found


def batch_root(index: ProjectIndex, record: ModuleRecord, key: str, depth: int = 0) -> Optional[tuple[str, str]]:
    """(the call that runs `key`, the per-batch loop it runs in) when a per-batch loop runs `key` on every
    iteration, directly or through callers; None otherwise."""
    memo = index.computed("batch_reach.roots", dict)
    known = memo.get((id(record), key))
    if known is not None or (id(record), key) in memo:
        return known
    if depth > _DEPTH:
        return None
    from gpulint.analysis.project import _in_loop_of

    memo[(id(record), key)] = None  # a cycle of calls adds nothing
    found = None
    for caller, caller_key, position in index.callers(record, key):
        f = caller.summary.functions[caller_key]
        call = f.calls[position]
        if call[5] or (caller is record and caller_key == key):
            continue  # under a `step % N` guard, or recursion
        loop = _batch_loop_around(index, caller, caller_key, call[4])
        if loop is not None and _in_loop_of(f, loop, index._step_loops(caller, f)):
            continue  # a training step's call: reported there, where the step's costs are weighed (`read_cost`)
        if loop is not None:
            found = (f"{caller.shown}:{call[1]}", f"{caller.shown}:{f.loops[loop][0]}")
            break
        if caller_key == MODULE_BODY or index.is_test(caller):
            continue  # run once (or by a test)
        outer = batch_root(index, caller, caller_key, depth + 1)
        if outer is not None:
            found = (f"{caller.shown}:{call[1]}", outer[1])
            break
    owner, _, method = key.partition(".")
    if found is None and method and not method.startswith("__") and owner in record.summary.classes:
        # an override: the base class's loop calls `self.<method>(...)` (`self.calculate_metrics(batch)` in a
        # trainer's validation loop), which runs the subclass's method on the subclass's instances
        info = record.summary.classes[owner]
        for base_record, base in project_bases(index, record, owner):
            if f"{base}.{method}" in base_record.summary.functions and _called_from_kept_method(base_record, base, method, info.methods):
                found = batch_root(index, base_record, f"{base}.{method}", depth + 1)
                if found is not None:
                    break
    memo[(id(record), key)] = found
    return found


def on_batch_path(index: ProjectIndex, caller: ModuleRecord, caller_key: str, call: tuple) -> bool:
    """The call `call` of `caller_key` runs on every iteration of a loop: in one, or its function is run so
    (`given_level`'s path)."""
    if call[5]:
        return False
    return _batch_loop_around(index, caller, caller_key, call[4]) is not None or batch_root(index, caller, caller_key) is not None


def _batch_loop_around(index: ProjectIndex, record: ModuleRecord, key: str, loop: int) -> Optional[int]:
    """The loop of function `key` that repeats a call in `loop` (the call's innermost loop), or None: not in a loop,
    in a loop that runs once, or in a test."""
    if loop < 0 or index.is_test(record) or not record.summary.evidence:
        return None  # (a loop of a module with no GPU evidence of its own: its `x.to(device)` may be a CPU copy)
    loops = record.summary.functions[key].loops
    at = loop
    while at >= 0:
        if "once" in loops[at][3:]:
            return None  # (`for x, y in loader: show(infer(x)); break`: one demo call)
        at = loops[at][2]
    return loop  # (any loop of the caller: a loop over batches, over epochs, over the samples of a test set)
