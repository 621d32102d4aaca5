from .shapes import build_loader  # re-exported: `from detection.datasets import build_loader`
