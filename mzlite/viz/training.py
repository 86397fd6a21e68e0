"""Operators, gates, training curves, histograms, bars and calibration curves (chapters 2-4,
7 and 8)."""

from __future__ import annotations

import torch

from ._common import _matrix

__all__: list[str] = []

# ---------------------------------------------------------------------------------------------
# Operators, gates and training curves (chapters 2 and 3)
# ---------------------------------------------------------------------------------------------

__all__ += ["plot_operator", "plot_operators", "plot_gates", "plot_curves"]


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
