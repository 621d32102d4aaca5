"""Pass one (CPython `ast`): data a module's classes and functions hand out from memory, for other modules.

`analysis/batch_cost.py` proves, inside one module, that a dataset's items are only indexed from data held in
memory (workers and pinning would buy nothing). Training code often builds the dataset in `data.py` and the
loader in `train.py`; this module records the same facts in the module's summary so the project index can
answer them across modules (`Callee.held`):

- a class whose `__getitem__` only indexes and converts what it holds (`self.x[i]`), where every attribute it
  reads is built in memory (a tensor, an array, a list, tokenizer output) or comes from a constructor
  parameter: `{"items": [the parameters the callers must give data in memory]}`; a class whose `__call__`
  only stacks or pads what it is given (a collate class): `{"collate": True}`;
- a function that returns such datasets: `"cheap"`, or `["tuple", [...]]` per element (`return train, val`).

Nothing is guessed: a `__getitem__` that opens a file, decodes an image, calls a transform or anything not
known to be a cheap conversion leaves the class out, and an attribute built by an unknown call is not in memory.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Optional

# What `__getitem__` (or a collate function) may call and still only index and convert in-memory data; `batch_cost.py`
# (the LibCST side of the same fact) reads the same tables.
CHEAP_BUILTINS = frozenset({"len", "int", "float", "bool", "range", "slice", "min", "max", "abs", "list", "tuple",
                            "dict", "zip", "enumerate", "isinstance", "sorted", "reversed"})  # fmt: skip
CHEAP_TORCH = frozenset({
    "tensor", "as_tensor", "from_numpy", "stack", "cat", "zeros", "ones", "full", "empty", "zeros_like", "ones_like",
    "full_like", "flip", "where", "LongTensor", "IntTensor", "FloatTensor", "BoolTensor", "ByteTensor", "DoubleTensor",
    "HalfTensor", "Tensor", "nn.utils.rnn.pad_sequence", "nn.functional.pad",
    # packing joins the samples like padding does (a sort by length and a copy)
    "nn.utils.rnn.pack_sequence", "nn.utils.rnn.pack_padded_sequence",
    "arange",  # positions or feature ids of a window: a small range of numbers, like `zeros`
})  # fmt: skip
CHEAP_NUMPY = frozenset({"array", "asarray", "stack", "concatenate", "int64", "int32", "float32", "float64", "zeros", "ones", "arange"})
CHEAP_METHODS = frozenset({
    "long", "int", "float", "half", "double", "bool", "byte", "to", "type", "clone", "detach", "contiguous", "view",
    "reshape", "unsqueeze", "squeeze", "flatten", "permute", "transpose", "expand", "tolist", "numpy", "item",
    "astype", "copy", "items", "keys", "values", "get", "append", "extend", "size", "dim", "flip",
})  # fmt: skip
_IN_MEMORY_BUILTINS = frozenset({"list", "tuple", "dict", "set", "sorted", "len", "int", "float", "str", "range", "sum", "max", "min"})
_IN_MEMORY_MODULES = ("torch.", "numpy.", "pandas.", "json.", "pickle.")
_LAZY = frozenset({"numpy.memmap", "numpy.lib.format.open_memmap"})
_TOKENIZER = re.compile(r"tokeni[sz]er|(^|_)tok($|_)", re.IGNORECASE)
_TOKENIZING_METHODS = frozenset({"encode", "encode_plus", "batch_encode_plus", "convert_tokens_to_ids", "encode_batch"})
_TENSOR_DATASET = "torch.utils.data.TensorDataset"
# Hugging Face `datasets` methods that build a new table once (not per item, unlike `set_transform`).
_EAGER_DATASET_METHODS = frozenset({"map", "filter", "with_format", "set_format", "select", "shuffle", "remove_columns",
                                    "rename_column", "rename_columns", "select_columns", "sort", "flatten_indices"})  # fmt: skip
_MAX_DEPTH = 4
# Methods only a torch tensor has (numpy arrays, lists and tables have none of them): their result is a tensor,
# rows held in memory whatever it was derived from.
TENSOR_ONLY_METHODS = frozenset({"narrow", "t", "contiguous"})

Qualify = Callable[[ast.AST], Optional[str]]

# Library functions that return a `TensorDataset` as one element of a tuple, given these keyword arguments:
# transformers' SQuAD feature conversion, `features, dataset = squad_convert_examples_to_features(...,
# return_dataset="pt")`, converts every example once and hands the tensors over in a TensorDataset.
_TENSOR_DATASET_ELEMENT = {
    "squad_convert_examples_to_features": ("transformers.", 2, 1, ("return_dataset", "pt")),
}


class _Unpacked(ast.AST):
    """`a, b = call(...)`: the element `index` of `count` that the call returns, for one name."""

    _fields = ()

    def __init__(self, call: ast.Call, index: int, count: int) -> None:
        super().__init__()
        self.call, self.index, self.count = call, index, count


def held_data(tree: ast.Module, qualify: Qualify) -> dict[str, Any]:
    """Class name -> {"items": [...], "collate": True}; function name -> "cheap" / ["tuple", [...]]; only
    what is known (absent: unknown)."""
    return _Reader(tree, qualify).run()


class _Reader:
    def __init__(self, tree: ast.Module, qualify: Qualify) -> None:
        self.qualify = qualify
        self.classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        self.functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.owner = {id(f): c.name for c in self.classes.values() for f in c.body if isinstance(f, ast.FunctionDef)}
        self.class_facts: dict[str, dict] = {}
        self._verdicts: dict[tuple[int, str], Any] = {}  # (function, name) -> verdict; in progress: None
        self._streams: dict[int, bool] = {}
        self._locals: dict[int, set[str]] = {}
        self._assignments: dict[int, dict[str, Optional[list[ast.AST]]]] = {}

    def assigned(self, func: ast.FunctionDef, name: str) -> Optional[list[ast.AST]]:
        """Every value `name` is given in `func`; None when one is not a plain assignment (a loop target, an
        unpacking, `with ... as name`)."""
        if id(func) not in self._assignments:
            self._assignments[id(func)] = _assignments(func)
        return self._assignments[id(func)].get(name, [])

    def local(self, func: ast.FunctionDef) -> set[str]:
        if id(func) not in self._locals:
            self._locals[id(func)] = _local_names(func)
        return self._locals[id(func)]

    def run(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name, node in self.classes.items():
            facts = self.class_fact(name)
            if facts:
                found[name] = facts
        for name, node in self.functions.items():
            verdict = self.function_verdict(node)
            if verdict is not None:
                found[name] = verdict
        return found

    # ---- classes ---------------------------------------------------------------------------------

    def class_fact(self, name: str) -> dict:
        if name in self.class_facts:
            return self.class_facts[name]
        self.class_facts[name] = {}  # a cycle proves nothing
        facts: dict[str, Any] = {}
        getitem = self.method(name, "__getitem__")
        if getitem is not None and self.body_cheap(getitem, name, 0):
            needs = self.held_attributes(getitem, name)
            if needs is not None:
                facts["items"] = sorted(needs)
        call = self.method(name, "__call__")
        if call is not None and self.body_cheap(call, name, 0):
            facts["collate"] = True
        self.class_facts[name] = facts
        return facts

    def method(self, cls: str, name: str, depth: int = 0) -> Optional[ast.FunctionDef]:
        node = self.classes.get(cls)
        if node is None or depth > _MAX_DEPTH:
            return None
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == name:
                return item
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in self.classes:
                found = self.method(base.id, name, depth + 1)
                if found is not None:
                    return found
        return None

    def methods(self, cls: str, depth: int = 0) -> list[ast.FunctionDef]:
        node = self.classes.get(cls)
        if node is None or depth > _MAX_DEPTH:
            return []
        found = [item for item in node.body if isinstance(item, ast.FunctionDef)]
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in self.classes:
                found.extend(self.methods(base.id, depth + 1))
        return found

    def held_attributes(self, getitem: ast.FunctionDef, cls: str) -> Optional[set[str]]:
        """The constructor parameters the attributes `__getitem__` reads come from (they must be in memory
        where the class is built); None when one of them is built some other, unknown way."""
        needs: set[str] = set()
        for attr in sorted(_self_reads(getitem)):
            writes = [(m, v) for m in self.methods(cls) for v in _self_writes(m, attr)]
            if not writes:
                return None
            for method, value in writes:
                found = self.in_memory(value, method, 0)
                if found is None:
                    return None
                needs |= found
        return needs

    # ---- what a body does ------------------------------------------------------------------------

    def body_cheap(self, func: ast.FunctionDef, cls: Optional[str], depth: int) -> bool:
        """`func` only indexes and converts: no file, no `with`, no transform, no arithmetic on the sample."""
        if depth > _MAX_DEPTH:
            return False
        local = self.local(func)
        for node in ast.walk(func):
            if isinstance(node, (ast.With, ast.AsyncWith, ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal)):
                return False
            if isinstance(node, ast.Call) and not self.call_cheap(node, cls, local, depth):
                return False
        return not _computes(func)

    def call_cheap(self, call: ast.Call, cls: Optional[str], local: set[str], depth: int) -> bool:
        func = call.func
        if isinstance(func, ast.Name):
            if func.id in CHEAP_BUILTINS and func.id not in self.functions and func.id not in self.classes:
                return True
            target = self.functions.get(func.id)
            if target is not None or func.id in local:
                return isinstance(target, ast.FunctionDef) and func.id not in local and self.body_cheap(target, None, depth + 1)
        elif not isinstance(func, ast.Attribute):
            return False
        elif isinstance(func.value, ast.Name) and func.value.id == "self" and cls is not None:
            method = self.method(cls, func.attr)
            return method is not None and self.body_cheap(method, cls, depth + 1)
        qualified = None if _root(func) in local else self.qualify(func)
        if qualified is not None:
            if qualified.startswith("torch."):
                return qualified[len("torch.") :] in CHEAP_TORCH
            if qualified.startswith("numpy."):
                return qualified[len("numpy.") :] in CHEAP_NUMPY
            return False
        return isinstance(func, ast.Attribute) and func.attr in CHEAP_METHODS

    # ---- data in memory --------------------------------------------------------------------------

    def in_memory(self, node: ast.AST, func: ast.FunctionDef, depth: int) -> Optional[set[str]]:
        """The value is data held in memory: the empty set, or the constructor parameters it comes from
        (when `func` is `__init__`); None when not known to be."""
        if depth > _MAX_DEPTH * 2:
            return None
        if isinstance(node, (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
            return set()
        if isinstance(node, ast.Name):
            last = _last_straight_write(func, node) if node.id != "self" else None
            params = _params(func)
            if node.id in params and last is None:
                return {node.id} if func.name == "__init__" and node.id != "self" else None
            values = [last] if last is not None else self.assigned(func, node.id)
            if not values:
                return None
            return self._all(values, func, depth + 1)
        if isinstance(node, ast.Attribute):
            return self.in_memory(node.value, func, depth + 1)
        if isinstance(node, ast.Subscript):
            return self.in_memory(node.value, func, depth + 1)
        if isinstance(node, ast.BinOp):
            return self._all([node.left, node.right], func, depth + 1)
        if isinstance(node, ast.UnaryOp):
            return self.in_memory(node.operand, func, depth + 1)
        if isinstance(node, ast.Compare):
            return self._all([node.left, *node.comparators], func, depth + 1)
        if isinstance(node, ast.IfExp):
            return self._all([node.body, node.orelse], func, depth + 1)
        if not isinstance(node, ast.Call):
            return None
        callee = node.func
        if isinstance(callee, ast.Name) and callee.id in _IN_MEMORY_BUILTINS and callee.id not in self.functions:
            return set()
        if _tokenizing(node):
            return set()  # token ids
        qualified = None if _root(callee) in self.local(func) else self.qualify(callee)
        if qualified is not None:
            lazy = qualified in _LAZY or any(k.arg in ("mmap", "mmap_mode") for k in node.keywords)
            known = qualified.startswith(_IN_MEMORY_MODULES) and not qualified.startswith("torch.utils.data.")
            return set() if known and not lazy else None
        if isinstance(callee, ast.Attribute):
            if callee.attr in ("read", "readlines", "read_text"):
                return set()
            if isinstance(callee.value, ast.Name) and callee.value.id == "self":
                return self.method_result(callee.attr, func, depth)  # `self.data = self.batchify(...)`
            if callee.attr in TENSOR_ONLY_METHODS:
                return set()  # `data.view(b, -1).t().contiguous()`: a torch tensor
            return self.in_memory(callee.value, func, depth + 1)  # a method of data in memory: derived in memory
        return None

    def method_result(self, name: str, func: ast.FunctionDef, depth: int) -> Optional[set[str]]:
        """What `self.name(...)` returns, for a method of `func`'s class: in memory when every `return` of it is,
        from what the method builds itself (not from its parameters, which are not followed)."""
        cls = self.owner.get(id(func))
        method = self.method(cls, name) if cls is not None else None
        returns = _returns(method) if method is not None else []
        if not returns or any(r.value is None for r in returns):
            return None
        found = self._all([r.value for r in returns], method, depth + 1)  # type: ignore[arg-type]
        return None if found is None or found else found  # (constructor parameters are `__init__`'s own)

    def _all(self, nodes: list, func: ast.FunctionDef, depth: int) -> Optional[set[str]]:
        found: set[str] = set()
        for node in nodes:
            inner = self.in_memory(node, func, depth)
            if inner is None:
                return None
            found |= inner
        return found

    # ---- functions -------------------------------------------------------------------------------

    def function_verdict(self, func: ast.FunctionDef | ast.AsyncFunctionDef) -> Any:
        if not isinstance(func, ast.FunctionDef):
            return None
        return self.returned_verdict(func)

    def returned_verdict(self, func: ast.FunctionDef) -> Any:
        """What every `return` of `func` hands out (as `dataset_verdict`); once per function, a cycle proves nothing."""
        key = (id(func), "<return>")
        if key in self._verdicts:
            return self._verdicts[key]
        self._verdicts[key] = None
        verdicts = [self.dataset_verdict(r.value, func, 0) for r in _returns(func)]
        verdict = None
        if verdicts and all(v is not None and v == verdicts[0] for v in verdicts):
            verdict = verdicts[0]
        self._verdicts[key] = verdict
        return verdict

    def dataset_verdict(self, node: Optional[ast.AST], func: ast.FunctionDef, depth: int) -> Any:
        """"cheap" for a dataset whose items are indexed from memory, ["tuple", [...]] for a tuple of values
        (None where an element is not such a dataset), None when unknown."""
        if node is None or depth > _MAX_DEPTH * 3:
            return None
        if isinstance(node, ast.Tuple):
            parts = [self.dataset_verdict(e, func, depth + 1) for e in node.elts]
            if any(isinstance(e, ast.Starred) for e in node.elts) or all(p is None for p in parts):
                return None
            return ["tuple", parts]
        if isinstance(node, (ast.List, ast.ListComp)):
            return "cheap"  # a list of samples: indexing a Python list
        if isinstance(node, ast.Name):
            key = (id(func), node.id)
            if key in self._verdicts:
                return self._verdicts[key]  # known, or being worked out (`ds = ds.map(...)`: a cycle proves nothing)
            self._verdicts[key] = None
            values = self.assigned(func, node.id)
            verdicts = [self.dataset_verdict(v, func, depth + 1) for v in values or ()]
            verdict = verdicts[0] if verdicts and verdicts[0] is not None and all(v == verdicts[0] for v in verdicts) else None
            self._verdicts[key] = verdict
            return verdict
        if isinstance(node, ast.Subscript):
            return self.dataset_verdict(node.value, func, depth + 1)  # `tokenized["train"]`: a split of it
        if isinstance(node, _Unpacked):
            return self.unpacked_verdict(node, func)
        if not isinstance(node, ast.Call):
            return None
        callee = node.func
        if isinstance(callee, ast.Attribute) and callee.attr in _EAGER_DATASET_METHODS and not self.streams(func):
            if callee.attr == "map" and self.maps_tokenizer(node, func):
                return "cheap"  # a Hugging Face dataset tokenized once by `.map(...)`: rows of token ids
            inner = self.dataset_verdict(callee.value, func, depth + 1)
            return inner if inner == "cheap" else None
        if isinstance(callee, ast.Name) and callee.id in self.classes:
            needs = self.class_fact(callee.id).get("items")
            if needs is None:
                return None
            given = _arguments(self.method(callee.id, "__init__"), node)
            if given is None or any(p not in given or self.in_memory(given[p], func, 0) is None for p in needs):
                return None  # a parameter left to its default, or given data not known to be in memory
            return "cheap"
        if isinstance(callee, ast.Name) and callee.id in ("list", "tuple") and callee.id not in self.functions:
            return "cheap"
        if isinstance(callee, ast.Name) and callee.id not in self.local(func) and isinstance(self.functions.get(callee.id), ast.FunctionDef):
            return self.returned_verdict(self.functions[callee.id])  # `train = make_split(rows)`: what it returns
        qualified = None if _root(callee) in self.local(func) else self.qualify(callee)
        if qualified == _TENSOR_DATASET:
            return "cheap" if all(self.in_memory(a, func, 0) is not None for a in node.args) else None
        if qualified == "torch.load":
            return "cheap"  # read back whole into memory (as `batch_cost` takes any `torch.` value to be)
        return None


    def unpacked_verdict(self, node: _Unpacked, func: ast.FunctionDef) -> Any:
        """`features, dataset = f(...)`: the element's verdict where `f` is this module's function returning tuples
        of that length, or a library function known to return a TensorDataset there."""
        callee = node.call.func
        if isinstance(callee, ast.Name) and callee.id not in self.local(func) and isinstance(self.functions.get(callee.id), ast.FunctionDef):
            returned = self.returned_verdict(self.functions[callee.id])  # type: ignore[arg-type]
            ok = isinstance(returned, list) and len(returned) == 2 and returned[0] == "tuple" and len(returned[1]) == node.count
            return returned[1][node.index] if ok else None
        qualified = None if _root(callee) in self.local(func) else self.qualify(callee)
        known = _TENSOR_DATASET_ELEMENT.get((qualified or "").rsplit(".", 1)[-1])
        if qualified is None or known is None or not qualified.startswith(known[0]) or (node.count, node.index) != known[1:3]:
            return None
        keyword, value = known[3]
        given = next((k.value for k in node.call.keywords if k.arg == keyword), None)
        return "cheap" if isinstance(given, ast.Constant) and given.value == value else None

    def streams(self, func: ast.FunctionDef) -> bool:
        if id(func) not in self._streams:
            self._streams[id(func)] = _streams(func)
        return self._streams[id(func)]

    def maps_tokenizer(self, call: ast.Call, func: ast.FunctionDef) -> bool:
        """`ds.map(tokenize, ...)` where `tokenize` (a function nested in `func` or of this module, or a
        lambda) calls a tokenizer."""
        mapped = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "function"), None)
        if isinstance(mapped, ast.Lambda):
            return any(isinstance(n, ast.Call) and _tokenizing(n) for n in ast.walk(mapped))
        if not isinstance(mapped, ast.Name):
            return False
        nested = [n for n in _own_nodes(func) if isinstance(n, ast.FunctionDef) and n.name == mapped.id]
        target = nested[0] if len(nested) == 1 else self.functions.get(mapped.id) if not nested else None
        return isinstance(target, ast.FunctionDef) and any(isinstance(n, ast.Call) and _tokenizing(n) for n in ast.walk(target))


# ---- helpers ------------------------------------------------------------------------------------


def _streams(func: ast.FunctionDef) -> bool:
    """`load_dataset(..., streaming=True)` or `.to_iterable_dataset()`: `.map` runs per item, lazily."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr == "to_iterable_dataset":
                return True
            if any(k.arg == "streaming" and not (isinstance(k.value, ast.Constant) and k.value.value is False) for k in node.keywords):
                return True
    return False


