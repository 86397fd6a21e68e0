"""The paper's own numbers, read from its LaTeX source into JSON (one file per table label), so
that no transcription typo creeps in and a new paper version is one command away::

    python -m mzlite.repro.paper           # regenerate data/paper/*.json from the .tex
    python -m mzlite.repro.paper --check   # exit 1 if the committed JSON differs from the .tex

The committed JSON is read back (the .tex is not needed at run time) with
``load_paper_table("tab:meb")`` or ``paper_value("tab:meb", "ST-Large", "d=8 R^2")``. The same
command numbers every ``\\label`` as LaTeX prints it (``labels.json``), so text names "Table 3",
not a raw label: ``paper_ref``, ``name_labels`` and the book's ``{paper}`` role. Numbers outside
the tables are in the hand-made, test-checked ``figures.json``: ``paper_figure_value``.

A parsed table is ``{"label", "caption", "caption_tex", "columns", "label_columns", "rows":
[{"row": name, "keys": {label column: text}, "cells": {column: {"text": raw LaTeX, "mean": float
| None, "std": float | None, ...}}}]}``. Choices made while flattening (stated once here):
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

import argparse
import json
from pathlib import Path

from ._labels import (  # noqa: F401
    LABELS_JSON,
    RAW_LABEL,
    name_labels,
    paper_label,
    paper_ref,
    parse_labels,
    write_paper_labels,
)
from ._source import DATA_DIR, DEFAULT_TEX, SYNTHETIC_LABELS, paper_tex_path, read_paper_tex  # noqa: F401
from ._tables import (  # noqa: F401
    FIGURES_JSON,
    json_name,
    latex_to_text,
    load_paper_figures,
    load_paper_table,
    paper_cell,
    paper_figure_value,
    paper_value,
    parse_cell,
    parse_table,
    parsed_tables,
    table_labels,
    write_paper_tables,
)


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
        prog="python -m mzlite.repro.paper", description=__doc__.split("\n")[0]
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
