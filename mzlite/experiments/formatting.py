"""How a number of a results table is printed, the same in the text report and on the book's
HTML pages (``mzlite.experiments.report``, ``mzlite.render``)."""

from __future__ import annotations

import math


def format_value(v, digits: int = 3) -> str:
    """``v`` with ``digits`` decimals; 3 significant digits when tiny or huge, 1 decimal from
    100 up; "--" for None, NaN and infinities."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "--"
    a = abs(v)
    if a != 0 and (a >= 1e4 or a < 1e-3):
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:.1f}"
    return f"{v:.{digits}f}"


def format_mean_std(mean, std) -> str:
    """ "mean ± std", "mean" when there is no std (one seed), "--" when there is no mean."""
    if mean is None:
        return "--"
    if std is None:
        return format_value(mean)
    return f"{format_value(mean)} ± {format_value(std)}"
