"""Figures for the book, one section per kind of plot.

matplotlib and plotly are imported here (lazily, inside the functions), never by the numeric
modules, so ``import mzlite.zonotope`` stays light. Every function returns its figure or axes so a
chapter can restyle it.

Sections: zonotopes (2-D matplotlib, 3-D plotly).
"""

from __future__ import annotations

import torch

from .zonotope import Zonotope

__all__ = ["plot_zonotope", "plot_zonotope_3d"]


def _members(z: Zonotope) -> list[Zonotope]:
    """A batched zonotope as a flat list of single zonotopes (row-major over the batch)."""
    if not isinstance(z, Zonotope):
        raise TypeError(f"z must be a mzlite.zonotope.Zonotope, got {type(z).__name__}")
    n = int(torch.Size(z.batch_shape).numel())
    c = z.center.detach().reshape(n, z.dim)
    G = z.generators.detach().reshape(n, z.num_generators, z.dim)
    return [Zonotope._new(c[i], G[i]) for i in range(n)]


def _colours(color, n: int) -> list:
    if color is None:
        import matplotlib.pyplot as plt

        cycle = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0"])
        return [cycle[i % len(cycle)] for i in range(n)]
    if isinstance(color, (list, tuple)) and len(color) == n and not isinstance(color[0], float):
        return list(color)
    return [color] * n


# ---------------------------------------------------------------------------------------------
# Zonotopes
# ---------------------------------------------------------------------------------------------


