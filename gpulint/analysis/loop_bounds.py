"""How many times a loop runs as shipped, when the code says.

A per-step cost (a host read, a tensor made on the CPU, a blocking copy) matters because the loop around it
runs once per batch, thousands of times. Some loops say in the source that they run only a few times: a
robustness or smoke check that stops after a few batches (`for i, (x, y) in enumerate(loader): ... if i > 5:
break`), a loop over a handful of hand-written items (`for name in ["relu", "tanh"]`, a dict literal of six
activation functions), a range of written or default size (`for i in range(1, number_int + 1)` with
`number_int = 10`, eleven image sizes `list(range(256, 1536 + 128, 128))`), a learning-rate range test that
stops after `--num_iter` (default 100) steps. What such a loop repeats runs a few times in all, too few for a
per-iteration cost to add up: the loop around it, if any, decides how often.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from gpulint.analysis.epoch_count import argument_for, shipped_integer
from gpulint.analysis.hot_loops import FEW_ITEMS, GROWING_METHODS, iterates_a_few_literals, trains, wrapper_kind
from gpulint.analysis.model import Loop

if TYPE_CHECKING:
    from gpulint.analysis.model import SemanticModel

# A loop that breaks by its counter within this many iterations runs "a handful" of times.
FEW_ITERATIONS = FEW_ITEMS
# A cost paid once per iteration of a loop that runs at most this many times (a 100-step learning-rate range
# test and the iteration its break test lets through, a dozen image sizes, a ten-image latent walk) adds up to
# a few hundred milliseconds at most: no per-step cost worth a report.
SHORT_LOOP = 128
_COPIES = frozenset({"list", "tuple", "sorted", "reversed", "set"})  # builtins that keep the number of items


def runs_briefly(model: SemanticModel, loop: Loop) -> bool:
    """The loop's body runs at most `SHORT_LOOP` times each time the loop is entered, as shipped: it iterates
    a few hand-written items, a range or a list of known size, or stops by a counter after a known number of
    iterations (`trip_count`)."""
    if not isinstance(loop, (cst.For, cst.While)):
        return False
    known = model.memo("runs briefly")  # asked for every node a per-step rule looks at: once per loop
    if loop not in known:
        if isinstance(loop, cst.For) and iterates_a_few_literals(model, loop):
            known[loop] = True
        else:
            count = trip_count(model, loop)
            known[loop] = count is not None and count <= SHORT_LOOP
    return known[loop]


def trip_count(model: SemanticModel, loop: cst.For | cst.While) -> Optional[int]:
    """At most how many times the loop's body runs each time the loop is entered, with the sizes and the
    command-line defaults the code ships: the number of items it iterates (a literal display, a `range` of
    resolvable bounds, a name bound once to one of these and never grown; through `enumerate`, `tqdm`, `zip`),
    or the bound of a break test on its counter (`break_bound`), whichever is smaller; 1 when the body ends in an
    unconditional `break` or `return` that no `continue` skips (a check of the first batch). None when unknown."""
    counts = [bound for bound, by_index in _break_bounds(model, loop) if not by_index or bound <= FEW_ITERATIONS]
    # (an `enumerate` index bounds a pass over a loader sampled on its first N batches: an evaluation still
    # judged per batch unless N is a handful)
    items = _items(model, loop.iter, loop) if isinstance(loop, cst.For) else None
    counts += [items] if items is not None else []
    if isinstance(loop.body, cst.IndentedBlock) and _ends_in_leaving(loop.body) and not _continues(model, loop):
        counts.append(1)  # `for x, y in loader: print(model(x).shape); break`: a check of the first batch, run once
    return min(counts) if counts else None


def _items(model: SemanticModel, expr: cst.BaseExpression, loop: Loop, depth: int = 0) -> Optional[int]:
    """How many items iterating `expr` hands out, when the source says."""
    if depth > 4:
        return None
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        return None if any(isinstance(e, cst.StarredElement) for e in expr.elements) else len(expr.elements)
    if isinstance(expr, cst.Dict):
        return None if any(isinstance(e, cst.StarredDictElement) for e in expr.elements) else len(expr.elements)
    if isinstance(expr, cst.Name):
        return _bound_items(model, expr, loop, depth)
    if isinstance(expr, cst.Subscript):
        return _sliced_items(model, expr, loop, depth)
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)) and expr.for_in.inner_for_in is None and not expr.for_in.ifs:
        return _items(model, expr.for_in.iter, loop, depth + 1)  # `[int(b) for b in sizes]`: one item per item
    words = _split_words(model, expr)
    if words is not None:
        return words
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    positional = [a.value for a in expr.args if a.keyword is None and not a.star]
    if any(a.star for a in expr.args):
        return None
    if isinstance(func, cst.Name) and not model.module_bindings(func.value):
        if func.value == "range" and 1 <= len(positional) <= 3 and len(positional) == len(expr.args):
            bounds = [int_value(model, a) for a in positional]
            return None if any(b is None for b in bounds) or bounds[-1] == 0 and len(bounds) == 3 else len(range(*bounds))  # type: ignore[misc]
        if func.value in _COPIES and len(positional) == 1:
            return _items(model, positional[0], loop, depth + 1)
    if isinstance(func, cst.Attribute) and func.attr.value in ("keys", "values", "items") and not expr.args:
        return _items(model, func.value, loop, depth + 1)
    wrapper = model.qualified_name(func)
    if wrapper == "itertools.cycle":
        return None  # starts over at the end: endless
    if wrapper == "itertools.islice" and 2 <= len(positional) <= 3 and len(positional) == len(expr.args):
        return _islice_items(model, positional, loop, depth)
    if _small_loader(model, expr, loop):
        return _loader_items(model, expr, loop, depth)
    kind = wrapper_kind(model, expr)
    if kind in ("passthrough", "enumerate") and positional:
        return _items(model, positional[0], loop, depth + 1)
    if kind == "zip":
        counts = [c for c in (_items(model, a, loop, depth + 1) for a in positional) if c is not None]
        return min(counts) if counts else None  # zip stops at its shortest argument
    return None


def _sliced_items(model: SemanticModel, expr: cst.Subscript, loop: Loop, depth: int) -> Optional[int]:
    """`xs[:10]`, `xs[2:12]`: at most `stop - start` items (bounds known as shipped, no step, none negative)."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Slice):
        return None
    cut = expr.slice[0].slice
    start = int_value(model, cut.lower) if cut.lower is not None else 0
    stop = int_value(model, cut.upper) if cut.upper is not None else None
    if cut.step is not None or start is None or stop is None or start < 0 or stop < 0:
        return None
    whole = _items(model, expr.value, loop, depth + 1)
    return max(stop - start, 0) if whole is None else min(max(stop - start, 0), whole)


