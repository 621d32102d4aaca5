"""The editor's `gpulint` settings, and the gpulint settings each document is checked with.

Client settings act as command-line flags do: they override `[tool.gpulint]` of the nearest pyproject.toml
(`ignore` and `extendSelect` add to its lists, `select` replaces it). A document's settings are read again
whenever a pyproject.toml between its folder and the filesystem root (or the `configuration` file) changes,
so an edited configuration applies at the next check without a restart.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulint import api

RUN_MODES = ("onType", "onSave")


@dataclass(frozen=True)
class ClientSettings:
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] | None = None
    extend_select: tuple[str, ...] | None = None
    preview: bool | None = None
    unsafe_fixes: bool | None = None
    configuration: str | None = None  # a TOML file to read instead of the nearest pyproject.toml (`--config`)
    run: str = "onType"  # check while typing, or only when a file is opened or saved
    debounce: int = 50  # milliseconds without a change before a document is checked while typing
    show_syntax_errors: bool = True

    def overrides(self) -> dict[str, Any]:
        return {
            "select": self.select,
            "ignore": self.ignore,
            "extend_select": self.extend_select,
            "preview": self.preview,
            "unsafe_fixes": self.unsafe_fixes,
        }


def _codes(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError("a list of rule codes")
    return tuple(v.strip().upper() if v.strip() != "ALL" else "ALL" for v in value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("true or false")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("a string")
    return value


def _run(value: Any) -> str:
    if value not in RUN_MODES:
        raise ValueError(" or ".join(f'"{m}"' for m in RUN_MODES))
    return value


def _milliseconds(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 10_000:
        raise ValueError("milliseconds from 0 to 10000")
    return value


KEYS = {  # camelCase key -> (field, check)
    "select": ("select", _codes),
    "ignore": ("ignore", _codes),
    "extendSelect": ("extend_select", _codes),
    "preview": ("preview", _flag),
    "unsafeFixes": ("unsafe_fixes", _flag),
    "configuration": ("configuration", _text),
    "run": ("run", _run),
    "debounce": ("debounce", _milliseconds),
    "showSyntaxErrors": ("show_syntax_errors", _flag),
}


def parse_client_settings(*layers: Any) -> tuple[ClientSettings, list[str]]:
    """Settings from `initializationOptions`, then what `workspace/configuration` or `didChangeConfiguration`
    gave (a later layer overrides an earlier one key by key: an editor that answers with an empty object keeps the
    initialization options). Each layer is the `gpulint` object itself, or an object holding it under `gpulint` or
    `settings`. Unknown keys and wrong values are left out and listed in the problems returned with the settings
    (the server tells the user), never fatal. Rule selectors are checked with the configuration."""
    data: dict[str, Any] = {}
    problems: list[str] = []
    for layer in layers:
        while isinstance(layer, dict) and set(layer) & {"gpulint", "settings"} and not set(layer) & set(KEYS):
            layer = layer.get("gpulint", layer.get("settings"))
        if isinstance(layer, dict):
            data.update(layer)
        elif layer is not None:
            problems.append(f"settings must be an object, got {type(layer).__name__}")
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in KEYS:
            problems.append(f"unknown setting `{key}` (known: {', '.join(KEYS)})")
            continue
        name, check = KEYS[key]
        if value is None:
            continue
        try:
            values[name] = check(value)
        except ValueError as error:
            problems.append(f"`{key}` must be {error}; ignored")
    return ClientSettings(**values), problems


@dataclass
class _Entry:
    signature: tuple
    settings: api.Settings | None
    error: str | None


class SettingsCache:
    """Settings per folder, read again when a configuration file they may come from has changed."""

    def __init__(self) -> None:
        self.client = ClientSettings()
        self._entries: dict[Path, _Entry] = {}
        self._lock = threading.Lock()  # the server's thread sets the client settings, the checker reads them

    def set_client(self, client: ClientSettings) -> None:
        with self._lock:
            self.client = client
            self._entries.clear()

    def for_folder(self, folder: Path) -> tuple[api.Settings | None, str | None]:
        """The settings for documents in `folder` (excluded files are not checked: `force-exclude`), or None
        and why they could not be read."""
        with self._lock:
            client = self.client
            signature = self._signature(folder, client)
            entry = self._entries.get(folder)
            if entry is None or entry.signature != signature:
                try:
                    settings = api.discover_settings(folder, config=client.configuration, force_exclude=True, **client.overrides())
                    entry = _Entry(signature, settings, None)
                except api.ConfigError as error:
                    entry = _Entry(signature, None, str(error))
                self._entries[folder] = entry
            return entry.settings, entry.error

    @staticmethod
    def _signature(folder: Path, client: ClientSettings) -> tuple:
        """Size and modification time of every file the settings may be read from."""
        candidates = [d / "pyproject.toml" for d in (folder, *folder.parents)]
        if client.configuration:
            candidates.append(Path(client.configuration))
        return tuple(_stamp(path) for path in candidates)


def _stamp(path: Path) -> tuple | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size)
