"""Chapter 10 exercises ("Real data: digits as point clouds"): references are computed with
:func:`mzlite.tasks.image_points` and :func:`mzlite.analysis.ranks.null_test`; the checkers draw
their inputs (random 8x8 images, random rank lists) from the notebook's ``seed``."""

from __future__ import annotations

import itertools

import numpy as np

from ..analysis.ranks import null_test
from ..tasks import image_points
from .checker import call, exercise, number_exercise

# ch10.p_floor: how many complete settings
EX_CELLS = 4


def _images(seed: int) -> list[np.ndarray]:
    """Random 8x8 digit-like images (intensities 0..16, about half the pixels at 8 or more), and
    one with a pixel at exactly the threshold, where >= and > differ."""
    g = np.random.default_rng(10_010 + seed)
    images = [g.integers(0, 17, size=(8, 8)) for _ in range(4)]
    edge = np.zeros((8, 8), dtype=np.int64)
    edge[0, 7], edge[5, 2] = 8, 16
    return [*images, edge]


def _as_points(got) -> np.ndarray:
    points = np.asarray(got, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 2:
        raise TypeError(f"return the points as an (n, 2) array, got shape {points.shape}")
    return points


@exercise(
    "ch10.image_points",
    hint="np.nonzero(image >= threshold) gives rows and columns; x is the column, y points up.",
    per_seed=True,
    kind="coding",
)
def _image_points(function, seed):
    for image in _images(seed):
        ref = image_points(image, 8)
        got = _as_points(call(function, image.copy(), 8))
        if got.shape == ref.shape and np.allclose(got, ref):
            continue
        r, c = np.nonzero(image >= 8)
        mistakes = [
            (np.stack([r - 3.5, 3.5 - c], 1), "rows as x and columns as y"),
            (np.stack([c - 3.5, r - 3.5], 1), "y pointing down (row - 3.5): the digit upside down"),
            (np.stack([c, r], 1), "image indices: not centred, y pointing down"),
            (np.stack([c - 4.0, 4.0 - r], 1), "centring on pixel (4, 4) instead of the centre 3.5"),
        ]
        r_gt, c_gt = np.nonzero(image > 8)
        mistakes.append((np.stack([c_gt - 3.5, 3.5 - r_gt], 1), "> threshold instead of >="))
        for wrong, name in mistakes:
            if got.shape == wrong.shape and np.allclose(got, wrong):
                return False, f"your points are what you get with {name}"
        if got.shape != ref.shape:
            return False, f"{got.shape[0]} points, expected {ref.shape[0]} (one per on-pixel)"
        if np.allclose(np.sort(got, 0), np.sort(ref, 0)):
            return False, "the right points in another order: keep np.nonzero's row-major order"
        return False, "your points differ from mzlite.tasks.image_points"
    return True, "the on-pixels at (col - 3.5, 3.5 - row), as mzlite.tasks.image_points"


def floor_cells(seed: int = 0) -> int:
    """The number of complete settings of exercise ch10.p_floor for the notebook's ``seed``."""
    return EX_CELLS if seed == 0 else int(np.random.default_rng([10, 1, seed]).integers(2, 7))


number_exercise(
    "ch10.p_floor",
    lambda ex: null_test([1] * ex["cells"])["p_advantage"],
    inputs=lambda seed: {"cells": floor_cells(seed)},
    hint="The best possible outcome is rank 1 in every cell; how likely is that under the null?",
    right=lambda p: f"(1/7)^k = {p:.6f}: below 0.05 from 2 cells on, never with 1",
    wrong="not the probability of rank 1 in every cell under the null",
    mistakes=lambda ex: [
        (1 / 7, "one cell's chance: the cells are independent, multiply them"),
        (1 - (6 / 7) ** ex["cells"], "rank 1 in at least one cell: every cell is asked for"),
        (ex["cells"] / 7, "the chances added: independent cells multiply"),
        ((1 / 6) ** ex["cells"], "six rivals: rank 1 among 7 models has chance 1/7"),
    ],
)


def _rank_lists(seed: int) -> list[list[int]]:
    g = np.random.default_rng(20_010 + seed)
    drawn = [[int(r) for r in g.integers(1, 8, size=k)] for k in (2, 3, 4)]
    return [[4], [1, 1], [7, 7, 7], *drawn]


@exercise(
    "ch10.null_test",
    hint="itertools.product(range(1, 8), repeat=len(observed)) lists every outcome, all equally "
    "likely; count those whose sum is at most the observed sum.",
    per_seed=True,
    kind="coding",
)
def _null_test(function, seed):
    for observed in _rank_lists(seed):
        ref = null_test(observed)["p_advantage"]
        got = call(function, list(observed))
        if isinstance(got, bool) or not isinstance(got, int | float | np.floating):
            return False, f"return the probability as a number, got {got!r}"
        if abs(got - ref) <= 1e-9:
            continue
        outcomes = list(itertools.product(range(1, 8), repeat=len(observed)))
        total = sum(observed)
        mistakes = {
            "P(mean < it): ties count too, use <=": sum(sum(o) < total for o in outcomes),
            "P(mean >= it): that is p_disadvantage": sum(sum(o) >= total for o in outcomes),
        }
        for name, count in mistakes.items():
            if abs(got - count / len(outcomes)) <= 1e-9:
                return False, f"for ranks {observed}: {name}"
        return False, f"for ranks {observed}: {got!r}, expected {ref:.6f}"
    return True, "equal to mzlite.analysis.ranks.null_test's p_advantage on every rank list"
