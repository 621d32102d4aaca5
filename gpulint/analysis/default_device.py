"""Where the default device may be CUDA: tensors made there are (possibly) GPU-resident.

`torch.set_default_device("cuda")`, `torch.set_default_tensor_type("torch.cuda.FloatTensor")` and a
`with torch.device("cuda"):` block make every tensor factory (`torch.tensor`, `torch.zeros`, `torch.cat` of new
tensors...) allocate on the GPU. A data set built there holds CUDA tensors: DataLoader workers forked from the
training process cannot make CUDA tensors ("Cannot re-initialize CUDA in forked subprocess"), `pin_memory` cannot
pin them, and copying their batches `.to(device)` copies nothing. GPU101, GPU102 and GPU105 stay silent for a
loader over such data (`dataloaders.produces_cuda_batches`).

A default set under a flag (`if args.cuda: torch.set_default_device("cuda")`) counts: the run the code documents
for a GPU passes the flag, and that run's data set lives on the GPU. A default set to the CPU (or `mps`, `meta`)
does not count, and a CUDA default set after the data set is built leaves it on the host.

Three layers, as for the other project facts:

- the module summary (`ast`, `default_device_ranges`): per function, the line ranges in which the default may be
  CUDA (from a setting call to the function's end or to a later call that sets the CPU back; a `with` block's
  lines), and whether the module sets it when it is imported (at module level, outside `if __name__ ==
  "__main__":`: a config or util module every importer runs first);
- the project (`project_facts`): a function is *entered* under a CUDA default when a caller calls it inside such
  a range, or from a function entered so (or its module imports a module that sets it on import); a parameter
  *receives* data made under a CUDA default when a caller passes a value it made (a call's result, or what it
  was itself given) inside such a range, or inside a function entered so;
- the module (`data_made_on_default_cuda`): the expressions that build a loader's data set (`batch_cost`'s
  sources), or the parameter it is, are under a CUDA default.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Callable, Optional

import libcst as cst

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

MODULE_BODY = "<module>"
ON_IMPORT = "<import>"  # a summary key: the module sets a CUDA default when imported (its line)
_SETTERS = frozenset({"torch.set_default_device", "torch.set_default_tensor_type"})
_END = 10**9  # a range open to the end of its function
_MAX_DEPTH = 4


# ---- the module summary (`ast`) ------------------------------------------------------------------


def mentions_default_device(text: str) -> bool:
    return "set_default_" in text or "torch.device(" in text


def default_device_ranges(statements: list[ast.stmt], qualify: Callable[[ast.AST], Optional[str]]) -> dict[str, list]:
    """Function key (`f`, `Class.method`, `<module>`) -> [[first line, last line], ...] in which the default device
    may be CUDA; `<import>` -> [[line]] when the module sets it at import time. `statements`: the module-level
    statements, those inside module-level `if` / `try` blocks too (as the summary reads them)."""
    found: dict[str, list] = {}
    module_body: list[ast.stmt] = []
    for stmt in statements:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _add(found, stmt.name, _function_ranges(stmt, stmt.body, qualify))
        elif isinstance(stmt, ast.ClassDef):
            for method in stmt.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    _add(found, f"{stmt.name}.{method.name}", _function_ranges(method, method.body, qualify))
        elif not isinstance(stmt, (ast.If, ast.Try)):  # (their statements come one by one)
            module_body.append(stmt)
    ranges = _function_ranges(None, module_body, qualify)
    _add(found, MODULE_BODY, ranges)
    on_import = _import_time_sets(module_body, qualify, _guarded_lines(statements))
    if on_import:
        found[ON_IMPORT] = [[min(on_import)]]
    return found


def _add(found: dict[str, list], key: str, ranges: list) -> None:
    if ranges:
        found[key] = ranges


def _function_ranges(node: Optional[ast.AST], body: list[ast.stmt], qualify) -> list:
    end = getattr(node, "end_lineno", None) or _END
    sets: list[tuple[int, bool]] = []  # (line, CUDA?)
    ranges: list[list[int]] = []
    for stmt in body:
        for inner in ast.walk(stmt):
            if isinstance(inner, ast.Call) and qualify(inner.func) in _SETTERS:
                cuda = _sets_cuda(inner, qualify)
                if cuda is not None:
                    sets.append((inner.lineno, cuda))
            elif isinstance(inner, (ast.With, ast.AsyncWith)):
                for item in inner.items:
                    expr = item.context_expr
                    if isinstance(expr, ast.Call) and qualify(expr.func) == "torch.device" and _device_may_be_cuda(expr.args[0] if expr.args else None):
                        ranges.append([inner.lineno, inner.end_lineno or inner.lineno])
    sets.sort()
    for position, (line, cuda) in enumerate(sets):
        if cuda:
            later = [other for other, back in sets[position + 1 :] if not back and other > line]
            ranges.append([line, later[0] if later else end])
    return ranges


def _import_time_sets(module_body: list[ast.stmt], qualify, guarded: set[int]) -> list[int]:
    """Lines of module-level calls that set a CUDA default, outside `if __name__ == "__main__":`."""
    return [
        inner.lineno for stmt in module_body if stmt.lineno not in guarded for inner in ast.walk(stmt)
        if isinstance(inner, ast.Call) and qualify(inner.func) in _SETTERS and _sets_cuda(inner, qualify)
    ]  # fmt: skip


def _guarded_lines(statements: list[ast.stmt]) -> set[int]:
    """The lines of the module's `if __name__ == "__main__":` blocks."""
    found: set[int] = set()
    for stmt in statements:
        if isinstance(stmt, ast.If) and _main_guard(stmt.test):
            found.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return found


