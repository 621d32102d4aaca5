"""Host reads inside a loop that cost nothing a rewrite could save.

Facts about the host syncs (`residency.HostSync`) of a loop:

- `needs_host_every_iteration`: the loop needs a GPU value on the host to go on (`drives_loop`), so each
  iteration waits anyway and the other reads in it add a copy, not a stall. Greedy decoding stops at EOS
  (`if topi.item() == EOS: break`), autoregressive sampling builds the next step's input from the host value
  (`word_idx = torch.multinomial(logits.cpu(), 1)[0]; input.fill_(word_idx)`). The wait is the algorithm, not
  a habit: no GPU-side form exists while each iteration depends on the one before through the host. Only
  loops that do not train count: in a training step a branch on a GPU value has a branch-free form, and
  outputs merely collected each step (`preds.append(out.cpu())`) can be copied once after the loop.
- `sizes_a_tensor`: the host value is a size the next allocation or reshape needs (`shape = t.tolist();
  buf = torch.empty(shape, device=d)`, `x.view(n, -1)`, `torch.split(x, counts)`): the host genuinely needs
  it (a pipeline stage receives the shape of what it receives next), so the wait is inherent.
- `needed_on_host`: `sizes_a_tensor`, or the host value is the action handed to an environment
  (`action = policy(state).argmax().item(); obs, reward, done, _ = env.step(action)`): a simulator on the host
  takes the action to produce the next observation, so every step of an RL loop waits for it whatever the
  code does (the read is the algorithm's, in a training loop too), or it decides when the run stops
  (`stops_the_run`: an early-stopping test that moves a patience counter a later test ends the run on).
- `written_out`: in a loop that does not train, the read is the loop's product written out each batch
  (`np.save(path, feats.cpu().numpy())`, `f.write(...)`, `Image.fromarray(arr).save(p)`, a frame shown with
  `imshow`), or collected into a list that the loop itself empties once it has shipped it (`codes.extend(lab)`
  ... `codes = []` every N batches): the copy is the output, and writing per batch bounds the memory. Outputs
  merely collected in memory (`preds.append(out.cpu())`) stay reported: they can be copied once after the loop.
- `queue_drained`: the iteration has already waited for the GPU (`torch.cuda.synchronize()`, or a timing
  helper that synchronizes) and launched no GPU work since, so the read copies a finished value (profiling
  harnesses record `loss.item()` right after their own synchronize).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterator, Optional

import libcst as cst

from gpulint.analysis.error_paths import always_ends, jumps
from gpulint.analysis.generation import generates_every_iteration
from gpulint.analysis.gpu_free_branches import means_no_gpu
from gpulint.analysis.hot_loops import trains
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.summary import CLOCKS, ENVIRONMENT

if TYPE_CHECKING:
    from gpulint.analysis.model import Loop, SemanticModel
    from gpulint.analysis.residency import HostSync

# Hops from the read to the host values built from it (`w = x.cpu()`, `i = torch.multinomial(w, 1)[0]`, `t = tensor([[i]])`).
_MAX_HOPS = 4
# In-place writes that carry a host value into what the next iteration reads (`input.fill_(idx)`, `tokens.append(tok)`).
_IN_PLACE_WRITES = frozenset({
    "fill_", "copy_", "index_fill_", "index_copy_", "scatter_", "masked_fill_", "append", "extend", "insert",
})  # fmt: skip
# Calls that queue no GPU work when nothing they are given is a GPU tensor.
_HOST_BUILTINS = frozenset({
    "sum", "len", "min", "max", "abs", "round", "float", "int", "str", "isinstance", "hasattr", "getattr", "dict",
    "list", "tuple", "range",
})  # fmt: skip
# Torch factories and tensor methods whose arguments are sizes (all but the tensor `split` / `narrow` cut).
_SIZED_FACTORIES = frozenset({
    "torch.empty", "torch.zeros", "torch.ones", "torch.full", "torch.rand", "torch.randn", "torch.empty_strided",
    "torch.split", "torch.narrow",
})  # fmt: skip
_SIZE_METHODS = frozenset({
    "new_empty", "new_zeros", "new_ones", "new_full", "view", "reshape", "expand", "split", "narrow", "unflatten", "resize_",
})  # fmt: skip
# Calls that write their arguments out of the process: files, streams, serialized arrays and datasets, a display.
_WRITE_FUNCTIONS = frozenset({
    "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt", "torch.save", "json.dump", "pickle.dump",
    "imageio.imwrite", "imageio.imsave", "imageio.mimsave", "imageio.v2.imwrite", "imageio.v3.imwrite", "cv2.imwrite",
    "cv2.imshow", "soundfile.write", "scipy.io.wavfile.write", "matplotlib.pyplot.imshow", "matplotlib.pyplot.imsave",
})  # fmt: skip
_WRITE_METHODS = frozenset({
    "write", "writerow", "writerows", "writelines", "write_frame", "append_data", "imshow", "imsave", "imwrite", "save",
    "savez", "dump", "tofile", "to_csv", "to_parquet", "save_to_disk",
})  # fmt: skip
_COLLECTING = frozenset({"append", "extend", "insert"})
# Receivers of `.write(...)` that print or log rather than store the loop's product.
_CONSOLE = re.compile(r"(^|[._])(sys\.std(out|err)|tqdm|p?bar|progress\w*|log\w*|console)$", re.IGNORECASE)
_HOST_NUMBERS = frozenset({"int", "float", "bool"})
_HOST_METHODS = frozenset({"append", "extend", "values", "items", "keys", "get", "update", "format", "write", "copy", "setdefault"})


def drives_loop(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """The value `sync` reads decides whether `loop` goes on (an `if ...: break` / `return`, the `while`
    test), or flows into a GPU input that the loop's next iteration reads: each iteration needs it on the host."""
    derived = _host_values(model, sync, loop)
    if _decides_exit(model, sync.node, derived, loop):
        return True
    return _carried_to_next_iteration(model, sync, derived, loop)


