"""GPU202 legacy-tensor-constructor: `torch.FloatTensor(...)`, `torch.cuda.FloatTensor(...)` and friends."""

from __future__ import annotations

import re
from typing import Iterator

import libcst as cst

from gpulint.analysis.host_arrays import is_host_array
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.factory_bytes import known_small
from gpulint.analysis.legacy_constructors import DATA, SIZE, assembled_on_host, legacy_form
from gpulint.analysis.residency import CPU, TRAIN
from gpulint.analysis.step_code import per_step
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Severity
from gpulint.edits import device_argument, module_alias, replace_node

DTYPES = {
    "Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
    "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
}  # fmt: skip
# `torch.Tensor(...)` is the same legacy constructor with the default dtype (float32 unless the program changes it)
_LEGACY = re.compile(r"^torch\.(cuda\.)?(" + "|".join(DTYPES) + r"|)Tensor$")
# In-place initialisers that return the tensor itself: `torch.FloatTensor(b, n).fill_(0).to(device)` still
# builds on the CPU and copies.
_IN_PLACE_INIT = frozenset({"fill_", "zero_", "normal_", "uniform_", "random_", "bernoulli_", "exponential_", "geometric_", "cauchy_", "log_normal_"})

_CONVERSIONS = frozenset({"long", "int", "float", "double", "half", "bool", "byte", "short", "char", "bfloat16"})


class LegacyTensorConstructor(Rule):
    code = "GPU202"
    name = "legacy-tensor-constructor"
    summary = "Legacy typed constructor (`torch.FloatTensor(...)`, `torch.cuda.FloatTensor(...)`)"
    fix_applicability = Applicability.SAFE
    requires = (r"Tensor\(",)

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        residency = model.residency
        for call in model.calls:
            match = _LEGACY.match(model.call_name(call) or "")
            if match is None:
                continue
            if not call.args and call is self._initialised(call):
                continue  # `torch.FloatTensor()`: an empty tensor, nothing to fill or copy (grown later by `torch.cat`)
            on_cuda = bool(match.group(1))
            if not match.group(2) and on_cuda:
                continue  # `torch.cuda.Tensor(...)`: its dtype is whatever default the program set
            dtype = DTYPES.get(match.group(2), "float32")
            built = self._initialised(call)  # the constructor, or its in-place initialisation
            if built is call and self._converts_host_array(call):
                continue  # NumPy data (a replay batch, an observation) crosses anyway: `torch.tensor(..., device=)` copies the same
            form = legacy_form(model, call)
            if built is call and not on_cuda and form == DATA:
                continue  # `torch.LongTensor(ids).cuda()`: host data, copied just the same by `torch.tensor(ids, device=)`
            if not on_cuda and form == SIZE and known_small(model, call):
                continue  # `torch.FloatTensor(BATCH_SIZE, 1).fill_(1).cuda()`: a few KB, as GPU201's small factories
            if not on_cuda and form == SIZE and assembled_on_host(model, built):
                continue  # a padded batch filled piece by piece from host data in a loop, then copied once
            reported: cst.Call = built
            device = None
            parent = model.parent.get(built)
            grand = model.parent.get(parent) if parent is not None else None
            if isinstance(parent, cst.Attribute) and isinstance(grand, cst.Call) and grand.func is parent:
                move = residency.move(grand)
                if move is not None and move[0] != CPU:
                    reported, device = grand, move
            if not on_cuda and device is None and not self._moved_later(built):
                continue  # CPU data that never reaches the GPU: not a GPU problem
            _, role = per_step(model, reported)
            if role is None:
                continue  # one-time set-up (a dev set converted before training, a buffer in `__init__`), as GPU201
            legacy = model.code(call.func)
            where = "the current CUDA device" if on_cuda else "the CPU, then copied to the GPU"
            message = f"`{legacy}(...)` is a legacy constructor, built on {where}"
            help = (
                f"A sequence is data, numbers are a shape; use `torch.tensor(data, dtype=torch.{dtype}, device=...)` "
                "or `torch.empty(size, ...)`"
            )
            # (no fix when the fill would be dropped, or for `torch.Tensor(...)`: its dtype is whatever default the program set)
            fix = self._fix(call, reported, dtype, on_cuda, device) if built is call and match.group(2) else None
            yield self.diagnostic(reported, message, severity=Severity.WARNING if role == TRAIN else Severity.INFO, fix=fix, help=help)

    def _converts_host_array(self, call: cst.Call) -> bool:
        """`torch.FloatTensor(state_batch)`: one argument that is host array data, not a size or a constant."""
        args = [a for a in call.args if not a.star]
        return len(args) == 1 == len(call.args) and args[0].keyword is None and is_host_array(self.model, args[0].value)

    def _initialised(self, call: cst.Call) -> cst.Call:
        """The outermost call of `call.fill_(0).normal_()...`: in-place initialisers return the same tensor."""
        model = self.model
        while True:
            parent = model.parent.get(call)
            grand = model.parent.get(parent) if isinstance(parent, cst.Attribute) else None
            if not (isinstance(grand, cst.Call) and grand.func is parent and parent.attr.value in _IN_PLACE_INIT):
                return call
            call = grand

    def _moved_later(self, call: cst.Call) -> bool:
        """`w = torch.FloatTensor(...)` and later `w.cuda()` / `w.to(device)` of that same value."""
        model, flow = self.model, self.model.dataflow
        assignment = model.parent.get(call)
        converted = model.parent.get(assignment) if isinstance(assignment, cst.Attribute) and assignment.attr.value in _CONVERSIONS else None
        if isinstance(converted, cst.Call) and converted.func is assignment and not converted.args:
            assignment = model.parent.get(converted)  # `torch.Tensor([]).long()`: the same CPU tensor, converted
        if not isinstance(assignment, cst.Assign) or len(assignment.targets) != 1:
            return False
        key = dotted_name(assignment.targets[0].target)
        for read in flow.reads.get(key or "", ()):
            attribute = model.parent.get(read)
            move = model.parent.get(attribute) if isinstance(attribute, cst.Attribute) and attribute.value is read else None
            if isinstance(move, cst.Call) and model.residency.moves_to_cuda(move):
                if any(w.statement is assignment for w in flow.reaching_writes(key, read)):
                    return True
        return False

    def _fix(self, call: cst.Call, reported: cst.Call, dtype: str, on_cuda: bool, move):
        model = self.model
        if any(a.keyword is not None or a.star for a in call.args):
            return None
        if move is not None:
            _, device_expr, move_dtype = move
            if move_dtype is not None or any(a.keyword is not None and a.keyword.value in ("copy", "memory_format") for a in reported.args):
                return None
            device = model.code(device_argument(device_expr)) if device_expr is not None else '"cuda"'
        elif on_cuda:
            device = '"cuda"'
        else:
            device = None
        torch, import_edit = module_alias(model, "torch")
        args = [a.value for a in call.args]
        if len(args) == 1 and isinstance(args[0], (cst.List, cst.Tuple)):
            factory, first = "tensor", model.code(args[0])
        elif all(isinstance(a, cst.Integer) for a in args):
            factory, first = "empty", ", ".join(model.code(a) for a in args) if args else "0"
        else:
            return None  # a variable may be data or a size: only its author knows
        device_part = f", device={device}" if device is not None else ""
        new = f"{torch}.{factory}({first}, dtype={torch}.{dtype}{device_part})"
        what = "torch.tensor(data, ...)" if factory == "tensor" else "torch.empty(size, ...)"
        return self.fix(f"Use `{what}`", [replace_node(model, reported, new), *([import_edit] if import_edit else [])], Applicability.SAFE)

