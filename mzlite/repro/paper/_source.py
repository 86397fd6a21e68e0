"""Where the paper's LaTeX source and the committed JSON are, and which tables the book uses
(``mzlite.repro.paper``)."""

from __future__ import annotations

import os
from pathlib import Path

from mzlite._paths import REPO_ROOT, data_root

DATA_DIR = data_root() / "paper"
# The paper sits beside the repository (../shared/paper); $MZLITE_PAPER_TEX overrides it.
DEFAULT_TEX = REPO_ROOT.parent / "shared" / "paper" / "mzattn-paper.tex"

# The synthetic tables the book reproduces (every one must parse and be committed).
SYNTHETIC_LABELS = (
    "tab:main-results", "tab:tdof-verify", "tab:meb", "tab:hull", "tab:hull-normed",
    "tab:mst-scale", "tab:mst-normed", "tab:rotmatch-scale", "tab:sgsp", "tab:scaling",
    "tab:egnn-comparison", "tab:mz-efficient", "tab:gen-ablation", "tab:depth", "tab:ece-nll",
    "tab:uncertainty", "tab:unc-comparison", "tab:cost", "tab:meta-reg", "tab:slot-baseline",
    "tab:ablation", "tab:hypernet-rank", "tab:sizegen", "tab:ambiguity", "tab:tdof-sensitivity",
    "tab:hypernet-rank-ext", "tab:genqk", "tab:seq-mz",
)  # fmt: skip


def paper_tex_path() -> Path:
    return Path(os.environ.get("MZLITE_PAPER_TEX", DEFAULT_TEX))


def read_paper_tex(path: str | os.PathLike | None = None) -> str:
    """The paper's LaTeX source (``FileNotFoundError`` naming the path when it is absent)."""
    p = Path(path) if path is not None else paper_tex_path()
    if not p.exists():
        raise FileNotFoundError(
            f"paper source not found at {p}; set $MZLITE_PAPER_TEX or pass the path"
        )
    return p.read_text(encoding="utf-8")