def _main_guard(test: ast.AST) -> bool:
    return (
        isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )  # fmt: skip


def _sets_cuda(call: ast.Call, qualify) -> Optional[bool]:
    """True: the call may make CUDA the default; False: it sets a host device back; None: it says nothing."""
    value = call.args[0] if call.args else next((k.value for k in call.keywords), None)
    if value is None:
        return None
    if qualify(call.func) == "torch.set_default_device":
        return _device_may_be_cuda(value)
    return _tensor_type_may_be_cuda(value, qualify)


def _device_may_be_cuda(value: Optional[ast.AST]) -> bool:
    """`"cuda"`, `"cuda:0"`, `torch.device("cuda")`, a device chosen at run time (`device`, `args.device`, `"cuda"
    if ... else "cpu"`); not a literal other device (`"cpu"`, `"mps"`, `"meta"`), nor `None` (no default)."""
    if value is None:
        return False
    if isinstance(value, ast.Constant):
        return isinstance(value.value, (str, int)) and not isinstance(value.value, bool) and (
            isinstance(value.value, int) or value.value.startswith("cuda")
        )
    if isinstance(value, ast.IfExp):
        return _device_may_be_cuda(value.body) or _device_may_be_cuda(value.orelse)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "device":
        return _device_may_be_cuda(value.args[0] if value.args else None)
    return isinstance(value, (ast.Name, ast.Attribute, ast.Subscript, ast.Call))


def _tensor_type_may_be_cuda(value: ast.AST, qualify) -> bool:
    """`"torch.cuda.FloatTensor"`, `torch.cuda.FloatTensor`, or either branch of a conditional of them."""
    if isinstance(value, ast.IfExp):
        return _tensor_type_may_be_cuda(value.body, qualify) or _tensor_type_may_be_cuda(value.orelse, qualify)
    if isinstance(value, ast.Constant):
        return isinstance(value.value, str) and value.value.startswith("torch.cuda.")
    return (qualify(value) or "").startswith("torch.cuda.")


# ---- the project ----------------------------------------------------------------------------------


def _under(ranges: list, line: int) -> bool:
    return any(len(r) == 2 and r[0] <= line <= r[1] for r in ranges)


