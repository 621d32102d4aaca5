"""gpulint: find, fix and verify the patterns that leave your GPU idle in PyTorch training code."""

__version__ = "0.1.0"
