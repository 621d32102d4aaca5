"""GPU001 unused-noqa: a `# noqa: GPUxxx` or `# gpulint: ignore[GPUxxx]` that suppresses nothing (ruff's RUF100)."""

from __future__ import annotations

from typing import Iterator

from gpulint.checks.base import Rule
from gpulint.diagnostics import Applicability, Diagnostic, Edit, Location, Severity
from gpulint.suppression import Directive, Suppressions


class UnusedNoqa(Rule):
    code = "GPU001"
    name = "unused-noqa"
    summary = "A suppression comment names a gpulint code that it does not suppress"
    fix_applicability = Applicability.SAFE
    fix_always = True
    needs_gpu_context = False
    explicit_only = True
    reads_findings = True
    requires = (r"(?i)noqa|gpulint:",)
    default_severity = Severity.WARNING

    def check_findings(self, findings: list[Diagnostic], suppressions: Suppressions, enabled: frozenset[str]) -> Iterator[Diagnostic]:
        """Given the file's findings before suppression: gpulint's own codes (`GPU...`) that no finding on the
        directive's rows has. Other tools' codes, blanket `# noqa` and codes of rules that did not run (not
        selected) are left alone."""
        from gpulint.checks import all_rules

        known = all_rules()
        found = {(d.code, suppressions.noqa_row(d.location.row)) for d in findings if d.code is not None}
        found_codes = {code for code, _ in found}
        for directive in suppressions.directives:
            if directive.codes is None:
                continue
            unused, unknown = [], []
            for code in directive.codes:
                if not code.startswith("GPU") or code == self.code:
                    continue
                if code not in known:
                    unknown.append(code)
                elif code not in enabled:
                    continue  # not checked in this run: it may well suppress something
                elif directive.kind == "file" and code not in found_codes:
                    unused.append(code)
                elif directive.kind != "file" and not any((code, row) in found for row in directive.rows):
                    unused.append(code)
            if unused or unknown:
                yield self._report(directive, unused, unknown)

    def _report(self, directive: Directive, unused: list[str], unknown: list[str]) -> Diagnostic:
        parts = [f"{what}: {', '.join(f'`{c}`' for c in codes)}" for what, codes in (("unused", unused), ("unknown", unknown)) if codes]
        start, end = Location(directive.row, directive.column + 1), Location(directive.row, directive.end_column + 1)
        fix = self.fix("Remove the unused codes", [self._removal(directive, {*unused, *unknown})], Applicability.SAFE)
        return Diagnostic(self.code, self.name, f"Unused suppression ({'; '.join(parts)})", self.model.path, start, end, self.default_severity, fix)

    def _removal(self, directive: Directive, drop: set[str]) -> Edit:
        """The directive without `drop`; with no code left, the whole directive: its line when it stood
        alone, the spaces before it at the end of a line, and a `#` kept for words after it."""
        lines = self.model.lines
        line = lines[directive.row - 1]
        kept = [c for c in directive.codes if c not in drop]
        begin, end = directive.column, directive.end_column
        if kept:
            listed = ", ".join(kept)
            new = {"noqa": f"# noqa: {listed}", "ignore": f"# gpulint: ignore[{listed}]", "file": f"# gpulint: noqa: {listed}"}[directive.kind]
            return Edit(Location(directive.row, begin + 1), Location(directive.row, end + 1), new)
        before, after = line[:begin], line[end:]
        if not before.strip() and not after.strip():
            if directive.row < len(lines):
                return Edit(Location(directive.row, 1), Location(directive.row + 1, 1), "")
            return Edit(Location(directive.row, 1), Location(directive.row, len(line) + 1), "")
        if after.strip():
            return Edit(Location(directive.row, begin + 1), Location(directive.row, end + 1), "#")
        return Edit(Location(directive.row, len(before.rstrip()) + 1), Location(directive.row, end + 1), "")
