"""Code written for PyTorch before 0.4, where `Variable(x, volatile=True)` was how inference switched autograd off.

PyTorch 0.4 renamed the copy flag `async=` to `non_blocking=` (Python 3.7 then made `async` a keyword) and made
`volatile` a no-op in favour of `torch.no_grad()`. A module that passes `async=` to a copy is written for the
PyTorch before that, so its volatile inputs record no graph; a module on 0.4 APIs that still writes
`volatile=True` runs with autograd on (a warning says so), and stays reported. A notebook keeps a record of its
run: when the cell that writes `volatile=True` ran and printed, and no output holds 0.4's warning that volatile
was removed, its kernel ran the PyTorch before 0.4 too (a `.py` file on 0.3 idioms alone, `loss.data[0]` and
`volatile=True`, may have run on 0.4, where both only warn: it stays reported).

Before 0.4 a tensor had no zero dimensions: a loss or an accuracy was a one-element tensor, and indexing a tensor
(not a `Variable`) with an integer returned a Python number, copied from the GPU (`THCudaTensor_get1d`). So
`objs.update(loss.data[0], n)` in such a module waits for the GPU like `loss.item()` does from 0.4 on. In 0.4 the
same index of a 0-dim tensor returned the tensor itself (with a warning; `applySelect` returns an alias), and from
0.5 on it raises: `x.data[0]` in a module not known to be older is a GPU index or an error, never a host read.
"""

from __future__ import annotations

import ast
import json
import os
import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_ERA = "on PyTorch before 0.4"  # ends the kind of a `number_read` sync: `loss.data[0]` on PyTorch before 0.4
_COPIES = frozenset({"cuda", "to", "cpu", "type"})
_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
# Names of values that hold one number: a loss, an accuracy or another per-batch metric (`loss`, `d_loss`, `errD`,
# `prec1`, `top5`, `train_acc`). A tensor of several numbers (`output.data[0]`: a row) is no host read.
_ONE_NUMBER = re.compile(
    r"(^|_)(?i:loss|err|error|acc|accuracy|prec|precision|top\d|correct|nll|ppl|perplexity|cost|kld?|mse|bce)(es|s)?(\d|[A-Z_]|$)"
)


def written_for_torch_before_0_4(model: SemanticModel) -> bool:
    """The module copies with `async=` (`x.cuda(async=True)`): PyTorch 0.3's spelling of `non_blocking`."""
    memo = model.memo("written for PyTorch before 0.4")
    if model.module not in memo:
        memo[model.module] = any(
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value in _COPIES
            and any(a.keyword is not None and a.keyword.value == "async" for a in call.args)
            for call in model.calls
        )
    return memo[model.module]


