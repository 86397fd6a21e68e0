"""Results beside the paper: point clouds, ours against the paper, sweeps, MEB sets, grouped bars
(chapters 4-6)."""

from __future__ import annotations

import torch

from .page import fit_page

__all__: list[str] = []

# ============================================================================= benchmarks
# Chapter 6 ("Relational benchmarks"): 3-D point clouds with their convex hull, and our numbers
# against the paper's across tables. Added as one block; nothing above depends on it.

__all__ += ["plot_points_3d", "plot_ours_vs_paper"]


def plot_points_3d(clouds: dict, *, hull: str | None = None, title: str | None = None):
    """Interactive plotly scatter of named 3-D point sets, ``clouds = {name: (n, 3) array}``
    (e.g. Task B's two clouds A and B); ``hull`` names one cloud whose convex hull is drawn as a
    translucent mesh (``scipy.spatial.ConvexHull``, e.g. for the hull-volume task). Returns the
    ``plotly.graph_objects.Figure``."""
    import numpy as np
    import plotly.graph_objects as go
    from scipy.spatial import ConvexHull

    if not isinstance(clouds, dict) or not clouds:
        raise ValueError("clouds must be a non-empty dict {name: (n, 3) array}")
    pts = {}
    for name, p in clouds.items():
        a = np.asarray(torch.as_tensor(p).detach().cpu().double())
        if a.ndim != 2 or a.shape[1] != 3 or a.shape[0] < 1:
            raise ValueError(f"clouds[{name!r}] must have shape (n, 3), got {a.shape}")
        pts[name] = a
    if hull is not None and hull not in pts:
        raise ValueError(f"hull={hull!r} names no cloud; clouds: {list(pts)}")
    fig = go.Figure()
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]
    for k, (name, a) in enumerate(pts.items()):
        fig.add_trace(
            go.Scatter3d(
                x=a[:, 0], y=a[:, 1], z=a[:, 2], mode="markers", name=name,
                marker=dict(size=3, color=palette[k % len(palette)]),
            )
        )  # fmt: skip
    if hull is not None:
        a = pts[hull]
        h = ConvexHull(a)
        fig.add_trace(
            go.Mesh3d(
                x=a[:, 0], y=a[:, 1], z=a[:, 2], i=h.simplices[:, 0], j=h.simplices[:, 1],
                k=h.simplices[:, 2], opacity=0.2, color="#7f7f7f", flatshading=True,
                name=f"hull of {hull} (volume {h.volume:.3g})", showlegend=True,
            )
        )  # fmt: skip
    fig.update_layout(
        title=title, scene=dict(aspectmode="data"), margin=dict(l=0, r=0, t=40, b=0), height=450
    )
    return fig


def plot_ours_vs_paper(points, *, lo: float = -1.0, title: str | None = None):
    """Interactive scatter of our numbers (y) against the paper's (x), one marker per point,
    with the diagonal "ours = paper". ``points``: dicts with ``ours``, ``paper`` (floats),
    ``group`` (colour, e.g. the model family), ``table`` (marker symbol), ``label`` (hover
    text) and optionally ``ours_std`` (an error bar, e.g. the std over seeds). Values below
    ``lo`` are drawn at ``lo`` (open marker; the hover text keeps the true value), so a few R^2
    of -60 do not squash the rest. Points missing either number are skipped. Returns the
    ``plotly.graph_objects.Figure``."""
    import plotly.graph_objects as go

    rows = [p for p in points if p.get("ours") is not None and p.get("paper") is not None]
    fig = go.Figure()
    tables = sorted({p.get("table", "") for p in rows})
    groups = sorted({p.get("group", "") for p in rows})
    symbols = ["circle", "square", "diamond", "cross", "x", "triangle-up", "star", "hexagon",
               "triangle-down", "pentagon", "star-triangle-up", "hourglass"]  # fmt: skip
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
    # The legend says each thing once: a colour per group, a marker per table (not one entry per
    # (group, table) pair, which made the legend taller than the plot)
    for g in groups:
        colour = colours[groups.index(g) % len(colours)]
        for t in tables:
            sel = [p for p in rows if p.get("group", "") == g and p.get("table", "") == t]
            if not sel:
                continue
            sym = symbols[tables.index(t) % len(symbols)]
            fig.add_trace(
                go.Scatter(
                    x=[max(p["paper"], lo) for p in sel],
                    y=[max(p["ours"], lo) for p in sel],
                    mode="markers",
                    name=f"{g}, {t}" if t else str(g),
                    showlegend=False,
                    marker=dict(
                        size=9,
                        color=colour,
                        symbol=[
                            sym + ("-open" if min(p["paper"], p["ours"]) < lo else "") for p in sel
                        ],
                    ),  # fmt: skip
                    text=[
                        f"{p.get('label', '')}<br>paper {p['paper']:.3f}, ours {p['ours']:.3f}"
                        + ("" if p.get("ours_std") is None else f" ± {p['ours_std']:.3f}")
                        for p in sel
                    ],
                    hoverinfo="text",
                    error_y=None
                    if all(p.get("ours_std") is None for p in sel)
                    else {
                        "type": "data",
                        "color": colour,
                        "array": [
                            0.0 if p.get("ours_std") is None or p["ours"] < lo else p["ours_std"]
                            for p in sel
                        ],
                    },
                )
            )
        # no legendgroup: in a horizontal legend each group would start a row of its own
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=str(g),
                                 marker=dict(size=9, color=colour, symbol="circle")))  # fmt: skip
    for t in (t for t in tables if t):
        sym = symbols[tables.index(t) % len(symbols)]
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=str(t),
                                 marker=dict(size=9, color="#495057", symbol=sym)))  # fmt: skip
    fig.add_trace(
        go.Scatter(x=[lo, 1.0], y=[lo, 1.0], mode="lines", name="ours = paper",
                   line=dict(color="grey", dash="dot"))
    )  # fmt: skip
    fig.update_layout(
        title=title,
        xaxis=dict(title="paper", range=[lo - 0.05, 1.05]),
        yaxis=dict(title="ours", range=[lo - 0.05, 1.05], scaleanchor="x"),
        height=520,
    )
    if not rows:
        fig.add_annotation(text="no results of this profile yet", x=0.0, y=0.0, showarrow=False)
    return fit_page(fig)


