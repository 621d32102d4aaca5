"""GPU residency: which expressions name a device, move to one, are `nn.Module`s, or hold GPU tensors.

Also the loop context the device rules need: logging-interval guards, timing code, training and
evaluation loops.

GPU tensors come with a certainty: CERTAIN when every step is known (a `.cuda()`, a factory with
`device=`, a moved module's output, torch functions and tensor methods of those), LIKELY when the value went
through a callable gpulint cannot see (a helper, a loss function passed as a parameter). Rules that would
misfire on a Python number returned by a helper (`float(x)`, `if x:`) ask for CERTAIN.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Iterator, Optional

import libcst as cst

from gpulint.analysis.communication import chosen_by_backend
from gpulint.analysis.dataflow import Write
from gpulint.analysis.error_paths import error_path
from gpulint.analysis.excluded_branches import unreached_wait
from gpulint.analysis.handed_elements import received_part
from gpulint.analysis.graph_data import pyg_host_attribute
from gpulint.analysis.handed_loaders import placed_by_callers
from gpulint.analysis.hot_loops import (
    element_targets, in_no_grad, is_training_step, iterates_a_few_literals, trains, wrapped_arguments, wrapper_kind,
)
from gpulint.analysis.host_libraries import host_library_read
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.legacy_torch import number_read, number_read_kind
from gpulint.analysis.leaving_guards import BREAK, RETURN, leaving_guard
from gpulint.analysis.loop_bounds import runs_briefly
from gpulint.analysis.shipped_paths import UNKNOWN as SHIPPED_UNKNOWN
from gpulint.analysis.shipped_paths import shipped_value
from gpulint.analysis.step_cadence import runs_own_backward
from gpulint.analysis.helper_steps import called_helper, helper_step, method_step, step_method
from gpulint.analysis.stored_steps import calls_training_closure, local_step, stored_step
from gpulint.analysis.summary import CLOCKS, DEVICE_INDEX_NAME, times_a_step
from gpulint.analysis.tensor_size import makes_empty_tensor
from gpulint.analysis.value_resolution import SETTINGS_ORIGINS, literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel

NONE, LIKELY, CERTAIN = 0, 1, 2

CUDA, CPU, OTHER = "cuda", "cpu", "other"
TRAIN, EPOCH, EVAL = "training", "epoch", "evaluation"
_OTHER_DEVICES = ("mps", "xpu", "meta", "npu", "hpu", "xla", "ipu", "privateuseone")
# A name that says it holds a device (`device`, `dev`, `gpu`, `local_device`); not `gpu_ref` or `cuda_dtype`.
_DEVICE_NAME = re.compile(r"(^|_)(device|dev|cuda|gpu)$")
# Tensor methods that convert to a dtype and nothing else (`torch.arange(n).long()`).
DTYPE_CONVERSIONS = frozenset({"float", "half", "double", "long", "int", "bool", "bfloat16", "short", "byte", "char"})
_DTYPES = frozenset({
    "float", "float16", "float32", "float64", "half", "double", "bfloat16", "int", "int8", "int16", "int32", "int64",
    "long", "short", "uint8", "bool", "complex64", "complex128", "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2",
})  # fmt: skip

DETERMINISTIC_FACTORIES = frozenset({
    "tensor", "as_tensor", "zeros", "ones", "empty", "full", "eye", "arange", "linspace", "logspace",
    "zeros_like", "ones_like", "full_like", "empty_like", "empty_strided", "tril_indices", "triu_indices",
})  # fmt: skip
RANDOM_FACTORIES = frozenset({"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal"})

# Tensor methods whose result lives on the host, or is not a tensor.
HOST_METHODS = frozenset({
    "item", "tolist", "numpy", "cpu", "size", "dim", "numel", "nelement", "element_size", "data_ptr", "stride",
    "is_contiguous", "get_device", "backward", "register_hook", "state_dict", "parameters", "named_parameters",
    "buffers", "modules", "children", "named_modules", "keys", "values", "items", "__len__", "is_floating_point",
    "is_complex", "storage_offset", "untyped_storage", "record_stream", "zero_grad", "step", "train", "eval",
    "pin_memory", "format", "join", "startswith", "append", "extend", "update", "add_scalar",
    "add_scalars", "log", "write", "info", "debug", "warning", "set_postfix", "synchronize", "wait_stream",
    "wait_event", "record_event", "record", "elapsed_time", "query", "ndimension", "is_pinned", "is_shared",
    "is_signed", "is_inference", "is_set_to",
})  # fmt: skip
# Tensor metadata the host keeps: reading it waits for nothing on the GPU.
HOST_ATTRIBUTES = frozenset({
    "shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "training", "is_leaf", "layout", "is_sparse",
    "is_quantized", "is_meta", "nbytes", "itemsize", "names", "grad_fn",
})  # fmt: skip
_HOST_BUILTINS = frozenset({
    "len", "int", "float", "bool", "str", "repr", "print", "range", "enumerate", "zip", "list", "tuple", "dict",
    "set", "isinstance", "hasattr", "getattr", "format", "type", "id", "iter", "sorted", "round", "open", "any", "all",
})  # fmt: skip
_PASS_THROUGH_BUILTINS = frozenset({"abs", "max", "min", "sum"})
# torch functions that do not return a tensor on the argument's device.
_TORCH_HOST_FUNCTIONS = frozenset({
    "torch.save", "torch.load", "torch.manual_seed", "torch.is_tensor", "torch.numel", "torch.equal", "torch.allclose",
    "torch.is_floating_point", "torch.set_grad_enabled", "torch.no_grad", "torch.device", "torch.get_default_dtype",
})  # fmt: skip
# The legacy typed tensor classes (`torch.cuda.FloatTensor`), and `torch.Tensor` (the default CPU type): their
# device is in their name.
_LEGACY_TENSOR_TYPE = re.compile(r"^torch\.(?:(cuda\.)?(Float|Double|Half|BFloat16|Long|Int|Short|Char|Byte|Bool)Tensor|Tensor)$")
VARIABLE = "torch.autograd.Variable"
# Ops whose output size depends on the data: the host reads the size from the GPU before it can go on.
_DATA_DEPENDENT_SHAPE = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"})
_DATA_DEPENDENT = "has an output size that depends on the data"
# The kind of a host read hidden in Python slicing (`x[:lengths[i]]`): GPU303 gives it its own advice.
SLICED_WITH_GPU_BOUND = "slicing with a GPU tensor as a bound"
# Reductions whose value an `assert` on a framework-placed batch reads (`assert mask.max() <= 1.0`).
_ASSERTED_REDUCTIONS = frozenset({"max", "min", "sum", "mean", "all", "any", "amax", "amin"})
# Data-dependent ops that NumPy arrays have no method of the name for: on a likely tensor, a tensor's.
# What a call may pass for a parameter (`ProjectIndex.inputs`) that is no GPU tensor.
_NOT_GPU_TENSOR = frozenset({"cpu", "cuda_device", "loader", "stream"})
_TENSOR_ONLY_METHODS = frozenset({"masked_select", "repeat_interleave", "unique_consecutive"})
# Methods and functions that turn a tensor into a boolean mask.
_MASK_METHODS = frozenset({"eq", "ne", "gt", "ge", "lt", "le", "bool", "isnan", "isinf", "isfinite", "logical_not", "logical_and", "logical_or", "logical_xor"})
# The node splits PyTorch Geometric's data sets store on their graph as boolean masks (torch_geometric/datasets/
# planetoid.py, `index_to_mask`; `transforms.RandomNodeSplit` writes the same names).
_GRAPH_SPLIT_MASKS = frozenset({"train_mask", "val_mask", "test_mask"})
# Tests that are true on every run that has a GPU to use.
_AVAILABILITY_CHECKS = frozenset({"torch.cuda.is_available", "torch.accelerator.is_available"})
_MODULE_METHODS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers", "modules", "named_modules", "children", "train", "eval", "apply"})
_SELF_RETURNING_MODULE_METHODS = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "eval", "requires_grad_", "apply", "to_empty"})
# `nn.Module`'s own API: bookkeeping, not computation (any other method of a model is the model's own: `encode`,
# `decode`, `project`, `generate`).
_MODULE_API = _MODULE_METHODS | _SELF_RETURNING_MODULE_METHODS | frozenset({
    "state_dict", "load_state_dict", "zero_grad", "register_buffer", "register_parameter", "register_module",
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook", "register_backward_hook",
    "add_module", "get_submodule", "get_parameter", "get_buffer", "named_children", "type", "share_memory",
    "extra_repr", "ipu", "xpu", "mtia",
})  # fmt: skip
_VARIABLE = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})
_MEMORY_STATISTICS = frozenset({
    "memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved", "memory_stats",
    "memory_summary", "reset_peak_memory_stats", "reset_max_memory_allocated", "mem_get_info", "memory_cached",
    "max_memory_cached", "memory_snapshot",
})  # fmt: skip
# `opt_g`, `optD`, `self.optimizer`; not `opt_batch_size` or `opt_level` (settings named after "optimal").
_OPTIMIZER = re.compile(r"(self\.)?((\w*_)?optim(izer)?\w*|opt(?!\w*(size|shape|height|width|level|len|dim))(_\w+|[A-Z]\w*)?)")
_COUNTER = re.compile(r"step|update|iter", re.IGNORECASE)
_RATE_NAME = re.compile(
    r"(log|print|display|report|eval|val|save|ckpt|checkpoint|summary|sample)\w*_?(step|every|interval|freq|iter|period)"
    r"|should_(log|print|report|eval|save)|is_(log|logging|print|report|eval|last)\w*|^(log|logging|verbose)_?now$",
    re.IGNORECASE,
)


class Residency:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.flow = model.dataflow
        self._levels: dict[cst.CSTNode, int] = {}
        self._write_levels: dict[Write, int] = {}
        self._stores: dict[cst.CSTNode, dict] = {}  # scope -> the `d[k] = v` stores of each dict
        self._modules: dict[cst.CSTNode, bool] = {}
        self._wrapping: set[cst.Call] = set()  # constructor calls `_wraps_gpu_module` is answering for
        self._roles: dict[cst.CSTNode, Optional[str]] = {}

    # ---- devices ------------------------------------------------------------------------------

    def device_kind(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[str]:
        """CUDA, CPU or OTHER when `expr` clearly names a device; None when it may be anything else."""
        if depth > 6:
            return None
        model = self.model
        ok, value = literal_value(expr)
        if ok:
            if isinstance(value, str):
                kind = value.split(":")[0]
                return CUDA if kind == "cuda" else CPU if kind == "cpu" else OTHER if kind in _OTHER_DEVICES else None
            if isinstance(value, int) and not isinstance(value, bool):
                return CUDA
            return None
        if isinstance(expr, cst.FormattedString):
            head = expr.parts[0] if expr.parts else None
            if isinstance(head, cst.FormattedStringText) and head.value.startswith("cuda"):
                return CUDA
            return None
        if isinstance(expr, cst.Call):
            name = model.call_name(expr)
            if name == "torch.device":
                if not expr.args:
                    return None
                if _chosen_by_backend(model, expr.args[0].value):
                    return None
                kind = self.device_kind(expr.args[0].value, depth + 1)
                # `torch.device(args.device)`: a device chosen at run time, an accelerator where there is one
                return kind if kind is not None or literal_value(expr.args[0].value)[0] else CUDA
            if name in ("torch.cuda.current_device", "torch.accelerator.current_accelerator", "torch.accelerator.current_device_index"):
                return CUDA
            callee = model.callee(expr)
            if callee is not None and callee.returns == ("device",):
                return CUDA  # `device = get_device()`, a project function that returns one
            if callee is None and _is_get_device(expr) and not self.is_module(expr.func.value):
                return CUDA  # `z.get_device()`: the index of z's GPU, as `z.device` is its device
            return None
        if isinstance(expr, cst.IfExp):
            if _chosen_by_backend(model, expr):
                return None  # `"cpu" if backend == "gloo" else "cuda"`: the process group decides
            chosen = shipped_value(model, expr.test)
            if chosen is not SHIPPED_UNKNOWN:  # `"cuda" if args.cuda else "cpu"` with `Namespace(cuda=False)`
                return self.device_kind(expr.body if chosen else expr.orelse, depth + 1)
            kinds = {self.device_kind(expr.body, depth + 1), self.device_kind(expr.orelse, depth + 1)}
            if None in kinds:
                return None
            # `"mps" if torch.backends.mps.is_available() else "cpu"`: known, and never CUDA
            return CUDA if CUDA in kinds else OTHER if OTHER in kinds else CPU
        if isinstance(expr, (cst.Attribute, cst.Subscript)):
            configured = model.values.agreed_setting(expr)
            if configured is not None and configured.origin in SETTINGS_ORIGINS and isinstance(configured.value, str):
                # `cfg.MODEL.DEVICE`, `config["device"]`: what every settings file of the project says
                kind = configured.value.split(":")[0]
                return CUDA if kind == "cuda" else CPU if kind == "cpu" else OTHER if kind in _OTHER_DEVICES else None
        if isinstance(expr, (cst.Name, cst.Attribute)):
            last = expr.attr.value if isinstance(expr, cst.Attribute) else expr.value
            if self.received_by_self(expr) == {"cuda_device"}:
                return CUDA  # `self.device = device` in `__init__`, and every caller gives a CUDA device
            if isinstance(expr, cst.Attribute) and last == "device":
                written = self._written_device(expr, depth)
                if written is not None:
                    return written  # `args.device = torch.device("cuda" if args.cuda else "cpu")`
                return CUDA if self.level(expr.value) else (CUDA if not self.is_module(expr.value) else None)
            key = dotted_name(expr)
            writes = self.flow.reaching_writes(key, expr) if key else []
            latest = max(writes, key=lambda w: self.flow.order[w.statement]) if len(writes) > 1 else None
            if latest is not None and self._runs_on_gpu_runs(latest.statement, expr):
                # `DEVICE = torch.device("cpu")`, then `if torch.cuda.is_available(): DEVICE = torch.device("cuda")`:
                # on a machine with a GPU the last write is the one that reaches (a function reading the module's
                # `DEVICE` gets the module's writes in source order)
                writes = [latest]
            if len(writes) == 1 and writes[0].value is not None and not writes[0].is_augmented:
                kind = self.device_kind(writes[0].value, depth + 1)
                if kind is not None:
                    return kind
                if _chosen_by_backend(model, writes[0].value):
                    return None  # not known to be the GPU, whatever the name says
            if writes and all(w.value is not None and not w.is_augmented and self._not_a_device(w.value) for w in writes):
                return None  # `gpu = torch.ones(3, device="cuda")`: the name says device, the value says tensor
            resolved = model.values.resolve(expr)
            if resolved is not None and isinstance(resolved.value, str):
                kind = resolved.value.split(":")[0]
                return CUDA if kind == "cuda" else CPU if kind == "cpu" else OTHER
            if isinstance(expr, cst.Name) and self._received(expr) == {"cpu"}:
                return CPU  # `def generate_batches(..., device="cpu")`, every caller passing a CPU device
            if _DEVICE_NAME.search(last) or DEVICE_INDEX_NAME.match(last):
                return CUDA
        return None

    def _written_device(self, attr: cst.Attribute, depth: int) -> Optional[str]:
        """The device a settings object's `device` holds when one write of it reaches here and names the CPU
        (`args.device = torch.device("cuda" if args.cuda else "cpu")` with `args.cuda` False as shipped)."""
        key = dotted_name(attr)
        writes = self.flow.reaching_writes(key, attr) if key else []
        if writes:
            values = [w.value for w in writes] if len(writes) == 1 and not writes[0].is_augmented else [None]
        else:  # read in a function: every store of the module's `args.device`
            own = isinstance(attr.value, cst.Name) and attr.value.value != "self"  # not an instance's, set per object
            values = self._attribute_stores().get(key, []) if key and own else []
        if not values or any(v is None for v in values):
            return None
        return CPU if all(self.device_kind(v, depth + 1) == CPU for v in values) else None

    def _attribute_stores(self) -> dict[str, list]:
        """`args.device = value` anywhere in the module: dotted target -> values (None when not a plain store)."""
        memo = self.model.memo("dotted attribute stores")
        if self.model.module not in memo:
            found: dict[str, list] = {}

            class _Stores(cst.CSTVisitor):
                def visit_Assign(self, node: cst.Assign) -> None:
                    for target in node.targets:
                        if isinstance(target.target, cst.Attribute) and dotted_name(target.target):
                            found.setdefault(dotted_name(target.target), []).append(node.value)

                def visit_AugAssign(self, node: cst.AugAssign) -> None:
                    if isinstance(node.target, cst.Attribute) and dotted_name(node.target):
                        found.setdefault(dotted_name(node.target), []).append(None)

                def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
                    if isinstance(node.target, cst.Attribute) and dotted_name(node.target):
                        found.setdefault(dotted_name(node.target), []).append(node.value)

            self.model.module.visit(_Stores())
            memo[self.model.module] = found  # type: ignore[assignment]
        return memo[self.model.module]  # type: ignore[return-value]

    def holds_on_gpu_runs(self, test: cst.BaseExpression, depth: int = 0) -> bool:
        """A condition that is true whenever the code runs on a GPU: `torch.cuda.is_available()`, a name bound to
        `not args.no_cuda and torch.cuda.is_available()` (or `True if ... else False`), `device.type == "cuda"`."""
        if depth > 6:
            return False
        if isinstance(test, cst.Call):
            return self.model.call_name(test) in _AVAILABILITY_CHECKS
        if isinstance(test, cst.BooleanOperation):
            sides = (self.holds_on_gpu_runs(test.left, depth + 1), self.holds_on_gpu_runs(test.right, depth + 1))
            return any(sides) if isinstance(test.operator, cst.And) else all(sides)
        if isinstance(test, cst.IfExp):
            return literal_value(test.body) == (True, True) and literal_value(test.orelse) == (True, False) and (
                self.holds_on_gpu_runs(test.test, depth + 1)
            )
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal):
            sides = (test.left, test.comparisons[0].comparator)
            return any(
                literal_value(a) == (True, "cuda") and isinstance(b, cst.Attribute) and b.attr.value == "type"
                for a, b in (sides, sides[::-1])
            )  # `device.type == "cuda"`
        if isinstance(test, (cst.Name, cst.Attribute)):
            key = dotted_name(test)
            writes = self.flow.reaching_writes(key, test) if key else []
            return bool(writes) and all(
                w.value is not None and not w.is_augmented and self.holds_on_gpu_runs(w.value, depth + 1) for w in writes
            )
        return False

    def _runs_on_gpu_runs(self, statement: cst.CSTNode, at: cst.CSTNode) -> bool:
        """`statement` runs before `at` whenever the code runs on a GPU: the only branches between them are
        the bodies of `if` tests that hold on GPU runs (`if use_gpu:`, `if torch.cuda.is_available():`)."""
        model = self.model
        for ancestor in model.ancestors(statement):
            if model.is_inside(at, ancestor):
                return True
            if isinstance(ancestor, cst.If):
                if not (model.is_inside(statement, ancestor.body) and self.holds_on_gpu_runs(ancestor.test)):
                    return False
            elif isinstance(ancestor, (cst.Else, cst.Try, cst.ExceptHandler, cst.Finally, cst.For, cst.While, cst.Match)):
                return False
        return True

    def _not_a_device(self, value: cst.BaseExpression) -> bool:
        """A value that is clearly something other than a device: a tensor, a module, a dtype, a number."""
        ok, literal = literal_value(value)
        if ok:
            return not isinstance(literal, (str, int)) or isinstance(literal, bool)
        if isinstance(value, cst.Attribute) and value.attr.value == "dtype":
            return True
        name = self.model.qualified_name(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
        if name is not None and name.startswith("torch.") and name[len("torch.") :] in _DTYPES:
            return True
        if isinstance(value, cst.Call) and self.factory(value) is not None:
            return True
        return self.level(value) > NONE or self.is_module(value)

    def moves_in_loops(self):
        """(call, move, innermost loop) for every move to a non-CPU device that sits inside a loop."""
        for call in self.model.calls:
            move = self.move(call)
            if move is None or move[0] == CPU:
                continue
            loops = self.model.enclosing_loops(call)
            if loops:
                yield call, move, loops[0]

    def move(self, call: cst.Call) -> Optional[tuple[str, Optional[cst.BaseExpression], Optional[cst.BaseExpression]]]:
        """(device kind, device expression, dtype expression) for `.cuda(...)`, `.cpu()`, `.to(<device>...)`.

        `.to(x)` is a move only when `x` is clearly a device, never when it may be a dtype or a tensor."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        method = func.attr.value
        if method == "cuda":
            device = None
            for i, arg in enumerate(call.args):
                if arg.star:
                    return None
                if (arg.keyword is None and i == 0) or (arg.keyword is not None and arg.keyword.value == "device"):
                    device = arg.value
            return (CUDA, device, None)
        if method == "cpu" and not any(a.keyword is None for a in call.args):
            return (CPU, None, None)
        if method != "to":
            return None
        device = dtype = None
        positional = [a for a in call.args if a.keyword is None]
        if any(a.star for a in call.args):
            return None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "device":
                device = arg.value
            elif arg.keyword is not None and arg.keyword.value == "dtype":
                dtype = arg.value
        if device is None and positional:
            if self.device_kind(positional[0].value) is None:
                return None
            device = positional[0].value
            if len(positional) > 1:
                dtype = positional[1].value
        if device is None:
            return None
        kind = self.device_kind(device)
        return (kind, device, dtype) if kind is not None else None

    def moves_to_cuda(self, call: cst.Call) -> bool:
        """`x.cuda(...)`, `x.to(<CUDA device>)`, `x.type(torch.cuda.FloatTensor)`: a copy to CUDA (the receiver is
        then a `cst.Attribute`'s value)."""
        m = self.move(call)
        return (m is not None and m[0] == CUDA) or self.type_move(call) == CUDA

    def type_move(self, call: cst.Call) -> Optional[str]:
        """CUDA or CPU for `x.type(T)` where `T` is a legacy tensor type (`torch.cuda.FloatTensor`, or the alias
        `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`): a copy that also casts. Kept apart from
        `move`: the cast has no `dtype=` expression a fix could reuse."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "type" or any(a.star for a in call.args):
            return None
        target = next((a.value for a in call.args if a.keyword is None or a.keyword.value == "dtype"), None)
        return self.legacy_type_device(target) if target is not None else None

    def legacy_type_device(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[str]:
        """CUDA for `torch.cuda.FloatTensor` (or `"torch.cuda.FloatTensor"`, or a name bound once to it or to
        `torch.cuda.FloatTensor if cuda else torch.FloatTensor`), CPU for `torch.FloatTensor`, else None."""
        if depth > 6:
            return None
        ok, value = literal_value(expr)
        name = value if ok and isinstance(value, str) else None
        if isinstance(expr, (cst.Name, cst.Attribute)):
            name = self.model.qualified_name(expr)
        match = _LEGACY_TENSOR_TYPE.match(name or "")
        if match is not None:
            return CUDA if match.group(1) else CPU
        if isinstance(expr, cst.IfExp):
            kinds = {self.legacy_type_device(expr.body, depth + 1), self.legacy_type_device(expr.orelse, depth + 1)}
            return CUDA if CUDA in kinds and None not in kinds else None  # as `device_kind`: GPU runs take CUDA
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            writes = self.flow.reaching_writes(key, expr) if key else []
            last = [w for w in writes if all(o is w or self.flow.before(o.statement, w.statement) for o in writes)]
            if len(writes) > 1 and len(last) == 1 and self._runs_on_gpu_runs(last[0].statement, expr):
                writes = last  # `type = torch.LongTensor`, then `if torch.cuda.is_available(): type = torch.cuda.LongTensor`
            if len(writes) == 1 and writes[0].value is not None and not writes[0].is_augmented:
                return self.legacy_type_device(writes[0].value, depth + 1)
        return None

    def unwrapped(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """The tensor inside `Variable(t)`: `torch.autograd.Variable` returns `t` itself."""
        while isinstance(expr, cst.Call) and self.model.call_name(expr) == VARIABLE and expr.args and not expr.args[0].keyword and not expr.args[0].star:
            expr = expr.args[0].value
        return expr

    def creates_on_cuda(self, call: cst.Call) -> bool:
        """A call given `device=<CUDA device>`: `torch.zeros(3, device="cuda")`."""
        return any(a.keyword is not None and a.keyword.value == "device" and self.device_kind(a.value) == CUDA for a in call.args)

    def contains_cuda_move(self, node: cst.CSTNode) -> bool:
        """Any call under `node` that moves to, or creates on, a CUDA device."""
        return any(self.moves_to_cuda(c) or self.creates_on_cuda(c) for c in self.model.calls_inside(node))

    def factory(self, call: cst.Call) -> Optional[str]:
        """`zeros` for `torch.zeros(...)`; None for anything that is not a torch tensor factory."""
        name = self.model.call_name(call) or ""
        if not name.startswith("torch.") or name.count(".") != 1:
            return None
        short = name[len("torch.") :]
        if short in DETERMINISTIC_FACTORIES or short in RANDOM_FACTORIES or short == "from_numpy":
            return short
        return None

    def fills_on_host(self, factory: cst.Call, depth: int = 0) -> bool:
        """A factory call that builds its tensor on the CPU. `torch.zeros_like(x)` and the other `*_like`
        factories build on `x`'s device (so do `x.new_zeros(...)`, which are no factories here): on the CPU only
        when `x` is a host tensor in sight (a CPU factory, `.cpu()`, a name bound to one), unknown otherwise."""
        short = self.factory(factory)
        if short is None:
            return False
        device = next((a.value for a in factory.args if a.keyword is not None and a.keyword.value == "device"), None)
        if device is not None:
            return self.device_kind(device) == CPU
        if not short.endswith("_like"):
            return True
        source = next((a.value for a in factory.args if a.keyword is None or a.keyword.value == "input"), None)
        return source is not None and self._host_tensor(source, depth)

    def _host_tensor(self, expr: cst.BaseExpression, depth: int) -> bool:
        if self.is_host(expr):
            return True
        if isinstance(expr, cst.Call) and self.factory(expr) is not None:
            return depth < 4 and self.fills_on_host(expr, depth + 1)  # `torch.zeros_like(torch.zeros_like(x))`
        if isinstance(expr, cst.Name) and depth < 4:
            writes = self.model.dataflow.reaching_writes(expr.value, expr)
            return bool(writes) and all(
                w.value is not None and not w.is_augmented and self._host_tensor(w.value, depth + 1) for w in writes
            )  # `y = torch.arange(n)` then `torch.zeros_like(y)`
        return False

    def is_variable_wrapper(self, call: cst.Call) -> bool:
        """`Variable(t)` with nothing else: returns `t` itself (autograd's old wrapper, a no-op since 0.4)."""
        return (
            len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star
            and self.model.call_name(call) in _VARIABLE
        )  # fmt: skip

    def converted_factory(self, expr: cst.BaseExpression) -> Optional[cst.Call]:
        """The factory call under dtype conversions: `torch.arange(n)` in `torch.arange(n).long()` (or the
        factory `expr` is itself); None when `expr` is no tensor a factory just built."""
        while isinstance(expr, cst.Call):
            if not expr.args and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in DTYPE_CONVERSIONS:
                expr = expr.func.value
            elif self.is_variable_wrapper(expr):
                expr = expr.args[0].value  # `Variable(torch.randn(n))`: the same tensor since PyTorch 0.4
            else:
                break
        return expr if isinstance(expr, cst.Call) and self.factory(expr) is not None else None

    # ---- modules ------------------------------------------------------------------------------

    def is_module(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """An `nn.Module`: built from `torch.nn.*`, torchvision, `from_pretrained`, a module subclass of this
        file, or a name used as one (`.parameters()`, `.train()`, or moved in place by a bare `.cuda()`)."""
        if depth > 8:
            return False
        if expr in self._modules:
            return self._modules[expr]
        self._modules[expr] = False
        result = self._is_module(expr, depth)
        self._modules[expr] = result
        return result

    def _is_module(self, expr: cst.BaseExpression, depth: int) -> bool:
        model = self.model
        if isinstance(expr, cst.Call):
            name = model.call_name(expr) or ""
            last = name.rsplit(".", 1)[-1]
            if name.startswith("torch.nn.") and last[:1].isupper() and last not in ("Parameter", "Buffer"):
                return True
            if name.startswith("torchvision.models.") or name.startswith("timm.create_model"):
                return True
            if name in ("torch.compile", "torch.jit.script") and expr.args:
                return self.is_module(expr.args[0].value, depth + 1)
            func = expr.func
            if isinstance(func, cst.Attribute):
                if func.attr.value == "from_pretrained":
                    return True
                if func.attr.value in _SELF_RETURNING_MODULE_METHODS:
                    return self.is_module(func.value, depth + 1)
            info = model.local_class_of(name)
            if info is not None and self._is_module_class(info.node.name.value):
                return True
            if isinstance(func, cst.Name) and any(self._returns_module(f, depth) for f in model.functions.get(func.value, [])):
                return True
            callee = model.callee(expr)  # a class or factory of the project (another module, or a base there)
            return callee is not None and callee.returns in (("module",), ("gpu_module",))
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            if key is None:
                return False
            if self._used_as_module(key, expr) or _received_module(self._received(expr)):
                return True
            writes = self.flow.reaching_writes(key, expr)
            if not writes and isinstance(expr, cst.Attribute):
                return _received_module(self.received_by_self(expr))  # set by an inherited constructor from its callers' module
            return bool(writes) and all(self._write_is_module(w, depth) for w in writes)
        return False

    def _write_is_module(self, write: Write, depth: int) -> bool:
        if write.value is not None and self.is_module(write.value, depth + 1):
            return True
        handed = received_part(self.model, write) - {"unplaced"}  # `net_g, net_d = nets`: modules every caller hands in
        if handed and handed <= {"module", "gpu_module"}:
            return True
        wrapped = self.model.frameworks.wrapped_argument(write.target)  # `model = accelerator.prepare(model)`
        return wrapped is not None and self.is_module(wrapped[1], depth + 1)

    def _is_module_class(self, class_name: str) -> bool:
        return self.model.derives_from(class_name, "nn.Module subclass", lambda bases: any(b.startswith("torch.nn.") for b in bases))

    def _returns_module(self, func: cst.FunctionDef, depth: int) -> bool:
        model = self.model
        if func.returns is not None:
            name = model.qualified_name(func.returns.annotation) or ""
            if name.startswith("torch.nn."):
                return True
        returns = [n for n in model.returns_of(func) if n.value is not None]
        return bool(returns) and all(self.is_module(r.value, depth + 1) for r in returns)

    def _used_as_module(self, key: str, at: cst.CSTNode) -> bool:
        model = self.model
        scope = model.scope_of(at)
        cls = self.flow.enclosing_class(at) if key.startswith("self.") else None
        for call in self.flow.method_calls_in(key, cls if cls is not None else scope):
            if cls is None and model.scope_of(call) is not scope:
                continue
            if call.func.attr.value in _MODULE_METHODS or self.is_discarded_move(call):
                return True
            # `m.cpu().parameters()`: look through the methods that return the module itself
            outer = call
            while outer.func.attr.value in _SELF_RETURNING_MODULE_METHODS:
                attribute = model.parent.get(outer)
                grand = model.parent.get(attribute) if attribute is not None else None
                if not (isinstance(attribute, cst.Attribute) and isinstance(grand, cst.Call) and grand.func is attribute):
                    break
                if attribute.attr.value in _MODULE_METHODS:
                    return True
                outer = grand
        return False

    def is_discarded_move(self, call: cst.Call) -> bool:
        """`x.cuda()` / `x.to(device)` as a statement of its own: only a module moves in place."""
        parent = self.model.parent.get(call)
        return isinstance(parent, cst.Expr) and (m := self.move(call)) is not None and m[0] != CPU

    def _received(self, expr: cst.BaseExpression) -> set[str]:
        """For a parameter: what the project's callers pass for it ("gpu_module", "cuda_device", ...)."""
        if not isinstance(expr, cst.Name):
            return set()
        binders = self.model.bindings_of(expr.value, expr) or self._step_closure_binders(expr)
        if len(binders) != 1 or not isinstance(binders[0], cst.Param):
            return set()
        func = self.model.enclosing_function(binders[0])
        if func is None:
            return set()
        owner = self.model.parent.get(self.model.parent.get(func))
        key = f"{owner.name.value}.{func.name.value}" if isinstance(owner, cst.ClassDef) else func.name.value
        return set(self.model.project.receives(key, expr.value))

    def _annotated_object(self, name: cst.Name) -> bool:
        """A parameter annotated as an object of a class that is not a tensor (`analysis/annotations.py`)."""
        from gpulint.analysis.annotations import annotated_as_object

        binders = self.model.bindings_of(name.value, name)
        return len(binders) == 1 and isinstance(binders[0], cst.Param) and annotated_as_object(self.model, binders[0])

    def _step_closure_binders(self, name: cst.Name) -> list[cst.CSTNode]:
        """The binders of a free name in a framework's step function defined inside another function, from the
        nearest enclosing function that binds it (`model` in `def train_step(engine, batch)` defined inside
        `def create_trainer(model, ...)`). Other closures keep their old reading (an evaluation helper nested in
        `test(model, ...)` is judged on its own loop)."""
        m = self.model
        if not m.frameworks.imported or m.frameworks.step_function(name) is None:
            return []
        scope = m.scope_of(name)
        while scope is not m.module:
            scope = m.scope_of(scope)
            found = m.bindings.get((id(scope), name.value)) if scope is not m.module else None
            if found:
                return found
        return []

    def _closure_part(self, name: cst.Name) -> Any:
        """For a free name of a framework step function bound once in the function around it by unpacking a project
        call (`model, ema_model, optimizer = utils.initialize(cfg)`): what that callee returns at the name's place."""
        binders = [] if self.model.bindings_of(name.value, name) else self._step_closure_binders(name)
        assign = binders[0] if len(binders) == 1 else None
        if not isinstance(assign, cst.Assign) or len(assign.targets) != 1 or not isinstance(assign.value, cst.Call):
            return None
        target = assign.targets[0].target
        elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else ()
        if not elements or any(isinstance(e, cst.StarredElement) for e in elements):
            return None
        position = next((i for i, e in enumerate(elements) if isinstance(e.value, cst.Name) and e.value.value == name.value), None)
        callee = self.model.callee(assign.value)
        returns = callee.returns if callee is not None else None
        if position is None or not (isinstance(returns, tuple) and returns[:1] == ("tuple",) and len(returns[1]) == len(elements)):
            return None
        return returns[1][position]

    def received_by_self(self, expr: cst.BaseExpression) -> set[str]:
        """For `self.x` set only from a constructor parameter (`self.actor_critic = actor_critic`): what every
        caller of the class gives for it, with "unplaced" when one gives something not known to be on the GPU."""
        key = dotted_name(expr) if isinstance(expr, cst.Attribute) else None
        if key is None or not key.startswith("self.") or key.count(".") != 1:
            return set()
        writes = self.flow.reaching_writes(key, expr)
        cls = self.flow.enclosing_class(expr) if not writes else None
        if cls is not None:  # set by a project base class's constructor (`analysis/inherited_members.py`)
            return set(self.model.project.receives(f"{cls.name.value}.self", key[len("self."):]))
        if not writes or not all(isinstance(w.value, cst.Name) and not w.is_augmented for w in writes):
            return set()
        received = [self._received(w.value) for w in writes]
        return set().union(*received) if all(received) else set()

    def is_gpu_module(self, expr: cst.BaseExpression) -> bool:
        """A module moved to CUDA: bound to `<module>.to(cuda)`, or moved in place in its scope, built by a
        project factory that moves it, or a parameter the project's callers give a GPU module."""
        if not self.is_module(expr):
            return False
        key = dotted_name(expr)
        if isinstance(expr, cst.Call):
            m = self.move(expr)
            if m is None:
                callee = self.model.callee(expr)
                return (callee is not None and callee.returns == ("gpu_module",)) or self._wraps_gpu_module(expr)
            return m[0] == CUDA
        if key is None:
            return False
        if "gpu_module" in self._received(expr) or self.received_by_self(expr) == {"gpu_module"}:
            return True
        if self._received(expr) == {"gpu"}:
            return True  # a module (see above) every caller hands as a GPU value: the summaries' word for a moved model
        for write in self.flow.reaching_writes(key, expr):
            if isinstance(write.value, cst.Call) and (self._moved_call(write.value) or self.is_gpu_module(write.value)):
                return True
            if self.model.frameworks.placed_module(write.target):
                return True
            if received_part(self.model, write) == {"gpu_module"}:
                return True  # `net_g, net_d = nets`, every caller handing GPU modules in that place
        if isinstance(expr, cst.Name) and self._closure_part(expr) == ("gpu_module",):
            return True  # `model, opt = utils.initialize(cfg)` around `def train_step(engine, batch)`, the factory moving it
        # Moved in place where it is used, or where it is defined (a module-level `model.to(device)` of a
        # model that functions use).
        scopes = {self.model.scope_of(expr)} | {self.model.scope_of(w.statement) for w in self.flow.reaching_writes(key, expr)}
        outer = self._closure_scope(expr) if isinstance(expr, cst.Name) else None
        if outer is not None:
            scopes.add(outer)  # `model.to(args.device)` in the function around `def update(engine, batch)` (ignite)
        cls = self.flow.enclosing_class(expr) if key.startswith("self.") else None
        for region in [cls] if cls is not None else scopes:
            for call in self.flow.method_calls_in(key, region):
                if cls is None and self.model.scope_of(call) is not region:
                    continue
                if self.is_discarded_move(call):
                    m = self.move(call)
                    if m is not None and m[0] == CUDA and not self._loop_ran_before(call, expr) and not self._rebound_after(key, call, expr):
                        return True
        return False

    def is_cpu_module(self, expr: cst.BaseExpression) -> bool:
        """A module the code puts on the CPU by name: every write that reaches `expr` binds it to a call chain whose
        move is `.cpu()`, `.to("cpu")` or `.to(torch.device("cpu"))` (`model = Net().to("cpu")`), and nothing in the
        module moves it anywhere else (no other `.to(...)` / `.cuda()` of it, in any scope), nor is it handed in.
        A device setting of "cpu" (`model.to(device)` with `device = "cpu"`) is not this: a script's setting is
        changed at launch (`cpu_as_shipped.py`). A loop that runs such a module feeds no GPU."""
        key = dotted_name(expr)
        if key is None or not isinstance(expr, (cst.Name, cst.Attribute)) or self._received(expr):
            return False
        writes = self.flow.reaching_writes(key, expr)
        if not writes or not all(isinstance(w.value, cst.Call) and self._literal_cpu_chain(w.value) for w in writes):
            return False
        for call in self.flow.method_calls.get(key, []):
            if call.func.attr.value in ("to", "cuda", "to_empty", "xpu", "mps") and not self._literal_cpu_move(call):
                return False  # moved again somewhere (or to something the code does not spell as the CPU)
        return True

    def _literal_cpu_chain(self, call: cst.Call) -> bool:
        """`Net(...).to("cpu")`, `Net().cpu().eval()`: the chain's last move is to the CPU, spelled so."""
        while isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
            if call.func.attr.value in ("to", "cuda", "cpu"):
                return self._literal_cpu_move(call)
            call = call.func.value
        return False

    def _literal_cpu_move(self, call: cst.Call) -> bool:
        """`x.cpu()`, `x.to("cpu")`, `x.to(torch.device("cpu"))`, `x.to(device="cpu")`: the CPU written at the move."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value == "cpu":
            return not call.args
        if func.attr.value != "to" or any(a.star for a in call.args):
            return False
        target = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "device"), None)
        if target is None and call.args and call.args[0].keyword is None:
            target = call.args[0].value
        if isinstance(target, cst.Call) and self.model.call_name(target) == "torch.device" and len(target.args) == 1:
            target = target.args[0].value
        return isinstance(target, cst.SimpleString) and target.evaluated_value == "cpu"

    def _wraps_gpu_module(self, call: cst.Call) -> bool:
        """`AutoregressiveWrapper(model)` with `model` on the GPU (moved in place before or after): a module built
        around a GPU module holds that very object, so its forward runs it there. Only a module class's constructor
        (`is_module`) given the module itself as an argument counts; a moved copy is another object (`.to` on a
        tensor), and a factory that builds a new module from a setting is not handed one. A module moved inline
        (`DistributedDataParallel(STCN(...).cuda(), device_ids=[rank])`) is handed too: `Module.cuda()` / `.to()`
        move it in place and return the module itself."""
        if call in self._wrapping:
            return False  # `net = Wrapper(net)` in a loop: the argument's write is this one
        self._wrapping.add(call)
        try:
            return self.is_module(call) and any(
                not a.star and self.is_gpu_module(a.value)
                and (isinstance(a.value, (cst.Name, cst.Attribute)) or _moved_module_call(a.value))
                for a in call.args
            )  # fmt: skip
        finally:
            self._wrapping.discard(call)

    def _closure_scope(self, name: cst.Name) -> Optional[cst.FunctionDef]:
        """The function around the nested function that reads `name`, when that one binds it and the nested one
        does not (a closure's free variable)."""
        model = self.model
        inner = model.scope_of(name)
        if not isinstance(inner, cst.FunctionDef) or (id(inner), name.value) in model.bindings:
            return None
        outer = model.scope_of(inner)
        return outer if isinstance(outer, cst.FunctionDef) and (id(outer), name.value) in model.bindings else None

    def _rebound_after(self, key: str, move: cst.Call, use: cst.CSTNode) -> bool:
        """Module-level code (a notebook's cells) rebinds `key` to a new module after the in-place `move` and
        before `use`: the move placed the old object, not the one `use` reads (`net.to(dev)` in one cell,
        `net = create_net()` in a later CPU section)."""
        model = self.model
        if model.scope_of(move) is not model.module or model.scope_of(use) is not model.module:
            return False
        writes = self.flow.reaching_writes(key, use)
        return bool(writes) and all(
            model.scope_of(w.statement) is model.module and self.flow.before(move, w.statement)
            and w.value is not None and not self.flow.reads_in(key, w.value)  # `net = DDP(net)` wraps the moved module
            for w in writes
        )  # fmt: skip

    def _loop_ran_before(self, move: cst.Call, use: cst.CSTNode) -> bool:
        """`use` sits in a module-level loop that has finished when the in-place `move` runs: the loop ran on the
        CPU. A use outside loops keeps its answer (`Adam(net.parameters())` before `net.cuda()` still updates
        the parameters the move moves in place, on CUDA)."""
        return bool(self.model.enclosing_loops(use)) and self.runs_after(move, use)

    def runs_after(self, later: cst.CSTNode, node: cst.CSTNode) -> bool:
        """Module-level code runs once, top to bottom (a notebook's cells too): `later` comes after `node` there,
        outside any loop around both, so it has not run yet when `node` runs (a model moved to CUDA after the
        loop that trained it on the CPU). False when unsure (either one in a function)."""
        model = self.model
        if model.scope_of(later) is not model.module or model.scope_of(node) is not model.module:
            return False
        if self.flow.before(later, node):
            return False
        return not any(model.is_inside(later, loop) for loop in model.enclosing_loops(node))

    def _moved_call(self, call: cst.Call) -> bool:
        while isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute):
            m = self.move(call)
            if m is not None:
                return m[0] == CUDA
            call = call.func.value
        return False

    # ---- GPU tensors --------------------------------------------------------------------------

    def level(self, expr: cst.BaseExpression) -> int:
        """CERTAIN, LIKELY or NONE: how surely `expr` is a tensor on the GPU."""
        if expr in self._levels:
            return self._levels[expr]
        self._levels[expr] = NONE  # cycles (x = x + 1 in a loop) resolve to "unknown"
        result = self._level(expr)
        self._levels[expr] = result
        return result

    def is_gpu(self, expr: cst.BaseExpression, certain: bool = False) -> bool:
        return self.level(expr) >= (CERTAIN if certain else LIKELY)

    def _args_level(self, call: cst.Call) -> int:
        return max((self.level(a.value) for a in call.args if not a.star), default=NONE)

    def _listed_args_level(self, call: cst.Call) -> int:
        """The level of the tensors a list or tuple written in the call holds (`torch.stack([a, b])`): every
        element of one such argument on the GPU (a torch function refuses tensors of two devices)."""
        levels = [
            min((self.level(e.value) for e in a.value.elements if not isinstance(e, cst.StarredElement)), default=NONE)
            for a in call.args if not a.star and isinstance(a.value, (cst.List, cst.Tuple)) and a.value.elements
        ]  # fmt: skip
        return max(levels, default=NONE)

    def _level(self, expr: cst.BaseExpression) -> int:
        if isinstance(expr, cst.Call):
            return self._call_level(expr)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            if isinstance(expr, cst.Attribute) and expr.attr.value in HOST_ATTRIBUTES:
                return NONE
            if pyg_host_attribute(self.model, expr):
                return NONE  # `batch.batch_size` of a PyG batch: a Python int on any device
            if self.is_module(expr):
                return NONE
            if isinstance(expr, cst.Name):
                walked = self._comprehension_element(expr)
                if walked is not None:
                    return walked  # `[items[u.item()] for u in users]`: an element of a GPU tensor is one
            key = dotted_name(expr)
            writes = self.flow.reaching_writes(key, expr) if key else []
            if len(writes) > 1 and self._runs_on_gpu_runs(writes[0].statement, expr):
                writes = writes[:1]  # `if use_gpu: img = img.cuda()`: on GPU runs the move is what reaches
            stored = self._stored_items_level(expr) if writes else None
            if stored is not None:
                return stored  # a dict of GPU tensors (`loss_dict`) is where its items are
            if writes:
                level = min(self._write_level(w) for w in _past_number_start(writes))
                return CERTAIN if level == LIKELY and self._backpropagated(key, expr, writes) else level
            if isinstance(expr, cst.Attribute) and not self.is_module(expr.value):
                return self.level(expr.value)  # `out.logits`, `x.grad`, `x.T`
            if isinstance(expr, cst.Name) and self.model.frameworks.placed_parameter(expr):
                return LIKELY  # `batch` of `training_step`: the framework copied it to the device
            if isinstance(expr, cst.Name) and self._annotated_object(expr):
                return NONE  # `aggregator: MetricAggregator | None`: an object, whatever its callers moved with `.to()`
            if isinstance(expr, cst.Name):
                return received_tensor_level(self._received(expr))  # a parameter: where the project's calls fill it
            return NONE
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, cst.Modulo) and isinstance(expr.left, (cst.SimpleString, cst.ConcatenatedString)):
                return NONE  # `"%f" % t` is a string
            return max(self.level(expr.left), self.level(expr.right))
        if isinstance(expr, cst.Comparison):
            return max([self.level(expr.left), *(self.level(c.comparator) for c in expr.comparisons)])
        if isinstance(expr, cst.UnaryOperation):
            return NONE if isinstance(expr.operator, cst.Not) else self.level(expr.expression)
        if isinstance(expr, cst.Subscript):
            if number_read(self.model, expr) is not None:
                return NONE  # `loss.data[0]` before PyTorch 0.4: a Python number
            built = self._built_elements_level(expr.value)
            if built is None:
                built = self._built_values_level(expr.value)
            if built is not None:
                return built
            stored = self._stored_items_level(expr.value, _single_index(expr))
            if stored is not None:
                return stored
            return NONE if self.is_module(expr.value) else self.level(expr.value)
        if isinstance(expr, cst.IfExp):
            return min(self.level(expr.body), self.level(expr.orelse))
        if isinstance(expr, cst.Dict):
            # `{**data, **out}`, `{"est": est_audio, ...}`: a dict display holds GPU tensors when one of its values is one
            # (as a dict filled by `d[k] = v` does, `_stored_items_level`)
            return max((self.level(e.value) for e in expr.elements), default=NONE)
        return NONE

    def _comprehension_element(self, name: cst.Name) -> Optional[int]:
        """The level of the tensor a comprehension around `name` walks, when `name` is its plain loop target and
        that iterable is a tensor likely on the GPU (its elements are GPU tensors too), else None."""
        for ancestor in self.model.ancestors(name):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None
            if not isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
                continue
            comp = ancestor.for_in
            while comp is not None:
                if isinstance(comp.target, cst.Name) and comp.target.value == name.value and not self.model.is_inside(name, comp.iter):
                    if not self._made_by_tensor_op(comp.iter):
                        return None  # `[o.cpu() for o in outputs]` of a model's outputs: a list, as before
                    level = self.level(comp.iter)
                    return level if level > NONE else None
                comp = comp.inner_for_in
        return None

    def _made_by_tensor_op(self, expr: cst.BaseExpression) -> bool:
        """`edge_index[0].unique()`, `t.unbind(0)`, `scores[i]`, or a name its one write binds to such a value
        (not unpacked): a tensor op's result, so its elements are tensors (a model's output may be a list)."""
        if isinstance(expr, cst.Name):
            writes = self.flow.reaching_writes(expr.value, expr)
            if len(writes) != 1 or writes[0].value is None or writes[0].source is not None or writes[0].is_augmented:
                return False
            expr = writes[0].value
        if isinstance(expr, cst.Subscript):
            return True
        return (
            isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and isinstance(expr.func.value, (cst.Name, cst.Subscript, cst.Attribute, cst.Call))
            and not self.is_module(expr.func.value)
        )  # fmt: skip

    def _backpropagated(self, key: str, at: cst.CSTNode, writes: list[Write]) -> bool:
        """`loss.backward()` on the value `at` reads (the same writes reach it): a tensor for sure, so where its
        inputs likely are (`cls_loss, reg_loss = model(x)` of a GPU model, then `loss = cls_loss + reg_loss`) it is."""
        scope = self.model.scope_of(at)
        reached = {id(w) for w in writes}
        return any(
            call.func.attr.value == "backward" and self.model.scope_of(call) is scope
            and {id(w) for w in self.flow.reaching_writes(key, call.func.value)} == reached
            for call in self.flow.method_calls_in(key, scope)
        )  # fmt: skip

    def _built_elements_level(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[int]:
        """Where the elements of a sequence built by a comprehension are: `tuple(t.to(device) for t in batch)`,
        `[t.cuda() for t in batch]` (or a name bound only to one), as its element expression says; None when
        `expr` is no such sequence."""
        if depth > 4:
            return None
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("tuple", "list"):
            if len(expr.args) != 1 or expr.args[0].keyword is not None or expr.args[0].star or self.model.bindings_of(expr.func.value, expr):
                return None
            expr = expr.args[0].value
        if isinstance(expr, (cst.GeneratorExp, cst.ListComp)):
            return self.level(expr.elt)
        if isinstance(expr, cst.Name):
            writes = self.flow.reaching_writes(expr.value, expr)
            levels = [self._built_elements_level(w.value, depth + 1) if w.value is not None and not w.is_augmented else None for w in writes]
            return min(levels) if levels and None not in levels else None
        return None

    def _built_values_level(self, expr: cst.BaseExpression) -> Optional[int]:
        """Where the values of a dict built by a comprehension are (`batch = {k: v.to(device) for k, v in
        batch.items()}`, then `batch["input_ids"]`), for a name bound only to such dicts; None otherwise."""
        if isinstance(expr, cst.DictComp):
            return self.level(expr.value)
        if not isinstance(expr, cst.Name):
            return None
        writes = self.flow.reaching_writes(expr.value, expr)
        if not writes or not all(isinstance(w.value, cst.DictComp) and not w.is_augmented for w in writes):
            return None
        return min(self.level(w.value.value) for w in writes)

    def _stored_items_level(self, expr: cst.BaseExpression, key: Optional[cst.BaseExpression] = None) -> Optional[int]:
        """Where the items of a dict are that starts empty and is filled by `losses["d"] = d_loss` in the same
        function (None when `expr` is no such dict): `losses["d"]` is where every value stored under "d" is,
        the dict itself holds GPU tensors when one of its values is one."""
        if not isinstance(expr, cst.Name):
            return None
        writes = self.flow.reaching_writes(expr.value, expr)
        if not writes or not all(
            w.value is not None and not w.is_augmented and (_empty_dict(self.model, w.value) or isinstance(w.value, cst.Dict))
            for w in writes
        ):  # fmt: skip
            return None
        scope = self.model.enclosing_function(expr) or self.model.module
        stored = list(self._item_stores(scope).get(expr.value, []))
        spread: list[cst.BaseExpression] = []  # `{**data, **out}`: entries whose keys are not written here
        for write in writes:
            for element in write.value.elements if isinstance(write.value, cst.Dict) else ():
                if isinstance(element, cst.StarredDictElement):
                    spread.append(element.value)
                else:  # `{"est": est, "n": 4}`: the display's own entries count as stores
                    stored.append((literal_value(element.key), element.value))
        ok, wanted = literal_value(key) if key is not None else (False, None)
        if ok:
            same_key = [value for written, value in stored if written == (True, wanted)]
            if not same_key and spread:
                return max((self.level(value) for value in spread), default=NONE)
            return min((self.level(value) for value in same_key), default=NONE)
        return max((self.level(value) for value in [*(v for _, v in stored), *spread]), default=NONE)

    def _item_stores(self, scope: cst.CSTNode) -> dict[str, list[tuple[tuple[bool, Any], cst.BaseExpression]]]:
        """`name[key] = value` statements of one function (or the module), by name: (the literal key, value)."""
        found = self._stores.get(scope)
        if found is None:
            found = self._stores[scope] = {}
            for statement in _assignments(scope):
                for target in statement.targets:
                    node = target.target
                    if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name):
                        index = _single_index(node)
                        written = literal_value(index) if index is not None else (False, None)
                        found.setdefault(node.value.value, []).append((written, statement.value))
        return found

    def _write_level(self, write: Write) -> int:
        # Memoized: each `if c: t += x` reaches every earlier one, so unmemoized this costs 2^n.
        if write in self._write_levels:
            return self._write_levels[write]
        self._write_levels[write] = NONE  # a loop of augmented writes (`t += a; t += b`) resolves to "unknown"
        result = self._write_levels[write] = self._compute_write_level(write)
        return result

    def _compute_write_level(self, write: Write) -> int:
        if write.value is None and isinstance(write.statement, cst.For):
            if self.model.frameworks.placed_loop(write.statement) or placed_by_callers(self.model, write.statement):
                return LIKELY  # a batch of a loader that accelerate / Fabric places on the device (here or in the callers)
            return self._element_level(write)
        if write.value is None:
            # `out, feats = model(x)`: the parts of what a GPU module returns are on the GPU too.
            if write.source is None:
                return NONE
            built = self._built_elements_level(write.source)
            return built if built is not None else min(self.level(write.source), LIKELY)
        level = self.level(write.value)
        if write.is_augmented:
            # `total += loss`: a tensor if either side is (the earlier value of `total` is seen before it).
            earlier = self.flow.reaching_writes(write.key, write.statement)
            previous = min((self._write_level(w) for w in _past_number_start([w for w in earlier if w is not write])), default=NONE)
            level = max(level, previous)
        return level

    def _element_level(self, write: Write) -> int:
        """`for row in t:` over a GPU tensor (also through `enumerate`/`zip`): each element is on the GPU too."""
        loop = write.statement
        params = self._parameters_of_gpu_module(loop)
        if params is not None:
            return LIKELY if write.target is params else NONE
        levels: list[int] = []

        def is_tensor(expr: cst.BaseExpression) -> bool:
            level = self.level(expr)
            if level:
                levels.append(level)
            return bool(level)

        iterable, target = self._zipped_part(loop, write.target) or (loop.iter, loop.target)
        parts = element_targets(self.model, iterable, target, is_tensor)
        if not parts or not any(write.target is t or self.model.is_inside(write.target, t) for t in parts):
            return NONE
        return levels[-1]

    def _zipped_part(self, loop: cst.For, target: cst.BaseExpression) -> Optional[tuple[cst.BaseExpression, cst.BaseExpression]]:
        """(`lengths`, `n`) for `n` in `for seq, n in zip(mels, lengths):`: the iterable whose elements the part
        of the target holding `target` receives (each part its own, not only the first GPU one)."""
        it = loop.iter
        if not (isinstance(it, cst.Call) and isinstance(loop.target, (cst.Tuple, cst.List)) and wrapper_kind(self.model, it) == "zip"):
            return None
        wrapped = wrapped_arguments(self.model, it)
        if len(wrapped) != len(loop.target.elements):
            return None
        for arg, element in zip(wrapped, loop.target.elements):
            if element.value is target or self.model.is_inside(target, element.value):
                return arg, element.value
        return None

    def _parameters_of_gpu_module(self, loop: cst.For) -> Optional[cst.BaseExpression]:
        """The target that takes each parameter in `for p in model.parameters()` / `for name, p in
        model.named_parameters()` over a GPU module (its parameters and their `.grad` are on the GPU)."""
        it = loop.iter
        if not (isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in ("parameters", "named_parameters")):
            return None
        if not self.is_gpu_module(it.func.value):
            return None
        target = loop.target
        if it.func.attr.value == "parameters":
            return target if isinstance(target, cst.Name) else None
        if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2 and isinstance(target.elements[1].value, cst.Name):
            return target.elements[1].value
        return None

    def _call_level(self, call: cst.Call) -> int:
        model = self.model
        move = self.move(call)
        if move is not None:
            return CERTAIN if move[0] == CUDA and not self.is_module(call) else NONE
        func = call.func
        moved = self.type_move(call)  # `x.type(Tensor)`; `model.type(...)` casts a module in place
        if moved is not None:
            return CERTAIN if moved == CUDA and not self.is_module(func.value) else NONE
        # `Tensor(n, 1)` for a legacy type (only names that say so are looked up: this runs for every call)
        built = self.legacy_type_device(func) if "Tensor" in (dotted_name(func) or "") else None
        if built is not None:
            return CERTAIN if built == CUDA else NONE
        if self.factory(call) is not None:
            for arg in call.args:
                if arg.keyword is not None and arg.keyword.value == "device":
                    return CERTAIN if self.device_kind(arg.value) == CUDA else NONE
            short = self.factory(call)
            return self._args_level(call) if short.endswith("_like") else NONE
        name = model.call_name(call)
        if name is not None:
            if name.startswith("torch.") and name not in _TORCH_HOST_FUNCTIONS and not name.startswith("torch.cuda."):
                if self.is_module(call):
                    return NONE
                # A torch function given a tensor returns a tensor, even when the input went through a helper;
                # `torch.stack([noisy - clean, clean])`, `torch.cat((a, b))` are where the tensors listed are.
                return CERTAIN if self._args_level(call) or self._listed_args_level(call) else NONE
            if "." in name and model.callee(call) is None:  # another library: numpy, math, time, ...
                return NONE
        if isinstance(func, cst.Name):
            if func.value in _HOST_BUILTINS and not model.bindings_of(func.value, call):
                return NONE
            if func.value in _PASS_THROUGH_BUILTINS and not model.bindings_of(func.value, call):
                return self._args_level(call)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in HOST_METHODS or names_type(call):
                return NONE
            receiver = func.value
            if self.is_module(receiver):
                if method == "forward":
                    return CERTAIN if self.is_gpu_module(receiver) else self._args_level(call)
                if self.runs_a_model_method(call):
                    return self._args_level(call)  # `model.decode(memory, mask, ys)`: computed where its inputs are
                if self._computes_on_gpu_module(call):
                    return LIKELY  # `self.actor_critic.evaluate_actions(obs, ...)`: a GPU model's own method
                return NONE
            receiver_level = self.level(receiver)
            if receiver_level:
                # A tensor method runs where its tensors are: `pred.eq(target)` with `target` on the GPU is too.
                return max(receiver_level, self._args_level(call))
        if self.is_module(func):
            return CERTAIN if self.is_gpu_module(func) else self._args_level(call)
        if isinstance(func, cst.Name) and self._returns_host(func.value):
            return NONE
        callee = model.callee(call)
        if callee is not None and callee.returns is not None:
            returned = callee.returns
            local = isinstance(func, cst.Name) and func.value in model.functions  # `_returns_level` below reads those
            if not local and (returned == ("gpu",) or _moved_tuple(returned) or returned[0] == "shapes" and all(_moved_tuple(r) for r in returned[1])):
                return CERTAIN  # `x, y = to_device(batch, device)`, a project helper that returns moved tensors
            if returned == ("host",):
                return NONE  # `def to_cpu(t): return t.detach().cpu()`
            if returned[0] == "param":
                # `def stats(outputs): return outputs.mean()`: tensor operations on what it is given
                given = next((arg.value for arg, param in model.arguments_to(call, callee) if param == returned[1]), None)
                if given is not None:
                    # what a GPU module it is given computes (`return model(**batch).loss`) is on the GPU too
                    return LIKELY if self.is_gpu_module(given) else self.level(given)
            if returned[0] == "params":  # tensor operations on several of its arguments: where the GPU one is
                return max((self.level(arg.value) for arg, param in model.arguments_to(call, callee) if param in returned[1]), default=NONE)
        if isinstance(func, cst.Name) and not model.bindings_of(func.value, call) or (
            isinstance(func, cst.Name) and func.value in model.functions
        ):
            returned = self._returns_level(func.value)
            if returned:
                return returned
        # A callable gpulint cannot see, given a GPU tensor: most likely returns one.
        return min(self._args_level(call), LIKELY)

    def _returns_level(self, function_name: str) -> int:
        """A function of this module whose every `return` gives GPU tensors (`return x.to(device), y.to(device)`)."""
        functions = self.model.functions.get(function_name, [])
        levels = []
        for func in functions:
            for ret in self.model.returns_of(func):
                value = ret.value
                if value is None:
                    return NONE
                elements = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
                levels.extend(self.level(e) for e in elements)
        return min(levels, default=NONE)

    def _returns_host(self, function_name: str) -> bool:
        functions = self.model.functions.get(function_name, [])
        if not functions:
            return False
        for func in functions:
            returns = [r for r in self.model.returns_of(func) if r.value is not None]
            if not returns or not all(self.is_host(r.value) for r in returns):
                return False
        return True

    def is_host(self, expr: cst.BaseExpression) -> bool:
        """Clearly not a GPU tensor: a literal, a Python number from `.item()`, a CPU tensor."""
        ok, _ = literal_value(expr)
        if ok or isinstance(expr, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString, cst.Dict)):
            return True
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            return all(not isinstance(e, cst.StarredElement) and self.is_host(e.value) for e in expr.elements)
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Name) and func.value in _HOST_BUILTINS:
                return True
            if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist", "numpy", "cpu", "pin_memory"):
                return True
            move = self.move(expr)
            if move is not None and move[0] == CPU:
                return True
            short = self.factory(expr)
            if short is not None and not short.endswith("_like"):
                return not any(a.keyword is not None and a.keyword.value == "device" for a in expr.args)
            name = self.model.call_name(expr) or ""
            if name.startswith(("numpy.", "math.", "time.")):
                return True
        if isinstance(expr, cst.BinaryOperation):
            return self.is_host(expr.left) and self.is_host(expr.right)
        if isinstance(expr, cst.Subscript):
            return number_read(self.model, expr) is not None  # `loss.data[0]` before PyTorch 0.4
        return False

    # ---- host syncs ---------------------------------------------------------------------------

    @cached_property
    def host_syncs(self) -> list[HostSync]:
        """Every expression that makes the host wait for the GPU: `.item()`, `.cpu()`, `.tolist()`,
        `.numpy()`, `.to("cpu")` of a GPU tensor; `float()` / `int()` / `bool()`, `print()` or f-string
        formatting, and `if` / `while` / `assert` tests of a tensor that is surely on the GPU."""
        model = self.model
        found: list[HostSync] = []
        for call in model.calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("item", "tolist", "numpy", "cpu", "to", "type"):
                method = func.attr.value
                receiver = func.value
                if method == "type":
                    if self.type_move(call) != CPU:
                        continue
                    kind = "`.type()` to a CPU tensor type"
                elif method == "to":
                    move = self.move(call)
                    if move is None or move[0] != CPU or any(
                        a.keyword is not None and a.keyword.value == "non_blocking" for a in call.args
                    ):
                        continue
                    kind = f"`.to({model.code(move[1])})`" if move[1] is not None else "`.to(...)`"
                elif method == "cpu" and call.args:
                    continue
                else:
                    kind = f"`.{method}()`"
                if isinstance(receiver, cst.Call) and self._syncs_itself(receiver):
                    continue  # `x.cpu().numpy()`: the `.cpu()` is the sync
                if self.is_gpu(receiver) and not self.is_module(receiver):
                    found.append(HostSync(call, kind, receiver))
            elif isinstance(func, cst.Name) and func.value in ("float", "int", "bool", "print", "str", "repr", "format"):
                if model.bindings_of(func.value, call):
                    continue
                for arg in call.args:
                    if arg.keyword is None and not arg.star and self.is_gpu(arg.value, certain=True):
                        kind = "`print()` of a GPU tensor" if func.value == "print" else f"`{func.value}()` of a GPU tensor"
                        found.append(HostSync(call, kind, arg.value))
                        break
            elif (read := host_library_read(model, call)) is not None:  # `np.isnan(grad_norm)`, `math.isnan(loss)`
                found.append(HostSync(call, read[0], read[1]))
            elif isinstance(func, cst.Attribute) and func.attr.value in ("format", "add_scalar", "add_scalars"):
                value = self._formatted_or_logged(call)
                if value is not None:
                    kind = "`str.format()` of a GPU tensor" if func.attr.value == "format" else f"`{func.attr.value}()` of a GPU tensor"
                    found.append(HostSync(call, kind, value))
        for node, kind in self._tests_and_formats():
            expr = node.expression if isinstance(node, cst.FormattedStringExpression) else node
            if self._test_is_gpu(expr) or (isinstance(self.model.parent.get(node), cst.Assert) and self._asserts_placed_batch(expr)):
                found.append(HostSync(node, kind, expr))
        subscripts, percent_formats = self._subscripts_and_percent_formats
        for operation in percent_formats:
            values = [e.value for e in operation.right.elements] if isinstance(operation.right, cst.Tuple) else [operation.right]
            value = next((v for v in values if self.is_gpu(v, certain=True)), None)
            if value is not None:
                found.append(HostSync(operation, "`%` formatting of a GPU tensor", value))
        for subscript in subscripts:
            index = _single_index(subscript)
            # `classes[pred]`: a Python list reads its index with `__index__`, which copies it to the host
            if index is not None and self.is_gpu(index, certain=True) and self._is_python_sequence(subscript.value):
                found.append(HostSync(subscript, "indexing a Python list with a GPU tensor", index))
            bound = self._gpu_slice_bound(subscript)
            if bound is not None:  # `x[:lengths[i]]`: Python's slice reads its bounds with `__index__` on the host
                found.append(HostSync(subscript, SLICED_WITH_GPU_BOUND, bound))
            read = number_read(model, subscript)
            if read is not None:
                found.append(HostSync(subscript, number_read_kind(model.code(subscript)), read))
        found.extend(self._helper_syncs(own=found))
        return self._left_to_helpers(found)

    def _left_to_helpers(self, found: list[HostSync]) -> list[HostSync]:
        """`found` less the calls of per-step helpers of this module that report their waits at their own lines."""
        kept = []
        for sync in found:
            helper = called_helper(self.model, sync.node) if sync.via is not None and isinstance(sync.node, cst.Call) else None
            if helper is None or not any(other is not sync and self.model.is_inside(other.node, helper) for other in found):
                kept.append(sync)
        return kept

    def _helper_syncs(self, what: str = "sync", own: Optional[list[HostSync]] = None) -> list[HostSync]:
        """Calls of project functions (this module's or another's) that wait for the GPU on every call: on a
        value they make themselves, or on an argument that is a GPU tensor or a GPU module here. `what`:
        "sync" (`.item()`, `print`, ...) or "shape" (an op whose output size depends on the data). A call of a
        method of this module that is per-step code itself (`ModuleContext.stepped`) and holds one of `own`
        (the syncs found in place) is left to those: the method reports them with the loop named."""
        model = self.model
        found = []
        for call in model.calls:
            callee = model.callee(call)
            if callee is None or self._reported_in_place(call, own or []):
                continue
            # a wait behind a branch this call's path has ruled out (`analysis/excluded_branches.py`) is not reached
            sync = next((
                HostSync(call, entry[1], call, via=entry[2]) for entry in callee.syncs
                if entry[0] == what and not unreached_wait(model, call, entry[2])
            ), None)  # fmt: skip
            in_callee = model.project.reported_in_callee.get(model.project_ref(call) or "", {})
            # the places the per-step method reports itself, whichever argument reaches them (one wait, one finding)
            covered = {
                e[2] for param, level in in_callee.items() for e in callee.effects.get(param, ())
                if e[0] == what and len(e) > 3 and level in (("certain", "likely") if not e[3] else ("certain",))
            }  # fmt: skip
            # a read in a loop of the helper first, whichever argument it reads (`analysis/read_cost.py`: the place its
            # cost comes from), then in the order of the arguments
            given = [(arg, e) for arg, param in model.arguments_to(call, callee) for e in callee.effects.get(param, ())]
            for arg, effect in sorted(given, key=lambda item: "repeated" not in item[1][4:]) if sync is None else ():
                if effect[0] != what or effect[2] in covered or unreached_wait(model, call, effect[2]):
                    continue  # (not this kind, or the per-step method reports it at its line: `analysis/stepped_inputs.py`)
                if self.is_gpu(arg.value, certain=effect[3]) or self.is_gpu_module(arg.value) or self._gpu_parameters(arg.value):
                    sync = HostSync(call, effect[1], arg.value, via=effect[2])
                    break
            if sync is not None:
                found.append(sync)
        return found

    def _gpu_parameters(self, expr: cst.BaseExpression) -> bool:
        """`model.parameters()` / `model.named_parameters()` of a GPU module: its parameters and their grads are GPU tensors."""
        return (
            isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in ("parameters", "named_parameters") and self.is_gpu_module(expr.func.value)
        )  # fmt: skip

    def _reported_in_place(self, call: cst.Call, own: list[HostSync]) -> bool:
        ref = self.model.project_ref(call) if self.model.project.stepped else None
        if ref is None or ref not in self.model.project.stepped:
            return False
        owner, _, method = ref.partition(".")
        info = self.model.classes.get(owner)
        body = info.methods.get(method) if info is not None else None
        return body is not None and any(self.model.is_inside(sync.node, body) for sync in own)

    def _gpu_slice_bound(self, subscript: cst.Subscript) -> Optional[cst.BaseExpression]:
        """A slice bound of `subscript` that is surely a GPU tensor (`mels[i, :, :mel_lengths[i]]`, `x[:n]` with
        `n = lengths.max()`): a tensor or a list reads it with `__index__`, a copy to the host and a wait."""
        return next((b for b in _slice_bounds(subscript) if self.is_gpu(b, certain=True)), None)

    def _formatted_or_logged(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """The GPU tensor that `"...".format(t)`, `writer.add_scalar(tag, t)` or `writer.add_scalars(tag, {...: t})`
        turns into host numbers (TensorBoard's writer calls `.cpu().numpy()` on it)."""
        func = call.func
        assert isinstance(func, cst.Attribute)
        method = func.attr.value
        if method == "format":
            if not self._is_python_sequence(func.value, strings_only=True):
                return None
            values = [a.value for a in call.args if not a.star]
        else:
            keyword = "scalar_value" if method == "add_scalar" else "tag_scalar_dict"
            positional = [a.value for a in call.args if a.keyword is None and not a.star]
            given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword), None)
            value = given if given is not None else positional[1] if len(positional) > 1 else None
            if method == "add_scalars":
                values = [e.value for e in value.elements if isinstance(e, cst.DictElement)] if isinstance(value, cst.Dict) else []
            else:
                values = [value] if value is not None else []
        return next((v for v in values if self.is_gpu(v, certain=True)), None)

    def _is_python_sequence(self, expr: cst.BaseExpression, strings_only: bool = False, depth: int = 0) -> bool:
        """A Python list, tuple or string (a display, `list(...)`, or a name bound only to those)."""
        if depth > 6:
            return False
        if isinstance(expr, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)):
            return True
        if not strings_only and isinstance(expr, (cst.List, cst.Tuple, cst.ListComp)):
            return True
        if not strings_only and isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple", "sorted"):
            return not self.model.bindings_of(expr.func.value, expr)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            writes = self.flow.reaching_writes(key, expr) if key else []
            return bool(writes) and all(
                w.value is not None and self._is_python_sequence(w.value, strings_only, depth + 1) for w in writes
            )
        return False

    @cached_property
    def _subscripts_and_percent_formats(self) -> tuple[list[cst.Subscript], list[cst.BinaryOperation]]:
        """Every subscript, and every `"..." % values` operation, in source order."""
        subscripts, formats = [], []
        for node in self.model.parent:
            kind = type(node)
            if kind is cst.Subscript:
                subscripts.append(node)
            elif kind is cst.BinaryOperation and type(node.operator) is cst.Modulo and isinstance(node.left, (cst.SimpleString, cst.ConcatenatedString)):
                formats.append(node)
        return subscripts, formats

    @cached_property
    def shape_syncs(self) -> list[HostSync]:
        """Every op whose output size depends on GPU data, so the host waits to learn it: `nonzero`, `argwhere`,
        one-argument `torch.where`, `masked_select`, `unique`, `repeat_interleave` with tensor repeats and no
        `output_size`, boolean-mask indexing (`x[x > 0]`); and two hidden blocking transfers: `torch.tensor(<host
        data>, device=<cuda>)` (a copy from pageable memory) and Python `max()` / `min()` of GPU tensors."""
        model = self.model
        found: list[HostSync] = []
        for call in model.calls:
            synced = self._shape_sync(call)
            if synced is not None:
                found.append(HostSync(call, *synced))
        for subscript in self._subscripts_and_percent_formats[0]:
            holder = model.parent.get(subscript)
            if isinstance(holder, (cst.AssignTarget, cst.Del)) or (isinstance(holder, cst.AugAssign) and holder.target is subscript):
                continue  # a masked store: not the read the rule is about
            masks = [e.slice.value for e in subscript.slice if isinstance(e.slice, cst.Index) and self._is_mask(e.slice.value)]
            if any(self.is_gpu(m, certain=True) for m in masks) and self.is_gpu(subscript.value):
                found.append(HostSync(subscript, f"boolean-mask indexing {_DATA_DEPENDENT}", subscript.value))
        found.extend(self._helper_syncs("shape", own=found))
        return self._left_to_helpers(found)

    def _shape_sync(self, call: cst.Call) -> Optional[tuple[str, cst.BaseExpression]]:
        """(kind, GPU value) when `call` makes the host wait for a data-dependent size, a copy or a comparison."""
        model = self.model
        func = call.func
        name = model.call_name(call) or ""
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        if name.startswith("torch.") and name.count(".") == 1:
            op, inputs = name[len("torch.") :], positional
        elif isinstance(func, cst.Attribute) and not name:  # a tensor method: `mask.nonzero()`
            op, inputs = func.attr.value, [func.value, *positional]
        elif isinstance(func, cst.Name) and func.value in ("max", "min") and not model.bindings_of(func.value, call):
            value = next((v for v in positional if self.is_gpu(v, certain=True)), None)
            return (f"Python `{func.value}()` compares GPU tensors on the host", value) if value is not None else None
        else:
            return None
        if op in ("tensor", "as_tensor") and name:
            device, data = keywords.get("device"), keywords.get("data", inputs[0] if inputs else None)
            if makes_empty_tensor(call, op):
                return None  # `torch.tensor([], device=d)`: a start value, no bytes to copy
            if device is not None and self.device_kind(device) == CUDA and data is not None and self._is_host_data(data):
                return f"`torch.{op}()` copies host data to the GPU from pageable memory", data
            return None
        if op in _DATA_DEPENDENT_SHAPE:
            kind, checked = f"`{op}()` {_DATA_DEPENDENT}", inputs[:2] if op == "masked_select" else inputs[:1]
        elif op == "where" and name and len(call.args) == 1:
            kind, checked = f"one-argument `torch.where()` {_DATA_DEPENDENT}", inputs
        elif op == "repeat_interleave" and "output_size" not in keywords:
            # Only tensor repeats have a data-dependent total (`x.repeat_interleave(2)` does not wait).
            repeats = keywords.get("repeats", inputs[1] if len(inputs) > 1 else inputs[0] if name and inputs else None)
            kind, checked = f"`repeat_interleave()` without `output_size` {_DATA_DEPENDENT}", [repeats] if repeats is not None else []
        else:
            return None
        # `torch.nonzero(x)` needs a tensor, so "likely on the GPU" is enough; `x.nonzero()` may be NumPy's
        # (`x.masked_select(m)`, `x.repeat_interleave(r)` are tensor methods only).
        tensor_only = bool(name) or op in _TENSOR_ONLY_METHODS
        value = next((v for v in checked if self.is_gpu(v, certain=not tensor_only)), None)
        return (kind, value) if value is not None else None

    def _is_host_data(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Numbers, lists and CPU tensors: data that `torch.tensor(..., device="cuda")` must copy from the host."""
        if depth > 6 or self.level(expr):
            return False
        if self.is_host(expr) or isinstance(expr, cst.ListComp):
            return True
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            writes = self.flow.reaching_writes(key, expr) if key else []
            return bool(writes) and all(w.value is not None and self._is_host_data(w.value, depth + 1) for w in writes)
        return False

    def _is_mask(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """A boolean tensor expression: a comparison, `~m`, `a & b`, `x.eq(y)`, `torch.isnan(x)`, or a name bound to one."""
        if depth > 6:
            return False
        if isinstance(expr, cst.Comparison):
            return not any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            return self._is_mask(expr.expression, depth + 1)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)):
            return self._is_mask(expr.left, depth + 1) or self._is_mask(expr.right, depth + 1)
        if isinstance(expr, cst.Call):
            name = self.model.call_name(expr) or ""
            last = name[len("torch.") :] if name.startswith("torch.") else expr.func.attr.value if isinstance(expr.func, cst.Attribute) else ""
            return last in _MASK_METHODS
        if isinstance(expr, cst.Attribute) and expr.attr.value in _GRAPH_SPLIT_MASKS and self._dataset_graph(expr.value, depth + 1):
            return True  # `data.train_mask` of a PyG data set's graph: a boolean node mask
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            writes = self.flow.reaching_writes(key, expr) if key else []
            return bool(writes) and all(w.value is not None and not w.is_augmented and self._is_mask(w.value, depth + 1) for w in writes)
        return False

    def _dataset_graph(self, expr: cst.BaseExpression, depth: int) -> bool:
        """A graph of a PyTorch Geometric data set: `dataset[0]` (or `dataset.data`) of `dataset =
        torch_geometric.datasets.Planetoid(...)`, moved with `.to(device)` / `.cuda()` or not, or a name every
        reaching write binds to one."""
        if depth > 6:
            return False
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("to", "cuda"):
            return self._dataset_graph(expr.func.value, depth + 1)
        if isinstance(expr, cst.Subscript) or (isinstance(expr, cst.Attribute) and expr.attr.value == "data"):
            return self._graph_dataset(expr.value, depth + 1)
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            writes = self.flow.reaching_writes(key, expr) if key else []
            return bool(writes) and all(w.value is not None and not w.is_augmented and self._dataset_graph(w.value, depth + 1) for w in writes)
        return False

    def _graph_dataset(self, expr: cst.BaseExpression, depth: int) -> bool:
        if depth > 6:
            return False
        if isinstance(expr, cst.Call):
            return (self.model.call_name(expr) or "").startswith("torch_geometric.datasets.")
        if isinstance(expr, (cst.Name, cst.Attribute)):
            key = dotted_name(expr)
            writes = self.flow.reaching_writes(key, expr) if key else []
            return bool(writes) and all(w.value is not None and not w.is_augmented and self._graph_dataset(w.value, depth + 1) for w in writes)
        return False

    def _syncs_itself(self, call: cst.Call) -> bool:
        func = call.func
        return isinstance(func, cst.Attribute) and func.attr.value in ("cpu", "item", "tolist") and self.is_gpu(func.value)

    def _test_is_gpu(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.BooleanOperation):
            return self._test_is_gpu(expr.left) or self._test_is_gpu(expr.right)
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return self._test_is_gpu(expr.expression)
        if isinstance(expr, cst.Comparison) and any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
            return False
        return self.is_gpu(expr, certain=True)

    def _asserts_placed_batch(self, expr: cst.BaseExpression) -> bool:
        """`assert mask.max() <= 1.0` on a tensor of the batch a framework placed on the device (Lightning's
        `training_step(batch, ...)`, and helpers it hands the batch to): a reduction of the batch read on the host."""
        if isinstance(expr, cst.BooleanOperation):
            return self._asserts_placed_batch(expr.left) or self._asserts_placed_batch(expr.right)
        if not isinstance(expr, cst.Comparison) or any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
            return False
        for side in (expr.left, *(c.comparator for c in expr.comparisons)):
            call = side
            if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in _ASSERTED_REDUCTIONS):
                continue
            root = call.func.value
            while isinstance(root, (cst.Subscript, cst.Attribute)) or (isinstance(root, cst.Name) and self._batch_item(root)):
                if isinstance(root, cst.Name):
                    root = self._batch_item(root)
                    continue
                root = root.value
            if isinstance(root, cst.Name) and self._placed_batch(root):
                return True
        return False

    def _framework_steps_calling(self, node: cst.CSTNode) -> list:
        """The framework step functions of `node`'s class that call the method around `node` on `self`, with the
        placed batch as an argument (`def shared_step(self, batch, stage)` called by `training_step` and
        `validation_step`): training steps first."""
        frameworks = self.model.frameworks
        method = next((a for a in self.model.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
        cls = self.flow.enclosing_class(method) if method is not None and frameworks.step_functions else None
        if cls is None:
            return []
        found = []
        for func, step in frameworks.step_functions.items():
            if not isinstance(func, cst.FunctionDef) or func is method or self.flow.enclosing_class(func) is not cls:
                continue
            for call in self.model.calls_inside(func):
                f = call.func
                if isinstance(f, cst.Attribute) and f.attr.value == method.name.value and dotted_name(f.value) == "self" and any(
                    isinstance(a.value, cst.Name) and a.value.value == step.batch for a in call.args
                ):
                    found.append(step)
                    break
        return sorted(found, key=lambda step: step.role != TRAIN)

    def _placed_batch(self, name: cst.Name) -> bool:
        """`batch` of a framework step, or a parameter of a method of the same class that a step hands its batch
        (`def shared_step(self, batch, stage)` called as `self.shared_step(batch, "train")`)."""
        frameworks = self.model.frameworks
        if frameworks.placed_parameter(name):
            return True
        binders = self.model.bindings_of(name.value, name)
        if len(binders) != 1 or not isinstance(binders[0], cst.Param) or name.value != binders[0].name.value:
            return False
        method = self.model.parent.get(self.model.parent.get(binders[0]))
        if not (isinstance(method, cst.FunctionDef) and any(p.name.value == name.value for p in method.params.params[1:2])):
            return False  # the batch is the method's first parameter after `self`
        from gpulint.analysis.frameworks import LIGHTNING_MODULE  # (it imports this module's roles)

        steps = self._framework_steps_calling(binders[0])
        return bool(steps) and (frameworks.lightning_places if steps[0].framework == LIGHTNING_MODULE.framework else self.model.uses_cuda)

    def _batch_item(self, name: cst.Name) -> Optional[cst.BaseExpression]:
        """`batch["mask"]` for `mask` bound once to it."""
        writes = self.flow.reaching_writes(name.value, name)
        if len(writes) == 1 and isinstance(writes[0].value, cst.Subscript) and not writes[0].is_augmented:
            return writes[0].value
        return None

    def _tests_and_formats(self) -> list[tuple[cst.CSTNode, str]]:
        kinds = {cst.If: "a Python `if` on a GPU tensor", cst.While: "a `while` condition on a GPU tensor", cst.Assert: "an `assert` on a GPU tensor"}
        found: list[tuple[cst.CSTNode, str]] = [(node.test, kinds[type(node)]) for node in self.flow.conditions]
        found.extend((node, "formatting a GPU tensor in an f-string") for node in self.flow.formatted)
        return found

    # ---- loop context -------------------------------------------------------------------------

    def step_loop(self, node: cst.CSTNode) -> tuple[Optional[cst.CSTNode], Optional[str]]:
        """The loop around `node` (inside its function) that decides how often `node` runs, and its role:
        TRAIN (one training step per iteration: a backward pass or an optimizer step, directly or through a
        function of this module), EPOCH (each iteration runs a whole training loop), EVAL (runs a GPU
        module or iterates a DataLoader without training), or (None, None). Outside such a loop, a function
        a framework runs once per batch (`training_step`, an ignite step) stands for the loop."""
        for loop in self.model.repeating_loops(node):
            if error_path(self.model, node, loop) is not None:
                return None, None  # it ends the run when it runs (`raise RuntimeError(loss.item())`): at most once
            leaves = leaving_guard(self.model, node, loop)
            if leaves == RETURN:
                break  # `if step >= max_steps: evaluate(); return`: once per call of the function, no loop here repeats it
            if leaves == BREAK or runs_briefly(self.model, loop):
                continue  # a few items, a short range, a check that breaks after a few batches: the loop around it decides
            role = self.loop_role(loop)
            if role is not None:
                return loop, role
        step = self.model.frameworks.step_function(node)
        if step is not None and error_path(self.model, node, step.node) is None:
            return step.node, step.role
        steps = self._framework_steps_calling(node)  # `self.shared_step(batch, "train")` in `training_step`
        if steps and error_path(self.model, node, steps[0].node) is None:
            return steps[0].node, steps[0].role
        from gpulint.analysis.step_code import called_per_step  # (it asks this module's roles)

        called = called_per_step(self.model, node)  # a method a training loop runs through an instance of its class
        if called is not None and error_path(self.model, node, called[0]) is None:
            return called[0], TRAIN
        stored = stored_step(self.model, node)  # a closure kept in an attribute that a step loop calls
        if stored is not None and error_path(self.model, node, stored[0]) is None:
            return stored[0], stored[1]
        local = local_step(self.model, node)  # a `def step(...)` of the enclosing function that its step loop calls
        if local is not None and error_path(self.model, node, local[0]) is None:
            return local[0], local[1]
        helper = helper_step(self.model, node)  # a function of this module that a step loop here calls by name
        if helper is not None and error_path(self.model, node, helper[0]) is None:
            return helper[0], helper[1]
        method = method_step(self.model, node)  # a method a step loop of its class calls on `self` (`_eval_step`)
        if method is not None and error_path(self.model, node, method[0]) is None:
            return method[0], method[1]
        return None, None

    def loop_role(self, loop: Loop) -> Optional[str]:
        if loop in self._roles:
            return self._roles[loop]
        model = self.model
        roles = set()
        steps_here = False  # a backward pass or an optimizer step in this loop's own body
        for call in model.calls_inside(loop):
            around = model.enclosing_loops(call)
            # in a loop of its own, unless that loop repeats the step a few times (`for _ in range(n_critic):`)
            nested = loop not in around or any(not _repeats_briefly(model, inner) for inner in around[: around.index(loop)])
            callee = model.callee(call)  # a function of this module or another: a training step, or a whole epoch
            if callee is not None:
                if callee.trains:
                    roles.add(EPOCH if nested or callee.epoch else TRAIN)
                # else: a project function that does not train, whatever it is handed (`adjust_lr(optimizer)`)
            elif self._is_training_step(call):
                roles.add(EPOCH if nested else TRAIN)
                steps_here = steps_here or not nested and is_training_step(model, call)
            elif isinstance(call.func, cst.Name) and call.func.value in model.functions:
                for func in model.functions.get(call.func.value, []):
                    if trains(model, func):
                        has_loop = any(trains(model, inner) for inner in model.loops_inside(func))
                        roles.add(EPOCH if nested or has_loop else TRAIN)
            elif calls_training_closure(model, call):  # `step_fn(x, y)`, a training step kept in `self.train_step_fn`
                roles.add(EPOCH if nested else TRAIN)
        if EPOCH in roles and not steps_here:
            roles.discard(TRAIN)  # an epoch loop that also zeroes gradients or hands the optimizer to a helper
        if TRAIN in roles and not in_no_grad(model, loop):
            role: Optional[str] = TRAIN
        elif EPOCH in roles:
            role = EPOCH
        elif self._runs_model(loop) and not iterates_a_few_literals(model, loop):
            role = EVAL  # (a loop over a few hand-written items is no evaluation loop: the one around it decides)
        else:
            role = None
        self._roles[loop] = role
        return role

    def _is_training_step(self, call: cst.Call) -> bool:
        """`loss.backward()`, `optimizer.step()`, `optimizer.zero_grad()`, or a call handed the optimizer
        (`loss_scaler(loss, optimizer, ...)`, `amp.scale_loss(loss, optimizer)`)."""
        model = self.model
        if is_training_step(model, call):
            return True
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "zero_grad" and _OPTIMIZER.search(model.code(func.value)):
            return True
        return any(
            not a.star and _OPTIMIZER.fullmatch(model.code(a.value)) and model.code(a.value) not in model.values.parse_args_names
            for a in call.args
        )

    def runs_a_model_method(self, call: cst.Call) -> bool:
        """`model.decode(memory, mask, ys)`, `vgg.features(x)`: a model's own method or submodule (not
        `nn.Module`'s bookkeeping API) given a GPU value: it computes on the GPU, as its forward does."""
        func = call.func
        return (
            isinstance(func, cst.Attribute) and func.attr.value not in _MODULE_API and not func.attr.value.startswith("_")
            and self.is_gpu_module(func.value) and self._args_level(call) > NONE
        )  # fmt: skip

    def _computes_on_gpu_module(self, call: cst.Call) -> bool:
        """`policy.evaluate_actions(obs, masks)`: a GPU module's own method (not `nn.Module`'s API) given
        arguments computes with the module's parameters, on the GPU, whatever it is given."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and call.args and func.attr.value not in _MODULE_API and not func.attr.value.startswith("_")):
            return False
        return self.is_gpu_module(func.value)

    def _runs_model(self, loop: Loop) -> bool:
        model = self.model
        for call in model.calls_inside(loop):
            if self.is_module(call.func) or self.is_gpu_module(call.func) or self.runs_a_model_method(call):
                return True
            if self._received(call.func) == {"gpu"}:
                return True  # a parameter every caller fills with a moved value, called: a model on the GPU
        for call in model.calls_inside(loop) if isinstance(loop, cst.For) else ():
            method = step_method(model, call)  # `self._eval_step(batch)`: a step method of this class, per batch
            if method is not None and self._computes_on_gpu(method):
                return True
            if self._runs_model_once(call):
                return True  # `my_loss = calc_sent_loss(sent)`: a function of this module that runs the model once
        if isinstance(loop, cst.For) and model.frameworks.placed_loop(loop):
            return True  # batches a framework places on the GPU (an accelerate-prepared loader, Ray Data on a GPU run)
        if isinstance(loop, cst.For):
            from gpulint.analysis.hot_loops import iterated_expressions

            loader_names = set()
            for loader in model.dataloaders:
                parent = model.parent.get(loader.call)
                if isinstance(parent, cst.Assign):
                    loader_names.update(model.code(t.target) for t in parent.targets)
            if loader_names & set(iterated_expressions(model, loop)):
                return True
        return False

    def _runs_model_once(self, call: cst.Call) -> bool:
        """`call` runs, by name, the one function of this module so named, which calls a module outside any loop of
        its own (`def calc_sent_loss(sent): ...; return criterion(model(x), y)`): one forward per call, as a step
        method is (a function that loops over a loader itself is a whole pass, not a step)."""
        model = self.model
        func = call.func
        if not isinstance(func, cst.Name):
            return False
        defs = model.functions.get(func.value, [])
        if len(defs) != 1 or model.bindings_of(func.value, call) not in ([], defs) or model.is_inside(call, defs[0]):
            return False
        helper = defs[0]
        return any(
            (self.is_module(inner.func) or self.is_gpu_module(inner.func) or self.runs_a_model_method(inner))
            and not any(model.is_inside(loop, helper) for loop in model.enclosing_loops(inner))
            for inner in model.calls_inside(helper)
        )  # fmt: skip

    def _computes_on_gpu(self, method: cst.FunctionDef) -> bool:
        """A step method runs a model: a module called in it, or one kept in a dict on `self` given a GPU tensor
        (`self.criterion["stft"](y_, y)`)."""
        for call in self.model.calls_inside(method):
            if self.is_module(call.func) or self.is_gpu_module(call.func) or self.runs_a_model_method(call):
                return True
            func = call.func
            if isinstance(func, cst.Subscript) and dotted_name(func.value) and str(dotted_name(func.value)).startswith("self.") and self._args_level(call):
                return True
        return False

    def rate_limit_guard(self, node: cst.CSTNode, loop: Loop) -> Optional[cst.CSTNode]:
        """The `if step % N == 0:` (or `if is_logging_step:`, or an except/finally block) between `node`
        and `loop` that keeps `node` from running every iteration; or the `raise` / error branch it is on."""
        model = self.model
        ended = error_path(model, node, loop)
        if ended is not None:
            return ended
        child = node
        loop_targets = {dotted_name(t) for t in _names_in(loop.target)} if isinstance(loop, cst.For) else set()
        if isinstance(loop, cst.FunctionDef):  # a framework step: `if batch_idx == 0:` runs once per epoch
            loop_targets = {p.name.value for p in loop.params.params}
        for outer in model.enclosing_loops(node):
            if isinstance(outer, cst.For):
                loop_targets |= {dotted_name(t) for t in _names_in(outer.target)}
        for ancestor in model.ancestors(node):
            if ancestor is loop:
                return None
            if isinstance(ancestor, (cst.ExceptHandler, cst.Finally)):
                return ancestor
            if isinstance(ancestor, cst.Try) and child is not ancestor.body:
                return ancestor
            if isinstance(ancestor, (cst.If, cst.While)) and child is ancestor.body and (
                self._rate_limiting(ancestor.test, loop_targets) or self._first_pass(ancestor.test, loop)
            ):
                if isinstance(ancestor, cst.If) and self._rate_limiting(ancestor.test, loop_targets) and runs_own_backward(model, ancestor):
                    child = ancestor
                    continue  # `if (i + 1) % n_critic == 0:` around the generator's step: its cadence, not a log interval
                return ancestor
            child = ancestor
        return None

    def _rate_limiting(self, test: cst.BaseExpression, loop_targets: set) -> bool:
        found = self._once(test, loop_targets)
        every = self._every_time

        class _Scan(cst.CSTVisitor):
            def visit_BinaryOperation(self, node: cst.BinaryOperation) -> Optional[bool]:
                nonlocal found
                if isinstance(node.operator, cst.Modulo):
                    if every(node):
                        return False  # `iter_num % log_interval` with `log_interval = 1`: its name thins nothing
                    found = True
                return None

            def visit_Name(self, node: cst.Name) -> None:
                nonlocal found
                if _RATE_NAME.search(node.value):
                    found = True

            def visit_Call(self, node: cst.Call) -> None:
                nonlocal found
                if divides(node):
                    found = True  # `if divisible_by(i, generate_every):` with `return (num % den) == 0`

        divides = self._divisibility_test
        test.visit(_Scan())
        return found

    def _divisibility_test(self, call: cst.Call) -> bool:
        """`divisible_by(i, generate_every)`: a call of this module's one `def` of that name whose body only returns
        a test of a remainder (`return (num % den) == 0`), given a divisor that is not 1 as shipped: it thins the
        iterations as `i % generate_every == 0` written out does."""
        model = self.model
        if not isinstance(call.func, cst.Name):
            return False
        defs = model.functions.get(call.func.value, [])
        if len(defs) != 1 or model.bindings_of(call.func.value, call) not in ([], defs):
            return False
        func = defs[0]
        body = [s for s in func.body.body if not (isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.Expr)
                                                  and isinstance(s.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))]
        if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or not isinstance(body[0].body[0], cst.Return):
            return False
        returned = body[0].body[0].value
        if returned is None:
            return False
        remainders = [n for n in _nodes(returned) if isinstance(n, cst.BinaryOperation) and isinstance(n.operator, cst.Modulo)]
        if not remainders:
            return False
        params = [p.name.value for p in func.params.params]
        for remainder in remainders:
            divisor = remainder.right
            if not (isinstance(divisor, cst.Name) and divisor.value in params):
                continue
            index = params.index(divisor.value)
            given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == divisor.value), None)
            positional = [a for a in call.args if a.keyword is None and not a.star]
            if given is None and index < len(positional):
                given = positional[index].value
            resolved = model.values.setting(given) if given is not None else None
            if resolved is not None and type(resolved.value) is int and resolved.value == 1:
                return False  # `divisible_by(i, log_every)` with `log_every = 1`: every iteration
        return True

    def _every_time(self, modulo: cst.BinaryOperation) -> bool:
        """`(step + 1) % args.gradient_accumulation_steps` where the divisor is 1 (its argparse default, a
        constant, a shipped YAML setting): always 0, so its test passes every iteration (every optimizer step, no interval)."""
        resolved = self.model.values.setting(modulo.right)  # a YAML file the project ships decides too
        return resolved is not None and type(resolved.value) is int and resolved.value == 1

    def runs_once(self, guard: Optional[cst.CSTNode], loop: Loop) -> bool:
        """A guard from `rate_limit_guard` that lets its body run once per pass of `loop` or only after an
        error: `if step == 0:`, `if self.get_num_updates() == 0:`, `if has_oom:`."""
        if not isinstance(guard, cst.If):
            return False
        loop_targets = {dotted_name(t) for t in _names_in(loop.target)} if isinstance(loop, cst.For) else set()
        return self._once(guard.test, loop_targets) or self._first_pass(guard.test, loop)

    def _first_pass(self, test: cst.BaseExpression, loop: Loop) -> bool:
        """`if preds is None:` where `preds = None` before the loop and the loop sets it to something else:
        the branch runs on the first pass only (the first batch starts the result, later ones extend it)."""
        if self._first_append(test, loop):
            return True
        if not (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and len(test.comparisons) == 1):
            return False
        comparison = test.comparisons[0]
        if not (isinstance(comparison.operator, cst.Is) and literal_value(comparison.comparator) == (True, None)):
            return False
        flow = self.flow
        writes = flow.writes_in_scope(test.left.value, self.model.scope_of(test))
        inside = [w for w in writes if flow.inside(w.statement, loop)]
        before = [w for w in writes if not flow.inside(w.statement, loop) and flow.before(w.statement, loop)]
        return (
            bool(inside) and any(w.value is not None and literal_value(w.value) == (True, None) for w in before)
            and all(w.value is not None and literal_value(w.value) != (True, None) for w in inside)
        )  # fmt: skip

    def _first_append(self, test: cst.BaseExpression, loop: Loop) -> bool:
        """`if len(preds) == 0:` where `preds = []` before the loop, the branch appends to it and the loop never
        rebinds it: true on the first pass only."""
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and isinstance(test.comparisons[0].operator, cst.Equal)):
            return False
        measured, zero = test.left, test.comparisons[0].comparator
        if literal_value(zero) != (True, 0) or not (isinstance(measured, cst.Call) and self.model.call_name(measured) is None):
            return False
        if not (isinstance(measured.func, cst.Name) and measured.func.value == "len" and len(measured.args) == 1):
            return False
        listed = measured.args[0].value
        if not isinstance(listed, cst.Name) or self.model.bindings_of("len", measured):
            return False
        flow = self.flow
        writes = flow.writes_in_scope(listed.value, self.model.scope_of(test))
        before = [w for w in writes if not flow.inside(w.statement, loop) and flow.before(w.statement, loop)]
        after = [w for w in writes if w not in before]  # in the loop, or after it where an outer loop comes back
        if not before or any(flow.inside(w.statement, loop) or self.model.enclosing_loops(w.statement) for w in after):
            return False
        if not all(isinstance(w.value, cst.List) and not w.value.elements for w in before):
            return False
        branch = self.model.parent.get(test)
        return isinstance(branch, cst.If) and any(
            isinstance(c.func, cst.Attribute) and c.func.attr.value == "append" and dotted_name(c.func.value) == listed.value
            for c in self.model.calls_inside(branch.body)
        )

    def _once(self, test: cst.BaseExpression, loop_targets: set) -> bool:
        model = self.model
        found = self._set_on_error(test)

        class _Scan(cst.CSTVisitor):
            def visit_Comparison(self, node: cst.Comparison) -> None:
                nonlocal found
                # `if step == 0:` / `if i == len(loader) - 1:` run once per loop; so does a step counter
                # compared with a number (`if self.get_num_updates() == 0:`).
                if any(isinstance(c.operator, cst.Equal) for c in node.comparisons):
                    sides = [node.left, *(c.comparator for c in node.comparisons)]
                    if any(dotted_name(s) in loop_targets for s in sides):
                        found = True
                    counters = [s for s in sides if isinstance(s, (cst.Name, cst.Attribute, cst.Call)) and _COUNTER.search(model.code(s))]
                    if counters and any(isinstance(s, cst.Integer) for s in sides):
                        found = True

        test.visit(_Scan())
        return found

    def _set_on_error(self, test: cst.BaseExpression) -> bool:
        """`if has_oom:` where only `except` handlers set the flag (to anything but `False`): a recovery path."""
        if not isinstance(test, cst.Name):
            return False
        writes = self.flow.writes_in_scope(test.value, self.model.scope_of(test))
        raised = [w for w in writes if not (w.value is not None and literal_value(w.value) == (True, False))]
        return bool(raised) and all(
            any(isinstance(a, cst.ExceptHandler) for a in self.model.ancestors(w.statement)) for w in raised
        )

    def measures_memory(self, loop: Loop) -> bool:
        """The loop reads the CUDA allocator's statistics (`memory_allocated`, `max_memory_reserved`,
        `reset_peak_memory_stats`, `mem_get_info`, ...): a memory benchmark or profiler."""
        for call in self.model.calls_inside(loop):
            name = self.model.call_name(call) or ""
            if name.startswith("torch.cuda.") and name.rsplit(".", 1)[-1] in _MEMORY_STATISTICS:
                return True
        return False

    def measures_latency(self, loop: Loop) -> bool:
        """The loop reads a clock before and after running a model (`t0 = time.perf_counter(); out = model(x);
        times.append(time.perf_counter() - t0)`): it times each step, and waiting for the GPU is part of that."""
        model, flow = self.model, self.flow
        calls = model.calls_inside(loop)
        clocks = [c for c in calls if self._reads_clock(c)]
        runs = [c for c in calls if self.is_module(c.func) or self.is_gpu_module(c.func)]
        return any(flow.before(a, run) and flow.before(run, b) for run in runs for a in clocks for b in clocks)

    def _reads_clock(self, call: cst.Call) -> bool:
        """`time.perf_counter()` and the like, CUDA events' `elapsed_time`, a step timer (`meter.iter_toc()`,
        `timer.pause()`), or a project helper or method that reads one (`monitor.end_timing()`)."""
        if self.model.call_name(call) in CLOCKS:
            return True
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "elapsed_time":
            return True
        if isinstance(call.func, cst.Attribute) and times_a_step(call.func.attr.value, self.model.code(call.func.value)):
            return True  # a step timer's `toc`, held in an object built elsewhere (`train_meter.iter_toc()`)
        callee = self.model.callee(call)
        return callee is not None and any(entry[0] == "clock" for entry in callee.syncs)

    def frees_memory_beside(self, node: cst.CSTNode) -> bool:
        """A `del` or `gc.collect()` next to `node`'s statement (in its block, or around the `if` that holds
        it): `node` is part of releasing memory on purpose, as after `del pipeline` between phases."""
        model = self.model
        for sibling in self._statements_beside(node):
            if any(isinstance(small, cst.Del) for small in sibling.body):
                return True
            if any(model.call_name(c) == "gc.collect" for c in model.calls_inside(sibling)):
                return True
        return False

    def deletes_model_beside(self, node: cst.CSTNode) -> bool:
        """A `del` of a model or pipeline next to `node`'s statement: `node` releases what that model held,
        once per phase (a concept's class images sampled, a configuration benchmarked)."""
        for sibling in self._statements_beside(node):
            for small in sibling.body:
                if isinstance(small, cst.Del) and any(self.is_module(target) for target in _names_in(small.target)):
                    return True
        return False

    def _statements_beside(self, node: cst.CSTNode) -> Iterator[cst.SimpleStatementLine]:
        """The simple statements in `node`'s block, and in the blocks of the `if`s that hold it (two levels)."""
        model = self.model
        statement = model.enclosing_statement(node)
        for _ in range(2):
            block = model.parent.get(statement)
            siblings = block.body if isinstance(block, (cst.IndentedBlock, cst.Module)) else ()
            yield from (s for s in siblings if s is not statement and isinstance(s, cst.SimpleStatementLine))
            holder = model.parent.get(block) if block is not None else None
            if not isinstance(holder, (cst.If, cst.Else)):
                break
            statement = holder if isinstance(holder, cst.If) else model.parent.get(holder)
            if not isinstance(statement, cst.If):
                break

    def in_timing_code(self, node: cst.CSTNode) -> bool:
        """`node` sits in a loop body (or function) that reads a clock or CUDA event timings."""
        model = self.model
        loops = model.enclosing_loops(node)
        region = loops[0] if loops else model.scope_of(node)
        return any(self._reads_clock(call) for call in model.calls_inside(region))


def _repeats_briefly(model: SemanticModel, loop: Loop) -> bool:
    """`for _ in range(n_critic):` with a few passes: the same step repeated, not a pass over data (a loader
    cut short by a `break` stays a loop of its own)."""
    return (
        isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call) and isinstance(loop.iter.func, cst.Name)
        and loop.iter.func.value == "range" and runs_briefly(model, loop)
    )  # fmt: skip