def _islice_items(model: SemanticModel, positional: list, loop: Loop, depth: int) -> Optional[int]:
    """`islice(it, 10)`, `islice(it, 5, 15[, step])`: at most `stop - start` items (fewer when `it` ends first)."""
    if len(positional) == 2:
        start, stop = 0, int_value(model, positional[1])
    else:
        first = positional[1]
        start = 0 if isinstance(first, cst.Name) and first.value == "None" else int_value(model, first)
        stop = int_value(model, positional[2])
    if start is None or stop is None or start < 0 or stop < 0:
        return None  # `islice(it, None)` runs to the end
    whole = _items(model, positional[0], loop, depth + 1)
    return max(stop - start, 0) if whole is None else min(max(stop - start, 0), whole)


def _small_loader(model: SemanticModel, call: cst.Call, loop: Loop) -> bool:
    """`call` builds a DataLoader (also PyG's) iterated by a loop that trains nothing: a pass over a few samples
    (`DataLoader(val_set[:10], batch_size=1)` for a visualization) is then a short loop. A training loop keeps
    its own count: a few batches trained for many epochs are still one step each."""
    from gpulint.analysis.dataloaders import is_loader_call  # (dataloaders imports residency, which imports us)

    return is_loader_call(model, call) and not trains(model, loop)


def _loader_items(model: SemanticModel, call: cst.Call, loop: Loop, depth: int) -> Optional[int]:
    """At most as many batches as the loader's dataset has samples, when its construction shows the dataset
    (a slice, a `Subset` of a few indices) and no sampler chooses the samples (`RandomSampler(num_samples=...)`
    may draw more); counted only up to a handful (`FEW_ITERATIONS`), like a break test on an `enumerate` index."""
    found = next((d for d in model.dataloaders if d.call is call), None)
    if found is None or not found.known("dataset", "sampler", "batch_sampler"):
        return None
    if found.value("sampler") is not None or found.value("batch_sampler") is not None:
        return None
    dataset = found.value("dataset")
    count = _dataset_items(model, dataset, loop, depth + 1) if dataset is not None else None
    return count if count is not None and count <= FEW_ITERATIONS else None