# ============================================================================= sweeps (chapter 4)
# Chapter 4 ("Training MZAttn for real"): a metric against a swept setting (R^2 vs L), ours
# beside the paper's, interactive. Added as one block; nothing above depends on it.

__all__ += ["plot_sweep"]


def plot_sweep(
    series: dict,
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str | None = None,
    hline: float | None = None,
    hline_label: str = "",
):
    """Interactive plotly line plot of named series over a swept setting (e.g. test R^2 vs L).

    ``series = {name: (xs, ys)}`` or ``{name: (xs, ys, style)}``; a ``None`` in ``ys`` (a cell
    not run) leaves a gap. ``style`` is a dict of optional keys ``dash`` ("solid", "dash",
    "dot"), ``color``, ``symbol`` (a plotly marker symbol) and ``error`` (per-point error bars,
    ``None`` allowed). ``hline`` draws a dotted reference line labelled ``hline_label``.
    Returns the plotly figure."""
    import plotly.graph_objects as go

    if not isinstance(series, dict) or not series:
        raise ValueError("series must be a non-empty dict {name: (xs, ys[, style])}")
    fig = go.Figure()
    for name, value in series.items():
        if not isinstance(value, (tuple, list)) or len(value) not in (2, 3):
            raise ValueError(f"series[{name!r}] must be (xs, ys) or (xs, ys, style)")
        try:
            xs, ys = list(value[0]), list(value[1])
        except TypeError:
            raise ValueError(f"series[{name!r}] must be (xs, ys) or (xs, ys, style)") from None
        style = dict(value[2]) if len(value) == 3 else {}
        if len(xs) != len(ys):
            raise ValueError(f"series[{name!r}]: xs and ys must have equal lengths")
        unknown = set(style) - {"dash", "color", "symbol", "error"}
        if unknown:
            raise ValueError(f"series[{name!r}]: unknown style key(s) {sorted(unknown)}")
        ys = [None if y is None else float(y) for y in ys]
        err = style.get("error")
        if err is not None and len(err) != len(xs):
            raise ValueError(f"series[{name!r}]: error must have one entry per point")
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                name=str(name),
                mode="lines+markers",
                connectgaps=False,
                line={"dash": style.get("dash", "solid"), "color": style.get("color")},
                marker={"symbol": style.get("symbol", "circle"), "size": 8},
                error_y=None
                if err is None
                else {"type": "data", "array": [0.0 if e is None else float(e) for e in err]},
                hovertemplate=f"{name}<br>{xlabel or 'x'} = %{{x}}<br>{ylabel or 'y'} = "
                "%{y:.3f}<extra></extra>",
            )
        )
    if hline is not None:
        fig.add_hline(
            y=float(hline),
            line={"dash": "dot", "color": "grey"},
            annotation_text=hline_label or None,
            annotation_position="bottom right",
        )
    fig.update_layout(title=title, xaxis_title=xlabel, yaxis_title=ylabel, height=420)
    return fit_page(fig)


# ============================================================================= MEB (chapter 5)
# Chapter 5 ("The minimum enclosing ball"): 2-D point sets with their exact enclosing ball behind
# a slider, and grouped bars (ours beside the paper's, per model and data condition). Added as
# one block; nothing above depends on it.

__all__ += ["plot_meb_slider", "plot_grouped_bars"]


