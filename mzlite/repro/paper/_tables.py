"""The paper's tables: LaTeX to plain text, cells and tables parsed, the committed JSON written
and read, and the numbers outside the tables (``figures.json``); see ``mzlite.repro.paper``."""

from __future__ import annotations

import copy
import json
import os
import re
from collections import Counter
from functools import cache
from itertools import groupby
from pathlib import Path

from mzlite._io import atomic_write_json

from ._source import DATA_DIR, SYNTHETIC_LABELS, paper_tex_path, read_paper_tex

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


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)"
_CELL_RE = re.compile(
    rf"^(?:[A-Za-z][\w ]*=\s*)?(?P<cmp><=|>=|<|>|~)?\s*(?P<mean>{_NUM})\s*(?P<mu>[KM%xs])?\s*"
    rf"(?:\+/-\s*(?P<lt><)?\s*(?P<std>{_NUM})\s*(?P<su>[KM%])?)?\s*(?P<u2>[%x])?$"
)
_SCALE = {"K": 1e3, "M": 1e6}


def parse_cell(tex: str) -> dict:
    """``{"text": raw, "mean": float | None, "std": float | None}`` plus optional ``unit``,
    ``bold``, ``underline``, ``std_upper_bound``, ``bound`` (see the module docstring)."""
    raw = re.sub(r"\s+", " ", tex).strip()
    cell: dict = {"text": raw, "mean": None, "std": None}
    if re.search(r"\\(?:textbf|mathbf)\b", raw):
        cell["bold"] = True
    if r"\underline" in raw:
        cell["underline"] = True
    text = latex_to_text(raw)
    text = re.sub(r"\([^)]*\)", "", text).strip()  # remarks: "(unstable)", "(1st)"
    m = _CELL_RE.match(text.replace(" ", "")) if text else None
    if m is None:
        return cell
    unit = m.group("mu") or m.group("su") or m.group("u2")
    scale = _SCALE.get(unit, 1.0)
    cell["mean"] = float(m.group("mean")) * scale
    if m.group("std") is not None:
        cell["std"] = float(m.group("std")) * scale
        if m.group("lt"):
            cell["std_upper_bound"] = True
    if unit in ("%", "x", "s"):
        cell["unit"] = unit
    if m.group("cmp"):
        cell["bound"] = m.group("cmp")
    return cell


def _braced(s: str, i: int) -> tuple[str, int]:
    """The content of the brace group opening at ``s[i] == "{"`` and the index after it."""
    if i >= len(s) or s[i] != "{":
        raise ValueError(f"expected '{{' at position {i}")
    depth = 0
    for j in range(i, len(s)):
        c = s[j]
        if c == "\\":
            continue
        if c == "{" and s[j - 1] != "\\":
            depth += 1
        elif c == "}" and s[j - 1] != "\\":
            depth -= 1
            if depth == 0:
                return s[i + 1 : j], j + 1
    raise ValueError("unbalanced braces")


def _split_cells(row: str) -> list[str]:
    """Split a tabular row on ``&`` at brace depth 0 (``\\&`` is text)."""
    cells, depth, cur = [], 0, ""
    for token in re.findall(r"\\.|.", row, flags=re.S):  # an escaped character is one token
        depth += (token == "{") - (token == "}")
        if token == "&" and depth == 0:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += token
    return [*cells, cur.strip()]


def _expand(cells: list[str]) -> list[tuple[str, int, bool]]:
    """Expand ``\\multicolumn{k}{spec}{x}`` into k entries; ``(tex, span, is_multirow)``."""
    out = []
    for c in cells:
        m = re.match(r"\\multicolumn\s*\{(\d+)\}\s*", c)
        if m:
            _, j = _braced(c, m.end())  # the column spec
            content, _ = _braced(c, j)
            k = int(m.group(1))
            out.extend([(content.strip(), k, False)] * k)
            continue
        m = re.match(r"\\multirow\s*\{(\d+)\}\s*\{[^}]*\}\s*", c)
        if m:
            content, _ = _braced(c, m.end())
            out.append((content.strip(), 1, True))
            continue
        out.append((c, 1, False))
    return out


_RULE = re.compile(
    r"^\s*\\(?:toprule|midrule|bottomrule|hline|addlinespace)(?:\[[^\]]*\])?"
    r"|^\s*\\(?:cmidrule|cline)(?:\([^)]*\))?\{[^}]*\}"
)


def _rows(body: str) -> tuple[list[str], list[str]]:
    """Header rows (above the first \\midrule) and body rows of a tabular body."""
    body = re.sub(r"(?<!\\)%.*", "", body)
    header, rows, seen_mid = [], [], False
    for chunk in re.split(r"\\\\(?:\[[^\]]*\])?", body):
        while m := _RULE.match(chunk):
            seen_mid = seen_mid or m.group(0).strip().startswith(r"\midrule")
            chunk = chunk[m.end() :]
        chunk = chunk.strip()
        if chunk:
            (rows if seen_mid else header).append(chunk)
    return header, rows


def _leading_label_columns(spec: str) -> int:
    spec = re.sub(r"@\{[^}]*\}|!\{[^}]*\}|[|\s]", "", spec)
    spec = re.sub(r"[pmb]\{[^}]*\}", "p", spec)
    n = len(spec) - len(spec.lstrip("l"))
    return max(n, 1)


