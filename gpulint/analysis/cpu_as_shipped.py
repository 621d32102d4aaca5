"""A notebook that runs on the CPU as shipped: every piece of its own GPU evidence is in code that never runs with
the values the notebook writes, or only asks whether a device is CUDA, and the project gives it none.

    def gpu_setup(use_gpu, gpu_id):
        if torch.cuda.is_available() and use_gpu:      # False as shipped: `use_gpu` is False at every call
            device = torch.device("cuda")
        else:
            device = torch.device("cpu")
        return device

    use_gpu = False; gpu_id = -1                       # the notebook's "select GPU or CPU" cell
    ...
    if device.type == 'cuda':                          # a question: runs only where a device is already CUDA
        torch.cuda.manual_seed(seed)

The flag may reach the call through the notebook's own dicts and functions (`gpu['use'] = use_gpu;
config['gpu'] = gpu; main(True, config)`, `analysis/stored_items.py`), and a branch that never runs as shipped
(`if notebook_mode == False:` reading a JSON file, with `notebook_mode = in_ipynb()`,
`analysis/notebook_probes.py`) passes nothing. No batch reaches a GPU there, so the rules that need GPU context
stay silent. A notebook whose flag is True, chosen at run time (`torch.cuda.is_available()`), read from a file
or the command line, or that has any other evidence (`.cuda()`, `"cuda:0"`, a device from another module) is
GPU code as before. Scripts are left alone: their functions are API, and a script's settings come at launch.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.call_arguments import LEFT_OUT
from gpulint.analysis.shipped_paths import UNKNOWN, never_runs, project_ways, runs_as_a_script, shipped_arguments, shipped_value
from gpulint.analysis.summary import _DEVICE_NAME

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# Functions named like the device getter they are (`dist_util.dev()`): they may return a GPU without evidence here.
_DEVICE_GETTER = re.compile(r"^(get_|default_)?(device|dev)$")
_GPU_MODULES = ("torch.cuda.", "torch.accelerator.")


def runs_on_cpu_as_shipped(model: SemanticModel) -> bool:
    """The notebook's GPU evidence all lies where it never runs as shipped (see the module's docstring)."""
    memo = model.memo("runs on the CPU as shipped")
    if model.module not in memo:
        memo[model.module] = _decide(model)
    return memo[model.module]


def _decide(model: SemanticModel) -> bool:
    context = model.project
    if not model.is_notebook or not context.own_evidence_lines or context.project_gpu:
        return False
    if any(_device_getter(model, call) for call in model.calls):
        return False
    by_line = _evidence_nodes(model)
    switched_off = False
    for line in context.own_evidence_lines:
        nodes = by_line.get(line)
        if not nodes:
            return False  # evidence of a kind not looked for here: GPU code
        for node in nodes:
            if never_runs(model, node) or _in_false_test(model, node):
                switched_off = True
            elif not _asks_for_cuda(model, node):
                return False
    return switched_off


def _evidence_nodes(model: SemanticModel) -> dict[int, list[cst.CSTNode]]:
    """Nodes that GPU evidence is spelled with (`"cuda"`, `torch.cuda.*`, `torch.device(...)`, `.cuda()`), by line."""
    found: dict[int, list[cst.CSTNode]] = {}

    def add(node: cst.CSTNode) -> None:
        found.setdefault(model.range(node).start.line, []).append(node)

    for call in model.calls:
        name = model.qualified_name(call.func) or ""
        if name == "torch.device" or (isinstance(call.func, cst.Attribute) and call.func.attr.value == "cuda"):
            add(call)
    for attribute in model.attributes:
        if (model.qualified_name(attribute) or "").startswith(_GPU_MODULES):
            add(attribute)

    class _Strings(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            if node.raw_value.startswith("cuda"):
                add(node)

        def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
            if node.value.startswith("cuda"):
                add(node)

    model.module.visit(_Strings())
    return found


def _in_false_test(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`torch.cuda.is_available()` in `if torch.cuda.is_available() and use_gpu:`, a test False as shipped."""
    child = node
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.If) and child is ancestor.test:
            value = shipped_value(model, ancestor.test)
            return value is not UNKNOWN and not value
        if isinstance(ancestor, (cst.BaseStatement, cst.FunctionDef)):
            return False
        child = ancestor
    return False


def _asks_for_cuda(model: SemanticModel, node: cst.CSTNode) -> bool:
    """In the test or the body of `if <device>.type == "cuda":` (or `== "cuda"`): runs only where a device already
    is CUDA, which only the notebook's other evidence could make it."""
    child = node
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.If) and child is not ancestor.orelse and _is_cuda_question(ancestor.test):
            return True  # (its `else:` runs where the device is not CUDA: evidence there counts)
        child = ancestor
    return False


def _is_cuda_question(test: cst.BaseExpression) -> bool:
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    if not isinstance(test.comparisons[0].operator, (cst.Equal, cst.Is)):
        return False
    right = test.comparisons[0].comparator
    asked = test.left
    if not (isinstance(right, cst.SimpleString) and right.raw_value.split(":")[0] == "cuda"):
        return False
    return isinstance(asked, cst.Name) or (isinstance(asked, cst.Attribute) and asked.attr.value == "type")


def _device_getter(model: SemanticModel, call: cst.Call) -> bool:
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
    if not _DEVICE_GETTER.match(name) or (model.qualified_name(func) or "").startswith("torch."):
        return False  # (`torch.device("cpu")` builds a device; it gets none)
    return not (isinstance(func, cst.Name) and name in model.functions)


def device_parameter_on_cpu(model: SemanticModel, expr: cst.BaseExpression) -> bool:
    """`device` in `def train(model, loader, epochs=20, device="cpu"):` where every call of `train` the project
    makes leaves `device` out (or writes `"cpu"`): the function runs on the CPU as shipped. `expr` is a name bound
    only by that parameter (a device-like name: `device`, `dev`, `*_device`), never rebound in the function; the
    calls are those `shipped_paths` reads: a notebook's or script's own calls of its module-level function, every
    one in sight, or, for a function other modules call, every call in the project (`analysis/call_arguments.py`,
    from the module summaries). A function nobody in the project calls is API (any device may come), and a call
    that passes a variable, `*args` or `**kwargs` leaves it open."""
    if not isinstance(expr, cst.Name) or not _DEVICE_NAME.search(expr.value):
        return False
    binders = model.bindings_of(expr.value, expr)
    if len(binders) != 1 or not isinstance(binders[0], cst.Param) or not _cpu_device(model, binders[0].default):
        return False
    param = binders[0]
    func = model.parent.get(model.parent.get(param))
    if not isinstance(func, cst.FunctionDef):
        return False
    if runs_as_a_script(model):
        given = shipped_arguments(model, param)
        return bool(given) and all(arg is None or _cpu_device(model, arg) for arg in given)
    ways = project_ways(model, func, param)
    return bool(ways) and all(way[0] == LEFT_OUT or (isinstance(way[1], str) and way[1].split(":")[0] == "cpu") for way in ways)


def _cpu_device(model: SemanticModel, expr: Optional[cst.BaseExpression]) -> bool:
    """`"cpu"`, `"cpu:0"`, `torch.device("cpu")`."""
    if isinstance(expr, cst.Call) and model.qualified_name(expr.func) == "torch.device" and len(expr.args) == 1:
        expr = expr.args[0].value
    value = expr.evaluated_value if isinstance(expr, cst.SimpleString) else None
    return isinstance(value, str) and value.split(":")[0] == "cpu"