def plot_zonotope(
    z: Zonotope,
    ax=None,
    *,
    dims: tuple[int, int] = (0, 1),
    color=None,
    alpha: float = 0.25,
    show_generators: bool = True,
    show_center: bool = True,
    show_interval_hull: bool = False,
    label: str | None = None,
    linewidth: float = 1.5,
):
    """Draw 2-D zonotopes with matplotlib: filled polygon, outline, the centre, the generators as
    arrows from the centre and (optionally) the interval hull as a dashed box.

    ``z`` may be batched: every member is drawn in this one call, cycling colours (or ``color``: one
    colour, or a list with one per member). For ``d > 2`` the projection onto ``dims`` is drawn,
    which is exact (a projection is a linear map). Returns the axes."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Polygon, Rectangle

    if not isinstance(z, Zonotope):
        raise TypeError(f"z must be a mzlite.zonotope.Zonotope, got {type(z).__name__}")
    if z.dim < 2:
        raise ValueError(f"plot_zonotope draws zonotopes of dim d >= 2, got d = {z.dim}")
    i, j = dims
    if not (0 <= i < z.dim and 0 <= j < z.dim and i != j):
        raise ValueError(f"dims must be two different axes in [0, {z.dim}), got {dims}")
    if z.dim > 2:
        P = torch.zeros(2, z.dim, dtype=z.dtype, device=z.device)
        P[0, i], P[1, j] = 1.0, 1.0
        z = P @ z
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4.5))
    members = _members(z)
    colours = _colours(color, len(members))
    for k, (zk, col) in enumerate(zip(members, colours, strict=True)):
        zk = zk.to(torch.float64).to("cpu")
        V = zk.vertices().numpy()  # (2m, 2), counter-clockwise
        lab = label if (label is not None and k == 0) else None
        ax.add_patch(Polygon(V, closed=True, facecolor=col, alpha=alpha, edgecolor="none"))
        ax.add_patch(
            Polygon(V, closed=True, fill=False, edgecolor=col, linewidth=linewidth, label=lab)
        )
        c = zk.center.numpy()
        if show_center:
            ax.plot(*c, "o", color=col, markersize=4)
        if show_generators:
            for g in zk.generators.numpy():
                if abs(g).sum() > 0:
                    ax.annotate(
                        "",
                        xy=c + g,
                        xytext=c,
                        arrowprops=dict(arrowstyle="->", color=col, linewidth=1.2),
                    )
        if show_interval_hull:
            lo, hi = (t.numpy() for t in zk.interval_hull())
            ax.add_patch(
                Rectangle(lo, *(hi - lo), fill=False, edgecolor=col, linestyle="--", linewidth=1.0)
            )
        # Patches and annotations do not update the data limits: include every drawn point.
        lo, hi = (t.numpy() for t in zk.interval_hull())
        ax.update_datalim([lo, hi])
    ax.autoscale_view()
    # "datalim" keeps the axes box; matplotlib forbids it for shared axes, which get "box".
    shared = len(ax.get_shared_x_axes().get_siblings(ax)) > 1
    ax.set_aspect("equal", adjustable="box" if shared else "datalim")
    return ax


def plot_zonotope_3d(
    z: Zonotope,
    fig=None,
    *,
    color=None,
    opacity: float = 0.35,
    show_center: bool = True,
    name: str | None = None,
):
    """Draw 3-D zonotopes with plotly: a ``Mesh3d`` of the convex hull of the exact vertices
    (:meth:`Zonotope.vertices`, then ``scipy.spatial.ConvexHull`` for the triangles), plus the
    centre. A batched ``z`` adds one mesh per member in this call. Returns a
    ``plotly.graph_objects.Figure`` (``fig`` if given)."""
    import plotly.graph_objects as go
    from scipy.spatial import ConvexHull

    if not isinstance(z, Zonotope):
        raise TypeError(f"z must be a mzlite.zonotope.Zonotope, got {type(z).__name__}")
    if z.dim != 3:
        raise ValueError(f"plot_zonotope_3d draws zonotopes of dim d = 3, got d = {z.dim}")
    fig = go.Figure() if fig is None else fig
    members = _members(z)
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    colours = (
        [palette[k % len(palette)] for k in range(len(members))]
        if color is None
        else (list(color) if isinstance(color, (list, tuple)) else [color] * len(members))
    )
    for k, (zk, col) in enumerate(zip(members, colours, strict=True)):
        V = zk.to(torch.float64).to("cpu").vertices().numpy()  # (n_v, 3)
        tri = ConvexHull(V).simplices  # (n_t, 3) vertex indices
        label = name if len(members) == 1 else f"{name or 'Z'}[{k}]"
        fig.add_trace(
            go.Mesh3d(
                x=V[:, 0], y=V[:, 1], z=V[:, 2], i=tri[:, 0], j=tri[:, 1], k=tri[:, 2],
                color=col, opacity=opacity, flatshading=True, name=label, showlegend=True,
            )
        )  # fmt: skip
        if show_center:
            c = zk.center.detach().cpu().numpy()
            fig.add_trace(
                go.Scatter3d(
                    x=[c[0]], y=[c[1]], z=[c[2]], mode="markers",
                    marker=dict(size=3, color=col), showlegend=False,
                )
            )  # fmt: skip
    fig.update_layout(scene=dict(aspectmode="data"), margin=dict(l=0, r=0, t=30, b=0))
    return fig


# ---------------------------------------------------------------------------------------------
# Operators, gates and training curves (chapters 2 and 3)
# ---------------------------------------------------------------------------------------------

__all__ += ["plot_operator", "plot_operators", "plot_gates", "plot_curves"]


def _matrix(name: str, M) -> torch.Tensor:
    if not isinstance(M, torch.Tensor):
        M = torch.as_tensor(M)
    if M.ndim != 2:
        raise ValueError(f"{name} must be a matrix of shape (p, q), got shape {tuple(M.shape)}")
    return M.detach().to("cpu", torch.float64)


def plot_operator(
    M,
    ax=None,
    *,
    title: str | None = None,
    vmax: float | None = None,
    cmap: str = "RdBu_r",
    colorbar: bool = True,
    annotate: bool = False,
):
    """Heatmap of one operator matrix ``M`` (p, q), e.g. a head's ``M(mu)`` (Eq. eq:mz-main).

    The colour scale is symmetric around 0 (``vmax`` defaults to ``max |M|``) so that signs read
    the same in every panel; pass one ``vmax`` to compare several operators. ``annotate`` writes
    the entries (for small matrices). Returns the axes."""
    import matplotlib.pyplot as plt

    M = _matrix("M", M)
    if ax is None:
        _, ax = plt.subplots(figsize=(3.2, 3.0))
    vmax = float(M.abs().max()) or 1.0 if vmax is None else float(vmax)
    im = ax.imshow(M.numpy(), cmap=cmap, vmin=-vmax, vmax=vmax)
    if annotate:
        for (i, j), v in zip(
            torch.cartesian_prod(torch.arange(M.shape[0]), torch.arange(M.shape[1])).tolist(),
            M.flatten().tolist(),
            strict=True,
        ):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
    ax.set_xticks([])
    ax.set_yticks([])
    if title is not None:
        ax.set_title(title, fontsize=9)
    if colorbar:
        ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def plot_operators(
    Ms,
    titles=None,
    *,
    vmax: float | None = None,
    ncols: int | None = None,
    suptitle: str | None = None,
):
    """A row (or grid) of operator heatmaps on ONE shared symmetric colour scale.

    ``Ms``: a sequence of matrices or a tensor (k, p, q); ``titles``: one per matrix. Returns the
    figure."""
    import matplotlib.pyplot as plt

    mats = [_matrix(f"Ms[{i}]", M) for i, M in enumerate(Ms)]
    if not mats:
        raise ValueError("Ms must hold at least one matrix")
    if titles is not None and len(titles) != len(mats):
        raise ValueError(f"titles must have one entry per matrix ({len(mats)}), got {len(titles)}")
    vmax = max(float(M.abs().max()) for M in mats) or 1.0 if vmax is None else float(vmax)
    ncols = ncols or len(mats)
    nrows = -(-len(mats) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols, 2.5 * nrows), squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k < len(mats):
            plot_operator(
                mats[k], ax, title=None if titles is None else titles[k], vmax=vmax, colorbar=False
            )
        else:
            ax.axis("off")
    im = axes.flat[0].images[0]
    fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.02, pad=0.02)
    if suptitle:
        fig.suptitle(suptitle)
    return fig


def plot_gates(gamma, ax=None, *, labels=None, title: str | None = None):
    """Bar chart of gate values ``gamma`` in [-1, 1] (Eq. eq:mz-main: ``gamma = tanh(W_gamma
    cbar)``). ``gamma``: (L,) one set, or (k, L) for ``k`` sets side by side (one colour per set,
    ``labels`` names them). Returns the axes."""
    import matplotlib.pyplot as plt

    g = torch.as_tensor(gamma).detach().to("cpu", torch.float64)
    if g.ndim == 1:
        g = g.unsqueeze(0)
    if g.ndim != 2:
        raise ValueError(f"gamma must have shape (L,) or (k, L), got {tuple(g.shape)}")
    k, L = g.shape
    if labels is not None and len(labels) != k:
        raise ValueError(f"labels must have one entry per row of gamma ({k}), got {len(labels)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.2 + 0.5 * L * k**0.5, 2.8))
    width = 0.8 / k
    for i in range(k):
        xs = [l_ - 0.4 + width * (i + 0.5) for l_ in range(L)]
        ax.bar(xs, g[i].numpy(), width=width, label=None if labels is None else labels[i])
    ax.axhline(0.0, color="k", linewidth=0.8)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xticks(range(L), [f"$\\gamma_{{{l_ + 1}}}$" for l_ in range(L)])
    if labels is not None:
        ax.legend(fontsize=7)
    if title is not None:
        ax.set_title(title, fontsize=9)
    return ax


def plot_curves(
    curves: dict,
    ax=None,
    *,
    logy: bool = True,
    xlabel: str = "step",
    ylabel: str = "loss",
    title: str | None = None,
):
    """Line plot of named curves, e.g. training losses ``{"standard": [...], "MZ": [...]}``.

    Each value is a sequence of numbers (plotted against 0, 1, 2, ...) or a pair ``(xs, ys)``
    (e.g. a test loss measured every few steps). Log scale by default. Returns the axes."""
    import matplotlib.pyplot as plt

    if not isinstance(curves, dict) or not curves:
        raise ValueError("curves must be a non-empty dict {name: sequence of numbers}")
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    for name, value in curves.items():
        if isinstance(value, tuple) and len(value) == 2:
            xs, ys = (torch.as_tensor(v, dtype=torch.float64).flatten() for v in value)
            if xs.shape != ys.shape:
                raise ValueError(f"curves[{name!r}] = (xs, ys) must have equal lengths")
        else:
            ys = torch.as_tensor(value, dtype=torch.float64).flatten()
            xs = torch.arange(len(ys), dtype=torch.float64)
        ax.plot(xs.numpy(), ys.numpy(), label=name)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    if title is not None:
        ax.set_title(title, fontsize=10)
    return ax


# ============================================================================= looking inside
# Chapters 7-8 ("Inside a trained layer", "Uncertainty"): operator sliders, histograms, bars,
# calibration curves. Added as one block; nothing above depends on it.

__all__ += [
    "plot_operator_slider",
    "plot_histogram",
    "plot_bars",
    "plot_calibration",
    "plot_uncertainty_vs_error",
]


def plot_operator_slider(Ms, labels=None, *, title: str | None = None, zmax: float | None = None):
    """Interactive plotly heatmap of ``k`` operators (k, p, q) with a slider over them (e.g. the
    realised ``M(mu)`` of one head on ``k`` sets). One symmetric colour scale for all frames
    (``zmax`` defaults to the largest ``|entry|``). Returns the plotly figure."""
    import plotly.graph_objects as go

    mats = torch.as_tensor(Ms).detach().to("cpu", torch.float64)
    if mats.ndim != 3 or mats.shape[0] < 1:
        raise ValueError(f"Ms must have shape (k, p, q) with k >= 1, got {tuple(mats.shape)}")
    k = mats.shape[0]
    labels = [str(i) for i in range(k)] if labels is None else [str(s) for s in labels]
    if len(labels) != k:
        raise ValueError(f"labels must have one entry per operator ({k}), got {len(labels)}")
    zmax = float(mats.abs().max()) or 1.0 if zmax is None else float(zmax)
    fig = go.Figure(
        go.Heatmap(z=mats[0].numpy(), zmin=-zmax, zmax=zmax, colorscale="RdBu_r", zmid=0.0)
    )
    fig.frames = [go.Frame(data=[go.Heatmap(z=mats[i].numpy())], name=labels[i]) for i in range(k)]
    steps = [
        {
            "method": "animate",
            "label": labels[i],
            "args": [[labels[i]], {"mode": "immediate", "frame": {"duration": 0, "redraw": True}}],
        }
        for i in range(k)
    ]
    fig.update_layout(
        title=title,
        sliders=[{"steps": steps, "currentvalue": {"prefix": "set: "}}],
        yaxis={"autorange": "reversed", "scaleanchor": "x"},
        width=520,
        height=520,
    )
    return fig


def plot_histogram(
    values,
    ax=None,
    *,
    bins: int = 40,
    threshold: float | None = None,
    xlabel: str = "value",
    title: str | None = None,
):
    """Histogram of a flat collection of numbers, with an optional dashed vertical line at
    ``threshold`` (e.g. the paper's |gamma| > 0.05 "active gate" cut). Returns the axes."""
    import matplotlib.pyplot as plt

    v = torch.as_tensor(values).detach().to("cpu", torch.float64).flatten()
    if v.numel() == 0:
        raise ValueError("values must hold at least one number")
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.2))
    ax.hist(v.numpy(), bins=bins, color="C0", alpha=0.8)
    if threshold is not None:
        ax.axvline(threshold, color="k", linestyle="--", linewidth=1, label=f"{threshold:g}")
        ax.legend(fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    if title is not None:
        ax.set_title(title, fontsize=10)
    return ax


def plot_bars(values, labels=None, ax=None, *, ylabel: str = "", title: str | None = None):
    """Bar chart of ``k`` numbers (e.g. per-generator Frobenius norms). Returns the axes."""
    import matplotlib.pyplot as plt

    v = torch.as_tensor(values).detach().to("cpu", torch.float64).flatten()
    labels = [str(i) for i in range(len(v))] if labels is None else [str(s) for s in labels]
    if len(labels) != len(v):
        raise ValueError(f"labels must have one entry per value ({len(v)}), got {len(labels)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.5 + 0.45 * len(v), 3.0))
    ax.bar(range(len(v)), v.numpy(), color="C0")
    ax.set_xticks(range(len(v)), labels)
    ax.set_ylabel(ylabel)
    if title is not None:
        ax.set_title(title, fontsize=10)
    return ax


def plot_calibration(curves: dict, ax=None, *, title: str | None = None):
    """Interval-coverage calibration plot: ``curves = {name: (levels, observed)}`` (as returned
    by ``mzlite.analysis.uncertainty.coverage_curve``) against the diagonal of perfect
    calibration."""
    import matplotlib.pyplot as plt

    if not isinstance(curves, dict) or not curves:
        raise ValueError("curves must be a non-empty dict {name: (levels, observed)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.2, 4.0))
    ax.plot([0, 1], [0, 1], color="k", linewidth=0.8, linestyle="--", label="calibrated")
    for name, (lv, obs) in curves.items():
        lv, obs = (torch.as_tensor(t, dtype=torch.float64).flatten() for t in (lv, obs))
        if lv.shape != obs.shape:
            raise ValueError(f"curves[{name!r}] = (levels, observed) must have equal lengths")
        ax.plot(lv.numpy(), obs.numpy(), marker="o", markersize=3, label=name)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("nominal coverage of the central interval")
    ax.set_ylabel("observed coverage")
    ax.legend(fontsize=8)
    if title is not None:
        ax.set_title(title, fontsize=10)
    return ax


def plot_uncertainty_vs_error(panels: dict, *, xlabel: str = "uncertainty u"):
    """One scatter panel per method: ``panels = {name: (u (N,), abs_error (N,))}``, log-free,
    sharing the y axis. Returns the figure."""
    import matplotlib.pyplot as plt

    if not isinstance(panels, dict) or not panels:
        raise ValueError("panels must be a non-empty dict {name: (u, abs_error)}")
    fig, axes = plt.subplots(
        1, len(panels), figsize=(3.6 * len(panels), 3.2), sharey=True, squeeze=False
    )
    for ax, (name, (u, e)) in zip(axes[0], panels.items(), strict=True):
        u, e = (torch.as_tensor(t, dtype=torch.float64).flatten() for t in (u, e))
        if u.shape != e.shape:
            raise ValueError(f"panels[{name!r}] = (u, abs_error) must have equal lengths")
        ax.scatter(u.numpy(), e.numpy(), s=4, alpha=0.4)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(xlabel)
    axes[0][0].set_ylabel("|error|")
    return fig


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
    symbols = ["circle", "square", "diamond", "cross", "x", "triangle-up", "star", "hexagon"]
    for g in sorted({p.get("group", "") for p in rows}):
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
                    legendgroup=str(g),
                    marker=dict(
                        size=9,
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
                        "array": [
                            0.0 if p.get("ours_std") is None or p["ours"] < lo else p["ours_std"]
                            for p in sel
                        ],
                    },
                )
            )
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

    from .tasks.geometry import meb

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


# ============================================================================= sliders on the page
# Client-side versions of the chapters' ipywidgets explorers: plotly frames and a slider, so the
# static book page moves without a kernel (the widgets stay for JupyterLab).

__all__ += ["plot_zonotope_slider"]

_PALETTE = ["#1f77b4", "#d62728", "#7f7f7f", "#2ca02c", "#ff7f0e", "#9467bd"]


def _zonotope_traces(zk: Zonotope, colour: str, name: str, *, fill_opacity: float,
                     show_generators: bool, show_interval_hull: bool):  # fmt: skip
    """The plotly traces of one 2-D zonotope: filled outline, generators, interval hull (always
    the same number of traces for given flags, so that frames can replace them one for one)."""
    import numpy as np
    import plotly.graph_objects as go

    zk = zk.to(torch.float64).to("cpu")
    V = zk.vertices().numpy()  # (2m, 2), counter-clockwise
    V = np.vstack([V, V[:1]])
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    traces = [
        go.Scatter(
            x=V[:, 0],
            y=V[:, 1],
            mode="lines",
            fill="toself",
            name=name,
            line=dict(color=colour, width=2),
            fillcolor=f"rgba({r},{g},{b},{fill_opacity})",
            legendgroup=name,
            showlegend=True,
            hoverinfo="name",
        )  # fmt: skip
    ]
    c = zk.center.numpy()
    if show_generators:
        xs, ys = [], []
        for gen in zk.generators.numpy():
            xs += [c[0], c[0] + gen[0], None]
            ys += [c[1], c[1] + gen[1], None]
        traces.append(go.Scatter(x=xs, y=ys, mode="lines+markers", legendgroup=name,
                                 line=dict(color=colour, width=1.5), showlegend=False,
                                 marker=dict(size=[0, 7, 0] * len(zk.generators), color=colour),
                                 hoverinfo="skip"))  # fmt: skip
    if show_interval_hull:
        lo, hi = (t.numpy() for t in zk.interval_hull())
        traces.append(go.Scatter(x=[lo[0], hi[0], hi[0], lo[0], lo[0]],
                                 y=[lo[1], lo[1], hi[1], hi[1], lo[1]], mode="lines",
                                 line=dict(color=colour, width=1, dash="dash"), legendgroup=name,
                                 showlegend=False, hoverinfo="skip"))  # fmt: skip
    return traces


def plot_zonotope_slider(
    frames,
    labels,
    *,
    titles=None,
    matrices=None,
    matrix_title: str = "",
    colors=None,
    show_generators=True,
    show_interval_hull=False,
    slider_prefix: str = "",
    title: str | None = None,
    height: int = 460,
):
    """A plotly figure with a slider over ``k`` frames of 2-D zonotopes, moving in the browser.

    ``frames``: a list of ``k`` dicts ``{name: Zonotope}`` (unbatched, ``d = 2``), the same names
    in every frame; ``labels``: the slider's ``k`` step labels; ``titles``: an optional title per
    frame (e.g. its area and IHW). ``show_generators`` / ``show_interval_hull``: a bool for all
    names or a set of names. ``matrices``: an optional list of ``k`` matrices ``(p, q)`` drawn as
    a heatmap left of the zonotopes (one symmetric colour scale for all frames). The axes are
    fixed to the union of every frame's zonotopes, so nothing rescales or shrinks to a speck
    while the slider moves. Returns the figure."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    k = len(frames)
    if k < 1 or any(not isinstance(f, dict) or not f for f in frames):
        raise ValueError("frames must be a non-empty list of dicts {name: Zonotope}")
    names = list(frames[0])
    for i, f in enumerate(frames):
        if list(f) != names:
            raise ValueError(f"frames[{i}] has names {list(f)}, frames[0] has {names}")
        for n, z in f.items():
            if not isinstance(z, Zonotope) or z.dim != 2 or z.batch_shape != ():
                raise ValueError(f"frames[{i}][{n!r}] must be one 2-D Zonotope")
    labels = [str(s) for s in labels]
    if len(labels) != k:
        raise ValueError(f"labels must have one entry per frame ({k}), got {len(labels)}")
    if titles is not None and len(titles) != k:
        raise ValueError(f"titles must have one entry per frame ({k}), got {len(titles)}")
    if matrices is not None and len(matrices) != k:
        raise ValueError(f"matrices must have one entry per frame ({k}), got {len(matrices)}")
    colours = dict(zip(names, colors or _PALETTE * (1 + len(names) // len(_PALETTE)), strict=False))

    def wanted(flag, name):
        return flag if isinstance(flag, bool) else name in flag

    def frame_traces(i):
        out = []
        if matrices is not None:
            M = _matrix(f"matrices[{i}]", matrices[i]).numpy()
            out.append(go.Heatmap(z=M, zmin=-zmax, zmax=zmax, zmid=0.0, colorscale="RdBu_r",
                                  colorbar=dict(x=0.36, len=0.8, thickness=10),
                                  text=[[f"{v:.2f}" for v in row] for row in M],
                                  texttemplate="%{text}", showscale=True))  # fmt: skip
        for n in names:
            out += _zonotope_traces(
                frames[i][n], colours[n], n, fill_opacity=0.18 if n != names[-1] else 0.3,
                show_generators=wanted(show_generators, n),
                show_interval_hull=wanted(show_interval_hull, n),
            )  # fmt: skip
        return out

    zmax = 1.0
    if matrices is not None:
        zmax = max(float(_matrix("M", M).abs().max()) for M in matrices) or 1.0
    lo = torch.full((2,), float("inf"), dtype=torch.float64)
    hi = -lo
    for f in frames:
        for z in f.values():
            a, b = z.to(torch.float64).to("cpu").interval_hull()
            lo, hi = torch.minimum(lo, a), torch.maximum(hi, b)
    half = float((hi - lo).max()) / 2 * 1.08 or 1.0
    mid = (hi + lo) / 2
    xr = [float(mid[0]) - half, float(mid[0]) + half]
    yr = [float(mid[1]) - half, float(mid[1]) + half]

    if matrices is not None:
        fig = make_subplots(rows=1, cols=2, column_widths=[0.4, 0.6],
                            subplot_titles=(matrix_title, ""), horizontal_spacing=0.12)  # fmt: skip
        xz = "x2"
    else:
        fig, xz = go.Figure(), "x"
    first = frame_traces(0)
    for j, t in enumerate(first):
        if matrices is not None:
            fig.add_trace(t, row=1, col=1 if j == 0 else 2)
        else:
            fig.add_trace(t)

    def frame_title(i):
        return titles[i] if titles is not None else title

    def placed(traces):  # frame traces keep the subplot their first-frame trace sits on
        for t, t0 in zip(traces, fig.data, strict=True):
            t.update(xaxis=t0.xaxis, yaxis=t0.yaxis)
        return traces

    fig.frames = [
        go.Frame(
            data=placed(frame_traces(i)),
            traces=list(range(len(first))),
            name=labels[i],
            layout=dict(title_text=frame_title(i)),
        )
        for i in range(k)
    ]
    steps = [
        {
            "method": "animate",
            "label": labels[i],
            "args": [
                [labels[i]],
                {
                    "mode": "immediate",
                    "frame": {"duration": 0, "redraw": True},
                    "transition": {"duration": 0},
                },
            ],  # fmt: skip
        }
        for i in range(k)
    ]
    axis_z = dict(range=xr, zeroline=True, zerolinecolor="#ccc")
    layout = dict(
        title=dict(text=frame_title(0), font=dict(size=13)),
        sliders=[
            {
                "steps": steps,
                "active": 0,
                "currentvalue": {"prefix": slider_prefix},
                "pad": {"t": 30},
            }
        ],  # fmt: skip
        height=height,
        margin=dict(l=10, r=10, t=60, b=10),
        legend=dict(
            orientation="h", x=1, xanchor="right", y=1.0, yanchor="bottom", font=dict(size=10)
        ),  # fmt: skip
    )
    fig.update_layout(**layout)
    xaxis = "xaxis2" if matrices is not None else "xaxis"
    yaxis = "yaxis2" if matrices is not None else "yaxis"
    fig.update_layout({xaxis: axis_z, yaxis: dict(range=yr, scaleanchor=xz, zeroline=True,
                                                  zerolinecolor="#ccc")})  # fmt: skip
    if matrices is not None:
        fig.update_layout(yaxis=dict(autorange="reversed", scaleanchor="x", showticklabels=False),
                          xaxis=dict(showticklabels=False))  # fmt: skip
    return fig


# ============================================================================= one page layout
# Every plotly figure of the book goes through ``fit_page``: no fixed width (the figure follows the
# text column, about 700 px in an 800 px window and in a 1300 px one with the navigation open),
# readable type, the legend in rows under the plot (or above it, where a slider sits below), so it
# neither covers the data nor runs past the right edge.

__all__ += ["fit_page", "plot_verdicts", "PAGE_FONT"]

PAGE_FONT = 13  # px: the figure's type (legend 12, title 15)
_COLUMN_PX = 640  # the narrowest text column a figure is drawn in, less the margins


def _r2(text):
    return text.replace("R^2", "R²") if isinstance(text, str) else text


def _wrap_title(text: str, width: int = 62) -> str:
    """A title longer than the column breaks once, at the space nearest its middle."""
    if not text or len(text) <= width or "<br>" in text:
        return text
    spaces = [i for i, ch in enumerate(text) if ch == " "]
    if not spaces:
        return text
    cut = min(spaces, key=lambda i: abs(i - len(text) / 2))
    return text[:cut] + "<br>" + text[cut + 1 :]


def fit_page(fig, *, height: int | None = None, legend_at: str = "bottom"):
    """Apply the book's page layout to a plotly ``fig`` (returned): width from the container,
    ``height`` (default: the figure's own, else 440) plus the legend's rows, ``PAGE_FONT`` type,
    titles that wrap, "R^2" written R², and the legend in equal columns ``legend_at`` "bottom"
    (under the axes) or "top" (under the title: for figures with a slider below)."""
    import math

    if legend_at not in ("bottom", "top"):
        raise ValueError(f'legend_at must be "bottom" or "top", got {legend_at!r}')
    for trace in fig.data:
        if getattr(trace, "name", None):
            trace.name = _r2(trace.name)
    names = [t.name for t in fig.data if t.showlegend is not False and t.name]
    names = list(dict.fromkeys(names))  # a legend group shows its name once
    longest = max((len(n) for n in names), default=0)
    per_row = max(1, min(4, _COLUMN_PX // (7 * longest + 45))) if names else 1
    rows = math.ceil(len(names) / per_row) if names else 0
    legend_h = 22 * rows + 8 if rows else 0
    title = fig.layout.title.text if fig.layout.title else None
    title = _wrap_title(_r2(title)) if title else title
    title_h = (30 + 20 * title.count("<br>")) if title else 0
    for axis in ("xaxis", "yaxis"):
        ax = getattr(fig.layout, axis, None)
        if ax is not None and ax.title and ax.title.text:
            ax.title.text = _r2(ax.title.text)
    base = height or fig.layout.height or 440
    legend = {
        "orientation": "h", "x": 0, "xanchor": "left", "yref": "container",
        "font": {"size": 12}, "entrywidth": 1 / per_row, "entrywidthmode": "fraction",
        "y": 0, "yanchor": "bottom",
    }  # fmt: skip
    margin = {"l": 60, "r": 16, "t": 20 + title_h, "b": 56}
    if legend_at == "top":
        legend.update(y=1, yanchor="top")
        legend["y"] = 1 - (title_h + 6) / (base + legend_h)
        margin["t"] += legend_h
    else:
        margin["b"] += legend_h
    fig.update_layout(
        width=None, autosize=True, height=base + legend_h, font={"size": PAGE_FONT},
        title={"text": title, "font": {"size": 15}, "x": 0, "xanchor": "left"},
        showlegend=bool(names), legend=legend, margin=margin,
    )  # fmt: skip
    return fig


def plot_verdicts(sc, *, title: str = "Verdicts per paper table"):
    """The scorecard's verdicts counted per paper table, as stacked horizontal bars in the
    verdicts' own colours (``render.VERDICT_COLOURS``), laid out for the page."""
    import plotly.graph_objects as go

    from mzlite.experiments.scorecard import VERDICTS
    from mzlite.render import VERDICT_COLOURS, table_name

    tables = list(dict.fromkeys(r["table"] for r in sc.rows))
    counts = {t: {v: 0 for v in VERDICTS} for t in tables}
    for r in sc.rows:
        counts[r["table"]][r["verdict"]] += 1
    fig = go.Figure(
        [
            go.Bar(name=v, y=[table_name(t, title=False) for t in tables],
                   x=[counts[t][v] for t in tables], orientation="h",
                   marker_color=VERDICT_COLOURS.get(v, ("#adb5bd", ""))[0],
                   marker_line={"color": VERDICT_COLOURS.get(v, ("", "#212529"))[1],
                                "width": 1})
            for v in VERDICTS if any(counts[t][v] for t in tables)
        ]
    )  # fmt: skip
    fig.update_layout(barmode="stack", title=title, xaxis_title="claims",
                      yaxis={"autorange": "reversed"}, height=60 + 30 * len(tables))  # fmt: skip
    return fit_page(fig)
