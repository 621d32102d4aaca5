"""Branches that run only where there is no GPU: the `else:` of `if torch.cuda.is_available():` (or of
`if use_cuda:` with `use_cuda = torch.cuda.is_available()`, of `if torch.cuda.device_count() > 0:`), the body
of `if not torch.cuda.is_available():` / `if torch.cuda.device_count() == 0:`, of `if device == "cpu":` /
`if device.type == "cpu":`. A GPU-underuse finding there (`DataParallel`, `pin_memory`, no AMP) is about a
run that has no GPU to use, so the linter drops it with the branches that never run as shipped.

Only tests that fail exactly when the machine has no GPU count: the `else:` of `if args.cuda and
torch.cuda.is_available():` also runs on a GPU machine where the user turned CUDA off, and the `else:` of
`if torch.cuda.device_count() > 1:` runs on one GPU; both keep their findings. An `elif` (or a nested `if`)
in such a branch that picks another accelerator (`torch.backends.mps.is_available()`, `device == "mps"`)
runs on that GPU and keeps its findings too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.imports import dotted_name
from gpulint.analysis.shipped_paths import if_statements
from gpulint.analysis.value_resolution import literal_value

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

_MAX_DEPTH = 6
# False exactly when the machine has no GPU (`torch.accelerator` counts every kind).
_AVAILABILITY = frozenset({"torch.cuda.is_available", "torch.accelerator.is_available"})
_COUNTS = frozenset({"torch.cuda.device_count", "torch.accelerator.device_count"})
# Words that name an accelerator other than CUDA: a branch that tests one of them may run on that GPU.
_OTHER_ACCELERATOR = re.compile(r"(?<![a-z])(mps|xpu|npu|hpu|xla|tpu|mlu|ipu)(?![a-z])")
# Objects whose `device` is the run's device (`args.device`, `self.device`, `cfg.MODEL.DEVICE`), unlike a
# tensor's (`batch.device == "cpu"` asks where one batch is, on GPU runs too).
_SETTINGS_ROOTS = frozenset({
    "self", "args", "opt", "opts", "cfg", "config", "conf", "hparams", "params", "options", "flags", "hp",
    "training_args", "train_args", "accelerator", "trainer",
})  # fmt: skip
_DEVICE_ATTRIBUTE = re.compile(r"(^|_)(device|dev)$", re.IGNORECASE)


def gpu_free_rows(model: SemanticModel) -> list[tuple[int, int]]:
    """The line spans of the branches that run only without a GPU (findings there are dropped)."""
    memo = model.memo("gpu-free rows")
    if model.module not in memo:
        spans: list[tuple[int, int]] = []
        kept: list[tuple[int, int]] = []
        for node in if_statements(model):
            if _names_other_accelerator(model, node.test):
                kept.append(_rows(model, node.body))  # `elif torch.backends.mps.is_available():`: an Apple GPU
            if means_no_gpu(model, node.test, when=True):
                spans.append(_rows(model, node.body))
            if node.orelse is not None and means_no_gpu(model, node.test, when=False):
                spans.append(_rows(model, node.orelse.body if isinstance(node.orelse, cst.Else) else node.orelse))
        memo[model.module] = _subtract(spans, kept)  # type: ignore[assignment]
    return memo[model.module]  # type: ignore[return-value]


def means_no_gpu(model: SemanticModel, test: cst.BaseExpression, when: bool, depth: int = 0) -> bool:
    """`test` evaluating to `when` means the machine has no GPU: `torch.cuda.is_available()` false, a name
    bound only to it, `torch.cuda.device_count()` 0, a device equal to `"cpu"`."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return means_no_gpu(model, test.expression, not when, depth + 1)
    if isinstance(test, cst.BooleanOperation):
        sides = (means_no_gpu(model, test.left, when, depth + 1), means_no_gpu(model, test.right, when, depth + 1))
        # `a and b` true needs both true (one side is enough); false may come from either side (both must say so)
        return any(sides) if isinstance(test.operator, cst.And) == when else all(sides)
    if isinstance(test, cst.IfExp):  # `cuda = True if torch.cuda.is_available() else False`
        arms = (literal_value(test.body), literal_value(test.orelse))
        if all(ok and isinstance(value, bool) for ok, value in arms) and arms[0][1] != arms[1][1]:
            return means_no_gpu(model, test.test, when == arms[0][1], depth + 1)
        return False
    if isinstance(test, cst.Call):
        name = model.call_name(test)
        return (name in _AVAILABILITY or name in _COUNTS) and not when  # `if torch.cuda.device_count():`
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        return _comparison_means_no_gpu(model, test, when, depth)
    if isinstance(test, (cst.Name, cst.Attribute)):  # `use_cuda = torch.cuda.is_available()`
        writes = _writes(model, test)
        return bool(writes) and all(means_no_gpu(model, w.value, when, depth + 1) for w in writes)  # type: ignore[arg-type]
    return False


