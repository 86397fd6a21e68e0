"""Figures for the book, one module per kind of plot; every name is importable from here
(``from mzlite import viz; viz.plot_sweep(...)``).

matplotlib and plotly are imported lazily, inside the functions, never by the numeric modules, so
``import mzlite.zonotope`` stays light. Every function returns its figure or axes so a chapter can
restyle it; every plotly figure goes through ``page.fit_page`` (one layout for the page).

Modules: ``zonotopes`` (2-D, 3-D, sliders), ``training`` (operators, gates, curves, histograms,
bars, calibration), ``results`` (ours beside the paper: clouds, scatter, sweeps, MEB sets, grouped
bars), ``page`` (the page layout and the verdict chart).
"""

from __future__ import annotations

from . import page, results, training, zonotopes
from .page import PAGE_FONT, fit_page
from .results import (
    plot_grouped_bars,
    plot_meb_slider,
    plot_ours_vs_paper,
    plot_points_3d,
    plot_sweep,
)
from .training import (
    plot_bars,
    plot_calibration,
    plot_curves,
    plot_gates,
    plot_histogram,
    plot_operator,
    plot_operator_slider,
    plot_operators,
    plot_uncertainty_vs_error,
)
from .zonotopes import plot_zonotope, plot_zonotope_3d, plot_zonotope_slider

__all__ = [
    "PAGE_FONT", "fit_page", "plot_bars", "plot_calibration", "plot_curves", "plot_gates",
    "plot_grouped_bars", "plot_histogram", "plot_meb_slider", "plot_operator",
    "plot_operator_slider", "plot_operators", "plot_ours_vs_paper", "plot_points_3d",
    "plot_sweep", "plot_uncertainty_vs_error", "plot_zonotope",
    "plot_zonotope_3d", "plot_zonotope_slider",
]  # fmt: skip
assert sorted(__all__) == sorted(zonotopes.__all__ + training.__all__ + results.__all__
                                 + page.__all__)  # fmt: skip
