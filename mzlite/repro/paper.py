"""The paper's own numbers, read from its LaTeX source into committed JSON (one file per table
label) so that no transcription typo creeps in::

    python tools/paper_tables.py           # regenerate data/paper/*.json from the .tex
    python tools/paper_tables.py --check   # exit 1 if the committed JSON differs from the .tex

The package reads only the JSON (``load_paper_table("tab:meb")``, ``paper_value("tab:meb",
"ST-Large", "d=8 R^2")``). The same command numbers every ``\\label`` as LaTeX prints it
(``labels.json``), so text names "Table 3", not a raw label: ``paper_ref``, ``name_labels`` and the
book's ``{paper}`` role. Numbers outside the tables are in the hand-made, test-checked
``figures.json``: ``paper_figure_value``.

A parsed table is ``{"label", "caption", "caption_tex", "columns", "label_columns", "rows":
[{"row": name, "keys": {label column: text}, "cells": {column: {"text": raw LaTeX, "mean": float
| None, "std": float | None, ...}}}]}``. Choices made while flattening:
- Header rows are those above the first ``\\midrule``; a column's name joins its header cells
  top to bottom with " / " (a ``\\multicolumn`` header names every column it spans), in plain
  ASCII: ``\\methodname{}`` -> "MZAttn", Greek letters by name, ``$d{=}8$ $R^2$ $\\uparrow$`` ->
  "d=8 R^2", ``\\times`` -> "x".
- Label columns are the leading ``l`` columns (at least one); a row's name joins its non-empty
  label cells with " / " (``\\multirow`` labels are carried down), e.g. "diameter / 8"; names
  that still repeat get the first value column appended ("Set Transformer / 2"). A row of one
  full-width ``\\multicolumn`` is a group heading, stored as ``"group"`` on the rows under it.
- Values are as printed: "%" stays a percentage (``"unit": "%"``), ``6.6\\times`` gives 6.6
  (``"unit": "x"``), "0.10s" 0.10 (``"unit": "s"``), "208K" / "1.3M" 208000.0 / 1300000.0.
  ``\\pm{<}.001`` gives std 0.001 with ``"std_upper_bound": true``; ``\\geq 95\\%`` gives 95 with
  ``"bound": ">="``; remarks in parentheses are ignored, "--" is None. ``\\textbf``/``\\mathbf``
  set ``"bold"``, ``\\underline`` ``"underline"`` (the paper's best / second-best); a body
  ``\\multicolumn`` cell goes to every column it spans (``"span": k``); footnote marks drop.
"""

from __future__ import annotations

import copy
import json
import os
import re
from functools import cache
from pathlib import Path

from mzlite._paths import REPO_ROOT, data_root

DATA_DIR = data_root() / "paper"
FIGURES_JSON = DATA_DIR / "figures.json"  # numbers outside the tables: captions, prose, settings
LABELS_JSON = DATA_DIR / "labels.json"
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


_SYMBOLS = {
    "pm": "+/-", "times": "x", "uparrow": "", "downarrow": "", "leq": "<=", "le": "<=",
    "geq": ">=", "ge": ">=", "approx": "~", "sim": "~", "cdot": "*", "infty": "inf",
    "ldots": "...", "dots": "...", "quad": " ", "qquad": " ", "methodname": "MZAttn",
    "R": "R", "dagger": "", "ddagger": "", "star": "", "left": "", "right": "",
}  # fmt: skip
_GREEK = (
    "alpha beta gamma delta Delta epsilon varepsilon theta lambda mu nu pi rho sigma Sigma tau "
    "phi psi omega Omega"
).split()
# Commands whose braces hold text to keep (the braces themselves are removed later).
_UNWRAP = (
    "textbf mathbf underline textit emph text mathrm mathit textsuperscript textsc texttt "
    "mathbb mathcal boldsymbol bm textrm"
).split()
_DROP = (
    "tiny scriptsize footnotesize small normalsize large bfseries itshape centering displaystyle"
).split()


def latex_to_text(s: str) -> str:
    """Plain ASCII-ish text of a LaTeX fragment (table headers, row names, captions)."""
    s = re.sub(r"(?<!\\)%.*", "", s)  # comments
    s = re.sub(r"\\label\{[^}]*\}", "", s)
    s = re.sub(r"\^\{\\(?:dagger|ddagger|star|ast)\}", "", s)  # footnote marks
    s = re.sub(r"\\cite[tp]?\*?(?:\[[^\]]*\])?\{([^}]*)\}", r"[\1]", s)
    s = re.sub(r"\\(?:eq)?ref\{([^}]*)\}", r"\1", s)
    s = s.replace(r"\%", "%").replace(r"\&", "&").replace(r"\_", "_").replace(r"\#", "#")
    s = s.replace(r"\,", " ").replace(r"\;", " ").replace(r"\!", "").replace(r"\ ", " ")
    s = s.replace(r"\{", "").replace(r"\}", "").replace(r"\\", " ")

    def command(m: re.Match) -> str:
        name = m.group(1)
        if name in _SYMBOLS:
            return _SYMBOLS[name]
        if name in _GREEK:
            return f" {name} "
        if name in _UNWRAP or name in _DROP:
            return ""
        return name  # unknown: keep the word, lose the backslash

    s = re.sub(r"\\([A-Za-z]+)\*?", command, s)
    s = s.replace("$", "").replace("{", "").replace("}", "").replace("~", " ")
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s*(?<![<>])=\s*", "=", s)  # "L = 16" and "L{=}16" read the same
    s = re.sub(r"\s+([,.;:)])", r"\1", s)  # "rho )" -> "rho)"
    return re.sub(r"([(])\s+", r"\1", s)


