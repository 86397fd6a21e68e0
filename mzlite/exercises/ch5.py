"""Chapter 5 exercises ("The minimum enclosing ball"): every reference answer is computed by
mzlite (``mzlite.tasks.geometry.meb`` and ``mzlite.tasks.set_features`` on generated MEB sets),
never typed by hand."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..tasks import meb_radius_dataset, set_features
from ..tasks.geometry import meb
from .checker import exercise, named_mistake, same_number

# Exercise 1: three points in the plane; the MEB radius can be found with pencil and paper.
EX_POINTS = ((0.0, 0.0), (6.0, 0.0), (1.0, 1.0))
_NAMES = ("n", "rms_spread", "max_dist_to_centroid")


def exercise_points(seed: int = 0) -> np.ndarray:
    """The (3, 2) point set of exercise ch5.radius for the notebook's ``seed`` (the typed one for
    seed 0; else three points with integer coordinates, no two equal, not on one line)."""
    if seed == 0:
        return np.array(EX_POINTS, dtype=np.float64)
    g = np.random.default_rng([5, 1, seed])
    while True:
        P = g.integers(0, 9, size=(3, 2)).astype(np.float64)
        (x1, y1), (x2, y2) = P[1] - P[0], P[2] - P[0]
        if abs(x1 * y2 - x2 * y1) > 2:  # a proper triangle
            return P


@lru_cache(maxsize=2)
def exercise_sets(normalise: str = "none", n_sets: int = 300, d: int = 8, seed: int = 5):
    """MEB sets of the chapter's generator (``mzlite.tasks.meb_radius_dataset``), for exercises."""
    return meb_radius_dataset(n_sets, d=d, seed=seed, normalise=normalise)


def _stat_names(answer) -> set[str]:
    if isinstance(answer, str):
        answer = [answer]
    return {str(a).strip() for a in answer}


@exercise(
    "ch5.radius",
    hint="Is one angle obtuse (or right)? Then the ball whose diameter is the longest side holds "
    "all three points; otherwise it is the circumcircle.",
    per_seed=True,
)
def _radius(answer, seed):
    P = exercise_points(seed)
    ref = meb(P).radius
    if same_number(answer, ref):
        return True, f"R = {ref:g}, the smallest ball holding all three points"
    a, b, c = (float(np.linalg.norm(P[i] - P[j])) for i, j in ((1, 2), (0, 2), (0, 1)))
    (x1, y1), (x2, y2) = P[1] - P[0], P[2] - P[0]
    area = abs(x1 * y2 - x2 * y1) / 2
    return False, named_mistake(
        answer,
        [
            (
                a * b * c / (4 * area),
                "the circumcircle's radius: with an obtuse angle the "
                "smallest ball is the one on the longest side",
            ),  # fmt: skip
            (2 * ref, "the diameter: the radius is half of it"),
            (
                float(np.linalg.norm(P - P.mean(0), axis=1).max()),
                "the largest distance to the centroid: an upper bound, not the radius",
            ),  # fmt: skip
        ],
        "not the radius of the smallest ball containing the three points",
    )


@exercise(
    "ch5.sandwich",
    hint="The ball centred at the centroid with radius max_i ||x_i - mean|| contains every point; "
    "and for any centre c, max_i ||x_i - c||^2 >= mean_i ||x_i - c||^2 >= mean_i ||x_i - mean||^2.",
)
def _sandwich(answer):
    lower, upper = (str(a).strip() for a in answer)
    data = exercise_sets("none")
    X, names = set_features(data, "basic")
    col = {nm: X[:, names.index(nm)] for nm in _NAMES}
    R = data.y.double().numpy()[:, 0]
    tol = 1e-5 * np.maximum(1.0, R)  # float32 targets
    ok_bounds = (
        lower in col
        and upper in col
        and bool((col[lower] <= R + tol).all())
        and bool((R <= col[upper] + tol).all())
        and lower != upper
    )
    ok = ok_bounds and (lower, upper) == ("rms_spread", "max_dist_to_centroid")
    return ok, (
        f"{lower} <= R <= {upper} on all {len(R)} generated sets (and on every set: see the hint)"
        if ok
        else f"give (lower, upper) as two of {list(_NAMES)} that bound R on every set"
    )


@exercise(
    "ch5.constant",
    hint="normalise='scale' centres each set and divides it by one of the basic statistics.",
)
def _constant(answer):
    data = exercise_sets("scale")
    X, names = set_features(data, "basic")
    const = {nm for nm, s in zip(names, X.std(0), strict=True) if s <= 1e-5 * (1 + X.std(0).max())}
    const.discard("n")  # n is not constant: set sizes are drawn per set
    got = _stat_names(answer)
    ok = got == const
    return ok, (
        f"after normalisation {sorted(const)} is the same for every set, so it predicts nothing"
        if ok
        else f"not the statistic(s) that become constant; choose among {list(_NAMES)}"
    )
