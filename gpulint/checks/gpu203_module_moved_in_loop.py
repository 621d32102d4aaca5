"""GPU203 module-moved-in-loop: `model.to(device)` / `model.cuda()` on an `nn.Module` inside a loop."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name
from gpulint.analysis.loop_bounds import runs_a_few_times
from gpulint.analysis.residency import TRAIN
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import delete_statement, insert_statement_before, statement_code

# Calls that change where or in which dtype a module lives: a loop that has one of them must move it back.
_RELOCATIONS = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "to_empty", "type"})


class ModuleMovedInLoop(Rule):
    code = "GPU203"
    name = "module-moved-in-loop"
    summary = "An `nn.Module` is moved to the device inside a loop (`model.to(device)` every iteration)"
    fix_applicability = Applicability.SAFE
    fix_sometimes_unsafe = True
    requires = (r"\.(cuda|to)\(",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        residency, flow = model.residency, model.dataflow
        for call, move, loop in residency.moves_in_loops():
            receiver = call.func.value
            key = dotted_name(receiver)
            if key is None or not residency.is_module(receiver):
                continue
            statement = model.parent.get(call)
            if isinstance(statement, cst.Expr):
                target = None
            elif isinstance(statement, cst.Assign) and len(statement.targets) == 1 and statement.value is call:
                target = dotted_name(statement.targets[0].target)
            else:
                continue
            if not flow.runs_every_iteration(call, loop) or self._varies(key, move[1], statement, call, loop):
                continue
            if runs_a_few_times(model, call):
                continue  # a handful of moves in all (a retry loop of a one-off inference): no per-step cost
            _, role = residency.step_loop(call)
            earlier = self._earlier_move(call, key, loop)
            where = f"; it is already moved at line {model.line_of(earlier)}" if earlier is not None else ""
            message = f"`{model.code(call)}` moves the module again every iteration of the loop (line {model.line_of(loop)})"
            help = (
                "A module moves in place, so after the first iteration this only walks every parameter and buffer "
                f"in Python; move it once before the loop{where}"
            )
            fix = self._fix(call, statement, target, key, loop, earlier)
            yield self.diagnostic(call, message, severity=Severity.WARNING if role == TRAIN else Severity.INFO, fix=fix, related=[("the loop", loop)], help=help)

    def _varies(self, key: str, device, statement, call, loop) -> bool:
        """The module or the device changes in the loop, or the loop moves the module elsewhere too."""
        model, flow = self.model, self.model.dataflow
        own = {w for w in flow.writes.get(key, ()) if w.statement is statement}
        if any(flow.inside(w.statement, loop) and w not in own for w in flow.writes.get(key, ())):
            return True
        if isinstance(loop, cst.For) and key in {dotted_name(t) for t in _targets(loop.target)}:
            return True
        device_key = dotted_name(device) if device is not None else None
        if device_key is not None and flow.assigned_in(device_key, loop):
            return True
        for other in model.calls:
            func = other.func
            if (
                other is not call
                and isinstance(func, cst.Attribute)
                and func.attr.value in _RELOCATIONS
                and dotted_name(func.value) == key
                and model.is_inside(other, loop)
                and model.code(other) != model.code(call)
            ):
                return True
        return False

    def _earlier_move(self, call: cst.Call, key: str, loop) -> Optional[cst.CSTNode]:
        """An identical move of the same module that always runs before the loop, with no other move between."""
        model, flow = self.model, self.model.dataflow
        for other in model.calls:
            if other is call or not isinstance(other.func, cst.Attribute) or other.func.attr.value != call.func.attr.value:
                continue
            if [model.code(a.value) for a in other.args] != [model.code(a.value) for a in call.args]:
                continue
            statement = model.enclosing_statement(other)
            if not flow.dominates(statement, loop):
                continue
            parent = model.parent.get(other)
            same_receiver = dotted_name(other.func.value) == key
            binds_receiver = isinstance(parent, cst.Assign) and any(dotted_name(t.target) == key for t in parent.targets)
            if not (same_receiver or binds_receiver):
                continue
            # Not rebound between that move and the loop.
            writes = [w for w in flow.writes.get(key, ()) if flow.before(statement, w.statement) and flow.before(w.statement, loop)]
            if writes:
                continue
            # Not moved elsewhere between that move and the loop (`model.cpu(); torch.save(...)`).
            if any(
                isinstance(c.func, cst.Attribute) and c.func.attr.value in _RELOCATIONS and dotted_name(c.func.value) == key
                for c in flow.calls_between(statement, loop, model.scope_of(loop))
            ):
                continue
            return statement
        return None

    def _fix(self, call, statement, target, key, loop, earlier):
        model = self.model
        line = model.parent.get(statement)
        if target is not None and target != key:
            return None  # `net = model.to(device)`: leave the binding alone
        if earlier is not None:
            return self.fix("Remove the repeated move", [delete_statement(model, line)], Applicability.SAFE)
        code = statement_code(model, line)
        if code is None or model.parent.get(line) is not loop.body:
            return None
        return self.fix(
            "Move the module once, before the loop",
            [delete_statement(model, line), insert_statement_before(model, loop, code)],
            Applicability.UNSAFE,
        )


def _targets(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [t for e in target.elements for t in _targets(e.value)]
    return [target]
