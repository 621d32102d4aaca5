"""GPU403 deprecated-cuda-amp: `torch.cuda.amp.*` became `torch.amp.*` with an explicit device."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.amp import ANNOTATION, BARE_DECORATOR, CALL, DEPRECATED_AMP, VALUE, AmpImport, AmpUse, torch_binding
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Edit
from gpulint.edits import add_import, replace_node, with_keyword_argument, with_leading_argument, with_positionals_as_keywords

# Positional parameters of the deprecated constructors (torch 2.13 `torch/cuda/amp/*.py`). `torch.amp.autocast`
# orders them differently (`device_type, dtype, enabled, cache_enabled`), so positionals become keywords.
POSITIONAL_NAMES = {
    "autocast": ("enabled", "dtype", "cache_enabled"),
    "GradScaler": ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"),
}
# The oldest torch that has the replacement: `torch.amp` namespace 1.12 (`torch.autocast` itself is 1.10),
# the "cuda" GradScaler 2.3, the device-generic custom_fwd/custom_bwd 2.4.
MINIMUM_TORCH = {"autocast": (1, 12), "GradScaler": (2, 3), "custom_fwd": (2, 4), "custom_bwd": (2, 4)}
CUDA = cst.SimpleString('"cuda"')


def _version(version: tuple[int, int]) -> str:
    return ".".join(map(str, version))


class DeprecatedCudaAmp(Rule):
    code = "GPU403"
    name = "deprecated-cuda-amp"
    summary = "Deprecated `torch.cuda.amp` API: use `torch.amp` with the device `\"cuda\"`"
    fix_applicability = Applicability.SAFE
    needs_gpu_context = False
    requires = (r"\bamp\b", r"cuda")  # `torch.cuda.amp` is named by these two words, however it is imported
    applies_to_tests = True  # a deprecated API warns in a test too

    def check(self) -> Iterator[Diagnostic]:
        amp = self.model.deprecated_amp
        group_fixes: dict[int, list[Edit] | None] = {}
        for use in amp.uses:
            if use.qualified not in DEPRECATED_AMP or use.usage == ANNOTATION or use.compatibility:
                continue  # compatibility code keeps the old API on purpose, for old torch
            if self.runs_below(MINIMUM_TORCH[use.member]):
                continue  # the project's torch has no replacement: the old API is the right one there
            if use.via_import is not None:
                record = amp.imports[use.via_import]
                if id(record) not in group_fixes:
                    group_fixes[id(record)] = self._import_edits(record, amp.shadowed)
                edits = group_fixes[id(record)]
                blocker = self._blocker(record.uses) if edits is None else None
                shadowed = [n for n in record.names if n in amp.shadowed]
                if edits is None and blocker is None and shadowed:
                    blocker = f"no fix: `{shadowed[0]}` is also bound elsewhere in this file"
            else:
                edits = self._use_edits(use, rewrite_name=True)
                blocker = self._blocker([use]) if edits is None else None
            yield self._report(use, edits, blocker)

    # ---- messages --------------------------------------------------------------------------------

    def _report(self, use: AmpUse, edits: list[Edit] | None, blocker: str | None) -> Diagnostic:
        member = use.member
        replacement = {
            "autocast": 'torch.amp.autocast("cuda", ...)',
            "GradScaler": 'torch.amp.GradScaler("cuda", ...)',
            "custom_fwd": 'torch.amp.custom_fwd(..., device_type="cuda")',
            "custom_bwd": 'torch.amp.custom_bwd(..., device_type="cuda")',
        }[member]
        message = f"`torch.cuda.amp.{member}` is deprecated; use `{replacement}`"
        if blocker:
            message += f" ({blocker})"
        fix = self.fix(f"Use `{replacement}`", list(edits), Applicability.SAFE) if edits else None
        return self.diagnostic(use.node, message, fix=fix)

    def _blocker(self, uses: list[AmpUse]) -> str | None:
        """Why no fix is offered, when the reason is one the user can act on."""
        needed = max((MINIMUM_TORCH.get(u.member, (0, 0)) for u in uses if u.qualified in DEPRECATED_AMP), default=(0, 0))
        pin = self.runs_below(needed)
        if pin is not None:
            return f"no fix: needs torch >= {_version(needed)}, {pin.describe()}"
        if self.target_torch < needed:
            return f"no fix: needs torch >= {_version(needed)}, `target-torch` is {_version(self.target_torch)}"
        passed = next((u for u in uses if u.usage == VALUE), None)
        if passed is not None:
            return f"no fix: `{self.model.code(passed.node)}` is used as a value at line {self.model.line_of(passed.node)}"
        return None

    # ---- edits -----------------------------------------------------------------------------------

    def _import_edits(self, record: AmpImport, shadowed: frozenset[str]) -> list[Edit] | None:
        """Rewrite the import and every use of its names together, or nothing (a half-done rewrite breaks)."""
        if record.rewrite is None or any(name in shadowed for name in record.names):
            return None
        edits: list[Edit] = []
        for use in record.uses:
            if use.usage == ANNOTATION:
                continue  # `torch.amp.GradScaler` is the base class of the deprecated one
            if use.qualified not in DEPRECATED_AMP:
                return None  # the module used otherwise: the import cannot change
            use_edits = self._use_edits(use, rewrite_name=False)
            if use_edits is None:
                return None
            edits.extend(use_edits)
        node, new = record.rewrite
        edit = replace_node(self.model, node, new)
        return [edit, *edits] if edit is not None else None

    def _use_edits(self, use: AmpUse, rewrite_name: bool) -> list[Edit] | None:
        """Edits for one use; `rewrite_name` also spells the callee `torch.amp.X` (for attribute chains)."""
        member = use.member
        if self.oldest_torch < MINIMUM_TORCH[member]:
            return None
        if member == "autocast" and any(a.attr.value.startswith("set_autocast") for a in self.model.attributes):
            return None  # the program changes autocast defaults: the implicit float16 would no longer hold
        edits: list[Edit] = []
        target: cst.BaseExpression = use.node
        if rewrite_name:
            torch = torch_binding(self.model)
            if torch is None:
                torch = "torch"
                edits.append(add_import(self.model, "torch"))
            target = cst.parse_expression(f"{torch}.amp.{member}")
        if use.usage == CALL:
            call = use.call
            assert call is not None
            new_call = self._rewrite_call(call, member)
            if new_call is None:
                return None
            if rewrite_name:
                new_call = new_call.with_changes(func=target)
            edit = replace_node(self.model, call, new_call)
        elif use.usage == BARE_DECORATOR and member in ("custom_fwd", "custom_bwd"):
            edit = replace_node(self.model, use.node, f'{self.model.code(target)}(device_type="cuda")')
        else:
            return None  # passed around as a value: the device cannot be added where it is called
        return [*edits, edit] if edit is not None else None

    def _rewrite_call(self, call: cst.Call, member: str) -> cst.Call | None:
        if member in ("custom_fwd", "custom_bwd"):
            if any(a.star or (a.keyword is not None and a.keyword.value == "device_type") for a in call.args):
                return None
            return with_keyword_argument(call, "device_type", CUDA)
        keyworded = with_positionals_as_keywords(call, POSITIONAL_NAMES[member])
        if keyworded is None:
            if member != "GradScaler":
                return None
            keyworded = call  # same order after the device: prepending "cuda" is exact even with *args
        return with_leading_argument(keyworded, CUDA)
