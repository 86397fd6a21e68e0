"""The paper's own numbers, read from its LaTeX source into JSON (one file per table label).

Every table the book compares against is parsed from ``mzattn-paper.tex`` rather than typed in,
so a transcription typo cannot creep in and a new paper version is one command away::

    python -m mzlite.repro.paper                 # regenerate data/paper/*.json from the .tex
    python -m mzlite.repro.paper --check         # exit 1 if the committed JSON differs from the
    .tex

and read back with ``load_paper_table("tab:meb")`` or ``paper_value("tab:meb", "ST-Large",
"d=8 R^2")`` (the committed JSON is used; the .tex is not needed at run time). The same command
numbers every ``\\label`` of the paper as LaTeX prints it (``data/paper/labels.json``), so text can
name "Theorem 2" or "Table 3" instead of a raw label: ``paper_ref("thm:tdof-depth")``,
``name_labels(text)``, and the book's ``{paper}`` role. Numbers outside
the tables (figure captions, text) are in the hand-made, test-checked ``data/paper/figures.json``:
``paper_figure_value("mz-analysis.gates-active")``.

A parsed table is ``{"label", "caption", "caption_tex", "columns", "label_columns", "rows":
[{"row": name, "keys": {label column: text}, "cells": {column: {"text": raw LaTeX, "mean": float
| None, "std": float | None, ...}}}]}``. Choices made while flattening (stated once here):
- Header rows are those above the first ``\\midrule``. A column's name joins its header cells
  from top to bottom with " / " (a ``\\multicolumn`` header names every column it spans), after
  LaTeX is turned into plain ASCII text: ``\\methodname{}`` -> "MZAttn", Greek letters by name
  ("rho"), ``$d{=}8$ $R^2$ $\\uparrow$`` -> "d=8 R^2" (arrows dropped), ``\\times`` -> "x".
- Label columns are the leading ``l`` columns of the tabular spec (at least one). A row's name
  joins its non-empty label cells with " / " (``\\multirow`` labels are carried down), e.g.
  "diameter / 8" in ``tab:sgsp``. If names still repeat (``tab:depth``), the first value column
  is appended ("Set Transformer / 2"). A row made of one full-width ``\\multicolumn`` is a group
  heading and is stored as ``"group"`` on the rows under it.
- Values are as printed: percentages stay percentages (``"unit": "%"``), ratios like
  ``6.6\\times`` give 6.6 (``"unit": "x"``), "0.10s" gives 0.10 (``"unit": "s"``); parameter
  counts "208K" / "1.3M" become 208000.0 / 1300000.0. ``\\pm{<}.001`` gives std 0.001 with
  ``"std_upper_bound": true``; bounds like ``\\geq 95\\%`` give 95 with ``"bound": ">="``.
  Parenthetical remarks ("(unstable)", "(1st)") are ignored for the number; "--" is None.
  ``\\textbf``/``\\mathbf`` set ``"bold": true`` and ``\\underline`` ``"underline": true`` (the
  paper's best / second-best marks). A body ``\\multicolumn`` cell is given to every column it
  spans (``"span": k``). Footnote marks (``^{\\dagger}``) are dropped from names and values.
No table of the paper currently needs a per-table fix-up; ``_FIXUPS`` is the place for one.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ._check import check_paper_tables  # noqa: F401  (re-exported: one import, mzlite.repro.paper)
from ._labels import (  # noqa: F401
    LABELS_JSON,
    RAW_LABEL,
    name_labels,
    paper_label,
    paper_ref,
    parse_labels,
    write_paper_labels,
)
from ._source import (  # noqa: F401
    DATA_DIR,
    DEFAULT_TEX,
    SYNTHETIC_LABELS,
    paper_tex_path,
    read_paper_tex,
)
from ._tables import (  # noqa: F401
    FIGURES_JSON,
    latex_to_text,
    load_paper_figures,
    load_paper_table,
    paper_cell,
    paper_figure_value,
    paper_value,
    parse_cell,
    parse_table,
    table_labels,
    write_paper_tables,
)


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
