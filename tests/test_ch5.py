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


@pytest.mark.parametrize("seed", [0, 3])
def test_sandwich_and_constant_exercises(seed):
    """The bounds of the chapter's statistics (``set_features``), on the student's own points."""
    import torch

    from mzlite.exercises.ch5 import sandwich_points
    from mzlite.tasks import set_features
    from mzlite.tasks.dataset import SetData

    P = sandwich_points(seed)
    x, mask = torch.tensor(P[None], dtype=torch.float32), torch.ones(1, len(P), dtype=torch.bool)
    data = SetData(x, mask, torch.zeros(1, 1), "meb_radius")
    X, names = set_features(data, "basic")
    r, u = (float(X[0, names.index(k)]) for k in ("rms_spread", "max_dist_to_centroid"))
    assert r <= meb(P).radius <= u
    assert check("ch5.sandwich", (r, u), seed=seed, strict=True)
    assert "swapped" in check("ch5.sandwich", (u, r), seed=seed).message
    assert "SQUARED" in check("ch5.sandwich", (r * r, u), seed=seed).message
    assert check("ch5.sandwich", "rms_spread", seed=seed).status == "wrong"  # malformed
    assert check("ch5.constant", ("rms_spread", u / r), seed=seed, strict=True)
    assert "divide by" in check("ch5.constant", ("rms_spread", u), seed=seed).message
    assert check("ch5.constant", ("max_dist_to_centroid", u / r), seed=seed).status == "wrong"
    assert not np.array_equal(P, sandwich_points(seed + 1))


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
