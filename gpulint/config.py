"""Settings: `[tool.gpulint]` in pyproject.toml, CLI overrides, rule selection and per-rule options."""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

from gpulint.budget import DEFAULT_SECONDS as DEFAULT_ANALYSIS_SECONDS
from gpulint.diagnostics import Applicability, Diagnostic, Severity

if TYPE_CHECKING:
    from gpulint.checks import Rule

# The rules (and LibCST with them) are imported where a selector is resolved, not with the settings: a warm
# run that reads every result from the cache never needs them.

DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache", ".nox",
    ".pants.d", ".pyenv", ".pytest_cache", ".pytype", ".ruff_cache", ".svn", ".tox", ".venv", ".vscode",
    ".gpulint_cache", "__pypackages__", "_build", "buck-out", "dist", "node_modules", "site-packages", "venv",
)  # fmt: skip
DEFAULT_TARGET_TORCH = "2.3"
DEFAULT_INCLUDE = ("*.py", "*.pyi", "*.ipynb")  # what a folder walk checks, as ruff
DEFAULT_TEST_PATHS = ("test_*.py", "*_test.py", "conftest.py", "**/tests/**", "**/test/**")  # gpulint.analysis.test_code

KNOWN_KEYS = {
    "select", "ignore", "extend-select", "preview", "exclude", "extend-exclude", "respect-gitignore",
    "force-exclude", "per-file-ignores", "target-torch", "rules", "output-format", "cache-dir", "unsafe-fixes",
    "fail-on", "unfixable", "extend-safe-fixes", "extend-unsafe-fixes", "include", "extend-include",
    "analysis-timeout", "test-paths",
}  # fmt: skip
# Keys that hold rule selectors (codes, prefixes, ALL), checked against the registry.
SELECTOR_KEYS = ("select", "ignore", "extend-select", "unfixable", "extend-safe-fixes", "extend-unsafe-fixes")


class ConfigError(Exception):
    """A usage or configuration problem: printed as `gpulint failed` + `Cause:`, exit 2."""


@dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] = ("GPU",)
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    preview: bool = False
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    include: tuple[str, ...] = DEFAULT_INCLUDE  # globs of the files a folder walk checks
    extend_include: tuple[str, ...] = ()
    respect_gitignore: bool = True
    force_exclude: bool = False
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    test_paths: tuple[str, ...] = DEFAULT_TEST_PATHS  # files that are test code: performance rules skip them
    target_torch: tuple[int, int] = (2, 3)
    rule_options: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()
    unsafe_fixes: bool = False
    fail_on: Severity = Severity.INFO  # the lowest severity that makes `check` exit 1
    unfixable: tuple[str, ...] = ()  # rules whose findings are reported without a fix
    extend_safe_fixes: tuple[str, ...] = ()  # rules whose unsafe fixes count as safe
    extend_unsafe_fixes: tuple[str, ...] = ()  # rules whose safe fixes count as unsafe
    output_format: str | None = None
    cache_dir: str | None = None  # from the config file: a folder inside the project
    user_cache_dir: str | None = None  # from --cache-dir / GPULINT_CACHE_DIR: anywhere
    analysis_timeout: float | None = DEFAULT_ANALYSIS_SECONDS  # CPU seconds per file; None or 0: no limit
    root: Path = field(default_factory=Path.cwd)  # paths in the config are relative to this
    config_path: Path | None = None

    @property
    def enabled_codes(self) -> tuple[str, ...]:
        return _enabled_codes(self.select, self.extend_select, self.ignore, self.preview)

    def options_for(self, code: str) -> dict[str, Any]:
        return dict(dict(self.rule_options).get(code, ()))

    def ignored_for(self, path: str) -> frozenset[str]:
        """Codes that `per-file-ignores` switches off for `path`."""
        ignored: set[str] = set()
        rel = _relative(path, self.root)
        for pattern, codes in self.per_file_ignores:
            if glob_match(rel, pattern):
                from gpulint.checks import all_rules

                for code in all_rules():
                    if any(code.startswith(prefix) or prefix == "ALL" for prefix in codes):
                        ignored.add(code)
        return frozenset(ignored)

    def is_test_path(self, path: str) -> bool:
        """`path` matches `test-paths`: a test file, where only the rules that apply to tests run."""
        rel = _relative(path, self.root)
        return any(glob_match(rel, pattern) for pattern in self.test_paths)

    @property
    def overrides_fixes(self) -> bool:
        return bool(self.unfixable or self.extend_safe_fixes or self.extend_unsafe_fixes)

    def with_fix_policy(self, diagnostic: Diagnostic) -> Diagnostic:
        """The diagnostic's fix as `unfixable`, `extend-safe-fixes` and `extend-unsafe-fixes` say, as in ruff:
        an unfixable rule's finding has no fix; a display-only fix stays so; otherwise the most specific selector
        decides, and at equal specificity `extend-unsafe-fixes` wins."""
        fix = diagnostic.fix
        if fix is None or diagnostic.code is None:
            return diagnostic
        if _most_specific(diagnostic.code, self.unfixable) is not None:
            return replace(diagnostic, fix=None)
        if fix.applicability == Applicability.DISPLAY_ONLY:
            return diagnostic
        safe = _most_specific(diagnostic.code, self.extend_safe_fixes)
        unsafe = _most_specific(diagnostic.code, self.extend_unsafe_fixes)
        if unsafe is not None and (safe is None or unsafe >= safe):
            forced = Applicability.UNSAFE
        elif safe is not None:
            forced = Applicability.SAFE
        else:
            return diagnostic
        return diagnostic if fix.applicability == forced else replace(diagnostic, fix=replace(fix, applicability=forced))

    def fingerprint(self) -> str:
        """A stable hash of everything that changes diagnostics, for the cache."""
        # the selectors as written, not the codes they enable: the same registry (gpulint's code, in the cache
        # key) resolves them the same way, and resolving them would import every rule
        data = [self.select, self.extend_select, self.ignore, self.preview, self.per_file_ignores, self.target_torch, self.rule_options, self.unsafe_fixes]
        if self.overrides_fixes:  # only when set, so that existing caches stay valid
            data += [self.unfixable, self.extend_safe_fixes, self.extend_unsafe_fixes]
        if self.test_paths != DEFAULT_TEST_PATHS:
            data.append(self.test_paths)
        return hashlib.sha256(json.dumps(data, default=str).encode()).hexdigest()[:16]


def _most_specific(code: str, selectors: tuple[str, ...]) -> int | None:
    """The specificity of the longest selector matching `code` (`ALL` is 0), or None when none does."""
    lengths = [0 if s == "ALL" else len(s) for s in selectors if s == "ALL" or code.startswith(s)]
    return max(lengths, default=None)


def _relative(path: str, root: Path) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(root.resolve()).as_posix()
    except ValueError:
        return Path(path).as_posix()


def glob_match(rel_path: str, pattern: str) -> bool:
    """ruff-like globs: `tests/**/*.py`, `*.py` (any folder), `__init__.py` (a basename)."""
    pattern = pattern.rstrip("/")
    if "/" not in pattern:
        return fnmatch.fnmatchcase(rel_path.rsplit("/", 1)[-1], pattern) or fnmatch.fnmatchcase(rel_path, pattern)
    regex = re.escape(pattern).replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
    return re.fullmatch(regex, rel_path) is not None or re.match(regex + "/", rel_path) is not None


def check_output_format(name: str, where: str = "") -> None:
    from gpulint.reporters import FORMATS

    if name not in FORMATS:
        known = ", ".join(sorted(FORMATS))
        raise ConfigError(f"Unknown output format `{name}`{f' ({where})' if where else ''}; known formats: {known}")


def parse_severity(value: Any, where: str) -> Severity:
    try:
        return Severity(value)
    except ValueError:
        known = ", ".join(s.value for s in Severity)
        raise ConfigError(f"{where} must be one of {known}, got {value!r}") from None


def check_selector(selector: str, where: str = "") -> None:
    if selector == "ALL":
        return
    if not any(code.startswith(selector) for code in rule_codes()):
        raise ConfigError(f"Unknown rule selector: `{selector}`{f' ({where})' if where else ''}")


