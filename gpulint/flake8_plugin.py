"""The flake8 plugin: `flake8` shows gpulint's findings (entry point `GPU` in `flake8.extension`).

The diagnostics come from `gpulint.api.check`, the same function `gpulint check` uses, so both
report the same things. The source is the `lines` flake8 has already read (stdin-aware, BOM stripped);
the plugin never re-reads or re-parses a file itself, and the text prefilter in `check_source` makes files
with nothing to report cost next to nothing. flake8 shows `column + 1`, so columns are yielded 0-based.

flake8 hands a plugin one file at a time, but gpulint's findings depend on the project around a file
(a loader built in `data.py` and copied to the GPU in `train.py`). The first file a flake8 process checks
builds the project index (`gpulint.projects`: every module under the configuration root, summarised
with `ast`; the summaries come from gpulint's cache when `gpulint check` or an earlier flake8 run made
them), and every file is then checked with its context in it. Code read from stdin has no project.

Settings: `[tool.gpulint]` from the nearest pyproject.toml (as `gpulint check` reads it), then the
`gpulint-*` and per-rule options below from the command line or `[flake8]` in `.flake8` / `setup.cfg` /
`tox.ini`. flake8's own selection (`--select`, `--extend-select`, `--ignore`, `noqa`) decides what is shown,
among the rules `gpulint check` would run: `flake8 --select GPU` reports exactly what `gpulint check` reports;
preview rules (GPU9xx) run only when a flake8 selector names them (`GPU9`, `GPU901`) or gpulint's own
configuration enables them.

This module does not import flake8: flake8 imports it.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Iterator

from gpulint import __version__, api
from gpulint.config import ConfigError, Settings, check_selector
from gpulint.linter import check_source

PREVIEW_PREFIX = "GPU9"


def _rule_option_flag(code: str, name: str) -> str:
    return f"--{code.lower()}-{name.replace('_', '-')}"


def _rule_option_dest(code: str, name: str) -> str:
    return f"gpulint_rule_{code.lower()}_{name.replace('-', '_')}"


def _codes(value: Any) -> tuple[str, ...]:
    if not value:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    return tuple(part.strip().upper() for part in value if part.strip())


class GpulintChecker:
    """A flake8 tree plugin. flake8 passes the parsed `tree` (unused: gpulint parses with LibCST, only when
    the prefilter says a rule could fire), the file's `lines` and its `filename`."""

    name = "gpulint"
    version = __version__

    _settings: ClassVar[Settings | None] = None
    _projects: ClassVar[dict[str, Any]] = {}  # configuration root -> ProjectIndex, built on first use

    def __init__(self, tree: Any, lines: list[str], filename: str = "stdin") -> None:
        self.tree = tree
        self.lines = lines
        self.filename = filename

    @classmethod
    def settings(cls) -> Settings:
        if cls._settings is None:
            cls._settings = replace(api.discover_settings(), force_exclude=False)
        return cls._settings

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        text = "".join(self.lines)
        for d in check_source(text, api.display_path(self.filename), self.settings(), project=self._context(text)):
            if d.code is None:
                continue  # the file does not parse: flake8 reports E999 itself
            yield d.location.row, d.location.column - 1, f"{d.code} {d.message}", type(self)

    def _context(self, text: str):
        """This file's context in its project (None for stdin): the index is built once per flake8 process."""
        if self.filename in ("stdin", "-") or not os.path.isfile(self.filename):
            return None
        from gpulint.projects import context_for, load_project

        settings = self.settings()
        index = self._projects.get(str(settings.root))
        if index is None:
            index = self._projects[str(settings.root)] = load_project([Path(self.filename)], settings)
        return context_for(index, Path(self.filename), text, self.tree if hasattr(self.tree, "body") else None)

    # ---- options ----------------------------------------------------------------------------

    @classmethod
    def add_options(cls, option_manager: Any) -> None:
        from gpulint.checks import all_rules

        option_manager.add_option(
            "--gpulint-config",
            default=None,
            parse_from_config=True,
            normalize_paths=True,  # in a config file: relative to that file's folder
            help="gpulint: read [tool.gpulint] from this file (default: the nearest pyproject.toml that has it).",
        )
        for flag, what in (
            ("select", "Rule codes or prefixes gpulint checks (like [tool.gpulint] select)."),
            ("extend-select", "Codes gpulint checks on top of the selection."),
            ("ignore", "Codes gpulint does not check."),
        ):
            option_manager.add_option(
                f"--gpulint-{flag}",
                default=None,
                parse_from_config=True,
                comma_separated_list=True,
                help=f"gpulint: {what} flake8's own --select / --ignore still decide what is shown.",
            )
        option_manager.add_option(
            "--gpulint-target-torch",
            default=None,
            parse_from_config=True,
            help="gpulint: the oldest PyTorch version the code must run on, e.g. 2.3.",
        )
        for code, rule in all_rules().items():
            for option in rule.options:
                kwargs: dict[str, Any] = {}
                if isinstance(option.default, bool):
                    kwargs["action"] = "store_true"
                elif isinstance(option.default, (list, tuple)):
                    kwargs["comma_separated_list"] = True
                elif isinstance(option.default, (int, float)):
                    kwargs["type"] = type(option.default)
                option_manager.add_option(
                    _rule_option_flag(code, option.name),
                    dest=_rule_option_dest(code, option.name),
                    default=None,
                    parse_from_config=True,
                    help=f"gpulint {code} ({rule.name}): {option.help}",
                    **kwargs,
                )
        option_manager.extend_default_ignore([PREVIEW_PREFIX])

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        try:
            cls._settings = settings_from_flake8(options)
        except ConfigError as error:
            # flake8 prints ExecutionError as "There was a critical error ..." and exits 1, no traceback.
            from flake8.exceptions import ExecutionError

            raise ExecutionError(f"gpulint: {error}") from None


