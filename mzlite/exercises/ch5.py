"""Chapter 5 exercises ("The minimum enclosing ball"): every reference answer is computed by
mzlite (``mzlite.tasks.geometry.meb``) or written out here from the definitions of
``mzlite.tasks.set_features`` (tests hold the two together), never typed by hand."""

from __future__ import annotations

import numpy as np

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


def sandwich_points(seed: int = 0) -> np.ndarray:
    """The (5, 2) point set of exercises ch5.sandwich and ch5.constant for the notebook's
    ``seed``: five distinct points with integer coordinates."""
    g = np.random.default_rng([5, 2, seed])
    while True:
        P = g.integers(-6, 7, size=(5, 2)).astype(np.float64)
        if len(np.unique(P, axis=0)) == len(P):
            return P


def _spread(P: np.ndarray) -> tuple[float, float, np.ndarray]:
    """``(rms_spread, max_dist_to_centroid, distances)`` of one set, as ``set_features``
    defines the two statistics (written out here), and each point's distance to the centroid."""
    dist = np.linalg.norm(P - P.mean(0), axis=1)
    return float(np.sqrt((dist**2).mean())), float(dist.max()), dist


def _pair(answer, what: str) -> tuple:
    if isinstance(answer, str) or not hasattr(answer, "__len__") or len(answer) != 2:
        raise ValueError(f"answer with a pair: {what}")
    return tuple(answer)


@exercise(
    "ch5.sandwich",
    hint="The ball centred at the centroid with radius max_i ||x_i - mean|| contains every point; "
    "and for any centre c, max_i ||x_i - c||^2 >= mean_i ||x_i - c||^2 >= mean_i ||x_i - mean||^2.",
    per_seed=True,
)
def _sandwich(answer, seed):
    lower, upper = (float(a) for a in _pair(answer, "(lower, upper), two numbers"))
    P = sandwich_points(seed)
    r, u, dist = _spread(P)
    R = meb(P).radius
    if same_number(lower, r) and same_number(upper, u):
        return True, f"{r:.4g} <= R = {R:.4g} <= {u:.4g}"
    diameter = max(float(np.linalg.norm(a - b)) for a in P for b in P)
    if same_number(lower, u) and same_number(upper, r):
        return False, "the two bounds swapped: (lower, upper)"
    slips_lower = [
        (R, "the radius itself: the bounds are statistics that sandwich it"),
        (r**2, "the mean SQUARED distance: take its square root"),
        (float(dist.mean()), "the mean distance to the centroid: the chapter's lower end is "
         "the RMS distance"),
    ]  # fmt: skip
    slips_upper = [
        (R, "the radius itself: the bounds are statistics that sandwich it"),
        (diameter, "the largest distance between two points: the upper end is the largest "
         "distance to the centroid"),
        (u**2, "a squared distance: take its square root"),
    ]  # fmt: skip
    if not same_number(lower, r):
        return False, "lower end: " + named_mistake(lower, slips_lower, "not the RMS spread r")
    return False, "upper end: " + named_mistake(
        upper, slips_upper, "not the largest distance to the centroid"
    )


@exercise(
    "ch5.constant",
    hint="normalise='scale' centres each set and divides it by one of the basic statistics.",
    per_seed=True,
)
def _constant(answer, seed):
    name, value = _pair(answer, "(a statistic's name, a number)")
    name = str(name).strip()
    P = sandwich_points(seed)
    r, u, dist = _spread(P)
    ref = u / r  # the normalised set (P - mean) / r has RMS spread 1
    if name not in _NAMES:
        return False, f"the statistic is one of {list(_NAMES)}"
    if name != "rms_spread":
        return False, (
            f"{name} still differs from set to set after normalisation: which statistic is "
            "divided out?"
        )
    if same_number(value, ref):
        return True, f"rms_spread becomes 1; your set's max_dist_to_centroid becomes {ref:.4g}"
    return False, "the value: " + named_mistake(
        float(value),
        [
            (u, "the distance before normalisation: divide by the set's RMS spread"),
            (
                meb(P).radius / r,
                "the normalised target R / r: the question asks for the "
                "largest distance to the centroid",
            ),
            (
                u / float(dist.mean()),
                "divided by the mean distance: normalise='scale' divides by the RMS spread",
            ),
        ],  # fmt: skip
        "not the normalised set's largest distance to the centroid",
    )