def rule_codes() -> tuple[str, ...]:
    """Every rule's code, from the names of the rule modules (`checks/gpu101_*.py` holds GPU101, as
    `all_rules` imports them): a config's selectors are checked without importing the rules."""
    codes = _rule_module_codes()
    registry = sys.modules.get("gpulint.checks.base")
    if registry is not None:  # rules registered in this process (an embedding program, a test) are rules too
        return codes + tuple(sorted(set(registry.REGISTRY) - set(codes)))
    return codes


@functools.lru_cache(maxsize=1)
def _rule_module_codes() -> tuple[str, ...]:
    import pkgutil

    folder = os.path.join(os.path.dirname(__file__), "checks")
    codes = sorted(info.name[:6].upper() for info in pkgutil.iter_modules([folder]) if re.fullmatch(r"gpu\d{3}_\w+", info.name))
    if not codes:  # not laid out as files (a zip): ask the rules themselves
        from gpulint.checks import all_rules

        return tuple(all_rules())
    return tuple(codes)


def _enabled_codes(select, extend_select, ignore, preview) -> tuple[str, ...]:
    from gpulint.checks import all_rules

    enabled = []
    for code, rule in all_rules().items():
        selectors = [s for s in (*select, *extend_select) if s == "ALL" or code.startswith(s)]
        if not selectors:
            continue
        # A preview rule needs --preview, or a selector that names its preview group (`GPU9`, `GPU901`).
        if rule.preview and not preview and not any(s != "ALL" and len(s) >= 4 for s in selectors):
            continue
        if rule.explicit_only and not any(s == "ALL" or len(s) >= 4 for s in selectors):
            continue
        if any(s == "ALL" or code.startswith(s) for s in ignore):
            # The more specific selector wins, as in ruff (`--select GPU101 --ignore GPU1`).
            best_select = max(len(s) if s != "ALL" else 0 for s in selectors)
            best_ignore = max(len(s) if s != "ALL" else 0 for s in ignore if s == "ALL" or code.startswith(s))
            if best_ignore >= best_select:
                continue
        enabled.append(code)
    return tuple(enabled)


def parse_version(value: Any, key: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", str(value))
    if match is None:
        raise ConfigError(f"`{key}` must be a version like \"2.3\", got {value!r}")
    return int(match.group(1)), int(match.group(2))


def _string_list(value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"`{key}` must be a list of strings")
    return tuple(value)


def _rule_by_code_or_name(key: str, where: str) -> type[Rule]:
    from gpulint.checks import all_rules

    for code, rule in all_rules().items():
        if key in (code, rule.name):
            return rule
    raise ConfigError(f"Unknown rule in `[tool.gpulint.rules.{key}]` ({where})")


def parse_rule_options(table: Any, where: str) -> tuple:
    if not isinstance(table, dict):
        raise ConfigError(f"`rules` in {where} must be a table")
    result = {}
    for key, values in table.items():
        rule = _rule_by_code_or_name(key, where)
        known = {o.name: o for o in rule.options}
        if not isinstance(values, dict):
            raise ConfigError(f"`[tool.gpulint.rules.{key}]` must be a table")
        checked = dict(result.get(rule.code, ()))
        for name, value in values.items():
            if name not in known:
                allowed = ", ".join(sorted(known)) or "none"
                raise ConfigError(f"Unknown option `{name}` for {rule.code} ({rule.name}); known options: {allowed}")
            try:
                checked[name] = known[name].validate(value)
            except TypeError as error:
                raise ConfigError(f"Option `{name}` of {rule.code}: {error}") from None
        validate = getattr(rule, "validate_options", None)
        if validate is not None:
            try:
                validate(checked)
            except ValueError as error:
                raise ConfigError(f"Option of {rule.code}: {error}") from None
        result[rule.code] = tuple(sorted(checked.items()))
    return tuple(sorted(result.items()))


def settings_from_table(table: dict, root: Path, config_path: Path | None = None) -> Settings:
    where = str(config_path) if config_path else "the configuration"
    unknown = sorted(set(table) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"Unknown key `{unknown[0]}` in [tool.gpulint] ({where})")
    s = Settings(root=root, config_path=config_path)
    changes: dict[str, Any] = {}
    for key in (*SELECTOR_KEYS, "exclude", "extend-exclude", "include", "extend-include", "test-paths"):
        if key in table:
            changes[key.replace("-", "_")] = _string_list(table[key], key)
    for key in ("preview", "respect-gitignore", "force-exclude", "unsafe-fixes"):
        if key in table:
            if not isinstance(table[key], bool):
                raise ConfigError(f"`{key}` must be true or false")
            changes[key.replace("-", "_")] = table[key]
    for key in ("output-format", "cache-dir"):
        if key in table:
            if not isinstance(table[key], str):
                raise ConfigError(f"`{key}` must be a string")
            changes[key.replace("-", "_")] = table[key]
    if "output-format" in table:
        check_output_format(table["output-format"], f"`output-format` in {where}")
    if "fail-on" in table:
        changes["fail_on"] = parse_severity(table["fail-on"], f"`fail-on` in {where}")
    if "analysis-timeout" in table:
        seconds = table["analysis-timeout"]
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < float("inf"):
            raise ConfigError(f"`analysis-timeout` must be a number of seconds (0 for no limit), got {seconds!r}")
        changes["analysis_timeout"] = float(seconds)
    if "target-torch" in table:
        changes["target_torch"] = parse_version(table["target-torch"], "target-torch")
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError("`per-file-ignores` must be a table of glob = [codes]")
        changes["per_file_ignores"] = tuple((k, _string_list(v, f"per-file-ignores.{k}")) for k, v in pfi.items())
    if "rules" in table:
        changes["rule_options"] = parse_rule_options(table["rules"], where)
    s = replace(s, **changes)
    for key in SELECTOR_KEYS:
        for selector in getattr(s, key.replace("-", "_")):
            check_selector(selector, f"`{key}` in {where}")
    for pattern, codes in s.per_file_ignores:
        for selector in codes:
            check_selector(selector, f"`per-file-ignores.\"{pattern}\"` in {where}")
    return s


def load_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path} is not valid TOML: {error}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path} is not valid TOML: not UTF-8 (invalid byte at offset {error.start})") from None
    except OSError as error:
        raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None


