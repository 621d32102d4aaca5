"""The semantic model: what the rules know about a module."""

from gpulint.analysis.model import SemanticModel

__all__ = ["SemanticModel"]