def needs_host_every_iteration(model: SemanticModel, loop: Loop, syncs: list[HostSync]) -> bool:
    """Every iteration of `loop` waits for a GPU value on the host to go on: one of `syncs` (the host reads
    in the loop) `drives_loop` and runs every iteration, or the loop leaves on a test of a GPU value that
    gpulint cannot tell for sure is one (`ni = topi[0][0]; if ni == EOS: break`). Each iteration waits for the
    GPU anyway; the other reads in it add a copy, not a stall."""
    residency = model.residency
    if generates_every_iteration(model, loop):
        return True  # a model's `generate(...)`: its decoding waits on the host per token (`analysis/generation.py`)
    for sync in syncs:
        if model.is_inside(sync.node, loop) and residency.rate_limit_guard(sync.node, loop) is None and drives_loop(model, sync, loop):
            return True
    flow = model.dataflow
    for condition in flow.conditions:
        if not (isinstance(condition, cst.If) and flow.inside(condition, loop) and model.enclosing_loops(condition)[:1] == [loop]):
            continue
        every_iteration = residency.rate_limit_guard(condition, loop) is None
        if every_iteration and _leaves_loop(model, condition, loop) and _tests_gpu_value(model, condition.test):
            return True
    return False


def _tests_gpu_value(model: SemanticModel, test: cst.BaseExpression) -> bool:
    if isinstance(test, cst.BooleanOperation):
        return _tests_gpu_value(model, test.left) or _tests_gpu_value(model, test.right)
    if isinstance(test, cst.UnaryOperation):
        return _tests_gpu_value(model, test.expression)
    if isinstance(test, cst.Comparison):
        if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in test.comparisons):
            return False
        return any(model.residency.is_gpu(side) for side in (test.left, *(c.comparator for c in test.comparisons)))
    return model.residency.is_gpu(test)


def _host_values(model: SemanticModel, sync: HostSync, loop: Loop) -> set[str]:
    """Names the loop assigns from the read, directly or through host computations of it."""
    flow = model.dataflow
    found: set[str] = set()
    name = assigned_name(model, sync.node)
    if name is not None:
        found.add(name)
    for _ in range(_MAX_HOPS):
        added = False
        for key in list(found):
            for read in flow.reads_in(key, loop):
                target = assigned_name(model, _value_root(model, read))
                if target is not None and target not in found:
                    found.add(target)
                    added = True
        if not added:
            break
    return found


