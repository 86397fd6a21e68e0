"""Chapter 6 ("Relational benchmarks"): its exercises and its two plot helpers in mzlite.viz."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import cdist, pdist, squareform

from mzlite.exercises import check, keys
from mzlite.exercises.ch6 import exercise_inputs
from mzlite.viz import plot_ours_vs_paper, plot_points_3d

ROOT = Path(__file__).resolve().parents[1]


def test_every_exercise_the_chapter_checks_is_registered_and_every_registered_one_is_asked():
    text = (ROOT / "notebooks" / "06_relational_benchmarks.ipynb").read_text(encoding="utf-8")
    asked = set(re.findall(r'check\(\\"(ch6\.\w+)\\"', text))
    assert asked and asked == set(keys("ch6."))


def test_mst_exercise_matches_scipy_and_rejects_wrong_answers():
    pts = exercise_inputs()["mst_points"]
    ref = minimum_spanning_tree(squareform(pdist(pts))).sum()
    assert check("ch6.mst", ref, strict=True)
    assert check("ch6.mst", ref + 0.1).status == "wrong"
    assert check("ch6.mst", pdist(pts).sum()).status == "wrong"  # all edges, not the tree
    assert check("ch6.mst", ...).status == "unanswered"


def test_chamfer_exercise_is_symmetric_squared_and_averaged():
    ex = exercise_inputs()
    D = cdist(ex["A"], ex["B"], "sqeuclidean")
    assert check("ch6.chamfer", D.min(1).mean() + D.min(0).mean(), strict=True)
    assert check("ch6.chamfer", D.min(1).mean()).status == "wrong"  # one direction only
    root = np.sqrt(D)
    assert check("ch6.chamfer", root.min(1).mean() + root.min(0).mean()).status == "wrong"


def test_r2_exercise_can_be_negative():
    ex = exercise_inputs()
    y, p = ex["y"], ex["pred"]
    r2 = 1 - ((y - p) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    assert r2 < 0
    res = check("ch6.r2", r2, strict=True)
    assert "worse than predicting the mean" in res.message
    assert check("ch6.r2", 0.0).status == "wrong"
    assert check("ch6.r2", "abc").status == "wrong"  # malformed: wrong, not an error


def test_plot_points_3d_draws_clouds_and_a_hull():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(12, 3)), rng.normal(size=(7, 3))
    fig = plot_points_3d({"A": a, "B": b}, hull="A", title="t")
    kinds = [t.type for t in fig.data]
    assert kinds == ["scatter3d", "scatter3d", "mesh3d"]
    assert len(fig.data[0].x) == 12 and "volume" in fig.data[2].name
    assert [t.type for t in plot_points_3d({"A": a}).data] == ["scatter3d"]
    with pytest.raises(ValueError, match="names no cloud"):
        plot_points_3d({"A": a}, hull="B")
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        plot_points_3d({"A": rng.normal(size=(5, 2))})
    with pytest.raises(ValueError, match="non-empty"):
        plot_points_3d({})


def test_plot_ours_vs_paper_clips_groups_and_skips_missing():
    pts = [
        {"ours": 0.5, "paper": 0.8, "group": "MZ", "table": "t1", "label": "a"},
        {"ours": -7.0, "paper": 0.2, "group": "ST", "table": "t1", "label": "b"},
        {"ours": None, "paper": 0.2, "group": "ST", "table": "t2", "label": "c"},
        {"ours": 0.1, "paper": -60.0, "group": "ST", "table": "t2", "label": "d"},
    ]
    fig = plot_ours_vs_paper(pts, lo=-1.0)
    traces = [t for t in fig.data if t.mode == "markers" and t.x != (None,)]
    assert [t.name for t in traces] == ["MZ, t1", "ST, t1", "ST, t2"]
    st1 = traces[1]
    assert st1.y[0] == -1.0 and st1.marker.symbol[0].endswith("-open")
    assert "-7.000" in st1.text[0]  # the true value stays in the hover text
    assert traces[2].x[0] == -1.0 and len(traces[2].x) == 1  # the point without ours is skipped
    assert fig.data[-1].name == "ours = paper"
    empty = plot_ours_vs_paper([])
    assert len(empty.data) == 1 and empty.layout.annotations


def test_plot_ours_vs_paper_legend_names_each_group_and_table_once():
    """A colour per group and a marker per table, each once in the legend: 2 groups and 12
    tables make 14 entries (not 24 pairs), and the legend stays shorter than the plot."""
    pts = [{"ours": 0.5, "paper": 0.5, "group": g, "table": f"Table {k}", "label": ""}
           for g in ("MZ", "ST") for k in range(12)]  # fmt: skip
    fig = plot_ours_vs_paper(pts)
    shown = [t for t in fig.data if t.showlegend is not False]
    assert [t.name for t in shown][:2] == ["MZ", "ST"] and len(shown) == 2 + 12 + 1
    styles = {(t.marker.color, t.marker.symbol) for t in shown if t.mode == "markers"}
    assert len(styles) == 14  # every entry looks different
    assert fig.layout.margin.b - 56 < fig.layout.height - fig.layout.margin.b


def test_plot_ours_vs_paper_draws_error_bars_where_given():
    pts = [
        {"ours": 0.5, "ours_std": 0.03, "paper": 0.8, "group": "MZ", "table": "t1", "label": "a"},
        {"ours": -3.0, "ours_std": 0.5, "paper": 0.8, "group": "MZ", "table": "t1", "label": "b"},
        {"ours": 0.4, "paper": 0.6, "group": "ST", "table": "t1", "label": "c"},
    ]
    mz, st = (t for t in plot_ours_vs_paper(pts).data if t.mode == "markers" and t.x != (None,))
    assert list(mz.error_y.array) == [0.03, 0.0]  # no bar on a clipped marker
    assert "± 0.030" in mz.text[0]
    assert st.error_y.array is None