def plot_meb_slider(sets, labels=None, *, title: str | None = None):
    """Interactive plotly view of ``k`` 2-D point sets (a list of ``(n_i, 2)`` arrays), one per
    slider step: the points, their exact minimum enclosing ball (:func:`mzlite.tasks.geometry.meb`),
    its centre and its support points (on the circle). Returns the plotly figure."""
    import numpy as np
    import plotly.graph_objects as go

    from ..tasks.geometry import meb

    pts = [np.asarray(torch.as_tensor(s).detach().cpu().double()) for s in sets]
    if not pts or any(p.ndim != 2 or p.shape[1] != 2 or p.shape[0] < 1 for p in pts):
        raise ValueError("sets must be a non-empty list of (n, 2) arrays")
    k = len(pts)
    labels = [f"set {i}" for i in range(k)] if labels is None else [str(s) for s in labels]
    if len(labels) != k:
        raise ValueError(f"labels must have one entry per set ({k}), got {len(labels)}")
    t = np.linspace(0.0, 2.0 * np.pi, 181)
    fig = go.Figure()
    lim = 0.0
    for i, p in enumerate(pts):
        b = meb(p)
        sup = p[b.support]
        circ = b.center + b.radius * np.stack([np.cos(t), np.sin(t)], 1)  # (181, 2)
        lim = max(lim, float(np.abs(circ).max()))
        vis = i == 0
        fig.add_trace(
            go.Scatter(
                x=p[:, 0],
                y=p[:, 1],
                mode="markers",
                name="points",
                marker=dict(size=7, color="#1f77b4"),
                visible=vis,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=circ[:, 0],
                y=circ[:, 1],
                mode="lines",
                name=f"ball, R = {b.radius:.3f}",
                line=dict(color="#d62728"),
                visible=vis,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=sup[:, 0],
                y=sup[:, 1],
                mode="markers",
                name=f"support points ({len(b.support)})",
                marker=dict(size=13, color="rgba(0,0,0,0)", line=dict(color="#d62728", width=2)),
                visible=vis,
            )
        )
        fig.add_trace(go.Scatter(x=[b.center[0]], y=[b.center[1]], mode="markers",
                                 name="centre", marker=dict(symbol="x", size=10, color="black"),
                                 visible=vis))  # fmt: skip
    per = 4
    steps = []
    for i in range(k):
        visible = [j // per == i for j in range(per * k)]
        steps.append({"method": "update", "label": labels[i], "args": [{"visible": visible}]})
    lim *= 1.05
    fig.update_layout(
        title=title,
        sliders=[{"steps": steps, "currentvalue": {"prefix": "shown: "}}],
        xaxis=dict(range=[-lim, lim]),
        yaxis=dict(range=[-lim, lim], scaleanchor="x"),
        height=600,
    )
    return fit_page(fig, legend_at="top")


def plot_grouped_bars(
    categories,
    series: dict,
    *,
    ylabel: str = "",
    title: str | None = None,
    ymin: float | None = None,
):
    """Interactive plotly grouped bar chart: one group per entry of ``categories`` (e.g. models),
    one bar per series, ``series = {name: values}`` or ``{name: (values, style)}`` with one value
    per category; ``None`` (a cell not run, or no paper number) leaves the slot empty. ``style``
    is a dict of optional keys ``error`` (per-bar error bars, e.g. the std over seeds; ``None``
    allowed), ``pattern`` (a plotly fill pattern such as ``"/"``, to set a series apart, e.g. a
    weaker protocol) and ``color``. Values below ``ymin`` are drawn at ``ymin`` (the hover text
    keeps the true value), so one R^2 of -5 does not squash the rest. Returns the plotly figure."""
    import plotly.graph_objects as go

    cats = [str(c) for c in categories]
    if not cats or not isinstance(series, dict) or not series:
        raise ValueError("categories and series must be non-empty")
    fig = go.Figure()
    top = 0.0
    for name, value in series.items():
        styled = isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], dict)
        vals, style = (list(value[0]), dict(value[1])) if styled else (list(value), {})
        if len(vals) != len(cats):
            raise ValueError(f"series[{name!r}] must have one value per category ({len(cats)})")
        unknown = set(style) - {"error", "pattern", "color"}
        if unknown:
            raise ValueError(f"series[{name!r}]: unknown style key(s) {sorted(unknown)}")
        err = style.get("error")
        if err is not None and len(err) != len(cats):
            raise ValueError(f"series[{name!r}]: error must have one entry per category")
        vals = [None if v is None else float(v) for v in vals]
        shown = [None if v is None else (v if ymin is None else max(v, ymin)) for v in vals]
        text = ["not run / none" if v is None else f"{v:.3f}" for v in vals]
        if err is not None:
            text = [t if e is None or v is None else f"{t} ± {e:.3f}"
                    for t, v, e in zip(text, vals, err, strict=True)]  # fmt: skip
        top = max([top] + [v for v in shown if v is not None])
        fig.add_trace(
            go.Bar(x=cats, y=shown, name=str(name), hovertext=text,
                   hovertemplate="%{x}<br>" + str(name) + ": %{hovertext}<extra></extra>",
                   error_y=None if err is None else {
                       "type": "data", "array": [0.0 if e is None else float(e) for e in err]},
                   marker={"color": style.get("color"),
                           "pattern": {"shape": style.get("pattern", "")}})
        )  # fmt: skip
    fig.update_layout(
        barmode="group",
        title=title,
        yaxis=dict(title=ylabel, range=None if ymin is None else [ymin, 1.05 * top + 0.05]),
        height=440,
    )
    return fit_page(fig)