def _value_root(model: SemanticModel, node: cst.CSTNode) -> cst.CSTNode:
    """The whole right-hand side `node` is part of (`torch.multinomial(w, 1)[0]` for `w`)."""
    child = node
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, (cst.Assign, cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return child
        child = ancestor
    return child


def assigned_name(model: SemanticModel, node: cst.CSTNode) -> Optional[str]:
    """`v` in `v = <node>` (through calls chained after it and indexing: `x.cpu().numpy()[0].transpose(1, 2, 0)`,
    `tensor(...).long().to(d)`)."""
    value = node
    while True:
        parent = model.parent.get(value)
        if isinstance(parent, (cst.Attribute, cst.Subscript)) and parent.value is value:
            value = parent
        elif isinstance(parent, cst.Call) and parent.func is value:
            value = parent
        else:
            break
    assignment = model.parent.get(value)
    if isinstance(assignment, cst.Assign) and assignment.value is value and len(assignment.targets) == 1:
        return dotted_name(assignment.targets[0].target)
    return None


def _decides_exit(model: SemanticModel, node: cst.CSTNode, derived: set[str], loop: Loop) -> bool:
    """The read (or a host value derived from it) is in the test of the `while` loop itself, or of an `if`
    in the loop whose branch leaves the loop (`break` / `return`)."""
    flow = model.dataflow
    tests: list[tuple[cst.BaseExpression, cst.CSTNode]] = []
    if isinstance(loop, cst.While):
        tests.append((loop.test, loop))
    for condition in flow.conditions:
        if isinstance(condition, cst.If) and flow.inside(condition, loop) and model.enclosing_loops(condition)[:1] == [loop]:
            tests.append((condition.test, condition))
    for test, holder in tests:
        reads_value = flow.inside(node, test) or any(flow.reads_in(key, test) for key in derived)
        if reads_value and (holder is loop or _leaves_loop(model, holder, loop)):
            return True
    return False


def _leaves_loop(model: SemanticModel, branch: cst.If, loop: Loop) -> bool:
    """A `break` of `loop` or a `return` in the `if`'s body or its `else`."""
    suites = [branch.body] + ([branch.orelse] if branch.orelse is not None else [])
    return any(
        isinstance(jump, cst.Return) or (isinstance(jump, cst.Break) and model.enclosing_loops(jump)[:1] == [loop])
        for suite in suites
        for jump in jumps(suite)
    )


def _carried_to_next_iteration(model: SemanticModel, sync: HostSync, derived: set[str], loop: Loop) -> bool:
    """A GPU input of the loop (read by a model or a GPU op before the read, in the iteration) is rebuilt
    from the host value (`x = torch.tensor([[tok]], device=d)`: a derived name) or filled with it in place
    (`input.fill_(word_idx)`, `tokens.append(tok)`, `output.append(int(y.argmax(dim=1).item()))`)."""
    flow = model.dataflow
    statement = model.enclosing_statement(sync.node)
    carried = set(derived)
    for call in model.calls_inside(loop):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _IN_PLACE_WRITES:
            if _carries(model, sync, derived, call.args):  # `output.append(int(y.argmax().item()))`, `input.fill_(idx)`
                receiver = dotted_name(func.value)
                if receiver is not None:
                    carried.add(receiver)
    if not carried:
        return False
    for key in carried:
        for read in flow.reads_in(key, loop):
            if not flow.before(read, statement) or _rebound_in_iteration(model, key, read, loop, derived):
                continue
            if any(_runs_on_gpu(model, call) for call in _calls_given(model, read)):
                return True
    return False


def _rebound_in_iteration(model: SemanticModel, key: str, read: cst.CSTNode, loop: Loop, derived: set[str]) -> bool:
    """The iteration binds `key` afresh, from no host value of the read, before `read` sees it (`out = model(x)`
    ... `out = out.cpu().numpy()`): the value the read leaves in `key` is not what the next iteration computes with."""
    flow = model.dataflow
    writes = flow.reaching_writes(key, read)
    return bool(writes) and all(
        flow.inside(w.statement, loop) and flow.before(w.statement, read)
        and w.value is not None and not w.is_augmented and not any(flow.reads_in(name, w.value) for name in derived)
        for w in writes
    )  # fmt: skip


def _calls_given(model: SemanticModel, node: cst.CSTNode) -> Iterator[cst.Call]:
    """The calls `node` is an argument of (`model(input, hidden)`, `torch.cat([input, t])`)."""
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, cst.Call) and not model.is_inside(node, ancestor.func):
            yield ancestor
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return


