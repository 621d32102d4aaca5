"""The rules. Every `gpuNNN_*.py` module here is imported once, which registers its rule class."""

from __future__ import annotations

import importlib
import pkgutil

from gpulint.checks.base import REGISTRY, Option, Rule

_loaded = False


def all_rules() -> dict[str, type[Rule]]:
    """Code -> rule class, sorted by code."""
    global _loaded
    if not _loaded:
        for info in pkgutil.iter_modules(__path__):
            if info.name.startswith("gpu"):
                importlib.import_module(f"{__name__}.{info.name}")
        _loaded = True
    return dict(sorted(REGISTRY.items()))


__all__ = ["Option", "Rule", "all_rules"]
