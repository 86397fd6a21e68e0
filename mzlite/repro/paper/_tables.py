"""The paper's tables: LaTeX to plain text, cells and tables parsed, the committed JSON written
and read, and the numbers outside the tables (``figures.json``); see ``mzlite.repro.paper``."""

from __future__ import annotations

import copy
import json
import os
import re
from functools import cache
from pathlib import Path

from ._source import DATA_DIR

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


def load_paper_table(label: str, data_dir: str | os.PathLike | None = None) -> dict:
    """The committed JSON of table ``label`` (e.g. ``"tab:meb"``); see the module docstring.
    A fresh copy each call, so callers may modify it."""
    return copy.deepcopy(_load(label, str(data_dir or DATA_DIR)))


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
    # the cached table, read only: a copy of the one cell asked for, not of the whole table (a
    # scorecard asks for a cell thousands of times; copying its table each time took a third of it)
    table = _load(label, str(data_dir or DATA_DIR))
    r = _pick(row, [x["row"] for x in table["rows"]], "row", label)
    c = _pick(column, table["columns"], "column", label)
    return copy.deepcopy(next(x for x in table["rows"] if x["row"] == r)["cells"][c])


def paper_value(label: str, row: str, column: str, data_dir=None) -> float | None:
    """The printed mean of a cell (None for "--"); ``paper_cell`` gives std and marks too."""
    return paper_cell(label, row, column, data_dir)["mean"]


# Numbers outside the tables (figure captions, the text beside them, hyperparameters)
FIGURES_JSON = DATA_DIR / "figures.json"


@cache
def _load_figures(path: str) -> dict:
    return {e["id"]: e for e in read_json(path)["numbers"]}


def load_paper_figures(path: str | os.PathLike | None = None) -> dict[str, dict]:
    """The paper's numbers that no table holds, by id: ``{id: {"label", "value", "unit",
    "quote", "printed", ...}}`` from ``data/paper/figures.json`` (a fresh copy each call).

    Why: the table parser cannot reach prose, and a number typed into a notebook drifts from the
    paper unnoticed. This file is written by hand, but every entry quotes the .tex verbatim and
    ``tests/test_paper.py`` checks that the quote is in the .tex and that its ``printed`` token
    parses to ``value``. ``--check`` and ``write_paper_tables`` only touch ``tab-*.json``."""
    return copy.deepcopy(_load_figures(str(path or FIGURES_JSON)))


def paper_figure_value(id: str, path: str | os.PathLike | None = None) -> float | int:
    """The value of one number of ``figures.json``, e.g. ``paper_figure_value(
    "mz-analysis.gates-active")`` -> 78.6 (percentages stay percentages, as printed)."""
    figures = _load_figures(str(path or FIGURES_JSON))
    if id not in figures:
        raise KeyError(f"no paper number {id!r} in figures.json; ids are {sorted(figures)}")
    return figures[id]["value"]
