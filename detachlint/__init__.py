"""detachlint: a static linter for autograd misuse in PyTorch code."""

__version__ = "0.1.0"
