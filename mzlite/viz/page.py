"""One page layout for every plotly figure of the book."""

from __future__ import annotations

__all__: list[str] = []

# ============================================================================= one page layout
# Every plotly figure of the book goes through ``fit_page``: no fixed width (the figure follows the
# text column, about 700 px in an 800 px window and in a 1300 px one with the navigation open),
# readable type, the legend in rows under the plot (or above it, where a slider sits below), so it
# neither covers the data nor runs past the right edge.

__all__ += ["fit_page", "PAGE_FONT"]

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
