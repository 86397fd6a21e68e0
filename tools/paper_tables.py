"""Regenerate (or check) the paper's numbers in data/paper/*.json from its LaTeX source.

A data-authoring tool, not part of the package, which only reads the committed JSON
(``mzlite.repro.paper``; its docstring states the JSON's layout and the choices made while
flattening a table)::

    python tools/paper_tables.py           # regenerate data/paper/*.json from the .tex
    python tools/paper_tables.py --check   # exit 1 if the committed JSON differs from the .tex

Tables: every ``\\label{tab:...}`` inside a table environment (``tab-<name>.json``); labels: every
``\\label`` numbered as LaTeX prints it (``labels.json``). ``figures.json`` is hand-made and left
alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from itertools import groupby
from pathlib import Path

from mzlite._io import atomic_write_json
from mzlite.repro.paper import (
    DATA_DIR,
    DEFAULT_TEX,
    LABELS_JSON,
    NAMED_LABEL,
    SYNTHETIC_LABELS,
    json_name,
    latex_to_text,
    paper_tex_path,
    read_paper_tex,
)

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


# Counters of the paper's preamble: theorem, corollary, proposition and lemma share one counter
# (``\newtheorem{corollary}[theorem]{Corollary}``); definition and remark count on their own.
_THEOREM_NAMES = {
    "theorem": "Theorem", "corollary": "Corollary", "proposition": "Proposition",
    "lemma": "Lemma", "definition": "Definition", "remark": "Remark",
}  # fmt: skip
_NUMBERED_MATH = ("equation", "align", "gather", "multline", "eqnarray")
_FLOATS = {"figure": "Figure", "table": "Table", "algorithm": "Algorithm"}
_TOKEN = re.compile(
    r"\\(?P<sec>section|subsection|subsubsection)(?P<star>\*?)\s*(?:\[[^\]]*\])?\s*\{"
    r"|\\begin\{(?P<begin>[A-Za-z]+\*?)\}"
    r"|\\end\{(?P<end>[A-Za-z]+\*?)\}"
    r"|\\(?P<caption>caption)\s*(?:\[[^\]]*\])?\s*\{"
    r"|\\label\{(?P<label>[^}]*)\}"
    r"|\\(?P<appendix>appendix)\b"
    r"|\\\\(?P<nonumber>)"
)


def _theorem_counters(tex: str) -> dict[str, str]:
    """environment -> the counter it steps, from the ``\\newtheorem`` lines."""
    counters = {env: env for env in _THEOREM_NAMES}
    for m in re.finditer(r"\\newtheorem\{(\w+)\}(?:\[(\w+)\])?\{([^}]*)\}", tex):
        counters[m.group(1)] = m.group(2) or m.group(1)
    return counters


def _short_title(tex_fragment: str, limit: int = 90) -> str:
    """A caption's bold lead or first sentence, as plain text, at most ``limit`` characters."""
    frag = tex_fragment.strip()
    m = re.match(r"\\textbf\{", frag)
    if m:
        frag = _braced(frag, m.end() - 1)[0]
    text = latex_to_text(frag)
    text = re.sub(r"\s*\((?:[^()]|\([^()]*\))*\)", "", text)  # "(R^2, mean+/-std, 5 seeds)"
    # the first sentence: a full stop after a word, not after "vs." or "Eq."
    text = re.split(r"(?<!\bvs)(?<!\bEq)(?<!\be\.g)(?<!\bi\.e)(?<=[A-Za-z0-9)])\.(?:\s|$)",
                    text, maxsplit=1)[0].rstrip(".")  # fmt: skip
    return text if len(text) <= limit else text[: limit - 3].rsplit(" ", 1)[0] + "..."