def _dataset_items(model: SemanticModel, dataset: cst.BaseExpression, loop: Loop, depth: int) -> Optional[int]:
    """The samples of a dataset written as a slice, a display, or `Subset(data, indices)` of known indices."""
    if isinstance(dataset, cst.Name):
        value = _module_value(model, dataset, loop)
        return _dataset_items(model, value, loop, depth + 1) if value is not None and depth < 4 else None
    if isinstance(dataset, cst.Call) and model.qualified_name(dataset.func) == "torch.utils.data.Subset":
        indices = next((a.value for a in dataset.args if a.keyword is not None and a.keyword.value == "indices"), None)
        positional = [a.value for a in dataset.args if a.keyword is None and not a.star]
        indices = indices if indices is not None else positional[1] if len(positional) == 2 else None
        return _items(model, indices, loop, depth + 1) if indices is not None else None
    return _items(model, dataset, loop, depth + 1)


def _module_value(model: SemanticModel, name: cst.Name, loop: Loop) -> Optional[cst.BaseExpression]:
    """The value of the one assignment that binds `name`, in the loop's scope or else at module level."""
    scope = model.scope_of(loop)
    writes = model.dataflow.writes_in_scope(name.value, scope)
    if not writes and not model.bindings.get((id(scope), name.value)):
        writes = model.dataflow.writes_in_scope(name.value, model.module)
    if len(writes) != 1 or writes[0].value is None or writes[0].is_augmented or writes[0].value is name:
        return None
    return writes[0].value


def _split_words(model: SemanticModel, expr: cst.BaseExpression) -> Optional[int]:
    """The number of words of `text.split()` when `text` is a string as shipped: a literal, or a command-line
    option's default (`--batch_sizes "1 2 4 8 16"`, a list the user types as one string)."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "split" and not expr.args):
        return None
    text = expr.func.value
    if isinstance(text, cst.SimpleString):
        value = text.evaluated_value
    else:
        resolved = model.values.setting(text)
        value = resolved.value if resolved is not None else None
    return len(value.split()) if isinstance(value, str) else None


def _bound_items(model: SemanticModel, name: cst.Name, loop: Loop, depth: int) -> Optional[int]:
    """`sizes` bound once in the loop's scope to a display or a range, and never grown or changed in place."""
    flow = model.dataflow
    scope = model.scope_of(loop)
    writes = flow.writes_in_scope(name.value, scope)
    if not writes and not model.bindings.get((id(scope), name.value)):
        value = _module_value(model, name, loop)  # a loader built at module level, iterated in a function
        return _items(model, value, loop, depth + 1) if isinstance(value, cst.Call) and _small_loader(model, value, loop) else None
    if len(writes) != 1 or writes[0].value is None or writes[0].is_augmented or writes[0].value is name:
        return None
    if any(isinstance(c.func, cst.Attribute) and c.func.attr.value in GROWING_METHODS for c in flow.method_calls_in(name.value, scope)):
        return None
    if flow.item_writes.get(name.value):
        return None  # `d[key] = value` adds an entry
    return _items(model, writes[0].value, loop, depth + 1)


def int_value(model: SemanticModel, expr: cst.BaseExpression) -> Optional[int]:
    """The integer `expr` has as shipped: a literal, a name bound once to one, what the job files or the
    argparse default give a command-line option, a setting, `a + b` of such values (`epoch_count`'s reading)."""
    literal = _literal_int(expr)
    if literal is not None:
        return literal
    shipped = shipped_integer(model, expr)
    return shipped if shipped is not None or not isinstance(expr, cst.Name) else _reaching_literal(model, expr)


def _reaching_literal(model: SemanticModel, name: cst.Name) -> Optional[int]:
    """The largest of the integer literals a name may hold where it is read, when every write that reaches the
    read assigns one (`n_steps = 5` in one notebook cell, `n_steps = 40` in the next: each loop sees its own) and
    no loop around the read writes the name again."""
    flow = model.dataflow
    writes = flow.reaching_writes(name.value, name)
    loops = model.enclosing_loops(name)
    written = flow.writes_in_scope(name.value, model.scope_of(name))
    if not writes or any(model.is_inside(w.statement, loop) for w in written for loop in loops):
        return None
    values = [_literal_int(w.value) if w.value is not None and not w.is_augmented else None for w in writes]
    return None if any(v is None for v in values) else max(values)  # type: ignore[type-var]