def _root(node: ast.AST) -> Optional[str]:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _params(func: ast.FunctionDef) -> set[str]:
    a = func.args
    names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    names |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    return names


def _own_nodes(func: ast.FunctionDef):
    """The nodes of `func`'s body, not those of functions or classes nested in it."""
    pending = list(func.body)
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        pending.extend(ast.iter_child_nodes(node))


def _local_names(func: ast.FunctionDef) -> set[str]:
    names = set(_params(func))
    for node in _own_nodes(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def _paired(target: ast.AST, value: ast.AST) -> bool:
    """`a, b = x, y`: names unpacked from a tuple or list written out with as many plain elements."""
    return (
        isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts) and all(isinstance(e, ast.Name) for e in target.elts)
        and not any(isinstance(e, ast.Starred) for e in value.elts)
    )  # fmt: skip


def _assignments(func: ast.FunctionDef) -> dict[str, Optional[list[ast.AST]]]:
    """Name -> the values plain assignments give it in `func`, or None when it is also bound otherwise."""
    found: dict[str, Optional[list[ast.AST]]] = {}

    def add(name: str, value: Optional[ast.AST]) -> None:
        if value is None:
            found[name] = None
        elif found.get(name, []) is not None:
            found.setdefault(name, []).append(value)  # type: ignore[union-attr]

    def others(target: ast.AST) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                add(n.id, None)

    for node in _own_nodes(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    add(target.id, node.value)
                elif _paired(target, node.value):  # `texts, labels = [], []`: each name its own element
                    for name, value in zip(target.elts, node.value.elts):  # type: ignore[attr-defined]
                        add(name.id, value)  # type: ignore[attr-defined]
                elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(node.value, ast.Call) \
                        and all(isinstance(e, ast.Name) for e in target.elts):  # `features, dataset = convert(...)`
                    for index, name in enumerate(target.elts):
                        add(name.id, _Unpacked(node.value, index, len(target.elts)))  # type: ignore[attr-defined]
                elif not isinstance(target, (ast.Subscript, ast.Attribute)):
                    others(target)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
            if node.value is not None:
                add(node.target.id, node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension, ast.NamedExpr)):
            others(node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            others(node.optional_vars)
    return found


def _self_reads(func: ast.FunctionDef) -> set[str]:
    """`self.x` read in `func`, other than as a method called."""
    called = {id(n.func) for n in ast.walk(func) if isinstance(n, ast.Call)}
    return {
        n.attr for n in ast.walk(func)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
        and isinstance(n.ctx, ast.Load) and id(n) not in called
    }  # fmt: skip


def _self_writes(func: ast.FunctionDef, attr: str) -> list[ast.AST]:
    found: list[ast.AST] = []
    for node in ast.walk(func):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        value = getattr(node, "value", None)
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self" and target.attr == attr:
                if value is not None:
                    found.append(value)
    return found


def _last_straight_write(func: ast.FunctionDef, node: ast.Name) -> Optional[ast.AST]:
    """For a name read in a simple statement of `func`'s body (`return data`, `data = data.narrow(...)`): the value
    of the last plain assignment to it in the body before that statement, when nothing between binds it again
    (straight-line code: that value is the one read); None otherwise."""
    body = func.body
    index = next((i for i, s in enumerate(body) if any(n is node for n in ast.walk(s))), None)
    if index is None or not isinstance(body[index], (ast.Return, ast.Assign, ast.Expr)):
        return None
    for j in range(index - 1, -1, -1):
        statement = body[j]
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name) \
                and statement.targets[0].id == node.id:
            return statement.value
        if any(isinstance(n, ast.Name) and n.id == node.id and not isinstance(n.ctx, ast.Load) for n in ast.walk(statement)):
            return None
        if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(statement)):
            return None
    return None