def _runs_on_gpu(model: SemanticModel, call: cst.Call) -> bool:
    residency = model.residency
    return residency.is_module(call.func) or residency.is_gpu_module(call.func) or residency.is_gpu(call)


def sizes_a_tensor(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """The value `sync` reads (or a host value built from it) is a size argument of a tensor factory or a
    reshape in the same iteration: the host must know it to allocate or lay out the next tensor. A slice
    with a GPU bound gives a GPU view: sizes later read from that view are other reads."""
    derived = _host_values(model, sync, loop) if sync.gives_host_value else set()
    for call in model.calls_inside(loop):
        func = call.func
        name = model.call_name(call) or ""
        if name in _SIZED_FACTORIES:
            sizes = [a for a in call.args if a.keyword is None or a.keyword.value == "size"]
            sizes = sizes[1:] if name in ("torch.split", "torch.narrow") else sizes
        elif isinstance(func, cst.Attribute) and func.attr.value in _SIZE_METHODS:
            sizes = list(call.args)
        else:
            continue
        if _carries(model, sync, derived, sizes):
            return True
    return False


def needed_on_host(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """The host needs the value to go on, and no rewrite avoids the wait: it sizes the next tensor
    (`sizes_a_tensor`), it is the action an environment on the host steps with (`steps_an_environment`), or
    it decides when the run stops (`stops_the_run`)."""
    return sizes_a_tensor(model, sync, loop) or steps_an_environment(model, sync, loop) or stops_the_run(model, sync, loop)


def stops_the_run(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """Early stopping: the value read (or a host value built from it) is tested by an `if` in the loop whose
    branches move a counter or a record (`bad_epochs = 0` / `bad_epochs += 1`) that another test in the loop
    ends the run on (`if bad_epochs >= patience: raise` / `break` / `return` / `sys.exit()`). Whether the
    run goes on depends on the value, so the host needs it; a best-so-far record only saved or printed
    (`if loss.item() < best: best = ...; torch.save(...)`) ends nothing and stays reported."""
    flow = model.dataflow
    derived = _host_values(model, sync, loop)
    record = _record_kept(model, sync.node)  # `best = min(loss.item(), best)`
    if record is not None:
        derived.add(record)
    for condition in flow.conditions:
        if not (isinstance(condition, cst.If) and flow.inside(condition, loop)) or not _runs_whenever(model, condition, sync.node, loop):
            continue
        if not _beside_training(model, condition, loop):
            continue  # a stop test in the training step itself: testing every N steps would do
        if not (flow.inside(sync.node, condition.test) or any(flow.reads_in(key, condition.test) for key in derived)):
            continue
        moved = {key for key in flow.writes if flow.writes_in(key, condition)}
        for other in flow.conditions:
            if other is condition or not (isinstance(other, cst.If) and flow.inside(other, loop)) or flow.inside(other, condition):
                continue
            if any(flow.reads_in(key, other.test) for key in moved) and _ends_loop_or_run(model, other, loop):
                return True
    return False


def _record_kept(model: SemanticModel, node: cst.CSTNode) -> Optional[str]:
    """`best` in `best = min(<node>, best)` / `max(...)`: a best-so-far record of the value."""
    arg = model.parent.get(node)
    call = model.parent.get(arg) if isinstance(arg, cst.Arg) else None
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in ("min", "max"):
        return assigned_name(model, call)
    return None


def _beside_training(model: SemanticModel, node: cst.CSTNode, loop: Loop) -> bool:
    """`node` runs in iterations that do not train: `loop` trains nowhere, or `node` lies in a branch that holds
    no backward pass or optimizer step (`elif phase == VAL:` of a loop shared by the training and validation
    phases)."""
    if not trains(model, loop):
        return True
    for ancestor in model.ancestors(node):
        if ancestor is loop:
            return False
        if isinstance(ancestor, (cst.If, cst.Else)) and model.is_inside(node, ancestor.body) and not trains(model, ancestor.body):
            return True
    return False


def _runs_whenever(model: SemanticModel, condition: cst.If, node: cst.CSTNode, loop: Loop) -> bool:
    """The `if` test runs in every iteration of `loop` that runs `node`: no branch or inner loop between them
    holds the test but not `node` (a test under `elif phase == VAL:` does not decide a read made in every phase)."""
    for ancestor in model.ancestors(condition):
        if ancestor is loop:
            return True
        if isinstance(ancestor, (cst.If, cst.Else, cst.For, cst.While, cst.Try, cst.ExceptHandler, cst.Finally)) and not model.is_inside(node, ancestor):
            return False
    return False


def _ends_loop_or_run(model: SemanticModel, branch: cst.If, loop: Loop) -> bool:
    """The `if`'s body leaves `loop` (`break`, `return`) or ends the run (`raise`, `sys.exit()`)."""
    return _leaves_loop(model, branch, loop) or always_ends(model, branch.body)


def steps_an_environment(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """The value `sync` reads (through `int(...)` too), or a host value built from it, is an argument of
    `env.step(...)` in the same loop: a simulator on the host needs the action to produce the next state."""
    steps = []
    for c in model.calls_inside(loop):
        if not (isinstance(c.func, cst.Attribute) and c.func.attr.value == "step" and c.args):
            continue
        receiver, zipped = c.func.value, _zipped_elements(model, c)
        if isinstance(receiver, cst.Name) and receiver.value in zipped:
            receiver = zipped[receiver.value]  # `[e.step(a) for e, a in zip(envs, actions)]`: an element of `envs`
        if ENVIRONMENT.search(model.code(receiver)):
            steps.append((c, zipped))
    if not steps:
        return False
    derived = _host_values(model, sync, loop)
    node = model.parent.get(sync.node)
    if isinstance(node, cst.Arg):  # `action = int(q.argmax().item())`
        call = model.parent.get(node)
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in _HOST_NUMBERS:
            name = assigned_name(model, call)
            if name is not None:
                derived.add(name)
    built = assigned_name(model, _value_root(model, sync.node))
    if built is not None:  # `action = [{k: np.array(a[k][i].cpu()) for k in a} for i in range(n)]`: built around the read
        derived.add(built)
    for step, zipped in steps:
        # an argument, or what an argument is an element of (`a` of `zip(envs, action)`: `action`, built from the read)
        sources = [cst.Arg(zipped[a.value.value]) for a in step.args if isinstance(a.value, cst.Name) and a.value.value in zipped]
        if _carries(model, sync, derived, [*step.args, *sources]):
            return True
    return False


def _zipped_elements(model: SemanticModel, node: cst.CSTNode) -> dict[str, cst.BaseExpression]:
    """For `node` inside a `for` or a comprehension over `zip(a, b)` with the target `x, y`: {"x": a, "y": b}, each
    name an element of what it is zipped from (the innermost binding of a name wins); over `enumerate(a)` with
    the target `i, x`: {"x": a}."""
    found: dict[str, cst.BaseExpression] = {}
    for ancestor in model.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            break
        if isinstance(ancestor, cst.For):
            target, iterable = ancestor.target, ancestor.iter
        elif isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            target, iterable = ancestor.for_in.target, ancestor.for_in.iter
        else:
            continue
        if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value in ("zip", "enumerate")):
            continue
        # `for i, e in enumerate(envs)`: `e` is an element of `envs`, as `e` of `zip(envs, actions)` is
        sources = iterable.args if iterable.func.value == "zip" else [None, *iterable.args[:1]]
        if not isinstance(target, cst.Tuple) or len(target.elements) != len(sources):
            continue
        for element, arg in zip(target.elements, sources):
            if arg is not None and isinstance(element.value, cst.Name) and not arg.star and arg.keyword is None:
                found.setdefault(element.value.value, arg.value)
    return found


def written_out(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """The value `sync` reads, or a host value built from it, is written out by the same iteration (a file,
    a stream, a serialized dataset, a display), or collected into a list that the loop empties (it ships
    the list every N batches): the read is the loop's output, not a habit to defer."""
    if "loss" in model.code(sync.value).lower():
        return False  # a loss written to a log each batch is bookkeeping, like printing it: not the loop's product
    flow = model.dataflow
    derived = _host_values(model, sync, loop)
    collected = set()
    for call in model.calls_inside(loop):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _COLLECTING and _carries(model, sync, derived, call.args):
            receiver = dotted_name(func.value)
            if receiver is not None:
                collected.add(receiver)
    if any(_emptied_in(model, name, loop) for name in collected):
        return True
    values = derived | collected
    built = assigned_name(model, _value_root(model, sync.node))
    if built is not None:  # `x = 255. * rearrange(x_gpu.cpu().numpy(), ...)`: a host value built around the read
        values.add(built)
    statement = model.enclosing_statement(sync.node)
    for _ in range(_MAX_HOPS):  # `tmp = Dataset.from_dict({"labels": codes})`
        added = {
            target for key in values for read in flow.reads_in(key, loop)
            if (target := assigned_name(model, _value_root(model, read))) is not None and target not in values
        }  # fmt: skip
        if not added:
            break
        values |= added
    for call in model.calls_inside(loop):
        if not _writes_out(model, call) or not (model.is_inside(sync.node, call) or flow.before(statement, call)):
            continue
        if model.is_inside(sync.node, call) or any(flow.reads_in(key, call) for key in values):
            return True
    return False


def _carries(model: SemanticModel, sync: HostSync, derived: set[str], args) -> bool:
    flow = model.dataflow
    return any(model.is_inside(sync.node, arg.value) or any(flow.reads_in(key, arg.value) for key in derived) for arg in args)


def _emptied_in(model: SemanticModel, name: str, loop: Loop) -> bool:
    """The loop hands the list to a call and then empties it, in the same block (`ship(codes)`, then `codes = []`
    or `codes.clear()`): it ships a few batches at a time. Emptied without being handed on, it is only dropped."""
    flow = model.dataflow
    emptied: list[cst.CSTNode] = []
    for write in flow.writes_in(name, loop):
        value = write.value
        empty_literal = isinstance(value, (cst.List, cst.Dict)) and not value.elements
        empty_call = isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in ("list", "dict")
        if empty_literal or (empty_call and not value.args):
            emptied.append(write.statement)
    for call in model.calls_inside(loop):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "clear" and dotted_name(func.value) == name:
            emptied.append(call)
    for node in emptied:
        line = model.enclosing_statement(node)
        block = model.parent.get(line)
        body = list(getattr(block, "body", ()))
        index = next((i for i, statement in enumerate(body) if statement is line), 0)
        for earlier in body[:index]:
            for call in model.calls_inside(earlier):
                if not _is_collecting(call) and any(flow.reads_in(name, arg.value) for arg in call.args):
                    return True
    return False


def _is_collecting(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in _COLLECTING


def _writes_out(model: SemanticModel, call: cst.Call) -> bool:
    if (model.call_name(call) or "") in _WRITE_FUNCTIONS:
        return True
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in _WRITE_METHODS or model.residency.is_gpu(func.value):
        return False
    return not _CONSOLE.search(model.code(func.value))  # `sys.stdout.write`, `pbar.write`, `log.write`: printing


def queue_drained(model: SemanticModel, sync: HostSync, loop: Loop) -> bool:
    """Earlier in the same iteration the host waited for the whole device (`torch.cuda.synchronize()`, or a
    timing helper that synchronizes), and nothing since queued GPU work: the read copies a finished value."""
    flow = model.dataflow
    statement = model.enclosing_statement(sync.node)
    scope = model.scope_of(sync.node)
    drains = drains_before(model, statement, loop)
    if not drains:
        return False
    last = max(drains, key=lambda call: flow.order[call])
    if model.enclosing_loops(last)[:1] != model.enclosing_loops(sync.node)[:1]:
        return False
    between = [call for call in flow.calls_between(last, statement, scope)]
    between += [call for call in model.calls_inside(statement) if flow.before(call, sync.node)]
    if any(_queues_gpu_work(model, call) for call in between):
        return False
    return not _gpu_arithmetic_between(model, last, statement, loop)


def drains_before(model: SemanticModel, statement: cst.CSTNode, loop: Loop) -> list[cst.Call]:
    """The calls of `loop` before `statement`, in source order, that wait for the whole device every iteration."""
    flow = model.dataflow
    memo = model.memo(f"drains the device every iteration of loop {id(loop)}")
    drains = []
    for call in model.calls_inside(loop):
        if not flow.before(call, statement):
            break  # in source order: the rest come after the read
        if call not in memo:
            memo[call] = _drains(model, call, loop)
        if memo[call]:
            drains.append(call)
    return drains


def drains_every_iteration(model: SemanticModel, call: cst.Call, loop: Loop) -> bool:
    """`call` waits for the whole device at every iteration of `loop` (see `_drains`)."""
    return _drains(model, call, loop)


def _drains(model: SemanticModel, call: cst.Call, loop: Loop) -> bool:
    """`torch.cuda.synchronize()` (or a project helper that calls it every time) that runs every iteration:
    no branch on the way to the loop but `with` blocks and the bodies of tests that hold whenever the run has a
    GPU (`if torch.cuda.is_available():`, `if device_type == "cuda":`, `gpu_free_branches.means_no_gpu`)."""
    name = model.call_name(call) or ""
    func = call.func
    drains = name == "torch.cuda.synchronize" or (
        isinstance(func, cst.Attribute) and func.attr.value == "synchronize" and isinstance(func.value, cst.Call)
        and (model.call_name(func.value) or "") == "torch.cuda.current_stream"
    )  # fmt: skip
    if not drains:
        callee = model.callee(call)
        drains = callee is not None and any(
            entry[0] in ("synchronize", "barrier") or (entry[0] == "clock" and len(entry) > 2 and entry[2]) for entry in callee.syncs
        )
    if not drains:
        return False
    for ancestor in model.ancestors(call):
        if ancestor is loop:
            return True
        if isinstance(ancestor, cst.If) and not (model.is_inside(call, ancestor.body) and _holds_on_gpu(model, ancestor.test)):
            return False
        branches = (cst.Else, cst.Try, cst.ExceptHandler, cst.Finally, cst.For, cst.While, cst.FunctionDef, cst.Lambda, cst.IfExp)
        if isinstance(ancestor, branches):
            return False
    return False


def _holds_on_gpu(model: SemanticModel, test: cst.BaseExpression) -> bool:
    """`if torch.cuda.is_available():`, `if device_type == "cuda":`: a test that holds on every run with a GPU."""
    return "is_available" in model.code(test) or means_no_gpu(model, test, when=False)


def _queues_gpu_work(model: SemanticModel, call: cst.Call) -> bool:
    """Whether `call` may queue GPU work: only clock reads, `torch.cuda` queries and host bookkeeping on
    host values (`times.append(t)`, `sum(timings.values())`) surely do not."""
    residency = model.residency
    name = model.call_name(call) or ""
    if name in CLOCKS or name.startswith("torch.cuda."):
        return False
    if any(not a.star and residency.is_gpu(a.value) for a in call.args):
        return True
    func = call.func
    if isinstance(func, cst.Name) and func.value in _HOST_BUILTINS and not model.bindings_of(func.value, call):
        return False
    if isinstance(func, cst.Attribute) and func.attr.value in _HOST_METHODS and not residency.is_gpu(func.value):
        return False
    return True


def _gpu_arithmetic_between(model: SemanticModel, start: cst.CSTNode, statement: cst.CSTNode, loop: Loop) -> bool:
    """An assignment between `start` and `statement` whose value is a GPU tensor (`x = a * b` queues a kernel)."""
    flow, residency = model.dataflow, model.residency
    for key, writes in flow.writes.items():
        for write in flow.writes_in(key, loop):
            if write.value is None or not flow.before(start, write.statement) or not flow.before(write.statement, statement):
                continue
            if residency.is_gpu(write.value):
                return True
    return False
