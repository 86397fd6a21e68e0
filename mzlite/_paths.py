"""Where mzlite finds the repository it runs from (``data/``, the notebooks, the paper beside it).

One constant for every module: results, the dataset cache, the paper's numbers and the shipped
checkpoints are all found relative to it, never relative to the working directory.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def in_checkout() -> bool:
    """True when mzlite runs from a repository checkout (not from an installed package)."""
    return (REPO_ROOT / "pyproject.toml").is_file()