def json_name(label: str) -> str:
    return label.replace(":", "-") + ".json"


@cache
def read_json(path: str) -> dict:
    """A committed JSON file, read once: callers copy what they hand on."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


@cache
def _load(label: str, data_dir: str) -> dict:
    path = Path(data_dir) / json_name(label)
    if not path.exists():
        have = sorted(p.stem.replace("tab-", "tab:", 1) for p in Path(data_dir).glob("tab-*.json"))
        raise KeyError(f"no paper table {label!r} in {data_dir}; available: {have}")
    return read_json(str(path))


def load_paper_table(label: str) -> dict:
    """The committed JSON of table ``label`` (e.g. ``"tab:meb"``), a fresh copy each call."""
    return copy.deepcopy(_load(label, str(DATA_DIR)))


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9^=.]", "", s.lower())


def _pick(name: str, options: list[str], what: str, label: str) -> str:
    if name in options:
        return name
    hits = [o for o in options if _norm(o) == _norm(name)]
    if len(hits) == 1:
        return hits[0]
    raise KeyError(f"{what} {name!r} not in {label}; {what}s are {options}")


def paper_cell(label: str, row: str, column: str, data_dir=None) -> dict:
    """The cell dict (``text``, ``mean``, ``std``, ...) of ``row`` x ``column`` in table ``label``.
    Names match exactly, else ignoring case, spaces and punctuation ("mzattn-1l r^2" works)."""
    # copy the one cell, not the table: a scorecard asks for cells thousands of times
    table = _load(label, str(data_dir or DATA_DIR))
    r = _pick(row, [x["row"] for x in table["rows"]], "row", label)
    c = _pick(column, table["columns"], "column", label)
    return copy.deepcopy(next(x for x in table["rows"] if x["row"] == r)["cells"][c])


def paper_value(label: str, row: str, column: str, data_dir=None) -> float | None:
    """The printed mean of a cell (None for "--"); ``paper_cell`` gives std and marks too."""
    return paper_cell(label, row, column, data_dir)["mean"]


@cache
def _load_figures() -> dict:
    return {e["id"]: e for e in read_json(str(FIGURES_JSON))["numbers"]}


def load_paper_figures() -> dict[str, dict]:
    """The paper's numbers that no table holds, by id: ``{id: {"label", "value", "unit",
    "quote", "printed", ...}}`` from ``figures.json`` (a fresh copy each call). The table parser
    cannot reach prose, so the file is written by hand; ``tests/test_paper.py`` checks that each
    ``quote`` is in the .tex and that its ``printed`` token parses to ``value``."""
    return copy.deepcopy(_load_figures())


def paper_figure_value(id: str) -> float | int:
    """The value of one number of ``figures.json``, e.g. ``paper_figure_value(
    "mz-analysis.gates-active")`` -> 78.6 (percentages stay percentages, as printed)."""
    figures = _load_figures()
    if id not in figures:
        raise KeyError(f"no paper number {id!r} in figures.json; ids are {sorted(figures)}")
    return figures[id]["value"]


def paper_label(label: str) -> dict:
    """``{"kind", "number", "title", "text"}`` of one of the paper's labels (``KeyError`` naming
    the known labels of that kind when it does not exist)."""
    labels = read_json(str(LABELS_JSON))["labels"]
    if label not in labels:
        prefix = label.split(":", 1)[0] + ":"
        near = sorted(k for k in labels if k.startswith(prefix))
        raise KeyError(f"the paper has no label {label!r}; labels {prefix}... are {near}")
    return dict(labels[label])


def paper_ref(label: str, title: bool = False) -> str:
    """How a reader of the paper names ``label``: ``paper_ref("thm:tdof-depth")`` -> "Theorem 2",
    ``paper_ref("thm:tdof-depth", title=True)`` -> "Theorem 2 (Depth separation via TDOF, ...)";
    sections read "Section 4.2", appendices "Appendix B.3", equations "Eq. (5)"."""
    entry = paper_label(label)
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


def name_labels(text: str) -> str:
    """``text`` with every raw paper label replaced by its printed name: "see tab:meb" and "see
    Table tab:meb" both become "see Table 3"."""
    return NAMED_LABEL.sub(lambda m: paper_ref(m.group(1)), text)


def spaced(text: str) -> str:
    """ "d=8" -> "d = 8", "R^2" -> "R²": a setting and a metric as a page prints them."""
    return re.sub(r"\b([A-Za-z]\w*)=(\d)", r"\1 = \2", text).replace("R^2", "R²")