def volatile_inputs(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`node` wraps values in `Variable(..., volatile=True)`, and the module is written for PyTorch before 0.4 (or
    its notebook ran there): what is computed from them records no graph there."""
    if not any(_is_volatile(model, call) for call in model.calls_inside(node)):
        return False
    return written_for_torch_before_0_4(model) or ran_on_torch_before_0_4(model)


def _is_volatile(model: SemanticModel, call: cst.Call) -> bool:
    """`Variable(x, volatile=True)`."""
    return model.call_name(call) in _VARIABLE and any(
        a.keyword is not None and a.keyword.value == "volatile" and literal_value(a.value) == (True, True) for a in call.args
    )


# PyTorch 0.4's warning for `Variable(x, volatile=True)` ("volatile was removed and now has no effect. Use `with
# torch.no_grad():` instead."); later releases warn the same way
_VOLATILE_REMOVED = "volatile was removed"
_VOLATILE_SOURCE = re.compile(r"\bvolatile\s*=\s*True\b")


def ran_on_torch_before_0_4(model: SemanticModel) -> bool:
    """The notebook's saved outputs show that it ran on PyTorch before 0.4: a code cell that writes `volatile=True`
    ran and printed (no error in its outputs), and no output of the notebook holds 0.4's warning that volatile was
    removed. A `.py` file carries no record of its run: False."""
    memo = model.memo("notebook ran on PyTorch before 0.4")
    if model.module not in memo:
        memo[model.module] = model.is_notebook and _outputs_show_old_torch(model.path)
    return memo[model.module]


def _outputs_show_old_torch(path: str) -> bool:
    try:
        if os.path.getsize(path) > _MAX_NOTEBOOK_BYTES:
            return False
        with open(path, encoding="utf-8", errors="replace") as handle:
            cells = json.load(handle).get("cells")
    except (OSError, ValueError, AttributeError, RecursionError):
        return False
    if not isinstance(cells, list):
        return False
    ran = False
    for cell in cells:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        outputs = [o for o in cell.get("outputs") or [] if isinstance(o, dict)]
        if any(_VOLATILE_REMOVED in _output_text(o) for o in outputs):
            return False  # it ran on 0.4 or later, where volatile does nothing
        source = cell.get("source")
        source = "".join(source) if isinstance(source, list) else source
        if isinstance(source, str) and _VOLATILE_SOURCE.search(source) and outputs:
            if not any(o.get("output_type") == "error" for o in outputs):
                ran = True
    return ran


_MAX_NOTEBOOK_BYTES = 32 * 1024 * 1024


def _output_text(output: dict) -> str:
    """The text a stream output (or a result's `text/plain`) shows."""
    text = output.get("text")
    if text is None and isinstance(output.get("data"), dict):
        text = output["data"].get("text/plain")
    if isinstance(text, list):
        text = "".join(t for t in text if isinstance(t, str))
    return text if isinstance(text, str) else ""


def copies_with_async(tree: ast.Module) -> bool:
    """`written_for_torch_before_0_4` on CPython's tree of a module (the project index reads modules that way)."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _COPIES
        and any(keyword.arg == "async" for keyword in node.keywords)
        for node in ast.walk(tree)
    )


def holds_one_number(name: Optional[str]) -> bool:
    """`loss`, `self.d_loss`, `prec1`: the name of a value that is one number (a loss, a metric)."""
    return name is not None and _ONE_NUMBER.search(name.rsplit(".", 1)[-1]) is not None


def number_read(model: SemanticModel, subscript: cst.Subscript) -> Optional[cst.BaseExpression]:
    """The GPU value that `subscript` reads into a Python number: `loss.data[0]` (the tensor behind a `Variable`,
    indexed with an integer) of a loss or a metric, in a module written for PyTorch before 0.4."""
    if not written_for_torch_before_0_4(model):
        return None
    holder = subscript.value
    if not (isinstance(holder, cst.Attribute) and holder.attr.value == "data") or len(subscript.slice) != 1:
        return None
    index = subscript.slice[0].slice
    if not isinstance(index, cst.Index) or not _is_integer(index.value):
        return None
    parent = model.parent.get(subscript)
    if isinstance(parent, (cst.AssignTarget, cst.Del)) or (isinstance(parent, cst.AugAssign) and parent.target is subscript):
        return None  # `x.data[0] = v` writes into the tensor
    value = holder.value
    if not holds_one_number(model.code(value) if isinstance(value, (cst.Name, cst.Attribute)) else None):
        return None
    return value if model.residency.is_gpu(value) else None


def _is_integer(expr: cst.BaseExpression) -> bool:
    """`0`, `-1`: an integer literal."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        expr = expr.expression
    return isinstance(expr, cst.Integer)


def number_read_in(tree_node: ast.Subscript) -> Optional[ast.AST]:
    """`number_read` on CPython's tree, for the project index: the value whose `.data[<int>]` is read, when its
    name says it holds one number (the caller checks the era and where the value lives)."""
    holder, index = tree_node.value, tree_node.slice
    if not (isinstance(holder, ast.Attribute) and holder.attr == "data" and isinstance(tree_node.ctx, ast.Load)):
        return None
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        index = index.operand  # `[-1]`
    if not (isinstance(index, ast.Constant) and type(index.value) is int):
        return None
    value = holder.value
    name = ast.unparse(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
    return value if holds_one_number(name) else None


def number_read_kind(code: str) -> str:
    """How a `number_read` syncs, for messages: "`loss.data[0]` on PyTorch before 0.4"."""
    return f"`{code}` {_ERA}"


def number_read_help(kind: str) -> Optional[str]:
    """What a sync of `kind` is, when it is a `number_read`, and the same read from PyTorch 0.4 on: `X.item()`
    for the first (or last) element of a value that holds one number; None for any other sync."""
    if not kind.endswith(_ERA) or not kind.startswith("`"):
        return None
    code = kind[1 : -len(_ERA) - 2]
    receiver, _, index = code.rpartition(".data[")
    later = f"; from 0.4 on the same read is `{receiver}.item()`" if receiver and index in ("0]", "-1]") else ""
    era = "on PyTorch before 0.4, which this code is written for (it copies with `async=`)"
    return f"`{code}` returns a Python number copied from the GPU {era}{later}"