def _comparison_means_no_gpu(model: SemanticModel, test: cst.Comparison, when: bool, depth: int) -> bool:
    operator = test.comparisons[0].operator
    left, right = test.left, test.comparisons[0].comparator
    if isinstance(operator, (cst.Equal, cst.NotEqual)):
        # `device == "cpu"`, `device.type == "cpu"`, `str(device) != "cpu"`: the run's device is the CPU
        equal = when == isinstance(operator, cst.Equal)
        for device, literal in ((left, right), (right, left)):
            if _string(literal) is None or not _run_device(model, device):
                continue
            if equal and _string(literal) == "cpu":
                return True
            # `device == "cuda"` false, with `device` set only to `"cuda"` or `"cpu"`: the CPU
            kinds = _device_strings(model, _unwrapped(device), depth + 1)
            if not equal and _string(literal) == "cuda" and kinds is not None and kinds <= {"cuda", "cpu"}:
                return True
    count, number = (left, right) if _is_count(model, left, depth) else (right, None)
    if number is None:
        return False  # the count on the right (`0 < n_gpu`) is rare; not worth the mirror image
    ok, value = literal_value(number)
    if not ok or type(value) is not int:
        return False
    # Whether `count <op> value` holding (or failing) leaves only a count of 0.
    holds = {
        cst.Equal: lambda n: n == value, cst.NotEqual: lambda n: n != value, cst.LessThan: lambda n: n < value,
        cst.LessThanEqual: lambda n: n <= value, cst.GreaterThan: lambda n: n > value,
        cst.GreaterThanEqual: lambda n: n >= value,
    }.get(type(operator))  # fmt: skip
    if holds is None:
        return False
    return holds(0) == when and all(holds(n) != when for n in (1, 2, 8))


def _is_count(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> bool:
    """`torch.cuda.device_count()`, or a name bound only to it (`n_gpu = torch.cuda.device_count()`)."""
    if isinstance(expr, cst.Call):
        return model.call_name(expr) in _COUNTS
    if isinstance(expr, (cst.Name, cst.Attribute)) and depth < _MAX_DEPTH:
        writes = _writes(model, expr)
        return bool(writes) and all(_is_count(model, w.value, depth + 1) for w in writes)  # type: ignore[arg-type]
    return False


def _writes(model: SemanticModel, expr: cst.BaseExpression) -> list:
    """The writes of `expr` that reach it, when every one assigns a known value."""
    key = dotted_name(expr)
    writes = model.dataflow.reaching_writes(key, expr) if key else []
    return writes if all(w.value is not None and not w.is_augmented for w in writes) else []


def _string(expr: cst.BaseExpression) -> Optional[str]:
    ok, value = literal_value(expr)
    return value if ok and isinstance(value, str) else None


def _unwrapped(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`device` for `str(device)` and `device.type`."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "str" and len(expr.args) == 1:
        expr = expr.args[0].value
    if isinstance(expr, cst.Attribute) and expr.attr.value == "type":
        expr = expr.value
    return expr


def _run_device(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`expr` names the device the run uses (`device`, `args.device`, `self.device.type`), not a tensor's."""
    expr = _unwrapped(expr)
    if isinstance(expr, cst.Name):
        return True
    if not (isinstance(expr, cst.Attribute) and _DEVICE_ATTRIBUTE.search(expr.attr.value)):
        return False
    owner = expr.value  # `args`, `self`, `cfg.MODEL`; not `self.weights` (a tensor held on `self`)
    name = owner.value if isinstance(owner, cst.Name) else owner.attr.value if isinstance(owner, cst.Attribute) else ""
    return name.lower() in _SETTINGS_ROOTS or (isinstance(owner, cst.Attribute) and name.isupper())


def _device_strings(model: SemanticModel, expr: cst.BaseExpression, depth: int) -> Optional[set[str]]:
    """The device kinds `expr` may hold when every way it is set is spelled out (`"cuda" if
    torch.cuda.is_available() else "cpu"`, `torch.device("cuda:0")`), else None."""
    if depth > _MAX_DEPTH:
        return None
    text = _string(expr)
    if text is not None:
        return {text.split(":")[0]}
    if isinstance(expr, cst.IfExp):
        body, orelse = _device_strings(model, expr.body, depth + 1), _device_strings(model, expr.orelse, depth + 1)
        return None if body is None or orelse is None else body | orelse
    if isinstance(expr, cst.Call) and model.call_name(expr) == "torch.device" and len(expr.args) == 1:
        return _device_strings(model, expr.args[0].value, depth + 1)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        writes = _writes(model, expr)
        kinds: set[str] = set()
        for write in writes:
            found = _device_strings(model, write.value, depth + 1)
            if found is None:
                return None
            kinds |= found
        return kinds or None
    return None


def _names_other_accelerator(model: SemanticModel, test: cst.BaseExpression) -> bool:
    """The test mentions a non-CUDA accelerator: `torch.backends.mps.is_available()`, `device == "mps"`."""
    return _OTHER_ACCELERATOR.search(model.code(test).lower()) is not None


def _rows(model: SemanticModel, block: cst.CSTNode) -> tuple[int, int]:
    """The first and last line of a branch's statements (not its `if`/`else:` line)."""
    statements = getattr(block, "body", None)
    if isinstance(block, cst.If):
        return model.range(block).start.line, model.range(block).end.line
    if isinstance(statements, (list, tuple)) and statements:
        return model.range(statements[0]).start.line, model.range(statements[-1]).end.line
    here = model.range(block)  # `else: pass` on one line
    return here.start.line, here.end.line


def _subtract(spans: list[tuple[int, int]], kept: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` less the rows of `kept`."""
    for low, high in kept:
        pieces = []
        for first, last in spans:
            if last < low or first > high:
                pieces.append((first, last))
                continue
            if first < low:
                pieces.append((first, low - 1))
            if last > high:
                pieces.append((high + 1, last))
        spans = pieces
    return spans