def _is_get_device(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == "get_device" and not call.args


def _chosen_by_backend(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`"cpu" if backend == "gloo" else "cuda"`, or `torch.device(...)` of it (`communication.chosen_by_backend`)."""
    if isinstance(expr, cst.Call) and model.call_name(expr) == "torch.device" and expr.args:
        expr = expr.args[0].value
    return isinstance(expr, cst.IfExp) and chosen_by_backend(re.findall(r"[\'\"](\w+)[\'\"]", model.code(expr.test)))


def received_tensor_level(received: set[str]) -> int:
    """How surely a parameter is a GPU tensor by what the project's calls pass for it (`ProjectIndex.inputs`):
    CERTAIN when every call passes a GPU tensor; LIKELY when one does and no call passes a CPU value or a
    device (the others pass what is not known here: a batch a helper returned, a model's output)."""
    if received == {"gpu"}:
        return CERTAIN
    if "gpu" in received and not received & _NOT_GPU_TENSOR:
        return LIKELY
    return NONE


def _received_module(received: set[str]) -> bool:
    """A parameter some call fills with a module, and none with a GPU tensor: a tensor that one call gives
    (`crit(batch, model(x))`) says the module another names is only the model whose output it is."""
    return bool(received & {"module", "gpu_module"}) and "gpu" not in received


@dataclass(frozen=True)
class HostSync:
    node: cst.CSTNode  # the call, test or f-string part that syncs
    kind: str  # how it syncs, for messages: "`.item()`", "a Python `if` on a GPU tensor"
    value: cst.BaseExpression  # the GPU tensor it reads
    via: Optional[str] = None  # a call of a project helper: where in it the sync is (`utils.py:14`)

    @property
    def gives_host_value(self) -> bool:
        """What the syncing expression evaluates to is on the host: not so for `x[:lengths[i]]`, a GPU view
        whose bound alone is copied to the host."""
        return self.kind != SLICED_WITH_GPU_BOUND


def names_type(call: cst.Call) -> bool:
    """`t.type()` with no type to convert to: the tensor's type name (`"torch.cuda.FloatTensor"`), a Python string."""
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == "type" and not call.args


def _past_number_start(writes: list[Write]) -> list[Write]:
    """`loss = 0`, then `loss += crit(out, y)` in a loop: the number is only the start value of a sum that the loop
    turns into what it adds (a read after a loop that never ran sees 0, and training code counts on the loop)."""
    numbers = [w for w in writes if not w.is_augmented and isinstance(w.value, (cst.Integer, cst.Float))]
    if not numbers or len(numbers) == len(writes) or not all(w.is_augmented for w in writes if w not in numbers):
        return writes
    return [w for w in writes if w not in numbers]


def _moved_module_call(expr: cst.BaseExpression) -> bool:
    """`Net(...).cuda()`, `Net(...).to(device)`: a module's own move, which returns the module itself."""
    return (
        isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("cuda", "to")
    )  # fmt: skip


def _empty_dict(model, value: cst.BaseExpression) -> bool:
    """`{}`, `dict()`, `OrderedDict()`: a dict that holds only what is stored into it later."""
    if isinstance(value, cst.Dict):
        return not value.elements
    return isinstance(value, cst.Call) and not value.args and (model.call_name(value) or model.code(value.func)) in (
        "dict", "collections.OrderedDict", "OrderedDict",
    )  # fmt: skip


def _assignments(scope: cst.CSTNode) -> list[cst.Assign]:
    """The assignments in `scope`, not those of nested functions or classes."""
    found: list[cst.Assign] = []

    class _Visitor(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Assign(self, node: cst.Assign) -> None:
            found.append(node)

    scope.visit(_Visitor())
    return found


def _slice_bounds(subscript: cst.Subscript) -> Iterator[cst.BaseExpression]:
    """The bounds and steps of the slices of `xs[a:b]`, `x[i, :n, ::s]`."""
    for element in subscript.slice:
        part = element.slice
        if isinstance(part, cst.Slice):
            yield from (bound for bound in (part.lower, part.upper, part.step) if bound is not None)


def _single_index(subscript: cst.Subscript) -> Optional[cst.BaseExpression]:
    """`i` in `xs[i]` (not a slice, not several indices)."""
    if len(subscript.slice) == 1 and isinstance(subscript.slice[0].slice, cst.Index):
        return subscript.slice[0].slice.value
    return None


def _names_in(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        out = []
        for element in target.elements:
            out.extend(_names_in(element.value))
        return out
    if isinstance(target, (cst.Name, cst.Attribute)):
        return [target]
    return []


def _moved_tuple(returned) -> bool:
    """A project function's result that is a tuple of GPU tensors (`return x.to(device), y.to(device)`)."""
    return returned is not None and returned[0] == "tuple" and bool(returned[1]) and all(r == ("gpu",) for r in returned[1])


def _nodes(expr: cst.CSTNode) -> list[cst.CSTNode]:
    """`expr` and every node inside it."""
    found: list[cst.CSTNode] = []

    class _All(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            found.append(node)
            return True

    expr.visit(_All())
    return found
