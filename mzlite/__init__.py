"""mzlite: Matrix Zonotopic Attention in plain PyTorch, and the code behind the MZAttn book."""

__version__ = "0.1.0"
