"""Chapter 6 exercises ("Relational benchmarks"): only the tiny inputs are typed here; every
reference answer is computed by mzlite (``mzlite.tasks.geometry`` for the MST weight and the Chamfer
distance, ``mzlite.train.regression_metrics`` for R^2). The notebook gets the same inputs from
:func:`exercise_inputs`."""

from __future__ import annotations

import numpy as np
import torch

from ..tasks.geometry import chamfer_distance, mst_weight
from ..train import regression_metrics
from .checker import number_exercise, student_inputs

# ch6.mst: five points in the plane (the corners of a unit square, plus one far point)
EX_MST = ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (3.0, 1.0))
# ch6.chamfer: two small sets in R^2, of different sizes
EX_A = ((0.0, 0.0), (2.0, 0.0), (0.0, 2.0))
EX_B = ((0.0, 1.0), (3.0, 1.0))
# ch6.r2: targets and a (bad) prediction of them
EX_Y = (1.0, 2.0, 3.0, 4.0)
EX_PRED = (2.5, 2.5, 2.5, 6.0)


def _draw(g: np.random.Generator) -> dict:
    y = np.round(g.uniform(0.0, 5.0, 4), 1)
    pred = np.round(y.mean() - 1.2 * (y - y.mean()) + g.normal(0.0, 0.3, 4), 1)
    return {
        "mst_points": np.round(g.uniform(0.0, 4.0, (5, 2)), 1),
        "A": np.round(g.uniform(0.0, 3.0, (3, 2)), 1),
        "B": np.round(g.uniform(0.0, 3.0, (2, 2)), 1),
        "y": y,
        "pred": pred,
    }


def exercise_inputs(seed: int = 0) -> dict:
    """The exercises' inputs as float64 numpy arrays: ``mst_points`` (5, 2), ``A`` (3, 2),
    ``B`` (2, 2), ``y`` (4,) and ``pred`` (4,). Seed 0 gives the small numbers typed above; any
    other notebook ``seed`` draws a variant of the same sizes (a prediction worse than the mean)."""
    typed = {"mst_points": EX_MST, "A": EX_A, "B": EX_B, "y": EX_Y, "pred": EX_PRED}
    return student_inputs(6, seed, _draw, typed)


def _r2(ex: dict) -> float:
    pred, y = (torch.as_tensor(ex[k]).reshape(-1, 1) for k in ("pred", "y"))
    return regression_metrics(pred, y)["r2"]


def _mst_slips(ex: dict) -> list[tuple[float, str]]:
    from scipy.sparse.csgraph import minimum_spanning_tree
    from scipy.spatial.distance import pdist, squareform

    D = squareform(pdist(ex["mst_points"]))
    nearest = np.where(np.eye(len(D), dtype=bool), np.inf, D).min(1)
    return [
        (float(minimum_spanning_tree(D**2).sum()), "squared edge lengths: sum plain lengths"),
        (
            float(nearest.sum()),
            "each point's nearest-neighbour distance summed: a tree has n - 1 "
            "edges, each counted once",
        ),  # fmt: skip
        (float(D.sum() / 2), "every pairwise distance: the MST keeps only n - 1 edges"),
    ]


def _chamfer_slips(ex: dict) -> list[tuple[float, str]]:
    A, B = np.asarray(ex["A"]), np.asarray(ex["B"])
    D2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1)
    D = np.sqrt(D2)
    return [
        (
            float(D.min(1).mean() + D.min(0).mean()),
            "plain distances: the Chamfer distance squares them",
        ),  # fmt: skip
        (float(D2.min(1).mean()), "one direction only (A to B): add B to A"),
        (float(D2.min(0).mean()), "one direction only (B to A): add A to B"),
        (float(D2.min(1).sum() + D2.min(0).sum()), "sums where each direction is averaged"),
    ]


def _r2_slips(ex: dict) -> list[tuple[float, str]]:
    y, p = np.asarray(ex["y"]), np.asarray(ex["pred"])
    sse = ((y - p) ** 2).sum()
    return [
        (
            float(np.corrcoef(y, p)[0, 1] ** 2),
            "the squared correlation, which is never negative: "
            "R^2 compares with predicting the mean",
        ),  # fmt: skip
        (
            float(1 - sse / ((p - p.mean()) ** 2).sum()),
            "the predictions' spread in the denominator: it is the spread of y",
        ),  # fmt: skip
        (float(sse / ((y - y.mean()) ** 2).sum()), "SSE / SST without the 1 -"),
    ]


number_exercise(
    "ch6.mst",
    lambda ex: mst_weight(ex["mst_points"]),
    hint="scipy.spatial.distance.pdist + squareform give the distance matrix; "
    "scipy.sparse.csgraph.minimum_spanning_tree(D).sum() is the total edge length.",
    inputs=exercise_inputs,
    right="MST weight {:.6f}",
    wrong="not the total length of the MST",
    mistakes=_mst_slips,
)
number_exercise(
    "ch6.chamfer",
    lambda ex: chamfer_distance(ex["A"], ex["B"]),
    hint="Squared distances; average min over B for each point of A, plus the same from B to A.",
    inputs=exercise_inputs,
    right="CD(A, B) = {:.6f} (symmetric, squared distances, each direction averaged)",
    wrong="not the symmetric squared Chamfer distance of A and B",
    mistakes=_chamfer_slips,
)
number_exercise(
    "ch6.r2",
    _r2,
    hint="R^2 = 1 - sum (y - pred)^2 / sum (y - mean(y))^2; it can be < 0.",
    inputs=exercise_inputs,
    right=lambda r2: (
        f"R^2 = {r2:.4f}" + (": worse than predicting the mean of y" if r2 < 0 else "")
    ),
    wrong="not the R^2 of these predictions",
    mistakes=_r2_slips,
)
