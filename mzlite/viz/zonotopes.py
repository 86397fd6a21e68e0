"""Zonotopes drawn: 2-D (matplotlib), 3-D (plotly), and behind a slider on the static page."""

from __future__ import annotations

import torch

from ..zonotope import Zonotope
from ._common import _matrix

__all__: list[str] = []

__all__ += ["plot_zonotope", "plot_zonotope_3d"]


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
