"""Step functions kept in attributes: a method builds a closure, the constructor stores it, a loop calls it.

Trainer classes written for teaching and research build their step once and call it per batch:

    def __init__(self, ...):
        self.train_step_fn = self._make_train_step_fn()     # returns the nested `perform_train_step_fn`
    def _mini_batch(self, validation=False):
        step_fn = self.val_step_fn if validation else self.train_step_fn
        for x, y in loader:
            loss = step_fn(x.to(self.device), y.to(self.device))

The closure's body (`loss.backward(); optimizer.step(); return loss.item()`) is per-step code although no
loop is around it: the loop that calls it through the attribute (or a local name bound only to such
attributes) runs it once per iteration. A loop that calls a stored closure that trains is a training loop;
a stored closure runs in a step loop with the role of its own work (it trains: TRAIN; else EVAL, the
validation step the same loop calls with the other loader). Only closures a method returns by name and an
attribute assigned from that method's call (`self.x = self.make()`) count: a closure handed elsewhere, or a
name bound to anything else as well, is out of sight.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.hot_loops import trains

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_TRAIN, _EVAL = "training", "evaluation"  # residency.TRAIN / EVAL (not imported: residency imports this module)


def _stored(model: SemanticModel) -> dict[tuple[str, str], list[cst.FunctionDef]]:
    """(class, attribute) -> the closures `self.<attribute> = self.<method>()` stores in it."""
    memo = model.memo("stored_steps")
    if model.module not in memo:
        memo[model.module] = _find_stored(model)
    return memo[model.module]  # type: ignore[return-value]


def _find_stored(model: SemanticModel) -> dict[tuple[str, str], list[cst.FunctionDef]]:
    found: dict[tuple[str, str], list[cst.FunctionDef]] = {}
    for class_name, info in model.classes.items():
        builders = {name: closures for name, method in info.methods.items() if (closures := _returned_closures(method))}
        if not builders:
            continue
        other: set[str] = set()  # attributes also bound to something else: which function they hold is not known
        for method in info.methods.values():
            for statement in _statements(method):
                if not isinstance(statement, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                    continue
                targets = [t.target for t in statement.targets] if isinstance(statement, cst.Assign) else [statement.target]
                attributes = [a for t in targets for a in _assigned_attributes(t)]
                value = statement.value
                built = (
                    isinstance(statement, cst.Assign) and len(targets) == 1 and len(attributes) == 1
                    and isinstance(targets[0], cst.Attribute) and isinstance(value, cst.Call) and not value.args
                    and _self_attribute(value.func) in builders
                )  # fmt: skip
                if built:
                    found.setdefault((class_name, attributes[0]), []).extend(builders[_self_attribute(value.func)])
                else:
                    other.update(attributes)
        for attribute in other:
            found.pop((class_name, attribute), None)
    return found


def _assigned_attributes(target: cst.BaseExpression) -> list[str]:
    """The `self.<name>` attributes an assignment target writes (through tuples and lists)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [a for e in target.elements for a in _assigned_attributes(e.value)]
    name = _self_attribute(target)
    return [name] if name is not None else []


def _returned_closures(method: cst.FunctionDef) -> list[cst.FunctionDef]:
    """The functions defined in `method`'s own body that every `return` of it hands back by name."""
    if not isinstance(method.body, cst.IndentedBlock):
        return []
    nested = {s.name.value: s for s in method.body.body if isinstance(s, cst.FunctionDef)}
    returns = [s.body[0] for s in method.body.body if isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Return)]
    if not nested or not returns:
        return []
    names = [r.value.value if isinstance(r.value, cst.Name) else None for r in returns]
    if any(name not in nested for name in names):
        return []
    return [nested[name] for name in dict.fromkeys(names)]


def _statements(method: cst.FunctionDef) -> list[cst.BaseSmallStatement]:
    """The small statements of `method`'s own body and its blocks (not nested functions)."""
    found: list[cst.BaseSmallStatement] = []

    def walk(block: cst.CSTNode) -> None:
        for child in block.children:
            if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(child, cst.BaseSmallStatement):
                found.append(child)
            else:
                walk(child)

    walk(method.body)
    return found