def _find_table(tex: str, label: str) -> str:
    pos = tex.find(f"\\label{{{label}}}")
    if pos < 0:
        raise KeyError(f"label {label!r} not found in the paper source")
    start = tex.rfind("\\begin{table", 0, pos)
    end = tex.find("\\end{table", pos)
    if start < 0 or end < 0 or tex.rfind("\\end{table", 0, pos) > start:
        raise ValueError(f"label {label!r} is not inside a table environment")
    return tex[start:end]


def table_labels(tex: str) -> list[str]:
    """Every ``\\label`` that sits in a table environment, in order of appearance."""
    out = []
    for m in re.finditer(r"\\label\{(tab:[^}]*)\}", tex):
        try:
            _find_table(tex, m.group(1))
        except ValueError:
            continue
        out.append(m.group(1))
    return out


def parse_table(tex: str, label: str) -> dict:
    """Parse the booktabs table labelled ``label`` out of the paper source ``tex``."""
    env = _find_table(tex, label)
    i = env.find("\\caption")
    caption_tex = _braced(env, env.index("{", i))[0] if i >= 0 else ""
    t = env.find("\\begin{tabular}")
    if t < 0:
        raise ValueError(f"table {label!r} has no tabular")
    spec, j = _braced(env, t + len("\\begin{tabular}"))
    k = env.find("\\end{tabular}", j)
    n_label = _leading_label_columns(spec)
    header_rows, body_rows = _rows(env[j:k])
    head = [_expand(_split_cells(r)) for r in header_rows]
    body = [_expand(_split_cells(r)) for r in body_rows]
    ncols = max(len(r) for r in head + body)

    names = []  # a column's header cells, top to bottom
    for c in range(ncols):
        texts = [latex_to_text(r[c][0]) for r in head if c < len(r)]
        name = " / ".join(k for k, _ in groupby(t for t in texts if t)) or (
            "Model" if c == 0 else f"column {c + 1}"
        )
        names.append(f"{name} ({names.count(name) + 1})" if name in names else name)
    label_names, value_names = names[:n_label], names[n_label:]

    rows, group, carry = [], None, {}
    for r in body:
        if len(r) == ncols and r[0][1] == ncols:  # one full-width multicolumn: a group heading
            group = latex_to_text(r[0][0])
            continue
        r = r + [("", 1, False)] * (ncols - len(r))
        keys = {}
        for c in range(n_label):
            tex_c, _, is_multirow = r[c]
            txt = latex_to_text(tex_c)
            if is_multirow:
                carry[c] = txt
            elif not txt and c in carry:
                txt = carry[c]
            if txt:
                keys[label_names[c]] = txt
        cells = {
            names[c]: parse_cell(r[c][0]) | ({"span": r[c][1]} if r[c][1] > 1 else {})
            for c in range(n_label, ncols)
        }
        row = {"row": " / ".join(keys.values()), "keys": keys, "cells": cells}
        if group is not None:
            row["group"] = group
        rows.append(row)

    row_names = [r["row"] for r in rows]
    if len(set(row_names)) < len(row_names) and value_names:
        for r in rows:  # e.g. tab:depth: "Set Transformer" at six depths
            first = latex_to_text(r["cells"][value_names[0]]["text"])
            r["row"] = f"{r['row']} / {first}"
            r["keys"][value_names[0]] = first
    seen = Counter()
    for r in rows:
        seen[r["row"]] += 1
        if seen[r["row"]] > 1:
            r["row"] += f" #{seen[r['row']]}"

    label_names = [n for n in label_names if any(n in r["keys"] for r in rows)] or label_names[:1]
    out = {
        "label": label,
        "caption": latex_to_text(caption_tex),
        "caption_tex": re.sub(r"\s+", " ", caption_tex).strip(),
        "label_columns": label_names,
        "columns": value_names,
        "rows": rows,
    }
    note = latex_to_text(env[k + len("\\end{tabular}") :])
    if note:
        out["note"] = note
    return out


def json_name(label: str) -> str:
    return label.replace(":", "-") + ".json"


def parsed_tables(tex_path=None, labels=None) -> dict[str, dict]:
    """The paper's tables (every one, or ``labels``) parsed from its source, each with the
    source's file name, as ``tab-<name>.json`` holds them."""
    tex = read_paper_tex(tex_path)
    source = Path(tex_path or paper_tex_path()).name
    wanted = table_labels(tex) if labels is None else labels
    return {lab: {**parse_table(tex, lab), "source": source} for lab in wanted}


def write_paper_tables(
    tex_path: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    labels=None,
) -> list[Path]:
    """Parse every table of the paper (or ``labels``) and write ``<out_dir>/tab-<name>.json``
    atomically. ``SYNTHETIC_LABELS`` must all be there, and every table must parse to rows."""
    tables = parsed_tables(tex_path, labels)
    missing = [lab for lab in SYNTHETIC_LABELS if labels is None and lab not in tables]
    if missing:
        raise ValueError(f"tables {missing} are not in the paper source")
    empty = [lab for lab, table in tables.items() if not table["rows"]]
    if empty:
        raise ValueError(f"tables {empty} parsed to no rows")
    out = Path(out_dir) if out_dir is not None else DATA_DIR
    return [
        atomic_write_json(out / json_name(lab), t, ensure_ascii=False) for lab, t in tables.items()
    ]


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