def break_bound(model: SemanticModel, loop: cst.For | cst.While) -> Optional[int]:
    """How many times at most the loop's body runs when one of its own statements (every iteration reaches
    it: no `continue` in the body) is `if i > N: break` (`>=`, `==` too, N a literal) on a counter that counts
    iterations: the `enumerate` index of a `for` (N - start + 2 for `>`, N - start + 1 otherwise), or a name
    set to a literal before the loop and raised by one among the body's own statements (`step += 1`; one more
    iteration allowed, whichever comes first). N is a literal or a value known as shipped (`args.num_iter`
    with its default: `int_value`). None when the code does not say."""
    bounds = [bound for bound, _ in _break_bounds(model, loop)]
    return min(bounds) if bounds else None


def _break_bounds(model: SemanticModel, loop: cst.For | cst.While) -> list[tuple[int, bool]]:
    """`break_bound`'s bounds, each with whether it counts by the `enumerate` index."""
    if not isinstance(loop.body, cst.IndentedBlock) or _continues(model, loop):
        return []
    counters = {}  # name -> (start, slack, jumps)
    counter, start = index_counter(model, loop) if isinstance(loop, cst.For) else (None, 0)
    if counter is not None:
        counters[counter] = (start, 0, False)
    header = _header_index(model, loop) if counter is None and isinstance(loop, cst.For) else None
    counter, start, jumps = raised_counter(model, loop)
    if counter is not None:
        counters.setdefault(counter, (start, 1, jumps))
    if not counters and header is None:
        return []
    bounds = []
    for statement in loop.body.body:
        if not isinstance(statement, cst.If) or statement.orelse is not None or not _ends_in_break(statement.body):
            continue
        test = statement.test
        if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
            continue
        if not isinstance(test.left, cst.Name):
            continue
        if test.left.value not in counters:
            if header is None or test.left.value != header[0] or not _read_as_set_by_header(model, test.left, loop):
                continue
            start, slack, jumps = header[1], 0, False  # the index as the header set it, rebound only later in the body
        else:
            start, slack, jumps = counters[test.left.value]
        by_index = slack == 0
        target = test.comparisons[0]
        limit = shipped_bound(model, target.comparator)
        if limit is None:
            continue
        if isinstance(target.operator, cst.GreaterThan):
            bounds.append((limit - start + 2 + slack, by_index))
        elif isinstance(target.operator, cst.GreaterThanEqual) or isinstance(target.operator, cst.Equal) and not jumps:
            bounds.append((limit - start + 1 + slack, by_index))
    return bounds


def _header_index(model: SemanticModel, loop: cst.For) -> Optional[tuple[str, int]]:
    """The `enumerate` index of the loop's header and its start, also when the body rebinds the name later (an inner
    `for ix, output in enumerate(outputs)` reusing `ix`): `_read_as_set_by_header` then says whether a test reads it
    as the header set it."""
    iterable, target = loop.iter, loop.target
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate"):
        return None
    if model.module_bindings("enumerate") or not isinstance(target, (cst.Tuple, cst.List)) or not target.elements:
        return None
    first = target.elements[0].value
    if not isinstance(first, cst.Name) or len(iterable.args) != 1:
        return None
    return first.value, 0


def _read_as_set_by_header(model: SemanticModel, name: cst.Name, loop: cst.For) -> bool:
    """Every write of `name` that reaches this read is the loop header's own binding: the test counts iterations
    whatever the body rebinds after it."""
    writes = model.dataflow.reaching_writes(name.value, name)
    return bool(writes) and all(w.statement is loop for w in writes)


