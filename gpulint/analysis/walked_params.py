"""Helpers that walk a GPU tensor they are handed element by element, run once per batch from another module.

A metrics module ranks a batch's scores and, for each sample, reads the number of relevant items to the host:

    def ndcg(scores, labels, ks):                      # metrics.py
        counts = labels.sum(1)                          # a GPU tensor: one count per sample
        for k in ks:
            ideal = torch.tensor([dcg[: min(int(n), k)].sum() for n in counts])   # <- one wait per sample
    def batch_metrics(model, batch, ks):               # main.py
        seqs, labels = batch
        return ndcg(model(seqs), labels, ks)
    for batch in val_loader:                           # every evaluation (or training) batch
        batch = [x.to(device) for x in batch]
        metrics = batch_metrics(model, batch, ks)

Each call waits once per element of the tensor (a batch's worth of device reads: after the first drains the
queue, each costs a copy's latency, ~10 µs, and the host launches nothing meanwhile), and the loop runs the call
for every batch. In the helper's own module nothing says `labels` is on the GPU or that a loop runs the helper;
the project does: `walked_params` lists, for a module-level function of `record`, the parameters

- whose summary has a read of one number from an element of the parameter (`int(n)` / `n.item()` in a
  comprehension or a `for` loop over what the parameter gives: the summary's "repeated" read, or a read in a loop
  that iterates the parameter), unguarded; rows copied out one by one (`[h.tolist() for h in hyps]`, a decoder's
  outputs) are the loop's output, not a walk the host computes with;
- that every call in the project fills with a GPU tensor, or at least one does and none a CPU value
  (`residency.received_tensor_level`);
- and that a loop over the batches of a loader, or a training-step loop, of another module runs through a chain of
  unguarded calls (at most `_DEPTH` functions up), with the parameter filled at each hop (a loop of the helper's own
  module is `element_passes.element_pass`'s, which sees the loop itself).

-> {function: [[param, [read lines], where the batch loop's call is (`main.py:12`)], ...]}. A call under a
`step % N` guard, a loop over a few options (`for k in ks:`), or a helper only called once stays silent. The reads
of a host copy (`labels.tolist()`) are no reads of the GPU tensor and are not in the summary's effects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from gpulint.analysis.summary import MODULE_BODY, deep_sources

if TYPE_CHECKING:
    from gpulint.analysis.project import ModuleRecord, ProjectIndex
    from gpulint.analysis.summary import FunctionSummary

_DEPTH = 3  # functions followed up from the walking helper to the loop over batches
# reads of one number each (`int(n)`, `n.item()`): a wait for a value the host computes with. Not `.tolist()` /
# `.cpu()` of a row (`[h.tolist() for h in hyps]`): a batch's outputs copied out row by row, the loop's output
_SCALAR_READS = ("`int()`", "`float()`", "`bool()`", "`.item()`")


def walked_params(index: ProjectIndex, record: ModuleRecord) -> dict[str, list]:
    from gpulint.analysis.residency import NONE, received_tensor_level

    found: dict[str, list] = {}
    for key, f in record.summary.functions.items():
        if key == MODULE_BODY or "." in key or key.startswith("<"):
            continue  # methods run through instances, whose calls are not all in sight
        for source, effects in f.effects.items():
            if not source.startswith("p:"):
                continue
            lines = sorted({e[2] for e in effects if _element_read(f, source, e)})
            if not lines:
                continue
            param = source[2:]
            if received_tensor_level(index.inputs(record, key, param)) == NONE:
                continue  # not known to be handed a GPU tensor
            where = _batch_loop_call(index, record, key, param, 0, record)
            if where is not None:
                found.setdefault(key, []).append([param, lines, where])
    return found


def _element_read(f: FunctionSummary, source: str, effect: tuple) -> bool:
    """`effect` is an unguarded read of an element of what `source` gives: in a comprehension over it (the
    summary's "repeated"), or in a `for` loop that iterates it (not a loop over a few options)."""
    if effect[0] != "sync" or len(effect) < 6 or effect[5] or not effect[1].startswith(_SCALAR_READS):
        return False
    flags = effect[6:]
    if "repeated" in flags:
        return True  # in a comprehension: per element, even inside a loop over a few options (`for k in ks:`)
    if "options" in flags:
        return False
    loop = effect[4]
    return loop >= 0 and ("iter", loop) in f.effects.get(source, ())


def _batch_loop_call(index: ProjectIndex, record: ModuleRecord, key: str, param: str, depth: int, home: ModuleRecord) -> Optional[str]:
    """Where a loop over batches of another module than `home` (the walk's) calls `key` (or a function that calls
    it, up the chain), handing `param`. A loop of the walk's own module is `element_passes.element_pass`'s, which
    reads the loop itself (one that breaks after its first pass runs the walk once)."""
    if depth >= _DEPTH:
        return None
    f = record.summary.functions.get(key)
    if f is None or param not in f.params:
        return None
    for caller, caller_key, position in index.callers(record, key):
        if index.is_test(caller):
            continue
        caller_f = caller.summary.functions[caller_key]
        call = caller_f.calls[position]
        if call[5] or (len(call) > 6 and call[6]):
            continue  # under a `step % N` guard; `f(*args)` (which argument lands where is not known)
        value = _handed(call, f, param)
        if value is None:
            continue
        handed = deep_sources(value)
        if call[4] >= 0:
            # a tensor moved to the GPU for the call (`labels.cuda()` of each batch), the loop's element, or a loop
            # over a loader's batches or training steps: a new tensor walked every iteration
            moved = value[0] == "moved"
            if caller is home:
                continue
            if moved or _element_of(caller_f, call[4], handed) or _over_batches(index, caller, caller_key, caller_f, call[4]):
                return f"{caller.shown}:{call[1]}"
            continue
        if "." in caller_key:
            continue  # a method: its instance's calls are not all in sight
        # `batch_metrics(model, batch)` hands its own parameter on (or `labels` unpacked from it): the loop that
        # calls it decides
        for source in handed:
            where = _batch_loop_call(index, caller, caller_key, source[2:], depth + 1, home) if source.startswith("p:") else None
            if where is not None:
                return where
    return None


def _handed(call: tuple, f: FunctionSummary, param: str) -> Optional[tuple]:
    """The summary's value the call hands for `param` (its sources: `p:batch`, `l:0` of a moved loop element),
    None when it hands nothing there."""
    position = f.params.index(param)
    value = call[2][position] if position < len(call[2]) else dict(call[3]).get(param)
    return value if isinstance(value, tuple) and value else None


def _element_of(f: FunctionSummary, loop: int, handed: list[str]) -> bool:
    """What the call hands is the element of `loop` or of a loop around it (`for batch in val_loader:` handing
    `batch`, moved to the GPU or not): the tensor walked is a new batch's every iteration."""
    while loop >= 0:
        if f"l:{loop}" in handed:
            return True
        loop = f.loops[loop][2]
    return False


def _over_batches(index: ProjectIndex, record: ModuleRecord, key: str, f: FunctionSummary, loop: int) -> bool:
    """`loop` (or a loop around it) runs a training step per iteration, or iterates a data loader's batches."""
    if index.in_step_loop(record, f, loop):
        return True
    loops = set()
    while loop >= 0:
        loops.add(loop)
        loop = f.loops[loop][2]
    for source, effects in f.effects.items():
        if not any(e[0] == "iter" and e[1] in loops for e in effects):
            continue
        if source.startswith("p:") and "loader" in index.inputs(record, key, source[2:]):
            return True
        resolved = index.value(record, f, ("src", source))
        if resolved is not None and resolved[0] == "loader":
            return True
    return False
