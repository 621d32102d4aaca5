"""Evaluation: loops that run a model after `model.eval()`, and whether autograd is switched off there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.gradients import needs_gradients
from gpulint.analysis.hot_loops import assigned_names, in_no_grad
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.legacy_torch import volatile_inputs
from gpulint.analysis.model_size import PARAMETER_FREE
from gpulint.analysis.model import any_reachable
from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel

# Contexts that decide about autograd themselves: `set_grad_enabled(is_training)` may well be False.
_GRAD_MODE_CALLS = frozenset(
    {"torch.set_grad_enabled", "torch.autograd.set_grad_enabled", "torch.enable_grad", "torch.autograd.grad_mode.set_grad_enabled"}
)


@dataclass
class EvalForward:
    eval_call: Optional[cst.Call]  # `model.eval()`; None where another module switches the model (`handed`)
    loop: Loop
    forward: cst.Call  # `model(x)` inside the loop, with autograd on, or the call of a helper that runs it
    through: Optional[cst.FunctionDef] = None  # the helper of this module the loop calls, which runs the model
    caller: Optional[cst.Call] = None  # for an evaluation outside any loop: the call in a loop of its function
    # for a loop in a helper of this module called after the `.eval()` (`self._run_one_epoch(epoch, cross_valid=True)`):
    # that call
    called: Optional[cst.Call] = None
    # for a model a module-level function of this module is handed in eval mode by other modules (`evaluate(model,
    # ...)` in `main.py` after `model.eval()`): the parameter, and those calls (`analysis/evaluated_params.py`)
    param: Optional[cst.Param] = None
    handed: tuple = ()


def grad_mode_decided(model: SemanticModel, node: cst.CSTNode) -> bool:
    """Under `no_grad`/`inference_mode`/`set_grad_enabled` (context or decorator), or in a function whose callers
    in this module call it so, or a module-level function every call of which in the project is made so
    (`analysis/grad_callers.py`: MelGAN's `validate`, called under `torch.no_grad()` from another module)."""
    if _decided_here(model, node):
        return True
    function = model.enclosing_function(node)
    if function is None:
        return False
    # Each function once, through its callers' functions: following callers path by path is exponential.
    return any_reachable(
        model.memo("grad mode decided by a caller"),
        function,
        lambda f: _decided_by_project(model, f) or any(_decided_here(model, c) for c in _callers(model, f)),
        lambda f: [g for c in _callers(model, f) if (g := model.enclosing_function(c)) is not None],
    )


def _decided_by_project(model: SemanticModel, function: cst.FunctionDef) -> bool:
    """A module-level function that every caller in the project runs with autograd decided."""
    if function.name.value not in model.project.grad_decided:
        return False
    return not any(isinstance(a, (cst.ClassDef, cst.FunctionDef)) for a in model.ancestors(function))  # not a method


def _callers(model: SemanticModel, function: cst.FunctionDef) -> list[cst.Call]:
    calls = [*model.calls_of(function.name.value), *model.method_calls(function.name.value)]
    return [c for c in calls if not model.is_inside(c, function)]


def _decided_here(model: SemanticModel, node: cst.CSTNode) -> bool:
    if in_no_grad(model, node):
        return True
    for ancestor in model.ancestors(node):
        items = ancestor.items if isinstance(ancestor, cst.With) else ()
        decorators = ancestor.decorators if isinstance(ancestor, cst.FunctionDef) else ()
        for expr in [i.item for i in items] + [d.decorator for d in decorators]:
            target = expr.func if isinstance(expr, cst.Call) else expr
            if model.qualified_name(target) in _GRAD_MODE_CALLS:
                return True
            # Project helpers that pick one of them (`@smart_inference_mode()` in YOLOv5): trust the name.
            name = model.code(target).rsplit(".", 1)[-1]
            if "no_grad" in name or "inference_mode" in name:
                return True
    scope = model.scope_of(node)
    # `torch.set_grad_enabled(False)` as a statement earlier in the function switches autograd off for what follows.
    return any(_switches_grad_off(model, c) and model.scope_of(c) is scope and model.dataflow.before(c, node) for c in model.calls_inside(scope))


def _switches_grad_off(model: SemanticModel, call: cst.Call) -> bool:
    """`torch.set_grad_enabled(<anything but True>)` as a statement of its own."""
    if model.call_name(call) not in _GRAD_MODE_CALLS or not isinstance(model.parent.get(call), cst.Expr):
        return False
    if not call.args or model.call_name(call) == "torch.enable_grad":
        return False
    ok, value = literal_value(call.args[0].value)
    return not (ok and value is True)


def _outermost_loops(model: SemanticModel, statement: cst.CSTNode) -> list[Loop]:
    loops = []
    for loop in model.loops_inside(statement):
        if loop is statement:
            loops.append(loop)
            continue
        if not model.is_inside(loop, statement):
            continue
        between = []
        for ancestor in model.ancestors(loop):
            if ancestor is statement:
                break
            between.append(ancestor)
        if not any(isinstance(a, (cst.For, cst.While, cst.FunctionDef, cst.ClassDef, cst.Lambda)) for a in between):
            loops.append(loop)
    return loops


def runs_the_model(model: SemanticModel, call: cst.Call, receiver: str) -> bool:
    """`call` runs the model `receiver` names: `model(x)`, `model.forward(x)`, or one of its other forward passes by
    the `forward_` convention (`self.network.forward_masks(data)` in TabNet's `explain`, timm's `forward_features`)."""
    func = model.code(call.func)
    return func in (receiver, f"{receiver}.forward") or func.startswith(f"{receiver}.forward_") and func.count(".") == receiver.count(".") + 1


def _calls_method(model: SemanticModel, node: cst.CSTNode, receiver: str, method: str) -> bool:
    return any(
        isinstance(c.func, cst.Attribute) and c.func.attr.value == method and model.code(c.func.value) == receiver
        for c in model.calls_inside(node)
    )


def find_eval_forwards(model: SemanticModel) -> list[EvalForward]:
    """Forward passes of a model in a loop that follows its `.eval()` in the same block, with autograd on: run
    there or by a function of this module the loop calls (`_helper_forwards`); the block may be the body of a
    loop that ends in eval mode, when the evaluation loop follows that loop (`_following`). Also a forward that
    follows the `.eval()` in a function whose calls run in a loop, after the function's own training step
    (`_per_call_forwards`)."""
    found: list[EvalForward] = []
    seen_loops: set[int] = set()
    for eval_call in model.method_calls("eval"):
        receiver = eval_call.func.value
        if eval_call.args or not isinstance(receiver, (cst.Name, cst.Attribute)):
            continue
        receiver_code = model.code(receiver)
        statement = model.enclosing_statement(eval_call)
        block = model.parent.get(statement)
        if not isinstance(block, (cst.IndentedBlock, cst.Module)):
            continue
        for following in _following(model, statement, receiver_code):
            for loop in _outermost_loops(model, following):
                if id(loop) in seen_loops or needs_gradients(model, loop):
                    continue
                forwards = [c for c in model.calls_inside(loop) if runs_the_model(model, c, receiver_code)]
                forwards = [c for c in forwards if model.enclosing_function(c) is model.enclosing_function(loop)]
                unguarded = [c for c in forwards if not grad_mode_decided(model, c)]
                through = None
                if not unguarded:
                    helped = _helper_forwards(model, loop, receiver, eval_call)
                    if helped is None and _repeats(model, eval_call):
                        helped = _method_helper_forwards(model, loop, receiver_code, eval_call)
                    if helped is not None:
                        unguarded, through = [helped[0]], helped[1]
                if unguarded and _records_a_head_only(model, receiver, eval_call, loop):
                    continue  # a frozen backbone: autograd records only the few ops of the trainable head
                if unguarded and volatile_inputs(model, loop):
                    continue  # PyTorch 0.3 code: `Variable(x, volatile=True)` is its no-grad
                if unguarded:
                    seen_loops.add(id(loop))
                    found.append(EvalForward(eval_call, loop, unguarded[0], through))
        found.extend(_per_call_forwards(model, eval_call, statement, receiver_code))
        following = _following(model, statement, receiver_code) if _repeats(model, eval_call) else []
        for forward in _called_loop_forwards(model, eval_call, following, receiver_code):
            if id(forward.loop) not in seen_loops and not _records_a_head_only(model, receiver, eval_call, forward.loop):
                seen_loops.add(id(forward.loop))
                found.append(forward)
    found.extend(f for f in _handed_forwards(model) if id(f.loop) not in seen_loops)
    return found


# Methods of a module that do not run its forward pass (`model.parameters()`, `model.to(device)`).
_MODULE_HOUSEKEEPING = frozenset({
    "eval", "train", "parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules",
    "children", "named_children", "state_dict", "load_state_dict", "to", "cuda", "cpu", "half", "float", "double",
    "bfloat16", "zero_grad", "apply", "requires_grad_", "register_buffer", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "get_parameter", "get_submodule", "type", "share_memory",
})  # fmt: skip


def _handed_forwards(model: SemanticModel) -> list[EvalForward]:
    """Loops of a module-level function of this module that run a model parameter, which calls in other modules hand
    in eval mode with autograd on (`model.eval(); t_test = evaluate(model, dataset, args)` in `main.py`, `for u in
    users: predictions = -model.predict(...)` in `utils.evaluate`): `model(x)`, `model.forward...(x)`, or another
    method of it (`model.predict(...)`, not `model.parameters()`), not under `no_grad` here, in a loop that needs no
    gradients."""
    found: list[EvalForward] = []
    for key, calls in sorted(model.project.evaluated.items()):
        name, _, param_name = key.partition(".")
        functions = model.functions.get(name, [])
        if len(functions) != 1 or model.parent.get(functions[0]) is not model.module:
            continue
        function = functions[0]
        binders = model.bindings.get((id(function), param_name)) or []
        param = binders[0] if len(binders) == 1 and isinstance(binders[0], cst.Param) else None
        if param is None:
            continue  # rebound in the function: not (only) the model handed in
        for loop in model.loops_inside(function.body):
            if model.enclosing_function(loop) is not function or any(model.is_inside(loop, o) for o in model.enclosing_loops(loop)):
                continue  # its outermost loops only
            if needs_gradients(model, loop) or volatile_inputs(model, loop):
                continue
            runs = [
                c for c in model.calls_inside(loop)
                if model.enclosing_function(c) is function and _runs_param(model, c, param_name) and not grad_mode_decided(model, c)
            ]  # fmt: skip
            if runs:
                found.append(EvalForward(None, loop, runs[0], param=param, handed=tuple(tuple(c) for c in calls)))
    return found


def _runs_param(model: SemanticModel, call: cst.Call, name: str) -> bool:
    """`model(x)`, `model.forward(x)`, `model.forward_features(x)` or another method of the module `model.predict(...)`."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value == name
    return (
        isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name
        and func.attr.value not in _MODULE_HOUSEKEEPING
    )  # fmt: skip


def _following(model: SemanticModel, statement: cst.CSTNode, receiver: str) -> list[cst.CSTNode]:
    """The statements that run after `statement` (a `.eval()`) with the model still in eval mode: the rest of its
    block up to a `.train()` of it; when that block is a loop's body and nothing there switches back, the loop
    ends in eval mode, so the statements after the loop too (`for epoch ...: train; model.eval()` then a test
    loop after the epochs), and so on outwards while the block is a loop's body."""
    found: list[cst.CSTNode] = []
    while True:
        block = model.parent.get(statement)
        if not isinstance(block, (cst.IndentedBlock, cst.Module)):
            return found
        body = list(block.body)
        for following in body[body.index(statement) + 1 :]:
            if _calls_method(model, following, receiver, "train"):
                return found  # back in training mode from here on
            found.append(following)
        loop = model.parent.get(block)
        if not isinstance(loop, (cst.For, cst.While)) or loop.body is not block or loop.orelse is not None:
            return found
        statement = loop


def _helper_forwards(
    model: SemanticModel, loop: Loop, receiver: cst.BaseExpression, at: cst.CSTNode
) -> Optional[tuple[cst.Call, cst.FunctionDef]]:
    """(the call in `loop`, the function) when `loop` calls, by name, a function of this module that runs the
    evaluated model itself with autograd on (`my_loss = calc_sent_loss(sent)`, whose body runs `model(x)`): the
    model is a module-level name that neither the helper nor the `.eval()`'s function binds as its own."""
    if not isinstance(receiver, cst.Name):
        return None
    name = receiver.value
    if model.bindings.get((id(model.scope_of(at)), name)) and model.scope_of(at) is not model.module:
        return None  # a local (a parameter) of the evaluating function: not the module's model
    if not model.module_bindings(name):
        return None
    for call in model.calls_inside(loop):
        func = call.func
        if not isinstance(func, cst.Name) or model.enclosing_function(call) is not model.enclosing_function(loop):
            continue
        helpers = model.functions.get(func.value, [])
        if len(helpers) != 1 or model.parent.get(helpers[0]) is not model.module or model.bindings_of(func.value, call) not in ([], helpers):
            continue  # two `def`s of the name, a method or a nested function, or a local shadowing it: not followed
        helper = helpers[0]
        if model.bindings.get((id(helper), name)):
            continue  # the helper has its own `model` (a parameter): whichever model the caller passes
        if grad_mode_decided(model, call):
            continue
        runs = [c for c in model.calls_inside(helper) if isinstance(c.func, cst.Name) and c.func.value == name]
        if any(model.enclosing_function(c) is helper and not _decided_here(model, c) for c in runs):
            return call, helper
    return None


def _repeats(model: SemanticModel, eval_call: cst.Call) -> bool:
    """The `.eval()` runs again and again: in a loop (an epoch loop's validation), or in a function or method that
    this module calls in a loop (`vali_loss = self.vali(vali_data, vali_loader, criterion)` once an epoch). A
    test pass a script runs once after training is not asked here."""
    if model.repeating_loops(eval_call):
        return True
    function = model.enclosing_function(eval_call)
    return function is not None and any(model.repeating_loops(c) for c in _callers(model, function))


def _same_class_method(model: SemanticModel, call: cst.Call, at: cst.CSTNode) -> Optional[cst.FunctionDef]:
    """The method `self.name(...)` runs, when `call` and `at` sit in methods of the same class of this module that
    defines `name` once."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
        return None
    owner = model.dataflow.enclosing_class(at)
    if owner is None or model.dataflow.enclosing_class(call) is not owner:
        return None
    info = model.classes.get(owner.name.value)
    method = info.methods.get(func.attr.value) if info is not None and info.node is owner else None
    if method is None or sum(1 for f in owner.body.body if isinstance(f, cst.FunctionDef) and f.name.value == func.attr.value) != 1:
        return None
    return method


def _unguarded_runs(model: SemanticModel, node: cst.CSTNode, function: cst.FunctionDef, receiver: str) -> list[cst.Call]:
    """The forwards of `receiver` (`self.model(...)`, `self.model.forward(...)`) in `node`, in `function` itself,
    with autograd left on there."""
    return [
        c for c in model.calls_inside(node)
        if runs_the_model(model, c, receiver) and model.enclosing_function(c) is function and not _decided_here(model, c)
    ]  # fmt: skip


def _method_helper_forwards(
    model: SemanticModel, loop: Loop, receiver: str, at: cst.CSTNode
) -> Optional[tuple[cst.Call, cst.FunctionDef]]:
    """(the call in `loop`, the method) when the evaluated model is an attribute of `self` (`self.model.eval()`) and
    `loop` calls a method of the same class that runs it with autograd on (Informer's `vali`: `pred, true =
    self._process_one_batch(...)`, whose body runs `self.model(batch_x, ...)`), and trains nothing."""
    if not receiver.startswith("self.") or model.enclosing_function(at) is None:
        return None
    for call in model.calls_inside(loop):
        if model.enclosing_function(call) is not model.enclosing_function(loop) or grad_mode_decided(model, call):
            continue
        helper = _same_class_method(model, call, at)
        if helper is None or needs_gradients(model, helper.body):
            continue
        if _unguarded_runs(model, helper.body, helper, receiver):
            return call, helper
    return None


def _called_loop_forwards(model: SemanticModel, eval_call: cst.Call, following: list[cst.CSTNode], receiver: str) -> list[EvalForward]:
    """Loops of a helper of this module called after the `.eval()` (not in a loop of the evaluating block), which run
    the evaluated model with autograd on: a function or a method of the same class (`self.model.eval()`, then
    `val_loss = self._run_one_epoch(epoch, cross_valid=True)`). A loop that trains counts only when each step
    that needs gradients sits under an `if` that the call's literal arguments switch off (`if not cross_valid:
    loss.backward(); optimizer.step()`): the training epoch reused for the validation pass."""
    found: list[EvalForward] = []
    depth = len(model.enclosing_loops(eval_call))
    for statement in following:
        for call in model.calls_inside(statement):
            if len(model.enclosing_loops(call)) != depth or model.enclosing_function(call) is not model.enclosing_function(eval_call):
                continue  # in a loop after the `.eval()`: `find_eval_forwards` answers for it
            helper = _called_helper(model, call, eval_call, receiver)
            if helper is None or grad_mode_decided(model, call):
                continue
            values = _literal_arguments(call, helper)
            for loop in model.loops_inside(helper.body):
                if model.enclosing_loops(loop) or model.enclosing_function(loop) is not helper:
                    continue  # its outermost loops only
                runs = _unguarded_runs(model, loop, helper, receiver)
                if runs and not _needs_gradients_given(model, loop.body, values) and not volatile_inputs(model, loop):
                    found.append(EvalForward(eval_call, loop, runs[0], called=call))
    return found


def _called_helper(model: SemanticModel, call: cst.Call, at: cst.CSTNode, receiver: str) -> Optional[cst.FunctionDef]:
    """The function `call` runs, when it sees the evaluated model under the same name: a method of the same class for
    `self.<attr>`, a module-level function of this module that does not bind the module-level model's name."""
    if receiver.startswith("self."):
        return _same_class_method(model, call, at)
    if "." in receiver or not isinstance(call.func, cst.Name) or not model.module_bindings(receiver):
        return None
    if model.bindings.get((id(model.scope_of(at)), receiver)) and model.scope_of(at) is not model.module:
        return None  # a local (a parameter) of the evaluating function: not the module's model
    helpers = model.functions.get(call.func.value, [])
    if len(helpers) != 1 or model.parent.get(helpers[0]) is not model.module or model.bindings.get((id(helpers[0]), receiver)):
        return None
    return helpers[0]


def _literal_arguments(call: cst.Call, function: cst.FunctionDef) -> dict[str, object]:
    """The parameters of `function` that `call` fills with a literal (`cross_valid=True`), or leaves to a literal
    default."""
    params = [*function.params.posonly_params, *function.params.params]
    if params and params[0].name.value in ("self", "cls") and isinstance(call.func, cst.Attribute):
        params = params[1:]
    values: dict[str, object] = {}
    for param in [*params, *function.params.kwonly_params]:
        if param.default is not None:
            ok, value = literal_value(param.default)
            if ok:
                values[param.name.value] = value
    for arg, param in zip([a for a in call.args if a.keyword is None], params):
        if arg.star:
            return {}
        ok, value = literal_value(arg.value)
        if ok:
            values[param.name.value] = value
        else:
            values.pop(param.name.value, None)
    for arg in call.args:
        if arg.keyword is not None:
            ok, value = literal_value(arg.value)
            if ok:
                values[arg.keyword.value] = value
            else:
                values.pop(arg.keyword.value, None)
        elif arg.star == "**":
            return {}
    return values


def _decided_test(test: cst.BaseExpression, values: dict[str, object]) -> Optional[bool]:
    """The truth of an `if` test over parameters given literals (`cross_valid`, `not cross_valid`, `a and not b`);
    None when the literals do not decide it."""
    if isinstance(test, cst.Name):
        return bool(values[test.value]) if test.value in values else None
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _decided_test(test.expression, values)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = _decided_test(test.left, values), _decided_test(test.right, values)
        if isinstance(test.operator, cst.And):
            return False if False in (left, right) else True if left and right else None
        return True if True in (left, right) else False if left is False and right is False else None
    return None


def _needs_gradients_given(model: SemanticModel, block: cst.BaseSuite, values: dict[str, object]) -> bool:
    """A statement of `block` that runs autograd (`needs_gradients`), skipping the branches of `if`s whose tests the
    literal arguments decide against."""
    statements = list(block.body) if isinstance(block, cst.IndentedBlock) else [block]
    return any(_statement_needs(model, statement, values) for statement in statements)


def _statement_needs(model: SemanticModel, statement: cst.CSTNode, values: dict[str, object]) -> bool:
    if isinstance(statement, cst.If):
        decided = _decided_test(statement.test, values)
        if decided is not False and _needs_gradients_given(model, statement.body, values):
            return True
        orelse = statement.orelse
        if decided is True or orelse is None:
            return False
        return _statement_needs(model, orelse, values) if isinstance(orelse, cst.If) else _needs_gradients_given(model, orelse.body, values)
    if isinstance(statement, (cst.For, cst.While, cst.With, cst.Try)):
        return needs_gradients(model, statement) and any(_needs_gradients_given(model, b, values) for b in _blocks(statement))
    return needs_gradients(model, statement)


def _blocks(statement: cst.CSTNode) -> list[cst.BaseSuite]:
    found = [statement.body]
    if isinstance(statement, cst.Try):
        found += [h.body for h in statement.handlers]
        found += [b.body for b in (statement.orelse, statement.finalbody) if b is not None]
    elif isinstance(statement, (cst.For, cst.While)) and statement.orelse is not None:
        found.append(statement.orelse.body)
    return found


def _per_call_forwards(model: SemanticModel, eval_call: cst.Call, statement: cst.CSTNode, receiver: str) -> list[EvalForward]:
    """A function that trains a step and then evaluates, outside any loop of its own (`def train(epoch): ...;
    loss.backward(); optimizer.step(); model.eval(); output = model(val_x)`), called in a loop: the validation
    forward records a graph on every call. The function must run autograd before the `.eval()` (its own
    training step: the evaluated output is not handed back to a caller's backward) and none after it."""
    function = model.enclosing_function(eval_call)
    if function is None or model.parent.get(function) is not model.module or model.enclosing_loops(eval_call):
        return []
    if model.functions.get(function.name.value) != [function] or not isinstance(function.body, cst.IndentedBlock):
        return []
    top = next((a for a in (statement, *model.ancestors(statement)) if model.parent.get(a) is function.body), None)
    if top is None:
        return []
    body = list(function.body.body)
    position = body.index(top)
    # (`if not args.fastmode: model.eval(); output = model(val_x)`: the `.eval()` may sit in an `if`)
    before, after = body[:position], _following(model, statement, receiver)
    if top is not statement:
        after += body[position + 1 :]
    if not any(needs_gradients(model, s) for s in before) or any(_backpropagates(model, s) for s in after):
        return []  # (a `scheduler.step()` after the evaluation is no autograd)
    callers = [c for c in _callers(model, function) if isinstance(c.func, cst.Name) and model.repeating_loops(c)]
    if not callers:
        return []
    for following in after:
        for call in model.calls_inside(following):
            if model.code(call.func) not in (receiver, f"{receiver}.forward") or model.enclosing_function(call) is not function:
                continue
            if model.enclosing_loops(call) or grad_mode_decided(model, call):
                continue  # in a loop: `find_eval_forwards` answers for it
            return [EvalForward(eval_call, model.repeating_loops(callers[0])[0], call, caller=callers[0])]
    return []


def _backpropagates(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`node` differentiates something: `.backward()` or `torch.autograd.grad/backward`, here or in a function of
    this module it calls."""

    def here(at: cst.CSTNode) -> bool:
        return any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value == "backward" or model.call_name(c) in _DIFFERENTIATING
            for c in model.calls_inside(at)
        )

    return model.through_calls("backpropagates", node, here)


_DIFFERENTIATING = frozenset({"torch.autograd.grad", "torch.autograd.backward"})


def _records_a_head_only(model: SemanticModel, receiver: cst.BaseExpression, at: cst.CSTNode, loop: Loop) -> bool:
    """The evaluated model (or, for a parameter, the model every caller in this module passes) had all of its
    parameters frozen (`for p in model_vgg.parameters(): p.requires_grad = False`, `model.requires_grad_(False)`)
    and nothing unfreezes them: what requires grad is a head assigned afterwards (`model_vgg.classifier[6] =
    nn.Linear(4096, 2)`), and only the ops after it record a graph. Freezing a part (`model.features`) or a PEFT
    model (adapters in every layer) does not count."""
    key = dotted_name(receiver)
    if key is None:
        return False
    freezes = _wholly_frozen(model)
    wholly = frozenset(freezes)
    if _part_of(key, wholly):
        return all(_frozen_before(model, freezes[name], loop) for name in wholly if _part_of(key, frozenset({name})))
    function = model.enclosing_function(at)
    if function is None or "." in key:
        return False
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    if params[:1] in (["self"], ["cls"]):
        return False  # a method: its callers pass the receiver, positions shift; not followed
    if key not in params:
        return False
    position = params.index(key)
    passed = []
    for call in _callers(model, function):
        arg = next((a for a in call.args if a.keyword is not None and a.keyword.value == key), None)
        positional = [a for a in call.args if a.keyword is None]
        if arg is None and any(a.star for a in positional[: position + 1]):
            return False
        if arg is None and position < len(positional):
            arg = positional[position]
        passed.append(dotted_name(arg.value) if arg is not None else None)
    return bool(passed) and all(_part_of(name, wholly) for name in passed)


def _freezes_each_item(model: SemanticModel, loop: cst.For) -> bool:
    """The loop body sets `<item>.requires_grad = False` on its loop item as a statement of its own, not under an
    `if` (`for name, v in model.named_parameters(): if "head" not in name: ...` freezes a part only)."""
    items = assigned_names(loop.target)
    body = loop.body
    # `for p in m.parameters(): p.requires_grad = False` on one line: a suite of small statements
    smalls = list(body.body) if isinstance(body, cst.SimpleStatementSuite) else [
        small for line in body.body if isinstance(line, cst.SimpleStatementLine) for small in line.body
    ]
    for small in smalls:
        if not isinstance(small, cst.Assign) or len(small.targets) != 1:
            continue
        target = small.targets[0].target
        if isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and isinstance(target.value, cst.Name):
            if target.value.value in items and literal_value(small.value) == (True, False):
                return True
    return False


def _part_of(key: Optional[str], models: frozenset[str]) -> bool:
    """`key` is one of `models` or a submodule of one (`model_vgg.classifier`)."""
    return key is not None and any(key == name or key.startswith(name + ".") for name in models)


def _frozen_before(model: SemanticModel, freezes: list[cst.CSTNode], loop: Loop) -> bool:
    """A freeze in the loop's own function must come before the loop on every path (not under an `if` or in a
    loop there); freezes elsewhere (module level, a helper the model passes through) are trusted as before."""
    scope = model.scope_of(loop)
    local = [f for f in freezes if model.scope_of(f) is scope]
    return not local or any(model.dataflow.before(f, loop) and not _conditional(model, f, scope) for f in local)


def _conditional(model: SemanticModel, node: cst.CSTNode, scope: cst.CSTNode) -> bool:
    for ancestor in model.ancestors(node):
        if ancestor is scope:
            return False
        if isinstance(ancestor, (cst.If, cst.For, cst.While, cst.Try, cst.IfExp, cst.BooleanOperation)):
            return True
    return False


def _wholly_frozen(model: SemanticModel) -> dict[str, list[cst.CSTNode]]:
    """Names whose every parameter the module freezes and never unfreezes (`model_size.frozen_roots`), by a
    loop over `<name>.parameters()` / `<name>.named_parameters()` or `<name>.requires_grad_(False)` on the name
    itself, each with the nodes that freeze it."""
    roots = model.model_size.frozen_roots
    found: dict[str, list[cst.CSTNode]] = {}
    for call in model.method_calls("requires_grad_"):
        key = dotted_name(call.func.value)  # type: ignore[attr-defined]
        if key in roots:
            found.setdefault(key, []).append(call)
    for loop in model.loops_inside(model.module):
        iterated = loop.iter if isinstance(loop, cst.For) else None
        if not (isinstance(iterated, cst.Call) and isinstance(iterated.func, cst.Attribute)):
            continue
        if iterated.func.attr.value not in ("parameters", "named_parameters") or iterated.args:
            continue  # `named_parameters(prefix=...)` / `parameters(recurse=False)` may cover a part only
        key = dotted_name(iterated.func.value)
        if key in roots and _freezes_each_item(model, loop):  # type: ignore[arg-type]
            found.setdefault(key, []).append(loop)
    # `model_lsm = nn.Sequential(model_resnet, nn.LogSoftmax(dim=1))`: a frozen model and parameter-free layers
    for call in model.calls:
        target = model.parent.get(call)
        if model.call_name(call) != "torch.nn.Sequential" or not isinstance(target, cst.Assign) or len(target.targets) != 1:
            continue
        parts = [a.value for a in call.args]
        if parts and all(_part_of(dotted_name(p), frozenset(found)) or _parameter_free(model, p) for p in parts):
            key = dotted_name(target.targets[0].target)
            others = [w for w in model.dataflow.writes.get(key or "", ()) if w.statement is not target]
            # later writes only move it (`model_lsm = model_lsm.to(device)`)
            if key is not None and all(w.value is not None and model.code(w.value).startswith(f"{key}.") for w in others):
                found.setdefault(key, []).append(target)
    return found


def _parameter_free(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    name = model.call_name(expr) if isinstance(expr, cst.Call) else None
    return name is not None and name.startswith("torch.nn.") and name.rsplit(".", 1)[-1] in PARAMETER_FREE