def shipped_bound(model: SemanticModel, expr: cst.BaseExpression) -> Optional[int]:
    """A break test's bound as shipped (`int_value`), or a parameter's literal default (`num_iter=100` of a
    learning-rate range test in a library its notebooks call): the largest of what the calls of this module pass
    (`sbs.lr_range_test(loader, num_iter=100)`, `self.run(...)`, the default where one passes nothing), the
    default where none calls it here; None when a call passes a value not known."""
    value = int_value(model, expr)
    if value is not None or not isinstance(expr, cst.Name):
        return value
    binders = model.bindings_of(expr.value, expr)
    param = binders[0] if len(binders) == 1 and isinstance(binders[0], cst.Param) else None
    func = model.parent.get(model.parent.get(param)) if param is not None else None
    if not isinstance(func, cst.FunctionDef) or param.default is None or _literal_int(param.default) is None:
        return None
    name = func.name.value
    calls = [c for c in model.calls if (c.func.value if isinstance(c.func, cst.Name) else c.func.attr.value if isinstance(c.func, cst.Attribute) else None) == name]
    found = [_literal_int(param.default)]
    for call in calls:
        given = argument_for(func, param, call)
        value = int_value(model, given) if given is not None and given is not param.default else found[0]
        if value is None:
            return None
        found.append(value)
    return max(found)  # type: ignore[type-var]


def raised_counter(
    model: SemanticModel, loop: cst.For | cst.While | cst.If, within: Optional[cst.For | cst.While] = None
) -> tuple[Optional[str], int, bool]:
    """`n` and its smallest start for `n = 0` (literals only) before the loop and `n += 1` among the body's own
    statements, the only write of `n` in the loop but raises by a positive literal (`n += 1e8` before a
    `break`; then True: the counter may jump over a value, so `n == N` bounds nothing). With `within`, `loop` is
    an `if` in that loop whose own body raises `n` (no `continue` there to skip it), counted the same way in
    `within`: the writes are looked for in `within`, the start before it."""
    outer = within if within is not None else loop
    if not isinstance(loop.body, cst.IndentedBlock) or within is not None and _continues(model, loop):
        return None, 0, False
    for statement in loop.body.body:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            continue
        raised = statement.body[0]
        if not (isinstance(raised, cst.AugAssign) and isinstance(raised.operator, cst.AddAssign) and isinstance(raised.target, cst.Name)):
            continue
        if _literal_int(raised.value) != 1:
            continue
        name = raised.target.value
        flow = model.dataflow
        if any(w.statement is not raised and not _raises(w) for w in flow.writes_in(name, outer)):
            continue  # reset or lowered elsewhere in the loop (`n += 1e8; break` only brings the end nearer)
        starts = [w for w in flow.reaching_writes(name, outer) if not model.is_inside(w.statement, outer)]
        values = [_literal_int(w.value) if w.value is not None and not w.is_augmented else None for w in starts]
        if not values or any(v is None for v in values):
            continue
        return name, min(values), len(flow.writes_in(name, outer)) > 1  # type: ignore[type-var]
    return None, 0, False


def _raises(write) -> bool:
    """`n += 1e8`: a write that only raises the counter by a positive literal."""
    statement = write.statement
    if not (isinstance(statement, cst.AugAssign) and isinstance(statement.operator, cst.AddAssign)):
        return False
    value = statement.value
    return isinstance(value, (cst.Integer, cst.Float)) and float(value.evaluated_value) > 0


def index_counter(model: SemanticModel, loop: cst.For) -> tuple[Optional[str], int]:
    """The name that counts the loop's iterations from a literal start, and that start: an `enumerate` index
    (`enumerate_counter`) or the target of `for i in range(n)` / `range(start, n)` (step 1, `i` not rebound)."""
    counter, start = enumerate_counter(model, loop)
    if counter is not None:
        return counter, start
    iterable, target = loop.iter, loop.target
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range"):
        return None, 0
    args = iterable.args
    if model.module_bindings("range") or not isinstance(target, cst.Name) or not 1 <= len(args) <= 3:
        return None, 0
    if any(a.keyword is not None or a.star for a in args) or len(args) == 3 and _literal_int(args[2].value) != 1:
        return None, 0
    start = 0 if len(args) == 1 else _literal_int(args[0].value)
    if start is None or model.dataflow.writes_in(target.value, loop.body):
        return None, 0  # a start not written as a literal, or a counter rebound in the body
    return target.value, start


def enumerate_counter(model: SemanticModel, loop: cst.For) -> tuple[Optional[str], int]:
    """`i` and the start of `for i, x in enumerate(it[, start])` (the builtin, not a rebinding of it)."""
    iterable, target = loop.iter, loop.target
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "enumerate"):
        return None, 0
    if model.module_bindings("enumerate") or not isinstance(target, (cst.Tuple, cst.List)) or not target.elements:
        return None, 0
    first = target.elements[0].value
    if not isinstance(first, cst.Name):
        return None, 0
    start = 0
    rest = [a for a in iterable.args[1:]]
    if rest:
        value = _literal_int(rest[0].value)
        if value is None or (rest[0].keyword is not None and rest[0].keyword.value != "start"):
            return None, 0
        start = value
    if model.dataflow.writes_in(first.value, loop.body):
        return None, 0  # the counter is rebound in the body: it no longer counts iterations
    return first.value, start


