"""The semantic model: what the rules know about a module."""

from gpulint.analysis.model import SemanticModel

# Analyses that add GPU evidence to module summaries register it when imported (devices.EVIDENCE_FINDERS).
from gpulint.analysis import frameworks  # noqa: F401

__all__ = ["SemanticModel"]
