"""xlalint: a static linter and autofixer for PyTorch/XLA training scripts."""

__version__ = "0.1.0"
