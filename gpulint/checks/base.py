"""A rule is a small class: code, name, fix applicability, options, and `check(model)`."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, Iterator

import libcst as cst

from gpulint.analysis import SemanticModel
from gpulint.analysis.residency import TRAIN
from gpulint.analysis.step_code import called_per_step
from gpulint.analysis.helper_steps import helper_step, method_step, step_helper
from gpulint.analysis.stored_steps import local_step, stored_step
from gpulint.analysis.torch_pins import TorchPin
from gpulint.analysis.value_resolution import LITERAL, ResolvedValue
from gpulint.diagnostics import Applicability, Diagnostic, Edit, Fix, Location, Severity

REGISTRY: dict[str, type[Rule]] = {}
DEFAULT_TARGET_TORCH = (2, 3)


@dataclass(frozen=True)
class Option:
    """A per-rule setting, read from `[tool.gpulint.rules.CODE]` (kebab-case key)."""

    name: str
    default: Any
    help: str

    def validate(self, value: Any) -> Any:
        expected = type(self.default)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise TypeError(f"expected {expected.__name__}, got {type(value).__name__} {value!r}")
        return value


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    fix_applicability: ClassVar[Applicability | None] = None  # the best fix the rule can offer
    fix_always: ClassVar[bool] = False  # every finding comes with a fix ("Fix is always available.")
    fix_sometimes_unsafe: ClassVar[bool] = False  # with a safe best fix, some findings get an unsafe one
    preview: ClassVar[bool] = False
    # Off unless a selector names it (`GPU001`, `GPU0`) or `ALL`: not turned on by `GPU` nor by `--preview`.
    explicit_only: ClassVar[bool] = False
    # Runs after the other rules, on their findings (`check_findings`) instead of `check()`.
    reads_findings: ClassVar[bool] = False
    needs_gpu_context: ClassVar[bool] = True
    # Also runs on test code (`analysis/test_code.py`): correctness and API rules, since a race or a removed
    # API is as wrong in a test as in training code. Performance rules leave tests alone.
    applies_to_tests: ClassVar[bool] = False
    # The prefilter: regexes that must ALL occur in a file's text for the rule to possibly fire; files
    # no enabled rule can fire on are never parsed. Name what the rule matches on, as specific as is
    # still certain (`r"memory_cached"`, `r"DataLoader"`); a rule must not need a comment to fire.
    # Rules with `needs_gpu_context` also need the project to say the module is GPU code (decided from
    # facts before parsing, see linter.rules_for). Every rule must declare at least one pattern
    # (tests/test_prefilter.py), so a new rule cannot switch the prefilter off for everyone by accident.
    requires: ClassVar[tuple[str, ...]] = ()
    # Facts the project index gives a module (`ModuleContext.tags`) that let the rule fire whatever the
    # text says: a rule reporting a helper's sync at the call names "helper-syncs".
    project_tags: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[tuple[Option, ...]] = ()
    default_severity: ClassVar[Severity] = Severity.WARNING

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            if cls.code in REGISTRY:
                raise RuntimeError(f"duplicate rule code {cls.code}")
            REGISTRY[cls.code] = cls

    def __init__(
        self,
        model: SemanticModel,
        options: dict[str, Any] | None = None,
        *,
        target_torch: tuple[int, int] = DEFAULT_TARGET_TORCH,
    ) -> None:
        self.model = model
        # The oldest torch the project supports (`target-torch`): fixes must work there.
        self.target_torch = target_torch
        self.settings = {o.name: o.default for o in self.options}
        self.settings.update(options or {})

    @classmethod
    def text_requirements(cls) -> tuple[str, ...]:
        """The regexes a file's text must all contain for this rule to possibly fire (the prefilter).
        Checked before parsing: a file no enabled rule could fire on is never given to LibCST."""
        return tuple(cls.requires)

    @classmethod
    def applies_to_text(cls, text: str) -> bool:
        return all(text_matcher(p)(text) for p in cls.text_requirements())

    def check(self) -> Iterator[Diagnostic]:
        raise NotImplementedError

    # ---- helpers for subclasses -------------------------------------------------------------

    @functools.cached_property
    def torch_pin(self) -> TorchPin | None:
        """The newest torch the project's own metadata allows (`torch==1.6.0` in requirements.txt), or None."""
        pin = getattr(self.model.project, "torch_pin", None)
        return TorchPin((pin[0], pin[1]), pin[2], pin[3]) if pin else None

    def pinned_below(self, needed: tuple[int, int]) -> TorchPin | None:
        """The project's pin when it allows no torch as new as `needed`: advice that needs it cannot be followed."""
        pin = self.torch_pin
        return pin if pin is not None and pin.newest < needed else None

    def runs_below(self, needed: tuple[int, int]) -> TorchPin | None:
        """The project's pin, or the torch its README or Dockerfile installs, when older than `needed`: where an API
        `needed` brings is missing, the name it replaces is the right one (the pure API rules, GPU402 / GPU403)."""
        pinned = self.pinned_below(needed)
        if pinned is not None:
            return pinned
        pin = getattr(self.model.project, "installed_torch", None)
        return TorchPin((pin[0], pin[1]), pin[2], pin[3], binding=False) if pin and (pin[0], pin[1]) < needed else None

    @property
    def oldest_torch(self) -> tuple[int, int]:
        """The oldest torch a fix must work on: `target-torch`, or older when the project pins an older one."""
        pin = self.torch_pin
        return min(self.target_torch, pin.newest) if pin is not None else self.target_torch

    def diagnostic(
        self,
        node: cst.CSTNode,
        message: str,
        *,
        severity: Severity | None = None,
        fix: Fix | None = None,
        related: Iterable[tuple[str, cst.CSTNode]] = (),
        help: str = "",
    ) -> Diagnostic:
        """A finding at `node`; `message` says what and where in one short line, `help` why it costs and what to
        do; `related` names the other places it is about (`("the training loop", loop)`)."""
        span = self.model.range(node)
        return Diagnostic(
            code=self.code,
            name=self.name,
            message=message,
            filename=self.model.path,
            location=Location(span.start.line, span.start.column + 1),
            end_location=Location(span.end.line, span.end.column + 1),
            severity=severity or self.default_severity,
            fix=fix,
            related=tuple((text, self._start(place)) for text, place in related),
            help=help,
        )

    def _start(self, node: cst.CSTNode) -> Location:
        span = self.model.range(node)
        return Location(span.start.line, span.start.column + 1)

    def every_step(self, role: str, loop: cst.CSTNode) -> str:
        """`every training step (loop at line 12)`, or `every training step (`training_step` at line 12, run by
        Lightning for each batch)` for a framework's step function: how often per-step code runs, for messages."""
        when = "every training step" if role == TRAIN else "every evaluation step"
        if isinstance(loop, cst.FunctionDef):
            stored = stored_step(self.model, loop.body)
            if stored is not None and stored[0] is loop:  # a closure kept in an attribute, called in a step loop
                return f"{when} (`{loop.name.value}` at line {self.model.line_of(loop)}, run by the call at line {stored[2]})"
            local = local_step(self.model, loop.body)
            if local is not None and local[0] is loop:  # a `def step(...)` its enclosing function's loop calls
                return f"{when} (`{loop.name.value}` at line {self.model.line_of(loop)}, run by the call at line {local[2]})"
            helper = helper_step(self.model, loop.body)
            if helper is not None and helper[0] is loop:  # a function of this module that a step loop calls by name
                return f"{when} (`{loop.name.value}` at line {self.model.line_of(loop)}, run by the call at line {helper[2]})"
            called = called_per_step(self.model, loop)
            if called is not None:  # a method an instance of its class runs in a training loop
                return f"{when} (`{loop.name.value}` at line {self.model.line_of(loop)}, run by the call at {called[1]})"
            method = method_step(self.model, loop.body)
            if method is not None and method[0] is loop:  # a method a step loop of its class calls on `self`
                return f"{when} (`{loop.name.value}` at line {self.model.line_of(loop)}, run by the call at line {method[2]})"
            step = self.model.frameworks.step_functions.get(loop)
            helper = step_helper(self.model, loop.body) if step is None else None
            if helper is not None and helper[2] is loop:  # a function of this module that a step loop calls
                return f"{when} (`{loop.name.value}` at line {self.model.line_of(loop)}, called in the loop at line {self.model.line_of(helper[0])})"
            step = self.model.frameworks.step_functions[loop]
            return f"{when} (`{loop.name.value}` at line {self.model.line_of(loop)}, run by {step.framework} for each batch)"
        step = self.model.frameworks.step_functions.get(loop) if isinstance(loop, cst.Lambda) else None
        if step is not None:  # `Engine(lambda engine, batch: ...)`, `output_transform=lambda x, y, y_pred, loss: ...`
            return f"{when} (the lambda at line {self.model.line_of(loop)}, run by {step.framework} for each batch)"
        return f"{when} (loop at line {self.model.line_of(loop)})"

    def fix(self, message: str, edits: list[Edit | None], applicability: Applicability) -> Fix | None:
        """A Fix, or None when any edit could not be built."""
        if not edits or any(e is None for e in edits):
            return None
        if applicability not in self.fix_applicabilities():
            raise ValueError(f"{self.code} declares {self.fix_tier()} fixes but built a {applicability.value} one")
        return Fix(message, applicability, tuple(e for e in edits if e is not None))

    @classmethod
    def fix_applicabilities(cls) -> frozenset[Applicability]:
        """The applicabilities this rule's fixes may have (the README's rule table and `fix()` hold it to them)."""
        if cls.fix_applicability is None:
            return frozenset()
        if cls.fix_applicability == Applicability.SAFE and cls.fix_sometimes_unsafe:
            return frozenset({Applicability.SAFE, Applicability.UNSAFE})
        return frozenset({cls.fix_applicability})

    @classmethod
    def fix_tier(cls) -> str:
        """`never`, or how often and how safely: `always, safe`, `sometimes, safe or unsafe`, ..."""
        kinds = cls.fix_applicabilities()
        if not kinds:
            return "never"
        how = " or ".join(a.value for a in Applicability if a in kinds)
        return f"{'always' if cls.fix_always else 'sometimes'}, {how}"


def value_origin(resolved: ResolvedValue | None) -> tuple[tuple[str, cst.CSTNode], ...]:
    """Where a resolved value is written when that is not where it is used (`the argparse default`): a related place."""
    return () if resolved is None or resolved.origin == LITERAL else ((f"the {resolved.origin}", resolved.node),)


@functools.lru_cache(maxsize=None)
def text_matcher(pattern: str) -> Callable[[str], bool]:
    """`text -> bool` for one `requires` pattern: substring tests when the pattern is a plain word or
    words joined by `|` (several times faster than a regex scan), a compiled regex search otherwise."""
    if re.escape(pattern) == pattern:
        return lambda text: pattern in text
    words = pattern.split("|")
    if all(word and re.escape(word) == word for word in words):
        return lambda text: any(word in text for word in words)
    return lambda text, search=re.compile(pattern).search: search(text) is not None
