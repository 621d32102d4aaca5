"""GPU402 deprecated-memory-api: `torch.cuda.memory_cached` and friends were renamed."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from gpulint.analysis.imports import dotted_name
from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic
from gpulint.edits import replace_node

RENAMES = {
    "torch.cuda.memory_cached": "memory_reserved",
    "torch.cuda.max_memory_cached": "max_memory_reserved",
    "torch.cuda.reset_max_memory_cached": "reset_peak_memory_stats",
}
RENAMED_IN = (1, 4)  # the new names arrived in torch 1.4: before it the old ones are the only ones


class DeprecatedMemoryApi(Rule):
    code = "GPU402"
    name = "deprecated-memory-api"
    summary = "Deprecated `torch.cuda` memory-statistics name"
    fix_applicability = Applicability.SAFE
    fix_always = True
    needs_gpu_context = False
    requires = (r"memory_cached",)
    applies_to_tests = True  # a removed API breaks a test too

    def check(self) -> Iterator[Diagnostic]:
        if self.runs_below(RENAMED_IN):
            return  # the project's torch has no `memory_reserved`: the rename would break it
        model = self.model
        for node in model.attributes:
            yield from self._check_reference(node, model.qualified_name(node), node.attr)
        for binding, qualified in model.imports.bindings.items():
            if qualified in RENAMES:
                yield from self._check_from_import(binding, qualified)

    def _check_reference(self, node: cst.CSTNode, qualified: str | None, name: cst.Name) -> Iterator[Diagnostic]:
        new = RENAMES.get(qualified or "")
        if new is None:
            return
        old = qualified.rsplit(".", 1)[1]
        fix = self.fix(f"Replace with `{new}`", [replace_node(self.model, name, new)], Applicability.SAFE)
        yield self.diagnostic(node, f"`torch.cuda.{old}` is deprecated; use `torch.cuda.{new}`", fix=fix)

    def _check_from_import(self, binding: str, qualified: str) -> Iterator[Diagnostic]:
        """`from torch.cuda import memory_cached`: report the import; renaming it keeps every use working."""
        old = qualified.rsplit(".", 1)[1]
        new = RENAMES[qualified]
        module = qualified.rsplit(".", 1)[0]
        for stmt in self.model.import_statements:
            if not isinstance(stmt, cst.ImportFrom) or isinstance(stmt.names, cst.ImportStar):
                continue
            if stmt.relative or stmt.module is None or dotted_name(stmt.module) != module:
                continue
            for alias in stmt.names:
                if not (isinstance(alias.name, cst.Name) and alias.name.value == old):
                    continue
                local = alias.asname.name.value if alias.asname else old
                if local != binding:
                    continue  # another import of the same name: reported for its own binding
                replacement = new if alias.asname else f"{new} as {old}"
                fix = self.fix(f"Import `{new}` instead", [replace_node(self.model, alias.name, replacement)], Applicability.SAFE)
                yield self.diagnostic(alias, f"`torch.cuda.{old}` is deprecated; use `torch.cuda.{new}`", fix=fix)
