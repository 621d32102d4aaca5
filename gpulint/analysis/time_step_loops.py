"""Launch-bound steps: a Python loop runs the model one time step at a time inside every training step.

A recurrent model written with cells (`nn.GRUCell`, `nn.LSTMCell`, `nn.RNNCell`) runs one time step per call: an
autoregressive decoder (Tacotron's frame-by-frame decoder) or a sample-level vocoder trained step by step loops in
Python over hundreds of time steps, each a handful of small kernels:

    for step in range(num_steps):
        hidden = model.init_hidden()
        for i in range(seq_len):                                  # 960 time steps of tiny kernels
            out, hidden = model(x[:, i:i + 1], hidden)            # the state carried from call to call
            loss += F.cross_entropy(out, y[:, i])
        running += loss.item()                                    # the GPU trails the host by microseconds
        loss.backward(); opt.step()

The host issues launches as fast as it can and the GPU runs each as soon as it arrives: a read finds almost
nothing queued, and autocast, TF32 or a fused optimizer speed up kernels whose time is not what the step waits
for. Two sides of one fact:

- module side (`time_step_loop`): the step's iteration runs, unguarded, an inner loop that calls a module with a
  state it carries from call to call (`out, hidden = model(x, hidden)`, `h = cell(x[t], h)`). A loop over layers
  (`for layer in model.layers: x = layer(x)`) calls a different module each time and is no recurrence: a
  transformer's blocks stay full-size kernels.
- project side (`ProjectIndex.steps_cells`, `Callee.steps_cells`): a model class whose `forward` calls, inside a
  loop, a recurrent cell it owns or a project module that owns one (Tacotron's `for t in range(0, steps, r):
  self.decoder(...)`, the decoder built of GRU and LSTM cells). `nn.GRU`/`nn.LSTM` over a whole sequence is one
  cuDNN kernel per layer and does not count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel

RECURRENT_CELLS = frozenset({"torch.nn.GRUCell", "torch.nn.LSTMCell", "torch.nn.RNNCell"})
_STEPS = frozenset({"backward", "step"})  # what a loop of training steps runs, not a loop of time steps


def _over_a_range(model: SemanticModel, loop: cst.For) -> bool:
    """`for t in range(steps):`, `for i, t in enumerate(range(0, steps, r)):`: time steps, not batches."""
    iterated = loop.iter
    while isinstance(iterated, cst.Call) and iterated.args and _builtin(model, iterated) in ("enumerate", "reversed"):
        iterated = iterated.args[0].value
    return isinstance(iterated, cst.Call) and _builtin(model, iterated) == "range"


def _builtin(model: SemanticModel, call: cst.Call) -> str | None:
    """`range(...)` as written, unless an import shadows the name."""
    if isinstance(call.func, cst.Name) and model.imports.resolve(call.func.value) is None:
        return call.func.value
    return None


def time_step_loop(model: SemanticModel, loop: Loop) -> bool:
    """Every iteration of the step loop `loop` runs a time-step loop of a recurrent module (see the module doc)."""
    memo = model.memo("launch-bound")  # asked once per finding: answered once per loop
    if loop not in memo:
        memo[loop] = isinstance(loop, (cst.For, cst.While)) and any(
            _recurrent_call(model, call, loop) for call in model.calls_inside(loop)
        )
    return memo[loop]


def _recurrent_call(model: SemanticModel, call: cst.Call, loop: Loop) -> bool:
    """`call` runs a module once per time step inside `loop`'s iteration: in an inner loop, with a carried state."""
    enclosing = model.enclosing_loops(call)
    if loop not in enclosing or enclosing[0] is loop or model.residency.rate_limit_guard(call, loop) is not None:
        return False  # not in an inner loop of the step, or on some steps only (`if step % 100 == 0: sample()`)
    inner = enclosing[0]
    if not isinstance(inner, (cst.For, cst.While)) or not model.residency.is_module(call.func):
        return False
    if isinstance(inner, cst.For) and not _over_a_range(model, inner):
        return False  # `for x, y in loader:` is a loop of batches (truncated BPTT carries its state across them)
    if any(isinstance(c.func, cst.Attribute) and c.func.attr.value in _STEPS for c in model.calls_inside(inner)):
        return False  # the inner loop trains (a backward or an optimizer step in it): it is the step loop itself
    if isinstance(inner, cst.For) and _names(inner.target) & _names(call.func):
        return False  # `for layer in model.layers: x = layer(x)`, `model.blocks[i](x)`: a different module each time
    statement = next(iter(model.ancestors(call)), None)
    if not isinstance(statement, cst.Assign) or statement.value is not call:
        return False
    assigned = set().union(*(_names(t.target) for t in statement.targets))
    passed = set().union(*(_bare_names(a.value) for a in call.args)) if call.args else set()
    return bool(assigned & passed)  # `out, hidden = model(x, hidden)`: the state carried from call to call


def _bare_names(expr: cst.BaseExpression) -> set[str]:
    """The state as passed: a name (`hidden`) or a tuple of names (`(h, c)`)."""
    if isinstance(expr, cst.Name):
        return {expr.value}
    if isinstance(expr, (cst.Tuple, cst.List)):
        return {e.value.value for e in expr.elements if isinstance(e.value, cst.Name)}
    return set()


def _names(node: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class _Collect(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            attribute.value.visit(self)  # `model.layers`: the root, not the attribute's own name
            return False

    node.visit(_Collect())
    return found