def _ends_in_break(block: cst.BaseSuite) -> bool:
    statements = block.body
    if not statements:
        return False
    last = statements[-1]
    if isinstance(block, cst.SimpleStatementSuite):
        return isinstance(last, cst.Break)
    return isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], cst.Break)


def _ends_in_leaving(block: cst.IndentedBlock) -> bool:
    """The block's last statement is an unconditional `break` or `return`: the loop's body runs once."""
    last = block.body[-1] if block.body else None
    return isinstance(last, cst.SimpleStatementLine) and bool(last.body) and isinstance(last.body[-1], (cst.Break, cst.Return))


class ContinueFinder(cst.CSTVisitor):
    """Finds a `continue` of this loop (not of a loop or function nested in it)."""

    def __init__(self) -> None:
        self.found = False

    def visit_Continue(self, node: cst.Continue) -> None:
        self.found = True

    def visit_For(self, node: cst.For) -> bool:
        return False  # a nested loop's `continue` is its own

    def visit_While(self, node: cst.While) -> bool:
        return False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _continues(model: SemanticModel, loop: cst.For | cst.While) -> bool:
    span = model.range(loop)
    if not any("continue" in line for line in model.lines[span.start.line - 1 : span.end.line]):
        return False  # (most loops: no need to walk the body)
    finder = ContinueFinder()
    loop.body.visit(finder)
    return finder.found


def _literal_int(expr: cst.BaseExpression) -> Optional[int]:
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    return None


def retry_bound(model: SemanticModel, loop: cst.For | cst.While) -> Optional[int]:
    """How many tries at most a retry loop makes: its body ends in an unconditional `return` or `break` (it stops
    at its first success) and it repeats only through a `continue` (a failed try), over a known number of items
    (`for attempt in range(max_attempts)` with `max_attempts = 5`). None for any other loop."""
    if not isinstance(loop, cst.For) or not isinstance(loop.body, cst.IndentedBlock) or not _ends_in_leaving(loop.body):
        return None
    return _items(model, loop.iter, loop)


def runs_a_few_times(model: SemanticModel, node: cst.CSTNode) -> bool:
    """`node` runs at most `SHORT_LOOP` times in all, as shipped: the loop around it breaks after a handful of
    iterations, every loop around it in its function runs briefly (together at most `SHORT_LOOP` iterations:
    two batches for each of ten batch sizes, a VRAM probe),
    and that function runs once: module-level code, or a function every call of which in this module sits
    outside any loop (none called from elsewhere only, nor a method an instance may run per step)."""
    loops = model.repeating_loops(node)
    if not loops:
        return False  # how often code outside a loop runs is its caller's business
    stop = None
    if isinstance(loops[0], (cst.For, cst.While)):
        stop = break_bound(model, loops[0])
        stop = retry_bound(model, loops[0]) if stop is None else stop
    if stop is None or stop > FEW_ITERATIONS:
        return False  # a probe stops after a handful of batches; a short step loop (`--steps 30`) is a trainer's default
    total = 1
    for loop in loops:
        if not runs_briefly(model, loop):
            return False
        count = trip_count(model, loop) if isinstance(loop, (cst.For, cst.While)) else None
        total *= count if count is not None else FEW_ITERATIONS
    if total > SHORT_LOOP:
        return False
    return runs_once(model, model.enclosing_function(node))


def runs_once(model: SemanticModel, func: Optional[cst.FunctionDef], depth: int = 0) -> bool:
    if func is None:
        return True  # module-level code runs once
    if depth > 3 or model.enclosing_function(func) is not None or any(isinstance(a, cst.ClassDef) for a in model.ancestors(func)):
        return False  # a closure or a method: whoever holds it may call it per step
    calls = model.calls_of(func.name.value)
    return bool(calls) and all(
        not model.repeating_loops(call) and model.enclosing_function(call) is not func
        and runs_once(model, model.enclosing_function(call), depth + 1)
        for call in calls
    )  # fmt: skip