def _returns(func: ast.FunctionDef) -> list[ast.Return]:
    return [n for n in _own_nodes(func) if isinstance(n, ast.Return)]


def _arguments(init: Optional[ast.FunctionDef], call: ast.Call) -> Optional[dict[str, ast.AST]]:
    """Constructor parameter -> the argument `call` gives it; None for `*args` / `**kwargs` calls."""
    if init is None or any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    positional = [p.arg for p in (*init.args.posonlyargs, *init.args.args)][1:]
    given = dict(zip(positional, call.args))
    given.update({k.arg: k.value for k in call.keywords if k.arg})
    return given


def _tokenizing(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _TOKENIZING_METHODS:
        return True
    target = func.value if isinstance(func, ast.Attribute) and func.attr == "__call__" else func
    name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else ""
    return bool(_TOKENIZER.search(name))


def _computes(func: ast.FunctionDef) -> bool:
    """Arithmetic on the sample (normalising, adding noise); arithmetic on the index, on sizes, or joining
    lists of the batch's parts is not."""
    index_names = _params(func) - {"self"}

    def index_like(expr: ast.AST) -> bool:
        if isinstance(expr, ast.Constant) and isinstance(expr.value, int) or isinstance(expr, ast.Name) and expr.id in index_names:
            return True
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            return True
        if isinstance(expr, ast.BinOp):
            if isinstance(expr.op, ast.Add) and all(isinstance(s, (ast.List, ast.ListComp)) for s in (expr.left, expr.right)):
                return True  # `[f[0] for f in batch] + [f[2] for f in batch]`: one list of the samples' parts
            return index_like(expr.left) and index_like(expr.right)
        if isinstance(expr, ast.Subscript):
            return _size(expr.value)  # `prompt.size()[-1]`, `x.shape[0]`
        return _size(expr)

    assignments = [n for n in _own_nodes(func) if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)]
    for _ in range(3):  # `length = x.size()[-1]` then `pad = self.max_len - length`, in any order
        for node in assignments:
            if index_like(node.value):
                index_names.add(node.targets[0].id)
    for node in _own_nodes(func):
        if isinstance(node, ast.Subscript):
            continue
        if isinstance(node, ast.BinOp) and not _inside_subscript(func, node) and not index_like(node):
            return True
    return False


def _size(expr: ast.AST) -> bool:
    """`len(x)`, `x.size()`, `x.size(1)`, `x.shape`: a size, not the sample."""
    if isinstance(expr, ast.Call):
        func = expr.func
        return isinstance(func, ast.Name) and func.id == "len" or isinstance(func, ast.Attribute) and func.attr in ("size", "dim")
    return isinstance(expr, ast.Attribute) and expr.attr == "shape"


def _inside_subscript(func: ast.FunctionDef, target: ast.AST) -> bool:
    for node in ast.walk(func):
        if isinstance(node, ast.Subscript) and any(n is target for n in ast.walk(node.slice)):
            return True
    return False
