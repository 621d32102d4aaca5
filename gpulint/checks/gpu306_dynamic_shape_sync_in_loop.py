"""GPU306 dynamic-shape-sync-in-loop: `nonzero`, `x[mask]`, `unique`, ... every step make the host wait."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis import generation
from gpulint.analysis.environment_loops import amid_environment_steps
from gpulint.analysis.first_iterations import first_few_iterations
from gpulint.analysis.forward_reach import reached_function, reached_shape_syncs, repeating_loop
from gpulint.analysis.full_batch import waits_every_full_batch_step
from gpulint.analysis.helper_steps import calling_loop
from gpulint.analysis.helper_waits import calls_named, fold_into_helpers
from gpulint.analysis.one_off_passes import one_off_pass
from gpulint.analysis.read_cost import UNPROVEN_HELP, read_cost, step_wait_points, waits_per_step
from gpulint.analysis.residency import EVAL, TRAIN
from gpulint.analysis.step_waits import waited_after, waited_before
from gpulint.checks.base import Option, Rule
from gpulint.diagnostics import Diagnostic, Severity

# What to write instead, by what makes the host wait (the kinds of `Residency.shape_syncs`).
_ADVICE = (
    ("output_size", "pass `output_size=` (the total, when you know it) so PyTorch need not read it from the GPU"),
    ("pageable", "build it once before the loop, or make it on the GPU (`torch.full(..., device=...)`, `torch.stack` of GPU tensors)"),
    ("compares", "compare on the GPU (`torch.maximum` / `torch.minimum`, or `torch.max` of a stacked tensor)"),
    ("", "keep shapes fixed: multiply by the mask or use `torch.where(mask, x, 0)` and reduce, or `torch.nonzero_static(x, size=...)`"),
)


class DynamicShapeSyncInLoop(Rule):
    code = "GPU306"
    name = "dynamic-shape-sync-in-loop"
    summary = "An op whose output size depends on GPU data (`nonzero`, `x[mask]`, `unique`) every loop iteration"
    requires = (r"nonzero|argwhere|masked_select|unique|repeat_interleave|where\(|tensor\(|max\(|min\(|\[",)
    project_tags = ("helper-syncs",)
    options = (
        Option(
            "unproven-cost", False,
            "Also report ops whose cost the code does not show (one wait a step with nothing shown on the host "
            "to serialize: a few per cent of a GPU-bound step at most, nothing in a launch-bound one).",
        ),
    )  # fmt: skip

    def check(self) -> Iterator[Diagnostic]:
        model = self.model
        residency = model.residency
        reported: set[int] = set()  # one finding per statement
        accepted = []
        reaches: dict[int, tuple[str, str]] = {}  # id(sync) -> the chain that reaches its function from a step
        seen = {id(s.node) for s in residency.shape_syncs}
        reached_ops = [s for s in reached_shape_syncs(model) if id(s.node) not in seen]
        for sync in [*residency.shape_syncs, *reached_ops]:
            statement = model.enclosing_statement(sync.node)
            if id(statement) in reported:
                continue
            loop, role = residency.step_loop(sync.node)
            if role is None and sync.via is None:
                # code a per-step `forward` reaches through submodules and helpers (`analysis/forward_reach.py`)
                reach = reached_function(model, sync.node)
                if reach is not None:
                    loop, role = reach[0], TRAIN
                    reaches[id(sync)] = reach[1:]
            if role not in (TRAIN, EVAL) or residency.rate_limit_guard(sync.node, loop) is not None:
                continue
            if first_few_iterations(model, sync.node, loop) is not None:
                continue  # `if n < 10:`: the first examples only, a handful of waits in the run
            if model.model_size.launch_bound_loop(loop):
                continue  # the step runs only a small model: launch-bound, the wait is microseconds
            if role == EVAL and one_off_pass(model, loop):
                continue  # one pass in the run beside the training epochs (a feature extraction after training)
            if waited_before(model, sync, loop) is not None:
                continue  # the step synchronizes every iteration (a per-step timer) and queued no step work since
            if waited_after(model, sync, loop) is not None:
                continue  # another wait follows at once, every iteration (`loss.item()` next): the two cost one
            if role == TRAIN and generation.generation_bound(model, loop):
                continue  # an RL step that generates a rollout: it waits on the host for every token anyway
            if amid_environment_steps(model, sync, loop):
                continue  # every iteration steps a collection of environments on the host: they bound it
            if role == TRAIN and waits_every_full_batch_step(model, calling_loop(model, loop)):
                continue  # full-batch training that waits every step anyway: no batch is made meanwhile
            reported.add(id(statement))
            accepted.append((sync, loop, role))
        # A call of a helper whose wait is reported in the helper itself: one wait, reported there, the call related.
        accepted, runs_it = fold_into_helpers(model, accepted, "shape")
        # What the op costs: a default finding needs evidence (`read_cost`, as GPU303's reads): the op repeats within
        # the step, the step holds many waits, or the wait serializes loading in the training process.
        points: dict[int, list[list]] = {}
        for sync, loop, role in accepted:
            points.setdefault(id(loop), step_wait_points(model, loop, [s for s, other, _ in accepted if other is loop]))
        for sync, loop, role in accepted:
            cost = read_cost(model, sync, loop, waits_per_step(model, points[id(loop)]), kind="shape")
            reach = reaches.get(id(sync))
            if reach is not None and (cost is None or cost.kind != "repeated"):
                continue  # reached from a step's `forward`: reported when it repeats within the call (the evidence)
            if (
                cost is not None and cost.kind == "repeated" and sync.via is not None
                and model.project_ref(sync.node) in model.project.reached_refs
            ):  # fmt: skip
                continue  # the callee, which the step's `forward` reaches, reports its repeated op at its own line
            if cost is None and not self.settings["unproven-cost"]:
                continue  # one wait a step, nothing on the host shown to serialize: a few per cent at most (or unknown)
            shown = self._shown(sync.node)
            if sync.via is not None:  # a project helper called every step
                call = shown or "This call"
                subject = f"{call} runs {sync.kind} at {sync.via}, which"
                what = f"{sync.kind[0].upper()}{sync.kind[1:]} is an op whose output size depends on the data"
            else:
                subject = shown or "This"
                what = sync.kind
            advice = next(text for key, text in _ADVICE if key in sync.kind)
            if reach is not None:
                message = f"{subject} makes the host wait for the GPU {self._reached_when(loop, sync, reach)}"
            else:
                message = f"{subject} makes the host wait for the GPU {self.every_step(role, loop)}"
            calls = runs_it.get(id(sync.node), [])
            message += calls_named(model, calls, message)
            if cost is not None:  # what the op costs, said first (as GPU303 does)
                help = f"It waits {cost.text}; {what[0].lower()}{what[1:]}; {advice}"
            else:  # shown only because of `unproven-cost = true`: say so
                help = f"{what}; {advice} ({UNPROVEN_HELP})"
            related = [("a call that runs it every step", call) for call in calls]
            yield self.diagnostic(sync.node, message, severity=Severity.WARNING if role == TRAIN else Severity.INFO, related=related, help=help)

    def _reached_when(self, function: cst.FunctionDef, sync, reach: tuple[str, str]) -> str:
        """`every training step, once per iteration of the loop at line 77 (`for i in range(npoint)`) of
        `farthest_point_sample`, which the call at models/pointnet2_utils.py:124 runs in a `forward` that the step's
        call at train.py:188 runs`: how often code a step's `forward` reaches runs, for messages."""
        model = self.model
        inner = repeating_loop(model, sync.node, function)
        where = f" of the {inner[1]} at line {model.line_of(inner[0])} (`{inner[2]}`)" if inner is not None else ""
        return (
            f"every training step, once per iteration{where} of `{function.name.value}`, which the call at {reach[0]} "
            f"runs in a `forward` that the step's call at {reach[1]} runs"
        )

    def _shown(self, node) -> str | None:
        """The code as the message quotes it; a long call or subscript by its callee or base (`torch.tensor(...)`)."""
        code = " ".join(self.model.code(node).split())
        if len(code) <= 60:
            return f"`{code}`"
        if isinstance(node, cst.Call):
            head = " ".join(self.model.code(node.func).split())
            if len(head) > 55 and isinstance(node.func, cst.Attribute):
                head = f"...{node.func.attr.value}"  # `....clamp(...)`: the method that is called
            return f"`{head}(...)`" if len(head) <= 55 else None
        if isinstance(node, cst.Subscript):
            head = " ".join(self.model.code(node.value).split())
            if len(head) <= 55:
                return f"`{head}[...]`"
            index = " ".join(self.model.code(node.slice[0].slice).split()) if len(node.slice) == 1 else ""
            return f"`...[{index}]`" if index and len(index) <= 40 else None  # the mask: `...[y > 0]`
        return None