def _self_attribute(node: cst.CSTNode) -> Optional[str]:
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def _class_of(model: SemanticModel, node: cst.CSTNode) -> Optional[str]:
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.ClassDef):
            return ancestor.name.value
    return None


def stored_closures(model: SemanticModel, call: cst.Call) -> list[cst.FunctionDef]:
    """The closures `call` runs: `self.train_step_fn(x, y)`, or `step_fn(x, y)` where every write of
    `step_fn` that reaches the call is such an attribute (`step_fn = self.val_step_fn` / `self.train_step_fn`)."""
    stored = _stored(model)
    if not stored:
        return []
    owner = _class_of(model, call)
    if owner is None:
        return []
    func = call.func
    if _self_attribute(func) is not None:
        return list(stored.get((owner, _self_attribute(func)), []))
    if not isinstance(func, cst.Name):
        return []
    writes = model.dataflow.reaching_writes(func.value, call)
    found: list[cst.FunctionDef] = []
    for write in writes:
        attribute = _self_attribute(write.value) if write.value is not None else None
        closures = stored.get((owner, attribute), []) if attribute is not None else []
        if not closures:
            return []  # bound to something else as well: which function runs is not known
        found.extend(closures)
    return found


def stored_step(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.FunctionDef, str, int]]:
    """(the stored closure around `node`, its role, the line of the call in a step loop that runs it) when
    `node` is in the body of a closure that a step loop of its class calls through an attribute."""
    closure = model.enclosing_function(node)
    if closure is None or not any(closure in closures for closures in _stored(model).values()):
        return None
    answers = model.memo("stored_step")  # the same answer for every node of the closure: asked once
    if closure not in answers:
        answers[closure] = None  # (also what a closure that reaches itself finds this way)
        answers[closure] = _calling_step_loop(model, closure)  # type: ignore[assignment]
    return answers[closure]  # type: ignore[return-value]


def _calling_step_loop(model: SemanticModel, closure: cst.FunctionDef) -> Optional[tuple[cst.FunctionDef, str, int]]:
    for call in model.calls:
        if closure not in stored_closures(model, call):
            continue
        _, role = model.residency.step_loop(call)
        if role in (_TRAIN, _EVAL):
            return closure, _TRAIN if trains(model, closure) else _EVAL, model.line_of(call)
    return None


def calls_training_closure(model: SemanticModel, call: cst.Call) -> bool:
    """`call` runs a stored closure that trains (a backward pass or an optimizer step)."""
    return any(trains(model, closure) for closure in stored_closures(model, call))


def local_step(model: SemanticModel, node: cst.CSTNode) -> Optional[tuple[cst.FunctionDef, str, int]]:
    """(the local closure around `node`, its role, the line of the call that runs it per step) when `node` is in
    the body of a function defined in another function's body and called by name from a step loop there:

        def main():
            def step(x):                   # <- per-step code, though no loop is around it
                loss = model(x).sum(); loss.backward(); optimizer.step()
                return loss.item()
            for x in loader:
                step(x.to(device))

    Only a name the enclosing function binds once, to this `def`, counts (a name rebound is out of sight)."""
    closure = model.enclosing_function(node)
    if closure is None:
        return None
    answers = model.memo("local_step")
    if closure not in answers:
        answers[closure] = None  # (also what a closure that calls itself finds this way)
        answers[closure] = _local_calling_loop(model, closure)  # type: ignore[assignment]
    return answers[closure]  # type: ignore[return-value]


def _local_calling_loop(model: SemanticModel, closure: cst.FunctionDef) -> Optional[tuple[cst.FunctionDef, str, int]]:
    outer = model.enclosing_function(closure)
    if outer is None or not isinstance(outer.body, cst.IndentedBlock) or closure not in outer.body.body:
        return None
    name = closure.name.value
    if sum(1 for s in outer.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name) != 1:
        return None
    for call in model.calls_inside(outer):
        if not (isinstance(call.func, cst.Name) and call.func.value == name) or model.enclosing_function(call) is not outer:
            continue
        if model.dataflow.reaching_writes(name, call):
            return None  # an assignment binds the name as well (a `def` is no write there)
        _, role = model.residency.step_loop(call)
        if role in (_TRAIN, _EVAL):
            return closure, _TRAIN if trains(model, closure) else _EVAL, model.line_of(call)
    return None
