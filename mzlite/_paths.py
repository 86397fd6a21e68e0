"""Where mzlite finds the repository it runs from (``data/``, the notebooks, the paper beside it).

One place for every module: results, the dataset cache, the paper's numbers and the shipped
checkpoints are all found from ``data_root()``. In a checkout that is the repository's ``data/``,
never the working directory's, so notebooks and the CLI read the same files wherever they start.
Installed as a package (no checkout around it), mzlite reads the ``data/`` folder that the
student download ships beside the chapters: the working folder's or a parent's.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# A folder is mzlite's data folder when it holds the paper's numbers (every download ships them).
_MARKER = "paper"


def in_checkout() -> bool:
    """True when mzlite runs from a repository checkout (not from an installed package)."""
    return (REPO_ROOT / "pyproject.toml").is_file()


def data_root() -> Path:
    """``$MZLITE_DATA`` if set; else the checkout's ``data/``; else the first ``data/`` holding
    ``paper/`` in the working folder or one of its parents (an unzipped student download).
    Outside a checkout with no such folder this is ``./data``: readers then raise
    ``FileNotFoundError`` naming the file they wanted there."""
    if os.environ.get("MZLITE_DATA"):
        return Path(os.environ["MZLITE_DATA"])
    if in_checkout():
        return REPO_ROOT / "data"
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / "data" / _MARKER).is_dir():
            return folder / "data"
    return here / "data"
