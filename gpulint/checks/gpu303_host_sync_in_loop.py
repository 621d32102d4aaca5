"""GPU303 host-sync-in-loop: `.item()`, `.cpu()`, `print(tensor)`, `if tensor:` ... every step of a loop."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis import generation, host_reads, legacy_torch, reached_reads
from gpulint.analysis.element_passes import element_pass, handed_walks
from gpulint.analysis.environment_loops import amid_environment_steps
from gpulint.analysis.first_iterations import first_few_iterations
from gpulint.analysis.full_batch import same_data_every_step
from gpulint.analysis.helper_steps import calling_loop
from gpulint.analysis.host_bound import host_bound_iteration
from gpulint.analysis.host_libraries import MATH_OF_GPU, NUMPY_OF_GPU
from gpulint.analysis.helper_waits import calls_named, fold_into_helpers
from gpulint.analysis.index_loaders import loader_bound_evaluation
from gpulint.analysis.one_batch_loops import one_batch_loop
from gpulint.analysis.time_step_loops import time_step_loop
from gpulint.analysis.read_runs import previous_read
from gpulint.analysis.read_cost import UNPROVEN_HELP, read_cost, waits_per_step
from gpulint.analysis.returned_actions import returned_to_an_environment
from gpulint.analysis.step_cadence import every_step_interval
from gpulint.analysis.step_syncs import absorbing_copy
from gpulint.analysis.step_waits import waited_before
from gpulint.analysis.imports import dotted_name
from gpulint.analysis.residency import SLICED_WITH_GPU_BOUND, TRAIN, EVAL
from gpulint.checks.base import Option, Rule
from gpulint.diagnostics import Diagnostic, Severity

_COLLECTING = frozenset({"append", "extend"})


class _PerElement:
    """`read_cost`'s answer for a read in a walk over a GPU tensor's elements (`element_passes`)."""

    def __init__(self, walked, model) -> None:
        self.text = (
            f"once per element of the GPU tensor `{walked.tensor}` (as many waits a call as it has elements), "
            f"and the loop at line {model.line_of(walked.calling_loop)} runs the call again and again"
        )


class HostSyncInLoop(Rule):
    code = "GPU303"
    name = "host-sync-in-loop"
    summary = "A host-device synchronization (`.item()`, `.cpu()`, `print(tensor)`, `if tensor:`) every loop iteration"
    requires = (r"\.(item|cpu|tolist|numpy|to|type|format|add_scalars?)\(|print|float|int|bool|if |while |assert |f['\"]|%|\[|numpy|math",)
    project_tags = ("helper-syncs",)
    options = (
        Option(
            "unproven-cost", False,
            "Also report reads whose cost the code does not show (one wait a step with nothing shown on the host "
            "to serialize: a few per cent of a GPU-bound step at most, nothing in a launch-bound one).",
        ),
    )  # fmt: skip

    def check(self) -> Iterator[Diagnostic]:
        """One finding per statement: its first sync drains the queue, the others in it then cost little."""
        model = self.model
        residency = model.residency
        statements: dict[int, list] = {}
        needs_host: dict[int, bool] = {}  # loop -> it waits for a GPU value every iteration to go on
        passes: dict[int, object] = {}  # sync -> the per-element walk of a GPU tensor it reads in (`element_passes`)
        for sync in residency.host_syncs:
            loop, role = residency.step_loop(sync.node)
            if role is None and sync.via is None:
                walked = element_pass(model, sync)
                if walked is not None and not model.model_size.toy_loop(walked.calling_loop):
                    # no step loop around it, but a wait per element of a GPU tensor, every pass an epoch loop runs
                    passes[id(sync.node)] = walked
                    statements.setdefault(id(model.enclosing_statement(sync.node)), []).append((sync, walked.loop, EVAL))
                continue
            if role not in (TRAIN, EVAL) or residency.rate_limit_guard(sync.node, loop) is not None:
                continue
            if role == EVAL and residency.measures_latency(loop):
                continue  # timing each prediction: the wait is part of the measurement
            if model.model_size.toy_loop(loop):
                continue  # a toy model on toy tensors: a step is microseconds, waiting costs nothing worth a report
            if model.model_size.launch_bound_loop(loop):
                continue  # the step runs only a small model (a LeNet, a 784-128-10 MLP): launch-bound, the read waits microseconds
            if role == TRAIN and time_step_loop(model, loop):
                continue  # each step loops over time steps of a recurrent module: the GPU trails the host, nothing queued
            if host_reads.queue_drained(model, sync, loop):
                continue  # the iteration already waited for the device (a profiling harness): a finished value is copied
            if first_few_iterations(model, sync.node, loop) is not None:
                continue  # `if n < 10: print(...)`: a debug print of the first examples, a handful of waits in the run
            if waited_before(model, sync, loop) is not None:
                continue  # the step synchronizes every iteration (a per-step timer) and queued no step work since
            if self._waits_anyway(sync, loop):
                continue  # the next batch's blocking copy waits for the queue anyway, with only bookkeeping before it
            if host_reads.needed_on_host(model, sync, loop):
                continue  # the host needs the value to go on: to allocate the next tensor, to step an environment
            if returned_to_an_environment(model, sync, loop):
                continue  # an agent's method returns the action to loops that step a simulator with it
            if amid_environment_steps(model, sync, loop):
                continue  # every iteration steps a collection of environments on the host: they, not a scalar's wait, bound it
            if role == TRAIN and same_data_every_step(model, calling_loop(model, loop)):
                continue  # full-batch training, one step an epoch: no batch to load meanwhile, the wait costs launches
            if role == EVAL and loader_bound_evaluation(model, calling_loop(model, loop)):
                continue  # an evaluation over an in-process index loader of large batches: the loader is its cost (GPU101)
            if role == EVAL and one_batch_loop(model, loop):
                continue  # the loader holds the whole test set in one batch: one read per pass
            if role == EVAL and host_reads.written_out(model, sync, loop):
                continue  # the read is the loop's output, written out (a file, a dataset, a display) batch by batch
            if role == EVAL and host_bound_iteration(model, loop) is not None:
                continue  # each iteration encodes, decodes or writes images on the host: one more wait is a sliver of it
            if role == EVAL and isinstance(loop, (cst.For, cst.While)):
                if id(loop) not in needs_host:
                    needs_host[id(loop)] = host_reads.needs_host_every_iteration(model, loop, residency.host_syncs)
                if needs_host[id(loop)]:
                    continue  # decoding / generation: each iteration waits for a value on the host to go on
            inner = self._inner_loop(sync, loop)
            if inner is not None:
                if id(inner) not in needs_host:
                    needs_host[id(inner)] = host_reads.needs_host_every_iteration(model, inner, residency.host_syncs)
                if needs_host[id(inner)]:
                    continue  # a greedy decode inside the step: each token is read to decide whether to go on
            if role == TRAIN and generation.generation_bound(model, loop):
                continue  # an RL step that generates a rollout: its decoding already waits on the host per token
            statements.setdefault(id(model.enclosing_statement(sync.node)), []).append((sync, loop, role))
        # A call of a helper whose wait is reported in the helper itself: one wait, reported there, the call related.
        kept, runs_it = fold_into_helpers(model, [item for found in statements.values() for item in found], "sync")
        kept_ids = {id(item[0]) for item in kept}
        for key, found in list(statements.items()):
            statements[key] = [item for item in found if id(item[0]) in kept_ids]
            if not statements[key]:
                statements.pop(key)
        for found in statements.values():
            found.sort(key=lambda item: model.dataflow.order[item[0].node])
        # A run of reads with only light GPU work queued between them is one wait: one finding, at its first read.
        later: dict[int, list] = {}  # statement of a run's first read -> the syncs of the later reads
        for key, found in sorted(statements.items(), key=lambda item: model.dataflow.order[item[1][0][0].node]):
            first = self._first_of_run(found[0][0], found[0][1], residency.host_syncs)
            if first is not None:
                statements.pop(key)
                later.setdefault(id(model.enclosing_statement(first.node)), []).extend(s for s, _, _ in found)
        # What the reads cost: a default finding needs evidence (`read_cost`): repeated reads, many waits a step,
        # or loading in the training process that the read serializes with the GPU step.
        per_loop: dict[int, list[list]] = {}
        reported: set[int] = set()  # statements reported above (a walk the module itself shows)
        for key, found in statements.items():
            per_loop.setdefault(id(found[0][1]), []).append([sync for sync, _, _ in found])
        for key, found in statements.items():
            syncs = [sync for sync, _, _ in found]
            _, loop, role = found[0]
            reported.add(key)
            followers = later.get(key, [])
            waits = waits_per_step(model, per_loop[id(loop)])
            costs = ((s, read_cost(model, s, loop, waits)) for s in syncs + followers)
            source, cost = next(((s, c) for s, c in costs if c is not None), (None, None))
            walked = passes.get(id(syncs[0].node))
            if walked is not None:
                source, cost = syncs[0], _PerElement(walked, model)
            if cost is None and not self.settings["unproven-cost"]:
                continue  # one wait a step, nothing on the host shown to serialize: a few per cent at most (or unknown)
            subjects = [self._subject(s) for s in syncs]
            what = subjects[0] if len(subjects) == 1 else ", ".join(subjects[:-1]) + f" and {subjects[-1]}"
            verb = "waits" if len(syncs) == 1 else "wait"
            if walked is not None:  # no step loop: the walk over the tensor's elements, run by an epoch loop's call
                message = (
                    f"{what} {verb} for the GPU once per element of `{walked.tensor}` (loop at line "
                    f"{model.line_of(loop)}), on every call of the pass at line {model.line_of(walked.call)}"
                )
            else:
                message = f"{what} {verb} for the GPU {self.every_step(role, loop)}"
            interval = every_step_interval(model, syncs[0].node, loop)
            if interval is not None:  # `if iter_num % log_interval == 0:` with `log_interval = 1`: no thinning
                divisor = model.code(interval.right)
                message += f", under `{model.code(interval)}` with `{divisor}` set to 1 (the guard passes every step)"
            calls = [call for s in syncs + followers for call in runs_it.get(id(s.node), ())]
            message += calls_named(model, calls, message)
            evidence = None  # what the read costs, said first in the help
            if cost is not None and any(source is f for f in followers):  # the run's later read at that line repeats
                evidence = f"the read at line {model.range(source.node).start.line} waits {cost.text}"
            elif cost is not None:
                evidence = f"it waits {cost.text}"
            related = [(f"the {role} loop", loop)] + [(f"then {self._subject(s)}, with only light GPU work queued since", s.node) for s in followers]
            related += [("a call that runs it every step", call) for call in calls]
            if followers:
                lines = sorted({model.range(s.node).start.line for s in followers})
                where = ", ".join(map(str, lines[:-1])) + (" and " if len(lines) > 1 else "") + str(lines[-1])
                many = len(lines) > 1
                message += f", as {'do the reads' if many else 'does the read'} after it at line{'s' if many else ''} {where} (only light GPU work queued in between: one wait)"
            advice = self._advice(syncs, loop)
            if walked is not None:
                advice = (
                    f"copy `{walked.tensor}` to the host once before the loop (`.tolist()`, or `.cpu()` and a numpy "
                    "walk) and read Python numbers there, or group on the GPU (`torch.unique`, `scatter`, `bincount`)"
                )
            if interval is not None and advice.startswith("keep the value on the GPU and convert it only every N steps"):
                advice = f"give `{model.code(interval.right)}` a default above 1 (say 10 or 100) so the guard thins the reads"
            era = next(filter(None, (legacy_torch.number_read_help(s.kind) for s in syncs)), None)
            if era is not None:  # `loss.data[0]` in PyTorch 0.3 code: say why it is a read, and its 0.4 spelling
                advice = f"{advice}. {era[0].upper()}{era[1:]}"
            if evidence is not None:
                advice = f"{evidence}; {advice}"
            else:  # shown only because of `unproven-cost = true`: say so, as GPU105 does
                advice = f"{advice} ({UNPROVEN_HELP})"
            yield self.diagnostic(
                syncs[0].node, message, severity=Severity.WARNING if role == TRAIN else Severity.INFO, related=related,
                help=advice[0].upper() + advice[1:],
            )

        yield from self._handed_walks(reported)

    def _handed_walks(self, reported: set[int]) -> Iterator[Diagnostic]:
        """Reads of each element of a GPU tensor that a batch loop elsewhere in the project hands this module's
        helper (`element_passes.handed_walks`): a batch's worth of waits on every call, reported at the read."""
        model = self.model
        done: set[int] = set()
        for walked in handed_walks(model):
            statement = id(model.enclosing_statement(walked.sync.node))
            if statement in reported or statement in done:
                continue
            done.add(statement)
            line = model.line_of(walked.loop)
            message = (
                f"{self._subject(walked.sync)} waits for the GPU once per element of `{walked.tensor}` (loop at line "
                f"{line}), on every call from the batch loop at {walked.where}"
            )
            advice = (
                f"It waits once per element of `{walked.tensor}`, made from the GPU tensor `{walked.param}` that the loop at "
                f"{walked.where} hands for every batch (after the first wait each read still costs a copy's latency, and "
                f"the host launches nothing meanwhile); copy `{walked.tensor}` to the host once before the loop "
                "(`.tolist()`, or `.cpu()` and a numpy walk) and read Python numbers there, or compute on the GPU"
            )
            yield self.diagnostic(
                walked.sync.node, message, severity=Severity.INFO, related=[("the walk over the elements", walked.loop)], help=advice,
            )

    def _inner_loop(self, sync, loop):
        """The innermost `for`/`while` around `sync` when it lies inside `loop` (a decode loop over tokens within
        an evaluation step over sentences), else None."""
        model = self.model
        if not isinstance(loop, (cst.For, cst.While)):
            return None
        enclosing = model.enclosing_loops(sync.node)
        inner = enclosing[0] if enclosing else None
        if inner is None or inner is loop or not model.is_inside(inner, loop):
            return None
        return inner if isinstance(inner, (cst.For, cst.While)) else None

    def _waits_anyway(self, sync, loop) -> bool:
        """The step already waits for the GPU at a blocking copy (`x.to(device)` without `non_blocking=True`)
        that follows the read in step order, with only bookkeeping between them (`step_syncs.absorbing_copy`):
        the read serializes microseconds of host work. Asked of the last read of the run `sync` starts (the
        reads after it with only light GPU work between, reported with it): the run costs the host work after
        its last read."""
        syncs = self.model.residency.host_syncs
        last, seen = sync, {id(sync)}
        while True:
            following = next((s for s in syncs if id(s) not in seen and previous_read(self.model, s, loop, syncs) is last), None)
            if following is None:
                break
            last = following
            seen.add(id(last))
        return absorbing_copy(self.model, last, loop, run=len(seen)) is not None

    def _first_of_run(self, sync, loop, syncs):
        """The first read of the run `sync` is a later read of (`read_runs.previous_read`, followed back), or None."""
        first = previous_read(self.model, sync, loop, syncs)
        while first is not None:
            earlier = previous_read(self.model, first, loop, syncs)
            if earlier is None:
                return first
            first = earlier
        return None

    def _advice(self, syncs, loop) -> str:
        model = self.model
        for sync in syncs:
            accumulation = self._accumulation(sync.node)
            if accumulation is not None:
                target = model.code(accumulation.target)
                value = model.code(accumulation.value).replace(model.code(sync.node), f"{model.code(sync.value)}.detach()", 1)
                operator = model.code(accumulation.operator).strip()
                return f"accumulate on the GPU (`{target} {operator} {value}`) and convert once every N steps or after the loop"
        if any(sync.kind == NUMPY_OF_GPU for sync in syncs):  # as written it raises on a CUDA tensor; `.cpu()` would wait
            return ("numpy reads a tensor through `.numpy()`, which refuses a CUDA tensor (TypeError): test it on the GPU "
                    "(`torch.isnan(x)`, `torch.isfinite(x).all()`) and read the result only every N steps")
        if any(isinstance(model.parent.get(sync.node), cst.Assert) for sync in syncs):  # a sanity check of the data
            return "check the data where it is made (the dataset, on the CPU) or on the first batch only, not on the GPU every step"
        if any(self._feeds_branch(sync.node, loop) for sync in syncs):
            return "the value feeds a Python branch: compute it on the GPU instead (`torch.where`, `clamp`, masks)"
        if any(sync.kind == SLICED_WITH_GPU_BOUND for sync in syncs):
            return "copy the lengths to the host once per batch (`lengths.tolist()`) and slice with those Python ints"
        if any(self._collected(sync.node, loop) for sync in syncs):
            return "collect the tensors on the GPU and copy them to the host once, after the loop (`torch.cat(...).cpu()`)"
        return "keep the value on the GPU and convert it only every N steps (under `if step % N == 0:`)"

    def _subject(self, sync) -> str:
        """`loss.item()`, `if torch.isnan(loss):` on a GPU tensor, formatting `{loss}` in an f-string."""
        model = self.model
        node = sync.node
        parent = model.parent.get(node)
        if sync.via is not None:  # a helper that syncs on every call
            code = _short(model.code(node))
            call = f"`{code}`" if code else "this call"
            reads = reached_reads.reads_per_call(model, sync)  # the syncs a step pays there: the cost evidence
            return f"{call} ({sync.kind} at {sync.via}{f', {reads} reads a call' if reads > 1 else ''})"
        if sync.kind in (NUMPY_OF_GPU, MATH_OF_GPU):  # `np.isnan(grad_norm)`: say where the read is
            code, value = _short(model.code(node)), _short(model.code(sync.value))
            how = "numpy needs" if sync.kind == NUMPY_OF_GPU else "`math` converts"
            return f"`{code}` ({how} the GPU tensor `{value}` on the host)" if code and value else sync.kind
        if isinstance(node, cst.FormattedStringExpression):
            code = _short(model.code(node.expression))
            return f"formatting `{{{code}}}` in an f-string" if code else sync.kind
        if isinstance(parent, (cst.If, cst.While, cst.Assert)):
            keyword = "if" if isinstance(parent, cst.If) else "while" if isinstance(parent, cst.While) else "assert"
            code = _short(model.code(node))
            return f"`{keyword} {code}{'' if keyword == 'assert' else ':'}` on a GPU tensor" if code else sync.kind
        code = _short(model.code(node))
        if sync.kind == SLICED_WITH_GPU_BOUND:  # `x[:lengths[i]]`: name the bound, the read is not visible
            bound = _short(model.code(sync.value))
            return f"`{code}` (the slice bound `{bound}` is a GPU tensor)" if code and bound else sync.kind
        return f"`{code}`" if code else sync.kind

    def _feeds_branch(self, node: cst.CSTNode, loop) -> bool:
        """The synced value decides an `if`/`while`/`assert`: the test itself, or a name assigned from it
        that a test in the same loop reads."""
        model, flow = self.model, self.model.dataflow
        child = node
        for ancestor in model.ancestors(node):
            if isinstance(ancestor, (cst.If, cst.While, cst.Assert, cst.IfExp)) and child is ancestor.test:
                return True
            if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                break
            child = ancestor
        target = self._assigned_name(node)
        if target is None:
            return False
        for condition in flow.conditions:
            if not flow.inside(condition, loop) or not flow.before(node, condition):
                continue
            if any(flow.inside(read, condition.test) for read in flow.reads.get(target, ())):
                return True
        return False

    def _collected(self, node: cst.CSTNode, loop) -> bool:
        """The synced value is appended to a list every step (`outputs.append(out.cpu().numpy())`), directly
        or through a name."""
        model, flow = self.model, self.model.dataflow
        targets = [self._chained(node)]
        name = self._assigned_name(node)
        if name is not None:
            targets += [r for r in flow.reads.get(name, ()) if flow.inside(r, loop) and flow.before(node, r)]
        for target in targets:
            arg = model.parent.get(target)
            call = model.parent.get(arg) if isinstance(arg, cst.Arg) else None
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in _COLLECTING:
                return True
            if self._added_as_element(target):
                return True
        return False

    def _added_as_element(self, node: cst.CSTNode) -> bool:
        """`preds += [out.cpu()]`: the value is an element of a list added to a list (`extend` spelled `+=`)."""
        model = self.model
        element = model.parent.get(node)
        listed = model.parent.get(element) if isinstance(element, cst.Element) else None
        statement = model.parent.get(listed) if isinstance(listed, cst.List) else None
        return isinstance(statement, cst.AugAssign) and statement.value is listed and isinstance(statement.operator, cst.AddAssign)

    def _chained(self, node: cst.CSTNode) -> cst.CSTNode:
        """`node` with the method calls chained after it: `out.cpu().numpy()` for `out.cpu()`."""
        model = self.model
        while True:
            parent = model.parent.get(node)
            if isinstance(parent, cst.Attribute) and parent.value is node:
                node = parent
            elif isinstance(parent, cst.Call) and parent.func is node:
                node = parent
            else:
                return node

    def _assigned_name(self, node: cst.CSTNode) -> str | None:
        """`v` in `v = <node>` (looking through `.numpy()`, `.tolist()` after the sync)."""
        value = self._chained(node)
        assignment = self.model.parent.get(value)
        if isinstance(assignment, cst.Assign) and assignment.value is value and len(assignment.targets) == 1:
            return dotted_name(assignment.targets[0].target)
        return None

    def _accumulation(self, node: cst.CSTNode) -> cst.AugAssign | None:
        """`total += loss.item()` (also `total += loss.item() * n`): a running sum that could stay on the GPU."""
        if not (isinstance(node, cst.Call) and (
            (isinstance(node.func, cst.Attribute) and node.func.attr.value == "item")
            or (isinstance(node.func, cst.Name) and node.func.value in ("float", "int"))
        )):  # fmt: skip
            return None
        child = node
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, cst.AugAssign):
                return ancestor if child is ancestor.value and isinstance(ancestor.operator, (cst.AddAssign, cst.SubtractAssign)) else None
            if not isinstance(ancestor, cst.BinaryOperation):
                return None
            child = ancestor
        return None


def _short(code: str) -> str | None:
    code = code.strip()
    return code if len(code) <= 60 and "\n" not in code else None