def settings_from_flake8(options: argparse.Namespace) -> Settings:
    """gpulint Settings from `[tool.gpulint]` plus flake8's options; rules flake8 would hide are not run."""
    from gpulint.checks import all_rules
    from gpulint.config import parse_rule_options, parse_version

    settings = api.discover_settings(config=getattr(options, "gpulint_config", None))
    changes: dict[str, Any] = {"force_exclude": False}  # flake8 chose the file
    # What `gpulint check` runs, plus the rules that flake8's own selection names as specifically as gpulint
    # asks for them (`--select GPU9` or `GPU901` turns a preview rule on, `--select GPU` does not): flake8
    # cannot hide those itself, since an explicit `--select GPU` beats its default ignore of `GPU9`.
    named = [c for c in (*(getattr(options, "select", None) or ()), *(getattr(options, "extend_select", None) or ())) if c.upper().startswith("GPU")]
    if named:
        changes["extend_select"] = (*settings.extend_select, *(c.upper() for c in named))
    for key in ("select", "extend_select", "ignore"):
        codes = _codes(getattr(options, f"gpulint_{key}", None))
        for selector in codes:
            check_selector(selector)
        if codes:
            changes[key] = codes if key == "select" else (*changes.get(key, getattr(settings, key)), *codes)
    target = getattr(options, "gpulint_target_torch", None)
    if target:
        changes["target_torch"] = parse_version(target, "gpulint-target-torch")
    table: dict[str, dict[str, Any]] = {}
    for code, rule in all_rules().items():
        for option in rule.options:
            value = getattr(options, _rule_option_dest(code, option.name), None)
            if value is None or value is False:
                continue
            if isinstance(option.default, tuple) and isinstance(value, list):
                value = tuple(value)
            table.setdefault(code, {})[option.name] = value
    if table:
        merged = {code: dict(values) for code, values in settings.rule_options}
        for code, values in table.items():
            merged.setdefault(code, {}).update(values)
        changes["rule_options"] = parse_rule_options(merged, "the flake8 options")
    hidden = _hidden_by_flake8(options, all_rules())
    if hidden:
        changes["ignore"] = (*changes.get("ignore", settings.ignore), *hidden)
    return replace(settings, **changes)


def _hidden_by_flake8(options: argparse.Namespace, rules: dict) -> tuple[str, ...]:
    """Codes flake8 would not show anyway (e.g. GPU9 by default): not worth computing."""
    try:
        from flake8.style_guide import Decision, DecisionEngine

        engine = DecisionEngine(options)
        return tuple(code for code in rules if engine.decision_for(code) is not Decision.Selected)
    except Exception:  # noqa: BLE001 - a flake8 without this internal API: run everything, flake8 filters
        return ()
