"""The committed JSON against a fresh parse of the paper's source: ``python -m mzlite.repro.paper
--check`` (``mzlite.repro.paper``)."""

from __future__ import annotations

import json
from pathlib import Path

from ._labels import LABELS_JSON, parse_labels
from ._source import DATA_DIR, paper_tex_path, read_paper_tex
from ._tables import _json_name, _read_json, parse_table, table_labels


def check_paper_tables(tex_path=None, data_dir=None) -> list[str]:
    """Labels whose committed JSON differs from a fresh parse of the .tex, and "labels.json" when
    the numbering of the paper's labels changed (empty: in sync)."""
    tex = read_paper_tex(tex_path)
    d = Path(data_dir) if data_dir is not None else DATA_DIR
    stale = []
    for lab in table_labels(tex):
        path = d / _json_name(lab)
        fresh = parse_table(tex, lab)
        fresh["source"] = Path(tex_path or paper_tex_path()).name
        if not path.exists() or json.loads(path.read_text(encoding="utf-8")) != fresh:
            stale.append(lab)
    labels_path = d / LABELS_JSON.name
    fresh_labels = parse_labels(tex)
    if not labels_path.exists() or _read_json(labels_path)["labels"] != fresh_labels:
        stale.append(LABELS_JSON.name)
    return stale
