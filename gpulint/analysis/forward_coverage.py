"""Whether a model's `forward` runs every submodule it owns on every training step (GPU407's premise).

`DistributedDataParallel(find_unused_parameters=True)` costs a walk of the autograd graph every step; it can go only
when every parameter gets a gradient on every step. Judges of five corpora never called GPU407 right: the models
that set it needed it, because

- the forward skips modules at random or by a training-time test (zipformer's layer drop,
  `if self.training and random.random() < layerdrop: continue`; Zipformer2's skip rates),
- the forward runs different parts by an argument (`forward(..., forward_generator=True)`: VITS's generator and
  discriminator steps),
- a submodule is built but never run by forward, or only through another method (HuBERT fine-tuning keeps its
  pretraining `final_proj`; a timm ViT run through `forward_features`, `analysis/partial_submodules.py`),
- or the model cannot be seen at all (a library model, a submodule the caller hands to the constructor).

Pass one (`class_runs`, with `ast`, per class of a module) records what the class's `forward` path (`forward` and the
methods of the class it calls on `self`) does with the submodules its `__init__` builds: which it calls whole
(`self.enc(x)`, `for layer in self.layers: x = layer(x)`, `checkpoint(self.block, x)`), which only through another
method (`self.vit.forward_features(x)`), and the first test on the path that may leave modules out (a random draw,
`self.training`, or any other `if` whose branch calls a module, leaves the loop or returns).

Pass two (`coverage`, the project index) composes that through project classes in other modules and through the
project factories that build them (`model = get_model(params)` -> `AsrModel(...)`): "every" when every submodule is
run whole on every call, transitively (library layers of `torch.nn` run whole), ["skips", why] when the code shows a
part left out, None when unknown (a library model, a class with project bases, a submodule handed in by the caller,
`setattr`). `ModuleContext.forward_coverage` gives the verdict of each call reference of a module.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, Callable, Optional

import libcst as cst

from gpulint.analysis.imports import ast_dotted_name

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel
    from gpulint.analysis.project import ModuleRecord, ProjectIndex

EVERY = "every"
_MAX_DEPTH = 6
_NN_MODULE = "torch.nn.Module"
_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.Sequential", "torch.nn.ModuleDict"})
# `torch.nn` classes without parameters: one never run leaves nothing without a gradient
_PARAMETER_FREE = (
    "Dropout", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax", "Identity", "Flatten", "Unflatten",
    "Pool", "Upsample", "ELU", "LeakyReLU", "Mish", "Hardswish", "Softplus", "PixelShuffle", "PixelUnshuffle",
    "ZeroPad", "ConstantPad", "ReflectionPad", "ReplicationPad", "ChannelShuffle", "CosineSimilarity", "PairwiseDistance",
)  # fmt: skip
# `nn.Module` methods that run none of the module's computation
_HOUSEKEEPING = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
    "named_modules", "train", "eval", "to", "cuda", "cpu", "half", "float", "double", "bfloat16", "type",
    "state_dict", "requires_grad_", "size", "dim", "numel",
})  # fmt: skip
_DYNAMIC = frozenset({"setattr", "getattr", "add_module", "register_module"})


def _self_attr(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _call_ref(call: ast.Call, qualify: Callable[[ast.AST], Optional[str]]) -> Optional[str]:
    return qualify(call.func) or ast_dotted_name(call.func)


def class_runs(node: ast.ClassDef, qualify: Callable[[ast.AST], Optional[str]]) -> Optional[dict]:
    """What the `forward` path of class `node` does with the submodules its `__init__` builds; None without a `forward`
    of its own or `__init__`."""
    methods = {m.name: m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init, forward = methods.get("__init__"), methods.get("forward")
    if init is None or forward is None:
        return None
    params = {a.arg for a in [*init.args.args, *init.args.kwonlyargs]}
    owned: dict[str, list] = {}
    dynamic = False
    for sub in ast.walk(init):
        if isinstance(sub, ast.Call) and (ast_dotted_name(sub.func) or "").rsplit(".", 1)[-1] in _DYNAMIC:
            dynamic = True  # `setattr(self, f"layer{i}", ...)`, `self.add_module(...)`: names out of sight
        targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target] if isinstance(sub, ast.AnnAssign) else []
        value = getattr(sub, "value", None)
        for target in targets:
            attr = _self_attr(target)
            if attr is None or value is None:
                continue
            if isinstance(value, ast.Call):
                ref = _call_ref(value, qualify)
                inner = [r for c in ast.walk(value) if isinstance(c, ast.Call) and c is not value and (r := _call_ref(c, qualify))]
                owned.setdefault(attr, []).append([ref or "?", inner])
            elif isinstance(value, ast.Name) and value.id in params:
                owned.setdefault(attr, []).append(["?param", [value.id]])  # the caller hands it in: known from the call
            elif any(isinstance(c, ast.Call) for c in ast.walk(value)):
                owned.setdefault(attr, []).append(["?", []])  # `a if cond else B(...)`
    path, todo = {"forward"}, ["forward"]
    while todo:
        for sub in ast.walk(methods[todo.pop()]):
            if isinstance(sub, ast.Call):
                attr = _self_attr(sub.func)
                if attr in methods and attr not in path:
                    path.add(attr)
                    todo.append(attr)
    whole: set[str] = set()
    partly: set[str] = set()
    varies: Optional[list] = None
    for name in sorted(path):
        method = methods[name]
        callees = {id(c.func) for c in ast.walk(method) if isinstance(c, ast.Call)}
        loop_vars: dict[str, str] = {}  # `for layer in self.layers:` (or `enumerate(self.layers)`): layer -> layers
        for sub in ast.walk(method):
            if isinstance(sub, ast.For):
                iterated = [a for inner in ast.walk(sub.iter) if (a := _self_attr(inner)) is not None and a not in methods]
                if iterated and isinstance(sub.iter, ast.Call) and ast_dotted_name(sub.iter.func) in ("range", "zip"):
                    whole.update(iterated)  # `range(len(self.layers))`: indexed below; `zip(self.a, self.b)`
                for target in ast.walk(sub.target):
                    if isinstance(target, ast.Name) and iterated:
                        loop_vars[target.id] = iterated[0]
        for sub in ast.walk(method):
            if isinstance(sub, ast.Call) and loop_vars:
                func = sub.func
                if isinstance(func, ast.Name) and func.id in loop_vars:
                    whole.add(loop_vars[func.id])  # `x = layer(x)`
                elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in loop_vars:
                    method_name = func.attr
                    (whole if method_name in ("forward", "__call__") else partly if method_name not in _HOUSEKEEPING else set()).add(loop_vars[func.value.id])
                for arg in [*sub.args, *(k.value for k in sub.keywords)]:
                    if isinstance(arg, ast.Name) and arg.id in loop_vars:
                        whole.add(loop_vars[arg.id])  # `checkpoint(layer, x)`
            if isinstance(sub, ast.Call):
                if (ast_dotted_name(sub.func) or "") in _DYNAMIC or (ast_dotted_name(sub.func) or "").endswith(".__getattr__"):
                    dynamic = True
                attr = _self_attr(sub.func)
                if attr is not None and attr not in methods:
                    whole.add(attr)
                elif isinstance(sub.func, ast.Attribute):
                    owner = _self_attr(sub.func.value)
                    if owner is None and isinstance(sub.func.value, ast.Subscript):
                        owner = _self_attr(sub.func.value.value)
                    if owner is not None:
                        (whole if sub.func.attr in ("forward", "__call__") else partly if sub.func.attr not in _HOUSEKEEPING else set()).add(owner)
                elif isinstance(sub.func, ast.Subscript) and _self_attr(sub.func.value) is not None:
                    whole.add(_self_attr(sub.func.value))  # `self.heads[i](x)`
                for arg in [*sub.args, *(k.value for k in sub.keywords)]:
                    attr = _self_attr(arg)
                    if attr is not None and ast_dotted_name(sub.func) not in ("enumerate", "reversed", "zip", "iter", "len"):
                        whole.add(attr)  # `checkpoint(self.block, x)`: the function runs it
            elif isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load) and id(sub) not in callees:
                owner = _self_attr(sub.value)
                if owner is not None and not sub.attr.startswith("__") and sub.attr not in _HOUSEKEEPING:
                    whole.add(owner)  # `self.embed.weight`: a parameter read directly (tied weights)
            if varies is None and isinstance(sub, (ast.If, ast.IfExp, ast.While)):
                varies = _varying_test(sub)
    # a method reached through `self.x.forward` etc. is recorded as whole; a housekeeping call as nothing
    return {
        "line": forward.lineno,
        "owned": owned,
        "whole": sorted(whole),
        "partly": sorted(partly - whole),
        "varies": varies,
        "dynamic": dynamic,
    }


def _varying_test(node: ast.AST) -> Optional[list]:
    """[why, line] when the test of `node` may leave modules out of some calls."""
    test = node.test  # type: ignore[attr-defined]
    for sub in ast.walk(test):
        name = ast_dotted_name(sub.func) if isinstance(sub, ast.Call) else None
        if name and ("random" in name or name.rsplit(".", 1)[-1] in ("rand", "rand_like", "bernoulli", "uniform_")):
            return ["at random", node.lineno]
    if any(_self_attr(sub) == "training" for sub in ast.walk(test)):
        return ["while training (a test of `self.training`)", node.lineno]
    branches = [node.body, node.orelse] if isinstance(node, ast.IfExp) else [*node.body, *node.orelse]  # type: ignore[attr-defined]
    for branch in branches:
        for sub in ast.walk(branch):
            if isinstance(sub, (ast.Continue, ast.Break, ast.Return)):
                return ["by a test of its inputs or settings", node.lineno]
            if isinstance(sub, ast.Call) and (isinstance(sub.func, ast.Name) or _self_attr(sub.func) or _self_attr(getattr(sub.func, "value", None))):
                return ["by a test of its inputs or settings", node.lineno]
    return None


# ---- pass two: the project index -------------------------------------------------------------------------------


def coverage(index: ProjectIndex, record: ModuleRecord, name: str, depth: int = 0, handed: tuple = ()) -> Any:
    """"every", ["skips", why] or None (unknown) for project class `name` of `record`; `handed`: (parameter of its
    `__init__`, verdict of the module the call passes for it) pairs, where known."""
    memo = index.__dict__.setdefault("_forward_coverage", {})
    key = (str(record.path), name, handed)
    if key in memo:
        return memo[key]
    memo[key] = None  # a cycle is unknown
    memo[key] = result = _coverage(index, record, name, depth, dict(handed))
    return result


def _coverage(index: ProjectIndex, record: ModuleRecord, name: str, depth: int, handed: dict) -> Any:
    info = record.summary.classes.get(name)
    if info is None or depth > _MAX_DEPTH:
        return None
    runs = info.runs
    if not runs or runs["dynamic"] or list(info.bases) != [_NN_MODULE]:
        return None  # no forward of its own, names set by `setattr`, or bases whose parts are out of sight
    where = f"`{name}.forward` ({record.shown}:{runs['line']})"
    if runs["varies"]:
        why, line = runs["varies"]
        return ["skips", f"{where} runs some modules only on some calls ({why}, line {line})"]
    unknown = False
    for attr, builds in sorted(runs["owned"].items()):
        for ref, inner in builds:
            verdict = _submodule(index, record, attr, ref, inner, runs, depth, handed)
            if verdict is None:
                unknown = True
            elif verdict != EVERY:
                return ["skips", f"{where}: {verdict}" if isinstance(verdict, str) else verdict[1]]
    return None if unknown else EVERY


def _submodule(index: ProjectIndex, record: ModuleRecord, attr: str, ref: str, inner: list, runs: dict, depth: int, handed: dict) -> Any:
    called = attr in runs["whole"]
    if attr in runs["partly"]:
        return f"runs `self.{attr}` only through another method than its forward"
    if ref == "?param" and called and inner and isinstance(handed.get(inner[0]), (list, tuple)):
        return list(handed[inner[0]])  # the module the caller hands in leaves parameters out (`AsrModel(encoder=Zipformer2(...))`)
    if ref == "?param" and called and inner and handed.get(inner[0]) == EVERY:
        return EVERY
    if ref == "?param" or ref == "?":
        return None if called else EVERY  # handed in by the caller: a module, or a number (`self.dim = dim`)
    if ref.startswith("torch.nn."):
        last = ref.rsplit(".", 1)[-1]
        if last in ("Parameter", "ParameterList", "ParameterDict") or not last[:1].isupper():
            return EVERY if last[:1].isupper() else None  # a parameter used by hand; `nn.init...`, `nn.utils...`
        if ref.startswith("torch.nn.functional."):
            return EVERY
        if not called:
            if any(part in last for part in _PARAMETER_FREE) or last.endswith("Loss"):
                return EVERY
            return f"never runs `self.{attr}` ({last})"
        if ref in _CONTAINERS:
            for inner_ref in inner:
                verdict = _built(index, record, inner_ref, depth)
                if verdict != EVERY:
                    return verdict
        return EVERY
    target = index.symbol(record, ref)
    if target is None or target[0] != "class":
        # a library object (`timm.create_model`, `BertModel.from_pretrained`) or a project factory: out of sight,
        # unless it is plainly no module (`float(x)`, `torch.zeros(n)`) and never run
        last = ref.rsplit(".", 1)[-1]
        if not called and (not last[:1].isupper() or ref.startswith("torch.")) and (target is None or target[0] != "function"):
            return EVERY
        return None
    if not index.is_module_class(target[1], target[2]):
        return EVERY  # a helper object, not a module
    if not called:
        return f"never runs `self.{attr}` ({target[2]})"
    return coverage(index, target[1], target[2], depth + 1)


def _built(index: ProjectIndex, record: ModuleRecord, ref: str, depth: int) -> Any:
    """The verdict of a module a container holds (`nn.ModuleList([Block(d) for _ in range(n)])`)."""
    if ref.startswith("torch.nn."):
        return EVERY
    if ref in ("range", "len", "int", "float", "enumerate", "zip", "list", "dict", "tuple", "str", "min", "max"):
        return EVERY
    target = index.symbol(record, ref)
    if target is None or target[0] != "class":
        return None
    if not index.is_module_class(target[1], target[2]):
        return EVERY
    return coverage(index, target[1], target[2], depth + 1)


def returned_coverage(index: ProjectIndex, record: ModuleRecord, ref: str, depth: int = 0, handed: Any = None) -> Any:
    """The verdict of what calling `ref` (a project class, or a project factory returning one) builds; `handed`:
    for a class, a function of its `__init__` parameters giving what the call passes for them."""
    target = index.symbol(record, ref)
    if target is None or depth > 3:
        return None
    if target[0] == "class":
        if not index.is_module_class(target[1], target[2]):
            return None
        init = target[1].summary.functions.get(f"{target[2]}.__init__")
        given = handed(init) if handed is not None and init is not None else ()
        return coverage(index, target[1], target[2], 0, given)
    if target[0] != "function" or "." in target[2]:
        return None
    f = target[1].summary.functions.get(target[2])
    if f is None or not f.returns:
        return None
    verdicts = []
    for value in f.returns:
        if not (isinstance(value, tuple) and len(value) == 2 and value[0] == "src" and isinstance(value[1], str)):
            return None
        source = value[1]
        if not source.startswith("c:") or not source[2:].isdigit() or int(source[2:]) >= len(f.calls):
            return None
        call = f.calls[int(source[2:])]
        inner = call[0]
        if inner.split(".", 1)[0] in target[1].summary.rebound:
            return None
        verdicts.append(returned_coverage(index, target[1], inner, depth + 1, _handed(index, target[1], f, call, depth)))
    skips = next((v for v in verdicts if isinstance(v, list)), None)
    if skips is not None:
        return skips
    return EVERY if verdicts and all(v == EVERY for v in verdicts) else None


def _handed(index: ProjectIndex, record: ModuleRecord, f: Any, call: tuple, depth: int) -> Callable:
    """For a class built by `call` in factory `f`: (parameter, verdict) of each module the call passes that another
    call of `f` builds (`encoder = get_encoder_model(params); AsrModel(encoder=encoder)`)."""

    def given(init: Any) -> tuple:
        params = [p for p in init.params[1:]]
        found = []
        slots = [*enumerate(call[2]), *call[3].items()]
        for slot, value in slots:
            param = params[slot] if isinstance(slot, int) and slot < len(params) else slot if isinstance(slot, str) else None
            if param is None or not (isinstance(value, tuple) and len(value) == 2 and value[0] == "src" and isinstance(value[1], str)):
                continue
            source = value[1]
            if source.startswith("c:") and source[2:].isdigit() and int(source[2:]) < len(f.calls):
                inner = f.calls[int(source[2:])]
                verdict = returned_coverage(index, record, inner[0], depth + 1, _handed(index, record, f, inner, depth + 1))
                if verdict is not None:
                    found.append((param, verdict if isinstance(verdict, str) else tuple(verdict)))
        return tuple(sorted(found))

    return given


def forward_coverage(index: ProjectIndex, record: ModuleRecord) -> dict[str, Any]:
    """Call reference of `record` (a class, or a factory of the project) -> its verdict, where known."""
    summary = record.summary
    refs = {call[0] for f in summary.functions.values() for call in f.calls if call[0]}
    found = {}
    for ref in sorted(refs):
        verdict = returned_coverage(index, record, ref)
        if verdict is not None:
            found[ref] = verdict
    return found


# ---- pass two, in the module that wraps the model (LibCST) -----------------------------------------------------

_CHAINED = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "train", "requires_grad_", "to_empty"})


def wrapped_coverage(model: SemanticModel, call: cst.Call) -> Any:
    """The verdict for the model a `DistributedDataParallel(...)` call wraps: "every", ["skips", why], or None
    (unknown: not built by a project class or factory the index can follow, or built several ways that disagree)."""
    arg = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "module"), None)
    if arg is None:
        positional = [a for a in call.args if a.keyword is None and not a.star]
        arg = positional[0].value if positional else None
    if arg is None:
        return None
    refs = _built_by(model, arg, set(), 0)
    if not refs:
        return None
    verdicts = [model.project.forward_coverage.get(ref) for ref in refs]
    skips = next((v for v in verdicts if isinstance(v, list)), None)
    if skips is not None:
        return skips
    if not all(v == EVERY for v in verdicts):
        return None
    bypass = _bypassed(model)
    return ["skips", bypass] if bypass else EVERY


def _built_by(model: SemanticModel, expr: cst.BaseExpression, seen: set, depth: int) -> Optional[list[str]]:
    """The call references (as written) that build the module `expr` names; None when something else may."""
    if depth > 8:
        return None
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _CHAINED:
            return _built_by(model, func.value, seen, depth + 1)  # `Net().cuda(rank)`, `model.to(device)`
        return [model.code(func)]
    if isinstance(expr, cst.Name):
        refs: list[str] = []
        line = model.line_of(expr)
        # binders before the use (`model = DDP(model, ...)` rebinds the name after it is read)
        binders = [b for b in model.bindings_of(expr.value, expr) if not model.is_inside(expr, b) and model.line_of(b) < line]
        if not binders:
            return None
        for binder in binders:
            if id(binder) in seen:
                continue  # `model = model.to(device)`: the other binders say what it is
            seen.add(id(binder))
            if not isinstance(binder, (cst.Assign, cst.AnnAssign)) or binder.value is None:
                return None  # a parameter, a loop target, an import: out of sight here
            found = _built_by(model, binder.value, seen, depth + 1)
            if found is None:
                return None
            refs.extend(found)
        return refs
    return None


def _bypassed(model: SemanticModel) -> Optional[str]:
    """A call of a DDP model's inner module other than through its forward (`model.module.generator(...)`,
    `model.module.encoder(x)`): those parts run outside the wrapper's forward, on steps of their own."""
    for call in model.calls:
        func = call.func
        if (
            isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute) and func.value.attr.value == "module"
            and func.attr.value not in _HOUSEKEEPING and func.attr.value not in ("forward", "load_state_dict", "zero_grad", "apply")
        ):  # fmt: skip
            return f"`{model.code(func)}(...)` runs part of the wrapped model outside its forward"
    return None