class _Facts:
    def __init__(self, index: ProjectIndex) -> None:
        self.index = index
        self._entered: dict[tuple[int, str], Optional[str]] = {}
        self._received: dict[tuple[int, str, str], Optional[str]] = {}

    def imports_setter(self, record: ModuleRecord) -> Optional[str]:
        """A project module this one imports sets a CUDA default when imported (or this one does)."""
        own = record.summary.default_devices.get(ON_IMPORT)
        if own:
            return f"{record.shown}:{own[0][0]}"
        for level, module, name in record.summary.imports.values():
            for dotted in (module, f"{module}.{name}" if module else name) if name else (module,):
                imported = self.index.module(record, level, dotted)
                found = imported.summary.default_devices.get(ON_IMPORT) if imported is not None else None
                if found:
                    return f"{imported.shown}:{found[0][0]}"
        return None

    def where(self, record: ModuleRecord, key: str, line: int, depth: int) -> Optional[str]:
        """Where a CUDA default may hold at `line` of function `key`: its own range, or how it is entered."""
        ranges = record.summary.default_devices.get(key, [])
        if _under(ranges, line):
            return f"{record.shown}:{next(r[0] for r in ranges if len(r) == 2 and r[0] <= line <= r[1])}"
        return self.entered(record, key, depth)

    def entered(self, record: ModuleRecord, key: str, depth: int = 0) -> Optional[str]:
        memo = (id(record), key)
        if memo in self._entered:
            return self._entered[memo]
        self._entered[memo] = None  # a cycle of callers adds nothing
        found = self.imports_setter(record) if key != MODULE_BODY else None
        if found is None and depth <= _MAX_DEPTH and key != MODULE_BODY:
            name = key.split(".")[0] if key.endswith(".__init__") else key
            for caller, caller_key, index in self.index.callers(record, name):
                if self.index.is_test(caller):
                    continue
                call = caller.summary.functions[caller_key].calls[index]
                found = self.where(caller, caller_key, call[1], depth + 1)
                if found is not None:
                    break
        self._entered[memo] = found
        return found

    def received(self, record: ModuleRecord, key: str, param: str, depth: int = 0) -> Optional[str]:
        memo = (id(record), key, param)
        if memo in self._received:
            return self._received[memo]
        self._received[memo] = None
        found = None
        f = record.summary.functions.get(key)
        if f is not None and depth <= _MAX_DEPTH:
            name = key.split(".")[0] if key.endswith(".__init__") else key
            for caller, caller_key, index in self.index.callers(record, name):
                if self.index.is_test(caller):
                    continue
                found = self._passed(f, key, param, caller, caller_key, index, depth)
                if found is not None:
                    break
        self._received[memo] = found
        return found

    def _passed(self, f, key: str, param: str, caller: ModuleRecord, caller_key: str, index: int, depth: int) -> Optional[str]:
        from gpulint.analysis.summary import sources_of

        caller_f = caller.summary.functions[caller_key]
        call = caller_f.calls[index]
        positional = f.params
        offset = 1 if positional[:1] == ("self",) and ("." in call[0] or key.endswith(".__init__")) else 0
        values = dict(call[3])
        given = param in values
        if param in positional:
            position = positional.index(param) - offset
            if 0 <= position < len(call[2]):
                values[param], given = call[2][position], True
        if not given:
            return None  # the parameter's default: made where the function is defined
        value = values.get(param)
        sources = sources_of(value)
        if not sources:  # a value the summary does not follow (`dataset_train` of a comprehension): made near the call
            return self.where(caller, caller_key, call[1], depth + 1)
        for source in sources:
            if source.startswith("p:"):
                found = self.received(caller, caller_key, source[2:], depth + 1)
            elif source.startswith("c:"):
                made = caller_f.calls[int(source[2:].partition(".")[0])]
                found = self.where(caller, caller_key, made[1], depth + 1)
            else:
                found = self.where(caller, caller_key, call[1], depth + 1)
            if found is not None:
                return found
        return None


