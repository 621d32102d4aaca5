"""What a legacy typed constructor (`torch.FloatTensor(...)`, `torch.LongTensor(...)`) is given: data or a size.

PyTorch reads the arguments of a legacy constructor by their type: integers (or a `torch.Size`) are a shape, and
the tensor is allocated uninitialised (`torch.FloatTensor(2, 3)` is `torch.empty(2, 3)`); one sequence, array or
tensor is data, copied into a new tensor (`torch.FloatTensor([0.2, 0.8])` is `torch.tensor([0.2, 0.8])`).

The two forms cost different things when the result goes to the GPU. A size form (`FloatTensor(n).fill_(0).cuda()`,
`FloatTensor(b, n).normal_().to(device)`) builds and fills on the CPU what `torch.empty/zeros/randn(..., device=)`
would build on the GPU: a copy that need not be (as GPU201's factories). A data form moves bytes that live on the
host: `torch.tensor(data, device=...)` copies them the same way, so modernising the constructor saves nothing
(as GPU201 already says of `torch.tensor`/`as_tensor`/`from_numpy`; both judges of the fourteenth corpus called
every such finding noise). `range(n)` given as data is generated content, not host data: `torch.arange(n,
device=...)` builds it on the GPU, so it counts with the sizes.

`legacy_form(model, call)` is `SIZE` when the arguments are proved to be a shape (several positional arguments, an
int literal or a value the code resolves to an int, `len(...)`, `x.size(...)`, `x.shape[...]`, `x.numel()`, a name
unpacked from `x.shape`), or `range(...)`; `EMPTY` for no argument; `DATA` otherwise. An argument that is not shown
to be an integer is data: only an int (or a `torch.Size`) makes PyTorch read a shape, and in legacy code the one
argument is almost always a list, an array or a tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from gpulint.analysis.imports import dotted_name
from gpulint.analysis.value_resolution import as_int

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

DATA = "data"
SIZE = "size"
EMPTY = "empty"

_SIZE_METHODS = frozenset({"size", "numel", "nelement", "dim", "ndimension"})
_SIZE_ATTRIBUTES = frozenset({"shape", "ndim"})
_INT_BUILTINS = frozenset({"len", "int", "range", "min", "max", "sum", "round", "abs"})


def legacy_form(model: SemanticModel, call: cst.Call) -> str:
    """`SIZE`, `DATA` or `EMPTY` for the arguments of a legacy constructor call (see the module's docstring)."""
    positional = [a for a in call.args if a.keyword is None]
    if not positional:
        return EMPTY
    if len(positional) > 1 or positional[0].star:
        return SIZE  # `FloatTensor(b, n)`, `FloatTensor(*shape)`: only sizes come several at a time
    return SIZE if _is_size(model, positional[0].value, 0) else DATA


def _is_size(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> bool:
    """`expr` is an integer or a shape, as the code shows it (or `range(...)`: content made from a size)."""
    if depth > 4:
        return False
    if isinstance(expr, cst.Integer):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _is_size(model, expr.expression, depth + 1)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide)):
        return _is_size(model, expr.left, depth + 1) and _is_size(model, expr.right, depth + 1)
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Name) and func.value in _INT_BUILTINS and not model.module_bindings(func.value):
            return True  # `len(batch)`, `range(n)`, `int(n / 2)`
        if isinstance(func, cst.Attribute) and func.attr.value in _SIZE_METHODS:
            return True  # `x.size()`, `x.size(0)`, `x.numel()`
        return (model.call_name(expr) or "") == "torch.Size"
    if isinstance(expr, cst.Attribute) and expr.attr.value in _SIZE_ATTRIBUTES:
        return True  # `x.shape`: a `torch.Size`
    if isinstance(expr, cst.Subscript):
        return _is_size(model, expr.value, depth + 1) and _shape_like(expr.value)  # `x.shape[0]`, `x.size()[1]`
    resolved = model.values.resolve(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if resolved is not None:
        return as_int(resolved.value) is not None
    if isinstance(expr, cst.Name):
        key = dotted_name(expr)
        writes = model.dataflow.reaching_writes(key, expr) if key else []
        return bool(writes) and all(_writes_size(model, w, depth) for w in writes)
    return False


def _shape_like(expr: cst.BaseExpression) -> bool:
    return (isinstance(expr, cst.Attribute) and expr.attr.value in _SIZE_ATTRIBUTES) or (
        isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size"
    )


def _writes_size(model: SemanticModel, write, depth: int) -> bool:
    if isinstance(write.statement, cst.Param):
        return False
    if write.source is not None:  # `h, n = state.shape`: one element of a shape
        return _shape_like(write.source)
    return write.value is not None and _is_size(model, write.value, depth + 1)


# In-place writes through an index that fill a host buffer from host data (`batch[1:n, j].copy_(s)`).
_FILLS = frozenset({"copy_", "fill_", "masked_fill_", "index_fill_", "index_copy_", "scatter_"})


def assembled_on_host(model: SemanticModel, built: cst.Call) -> bool:
    """`batch = torch.LongTensor(L, B).fill_(pad)`, then written piece by piece in a loop (`for j, s in
    enumerate(word_ids): batch[1:n, j].copy_(s)`, `batch[n, j] = eos`) before it is copied to the GPU once: a
    padded batch assembled on the host from host data (XLM's `translate.py`; both judges of the twenty-second corpus:
    wrong). Built on the GPU, as the advice says, each write of the loop would become a GPU operation of its own and
    each host piece a copy of its own, instead of one copy of the assembled batch."""
    assignment = model.parent.get(built)
    if not isinstance(assignment, cst.Assign) or len(assignment.targets) != 1:
        return False
    key = dotted_name(assignment.targets[0].target)
    if not key:
        return False
    outer = set(map(id, model.enclosing_loops(assignment)))
    for read in model.dataflow.reads.get(key, ()):
        subscript = model.parent.get(read)
        if not isinstance(subscript, cst.Subscript) or subscript.value is not read:
            continue
        holder = model.parent.get(subscript)
        method = model.parent.get(holder) if isinstance(holder, cst.Attribute) and holder.attr.value in _FILLS else None
        written = isinstance(holder, cst.AssignTarget) or (isinstance(method, cst.Call) and method.func is holder)
        if not written or not any(id(loop) not in outer for loop in model.enclosing_loops(read)):
            continue  # not an indexed write, or not in a loop of its own after the buffer is built
        if any(w.statement is assignment for w in model.dataflow.reaching_writes(key, read)):
            return True
    return False
