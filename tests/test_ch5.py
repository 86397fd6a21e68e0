"""Chapter 5 ("The minimum enclosing ball"): its exercises and its plot helpers."""

from __future__ import annotations

import numpy as np
import pytest

from mzlite.exercises import check
from mzlite.tasks.geometry import meb


def test_radius_exercise_is_half_the_longest_side():
    from mzlite.exercises.ch5 import exercise_points

    p = exercise_points()
    half = 0.5 * max(np.linalg.norm(a - b) for a in p for b in p)
    assert check("ch5.radius", half, strict=True)
    assert check("ch5.radius", half * 1.01).status == "wrong"
    assert check("ch5.radius", ...).status == "unanswered"
    assert len(meb(p).support) == 2  # the obtuse triangle's ball has two support points


def test_sandwich_and_constant_exercises():
    assert check("ch5.sandwich", ("rms_spread", "max_dist_to_centroid"), strict=True)
    assert check("ch5.sandwich", ("max_dist_to_centroid", "rms_spread")).status == "wrong"
    assert check("ch5.sandwich", "rms_spread").status == "wrong"  # malformed: one name
    assert check("ch5.constant", "rms_spread", strict=True)
    assert check("ch5.constant", ["rms_spread"], strict=True)
    assert check("ch5.constant", "max_dist_to_centroid").status == "wrong"


def test_plot_meb_slider_has_one_visible_set_per_step():
    from mzlite.viz import plot_meb_slider

    rng = np.random.default_rng(0)
    sets = [rng.normal(size=(n, 2)) for n in (5, 8, 13)]
    fig = plot_meb_slider(sets)
    assert len(fig.data) == 4 * len(sets)
    steps = fig.layout.sliders[0].steps
    assert len(steps) == len(sets)
    for i, s in enumerate(steps):
        vis = s.args[0]["visible"]
        assert sum(vis) == 4 and all(vis[4 * i : 4 * i + 4])
    with pytest.raises(ValueError, match="2\\)"):
        plot_meb_slider([rng.normal(size=(4, 3))])


def test_plot_grouped_bars_clips_and_keeps_gaps():
    from mzlite.viz import plot_grouped_bars

    fig = plot_grouped_bars(["a", "b", "c"], {"ours": [0.5, None, -4.0], "paper": [0.7, 0.1, 0]},
                            ymin=-0.5)  # fmt: skip
    ours = fig.data[0]
    assert list(ours.y) == [0.5, None, -0.5]
    assert "-4.000" in ours.hovertext[2] and "not run" in ours.hovertext[1]
    assert fig.layout.yaxis.range[0] == -0.5
    with pytest.raises(ValueError, match="one value per category"):
        plot_grouped_bars(["a"], {"x": [1, 2]})


def test_plot_grouped_bars_draws_error_bars_and_patterns():
    from mzlite.viz import plot_grouped_bars

    fig = plot_grouped_bars(
        ["a", "b"],
        {"paper": [0.7, 0.1], "ours": ([0.5, None], {"error": [0.02, None], "pattern": "/"})},
    )
    paper, ours = fig.data
    assert paper.error_y.array is None and not paper.marker.pattern.shape
    assert list(ours.error_y.array) == [0.02, 0.0] and ours.marker.pattern.shape == "/"
    assert "0.500 ± 0.020" in ours.hovertext[0] and "not run" in ours.hovertext[1]
    with pytest.raises(ValueError, match="one entry per category"):
        plot_grouped_bars(["a", "b"], {"x": ([1, 2], {"error": [0.1]})})
    with pytest.raises(ValueError, match="unknown style"):
        plot_grouped_bars(["a"], {"x": ([1], {"dash": "dot"})})