def project_facts(index: ProjectIndex, record: ModuleRecord) -> tuple[dict[str, list], dict[str, str]]:
    """(function key -> line ranges under a possible CUDA default, the whole function where it is entered so;
    `key.param` -> where the data a caller passes for it was made under one)."""
    facts: _Facts = index.computed("default_device", lambda: _Facts(index))
    summary = record.summary
    if not _any_setter(index):
        return {}, {}
    lines: dict[str, list] = {}
    params: dict[str, str] = {}
    for key, f in summary.functions.items():
        ranges = [[r[0], r[1], f"{record.shown}:{r[0]}"] for r in summary.default_devices.get(key, []) if len(r) == 2]
        if key == MODULE_BODY:
            setter = facts.imports_setter(record)
            if setter is not None:
                ranges = [[0, _END, setter]]
        else:
            entered = facts.entered(record, key)
            if entered is not None:
                ranges = [[f.line, _END, entered]]
        if ranges:
            lines[key] = ranges
        for param in (*f.params, *f.kwonly):
            if param in ("self", "cls"):
                continue
            received = facts.received(record, key, param)
            if received is not None:
                params[f"{key}.{param}"] = received
    return lines, params


def _any_setter(index: ProjectIndex) -> bool:
    return index.computed(
        "default_device_any", lambda: any(r.summary.default_devices for r in index.records.values())
    )


# ---- the module (LibCST) -------------------------------------------------------------------------


def function_key(model: SemanticModel, node: cst.CSTNode) -> str:
    """The summary key of the module-level function or method around `node` (`<module>` outside them)."""
    outer: Optional[cst.FunctionDef] = None
    owner: Optional[cst.ClassDef] = None
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.FunctionDef):
            outer, owner = ancestor, None
        elif isinstance(ancestor, cst.ClassDef) and outer is not None and owner is None:
            owner = ancestor
    if outer is None:
        return MODULE_BODY
    return f"{owner.name.value}.{outer.name.value}" if owner is not None else outer.name.value


def on_default_cuda(model: SemanticModel, node: cst.CSTNode) -> Optional[str]:
    """Where a CUDA default may hold when `node` runs (the setting call, or what enters its function so)."""
    ranges = model.project.default_cuda.get(function_key(model, node), ())
    line = model.line_of(node)
    return next((r[2] for r in ranges if r[0] <= line <= r[1]), None)


def data_made_on_default_cuda(model: SemanticModel, dataset: cst.BaseExpression) -> Optional[str]:
    """Where a CUDA default may hold when the data set `dataset` (a loader's) is built: one of the expressions
    that build it runs under one, or it is a parameter some caller passes data it made under one."""
    context = model.project
    if not context.default_cuda and not context.default_cuda_params:
        return None
    param = _parameter_key(model, dataset)
    if param is not None:
        return context.default_cuda_params.get(param)
    sources = model.batch_cost.expression_sources(dataset)
    for source in sources if sources is not None else [dataset]:
        if isinstance(source, cst.Name) and source.value in ("None", "True", "False"):
            continue
        found = _parameter_key(model, source)
        where = context.default_cuda_params.get(found) if found is not None else on_default_cuda(model, source)
        if where is not None:
            return where
    return None


def _parameter_key(model: SemanticModel, expr: Any) -> Optional[str]:
    """`key.param` for a name bound only by a parameter of a module-level function or method."""
    if not isinstance(expr, cst.Name):
        return None
    binders = model.bindings_of(expr.value, expr)
    if len(binders) != 1 or not isinstance(binders[0], cst.Param):
        return None
    func = model.enclosing_function(binders[0])
    if func is None:
        return None
    key = function_key(model, func.body)
    return f"{key}.{expr.value}" if key.rsplit(".", 1)[-1] == func.name.value else None