def find_config(start: Path) -> Path | None:
    """The nearest pyproject.toml (upwards from `start`) that has a `[tool.gpulint]` table, never above the
    repository `start` is in (a folder with `.git`): a file planted in a parent folder (a shared `/tmp`, a home
    folder) does not configure the projects below it; `--config` can still name it."""
    start = start.resolve()
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            tool = load_toml(candidate).get("tool")
            if isinstance(tool, dict) and "gpulint" in tool:
                return candidate
        if (directory / ".git").exists():
            return None
    return None


def load_settings(config: str | None = None, start: Path | None = None) -> Settings:
    """Settings from `--config PATH`, or the nearest pyproject.toml with `[tool.gpulint]`, or defaults."""
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise ConfigError(f"config file {config} does not exist")
        data = load_toml(path)
        table = _gpulint_table(data, path, data if path.name != "pyproject.toml" else {})
        return settings_from_table(table, path.resolve().parent, path)
    path = find_config(start or Path.cwd())
    if path is None:
        return Settings(root=(start or Path.cwd()).resolve())
    return settings_from_table(_gpulint_table(load_toml(path), path, {}), path.resolve().parent, path)


def _gpulint_table(data: dict, path: Path, default: dict) -> dict:
    """`[tool.gpulint]` of a parsed TOML file (`default` when it has none), checked to be a table."""
    if "tool" not in data:
        return default
    tool = data["tool"]
    if not isinstance(tool, dict):
        raise ConfigError(f"`tool` in {path} must be a table, got {type(tool).__name__}")
    if "gpulint" not in tool:
        return default
    table = tool["gpulint"]
    if not isinstance(table, dict):
        raise ConfigError(f"[tool.gpulint] in {path} must be a table, got {type(table).__name__}")
    return table


def with_overrides(settings: Settings, **overrides: Any) -> Settings:
    """Apply CLI flags (None means 'not given'); selectors are checked."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    for key in SELECTOR_KEYS:
        for selector in changes.get(key.replace("-", "_"), ()):
            check_selector(selector)
    for key in ("ignore", "extend_select", "unfixable", "extend_safe_fixes", "extend_unsafe_fixes"):
        if key in changes:  # these add to the configuration's list; `select` replaces it
            changes[key] = (*getattr(settings, key), *changes[key])
    return replace(settings, **changes)
