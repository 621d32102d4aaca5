"""A call of a project helper that waits, whose wait is also reported inside the helper: one wait, one finding.

A call of a project function that syncs every time it runs is reported at the call, with where the helper
syncs (`Residency._helper_syncs`: `test_clip(lq, model)` (`.cpu()` at test.py:337)). The helper's own body may
be per-step code as well, its syncs reported at their lines: a loop of its own (KAIR's `test_clip` copies each
patch to the host in its patch loop), or a method a loop runs through an instance (`crit(pred, y)` runs
`forward`, which calls `self.build_target`, per-step code itself). Then the user would read the same wait twice:
at the call in the step loop and in the helper. The helper's line is where the wait is, and where the labels of
every corpus put it, so the finding stays there and the call becomes one of its related places:

    def test_clip(lq, model):
        for h, w in patches:
            out = model(lq[..., h:h + p, w:w + p]).cpu()   # GPU303 here, related: the calls at 13 and 15
    for batch in loader:
        out = test_clip(batch.to(device), model)          # not again here

Only helpers of this module are looked at (`via` names the module's shown path): a helper of another module is
reported in its own file, out of sight here, and its calls stay findings. A helper whose waits are not reported
in place (called from the loop and at set-up too, a helper with no loop of its own) keeps its finding at the
call. Two different helpers are two waits, two findings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel
    from gpulint.analysis.residency import HostSync


def helper_lines(model: SemanticModel, sync: HostSync, what: str) -> set[int]:
    """The lines of this module where the project helper that the call `sync` runs waits (`what`: "sync",
    "shape", "synchronize"): the one its finding names (`sync.via`) and the others the helper's facts list; empty for a
    helper of another module or a sync that is not a call of a helper."""
    if sync.via is None or not isinstance(sync.node, cst.Call):
        return set()
    places = {sync.via}
    callee = model.callee(sync.node)
    at = 1 if what == "synchronize" else 2  # ("synchronize", place); ("sync", kind, place, ...)
    if callee is not None:
        places.update(entry[at] for entry in callee.syncs if entry[0] == what and len(entry) > at)
        places.update(effect[at] for effects in callee.effects.values() for effect in effects if effect[0] == what and len(effect) > at)
    own = model.project.path
    lines = set()
    for place in places:
        path, _, line = str(place).rpartition(":")
        if path == own and line.isdigit():
            lines.add(int(line))
    return lines


def reported_in_helpers(model: SemanticModel, reported: list[tuple[HostSync, object, str]], what: str) -> dict[int, HostSync]:
    """id(a reported call of a helper of this module) -> the sync in that helper reported at its own line that
    the call runs (the first, in the module's order): the call's wait is that one, reported there. `reported`:
    the rule's (sync, loop, role) findings; a call in a training step is not folded into a read the helper's
    own loop reports as an evaluation step (its finding would say "evaluation" and lose the warning)."""
    in_place = sorted((item for item in reported if item[0].via is None), key=lambda item: model.dataflow.order[item[0].node])
    if not in_place:
        return {}
    folded = {}
    for sync, _, role in reported:
        lines = helper_lines(model, sync, what)
        target = next((s for s, _, r in in_place if r == role and _lines(model, s.node) & lines), None) if lines else None
        if target is not None and not model.is_inside(sync.node, _function_of(model, target.node)):
            folded[id(sync)] = target
    return folded


def fold_into_helpers(
    model: SemanticModel, reported: list[tuple[HostSync, object, str]], what: str
) -> tuple[list[tuple[HostSync, object, str]], dict[int, list[cst.CSTNode]]]:
    """`reported` without the calls whose wait is reported inside their helper (`reported_in_helpers`), and
    id(the helper's reported sync node) -> the calls that run it: the finding's related places."""
    folded = reported_in_helpers(model, reported, what)
    runs_it: dict[int, list[cst.CSTNode]] = {}
    for sync, _, _ in reported:
        if id(sync) in folded:
            runs_it.setdefault(id(folded[id(sync)].node), []).append(sync.node)
    return [item for item in reported if id(item[0]) not in folded], runs_it


def calls_named(model: SemanticModel, calls: list[cst.CSTNode], message: str) -> str:
    """What a finding in a helper adds to its message for the calls folded into it: `, run by the calls at lines
    286 and 306`; nothing where the message names the call that runs it already (`run by the call at
    train.py:380`: the calls between, `forward`'s `self.build_target(...)`, are related places only)."""
    lines = sorted({model.line_of(call) for call in calls})
    if not lines or "run by the call at" in message:
        return ""
    where = ", ".join(map(str, lines[:-1])) + (" and " if len(lines) > 1 else "") + str(lines[-1])
    return f", run by the call{'s' if len(lines) > 1 else ''} at line{'s' if len(lines) > 1 else ''} {where}"


def _lines(model: SemanticModel, node: cst.CSTNode) -> set[int]:
    """The lines of `node` and the first of its statement (the helper's facts name the read's line or its
    statement's; not the whole body of an `if` whose test reads)."""
    span = model.range(node)
    return {*range(span.start.line, span.end.line + 1), model.line_of(model.enclosing_statement(node))}


def _function_of(model: SemanticModel, node: cst.CSTNode) -> cst.CSTNode:
    """The function around `node`, or the module: a call inside the helper itself (recursion) is not folded."""
    return next((a for a in model.ancestors(node) if isinstance(a, (cst.FunctionDef, cst.Lambda))), model.module)
