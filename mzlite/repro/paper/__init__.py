"""The paper's own numbers, read from its LaTeX source into JSON (one file per table label), so
that no transcription typo creeps in and a new paper version is one command away::

    python tools/paper_tables.py           # regenerate data/paper/*.json from the .tex
    python tools/paper_tables.py --check   # exit 1 if the committed JSON differs from the .tex

The package only reads the committed JSON back (the .tex and the parser, a script outside the
package, are not needed at run time) with
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

from ._labels import LABELS_JSON, NAMED_LABEL, RAW_LABEL, name_labels, paper_label, paper_ref  # noqa: F401
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
)
