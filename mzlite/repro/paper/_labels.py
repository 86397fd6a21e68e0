"""The paper's cross-references: every ``\\label`` numbered as LaTeX prints it
(``labels.json``), and text that names them ("Table 3") instead of raw labels; see
``mzlite.repro.paper``."""

from __future__ import annotations

import re

from ._source import DATA_DIR
from ._tables import read_json

LABELS_JSON = DATA_DIR / "labels.json"


def paper_label(label: str, path=None) -> dict:
    """``{"kind", "number", "title", "text"}`` of one of the paper's labels (``KeyError`` naming
    the known labels of that kind when it does not exist)."""
    labels = read_json(str(path or LABELS_JSON))["labels"]
    if label not in labels:
        prefix = label.split(":", 1)[0] + ":"
        near = sorted(k for k in labels if k.startswith(prefix))
        raise KeyError(f"the paper has no label {label!r}; labels {prefix}... are {near}")
    return dict(labels[label])


def paper_ref(label: str, title: bool = False, path=None) -> str:
    """How a reader of the paper names ``label``: ``paper_ref("thm:tdof-depth")`` -> "Theorem 2",
    ``paper_ref("thm:tdof-depth", title=True)`` -> "Theorem 2 (Depth separation via TDOF, ...)";
    sections read "Section 4.2", appendices "Appendix B.3", equations "Eq. (5)"."""
    entry = paper_label(label, path)
    if title and entry["title"]:
        return f"{entry['text']} ({entry['title']})"
    return entry["text"]


# A raw label as it appears in text: "tab:meb", "thm:tdof-depth" (not URLs such as "http:").
RAW_LABEL = re.compile(r"(?<![\w/.-])(?:thm|tab|eq|prop|fig|sec|app|lem|cor|def|rem|alg):[\w-]+")


_KIND_WORDS = (
    r"(?:Theorem|Thm\.|Table|Tab\.|Eq\.|Eqs\.|Equation|Proposition|Prop\.|Figure|Fig\.|"
    r"Section|Sec\.|Appendix|App\.|Lemma|Corollary|Definition|Remark)"
)
NAMED_LABEL = re.compile(rf"(?:\b{_KIND_WORDS}\s+)?({RAW_LABEL.pattern})")


def name_labels(text: str, path=None) -> str:
    """``text`` with every raw paper label replaced by its printed name: "see tab:meb" and "see
    Table tab:meb" both become "see Table 3"."""
    return NAMED_LABEL.sub(lambda m: paper_ref(m.group(1), path=path), text)
