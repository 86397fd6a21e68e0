"""mzlite.viz.fit_page: every plotly figure of the book fits the text column (the browser test
measures them at 800 and 1300 px; these are the properties that make them fit)."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from mzlite import viz
from mzlite.repro.experiments.scorecard import Scorecard
from mzlite.repro.render import plot_verdicts


def _fig(names, title="a title", width=820):
    fig = go.Figure([go.Scatter(x=[0, 1], y=[0, 1], name=n) for n in names])
    fig.update_layout(title=title, width=width, height=400, yaxis_title="test R^2")
    return fig


def test_fit_page_drops_the_fixed_width_and_puts_the_legend_in_rows_under_the_plot():
    names = [f"model {i}, ours (cpu-converged)" for i in range(9)]
    fig = viz.fit_page(_fig(names))
    lay = fig.layout
    assert lay.width is None and lay.autosize
    assert lay.legend.orientation == "h" and lay.legend.yref == "container"
    per_row = round(1 / lay.legend.entrywidth)
    # the columns fit the narrowest column at ~7 px a character, and every entry gets a row slot
    assert per_row * (7 * max(map(len, names)) + 45) <= 640
    rows = -(-len(names) // per_row)
    assert lay.height == 400 + 22 * rows + 8 and lay.margin.b == 56 + 22 * rows + 8
    assert lay.yaxis.title.text == "test R²" and lay.font.size == viz.PAGE_FONT


def test_fit_page_wraps_long_titles_and_writes_r2():
    long = "Table 3: depth separation on the quadratic-TDOF target, ours beside the paper's R^2"
    fig = viz.fit_page(_fig(["a R^2"], title=long))
    assert "<br>" in fig.layout.title.text and "R²" in fig.layout.title.text
    assert all(len(p) <= 62 for p in fig.layout.title.text.split("<br>"))
    assert fig.data[0].name == "a R²"
    with pytest.raises(ValueError, match="legend_at"):
        viz.fit_page(_fig(["a"]), legend_at="left")


def test_fit_page_legend_on_top_leaves_the_bottom_to_a_slider():
    fig = viz.fit_page(_fig(["a", "b"]), legend_at="top")
    assert fig.layout.legend.yanchor == "top" and fig.layout.margin.b == 56


def test_the_chapters_plots_come_out_fitted():
    figs = [
        viz.plot_sweep({"a": ([1, 2], [0.1, 0.2])}, xlabel="L", ylabel="test R^2"),
        viz.plot_grouped_bars(["m"], {"paper": [0.5], "ours": [0.4]}, ylabel="R^2"),
        viz.plot_ours_vs_paper([{"ours": 0.1, "paper": 0.2, "group": "g"}]),
    ]
    for fig in figs:
        assert fig.layout.width is None and fig.layout.legend.orientation == "h"


def test_plot_verdicts_counts_each_tables_verdicts():
    rows = [{"table": "tab:meb", "verdict": v} for v in ("holds", "holds", "not run")]
    rows.append({"table": "tab:tdof-verify", "verdict": "optimisation failure"})
    fig = plot_verdicts(Scorecard(rows, ("cpu",)))
    bars = {t.name: list(t.x) for t in fig.data}
    assert bars == {"holds": [2, 0], "optimisation failure": [0, 1], "not run": [1, 0]}
    assert fig.layout.width is None