def parse_labels(tex: str) -> dict[str, dict]:
    """Every ``\\label`` of the paper with the number LaTeX prints for it, found by stepping the
    paper's counters in document order: ``{label: {"kind": "Theorem", "number": "2", "title":
    "Depth separation via TDOF, ...", "text": "Theorem 2"}}``.

    Rules (those of the article class and this paper's preamble): numbered sections count 1, 2,
    ... and after ``\\appendix`` A, B, ... (``\\section*`` does not count; labels under an
    appendix are "Appendix B.3"); theorem-like environments step the counter their
    ``\\newtheorem`` names; each numbered display (equation, align rows without \\nonumber) steps
    the equation counter ("Eq. (5)"); a ``\\caption`` steps its float's counter. A label takes
    the innermost number stepped before it within the enclosing environment, as LaTeX's
    ``\\@currentlabel`` does."""
    body = re.sub(r"(?<!\\)%.*", "", tex)
    start = body.find("\\begin{document}")
    body = body[start if start >= 0 else 0 :]
    theorem_counter = _theorem_counters(tex)
    count: dict[str, int] = {}
    sec = [0, 0, 0]
    appendix = False
    current: dict | None = None
    stack: list[tuple[str, dict | None]] = []
    labels: dict[str, dict] = {}

    def step(name: str) -> int:
        count[name] = count.get(name, 0) + 1
        return count[name]

    for m in _TOKEN.finditer(body):
        if m.group("appendix") is not None:
            appendix, sec = True, [0, 0, 0]
        elif m.group("sec"):
            if m.group("star"):
                continue
            level = ("section", "subsection", "subsubsection").index(m.group("sec"))
            sec[level] += 1
            sec[level + 1 :] = [0] * (2 - level)
            parts = [chr(ord("A") + sec[0] - 1) if appendix else str(sec[0])]
            parts += [str(n) for n in sec[1 : level + 1]]
            title = latex_to_text(_braced(body, m.end() - 1)[0])
            kind = "Appendix" if appendix else "Section"
            current = {"kind": kind, "number": ".".join(parts), "title": title}
        elif m.group("begin"):
            env = m.group("begin")
            stack.append((env, current))
            if env in theorem_counter:
                opt = re.match(r"\s*\[", body[m.end() :])
                title = ""
                if opt:  # [Title~\citep{...}]: up to the matching bracket
                    i, depth = m.end() + opt.end(), 1
                    j = i
                    while j < len(body) and depth:
                        depth += {"[": 1, "]": -1}.get(body[j], 0)
                        j += 1
                    title = latex_to_text(re.sub(r"~?\\cite[tp]?\{[^}]*\}", "", body[i : j - 1]))
                n = step(theorem_counter[env])
                current = {"kind": _THEOREM_NAMES.get(env, env.title()), "number": str(n),
                           "title": title}  # fmt: skip
            elif env in _NUMBERED_MATH:
                current = {"kind": "Eq.", "number": f"({step('equation')})", "title": ""}
        elif m.group("end"):
            env = m.group("end")
            while stack:
                top, saved = stack.pop()
                if top == env:
                    current = saved
                    break
        elif m.group("caption"):
            float_env = next((e for e, _ in reversed(stack) if e.rstrip("*") in _FLOATS), None)
            if float_env is None:
                continue
            kind = _FLOATS[float_env.rstrip("*")]
            title = _short_title(_braced(body, m.end() - 1)[0])
            current = {"kind": kind, "number": str(step(kind)), "title": title}
        elif m.group("nonumber") is not None:
            # a new row of a numbered multi-line display: the next row gets the next number
            env = next((e for e, _ in reversed(stack) if e in _NUMBERED_MATH), None)
            if env is not None and env != "equation":
                row_end = body.find("\\\\", m.end())
                row = body[m.end() : row_end if row_end >= 0 else None]
                if not re.search(r"\\(?:nonumber|notag)\b", row):
                    current = {"kind": "Eq.", "number": f"({step('equation')})", "title": ""}
        elif m.group("label"):
            label = m.group("label")
            if current is None:
                raise ValueError(f"label {label!r} comes before any numbered element")
            entry = dict(current)
            entry["text"] = f"{entry['kind']} {entry['number']}"
            labels[label] = entry
    for entry in labels.values():  # "Proof of Theorem thm:tdof-depth" -> "... Theorem 2 ..."
        entry["title"] = NAMED_LABEL.sub(
            lambda m: labels[m.group(1)]["text"] if m.group(1) in labels else m.group(0),
            entry["title"],
        )
    return labels


def write_paper_labels(tex_path=None, out_path=None) -> Path:
    """Write ``data/paper/labels.json`` (every label's printed number and title) atomically."""
    labels = parse_labels(read_paper_tex(tex_path))
    doc = {"source": Path(tex_path or paper_tex_path()).name, "labels": labels}
    return atomic_write_json(Path(out_path or LABELS_JSON), doc, ensure_ascii=False)


def check_paper_tables(tex_path=None, data_dir=None) -> list[str]:
    """Labels whose committed JSON differs from a fresh parse of the .tex, and "labels.json" when
    the numbering of the paper's labels changed (empty: in sync)."""
    d = Path(data_dir) if data_dir is not None else DATA_DIR

    def committed(name: str):
        path = d / name
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    stale = [
        lab for lab, fresh in parsed_tables(tex_path).items() if committed(json_name(lab)) != fresh
    ]
    labels = committed(LABELS_JSON.name)
    if labels is None or labels["labels"] != parse_labels(read_paper_tex(tex_path)):
        stale.append(LABELS_JSON.name)
    return stale


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python tools/paper_tables.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--tex", default=None, help=f"paper source (default {DEFAULT_TEX})")
    ap.add_argument("--out", default=None, help=f"output folder (default {DATA_DIR})")
    ap.add_argument("--check", action="store_true", help="only compare, exit 1 when stale")
    args = ap.parse_args(argv)
    if args.check:
        stale = check_paper_tables(args.tex, args.out)
        print("data/paper is in sync with the paper" if not stale else f"stale: {stale}")
        return 1 if stale else 0
    paths = write_paper_tables(args.tex, args.out)
    out = Path(args.out) if args.out else DATA_DIR
    write_paper_labels(args.tex, out / LABELS_JSON.name)
    print(f"wrote {len(paths)} tables and {LABELS_JSON.name} to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
