"""Chapter 6 exercises ("Relational benchmarks"): only the tiny inputs are typed here; every
reference answer is computed by mzlite (``mzlite.tasks.geometry`` for the MST weight and the Chamfer
distance, ``mzlite.train.regression_metrics`` for R^2). The notebook gets the same inputs from
:func:`exercise_inputs`."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..tasks.geometry import chamfer_distance, mst_weight
from ..train import regression_metrics
from .checker import exercise

# ch6.mst: five points in the plane (the corners of a unit square, plus one far point)
EX_MST = ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0), (3.0, 1.0))
# ch6.chamfer: two small sets in R^2, of different sizes
EX_A = ((0.0, 0.0), (2.0, 0.0), (0.0, 2.0))
EX_B = ((0.0, 1.0), (3.0, 1.0))
# ch6.r2: targets and a (bad) prediction of them
EX_Y = (1.0, 2.0, 3.0, 4.0)
EX_PRED = (2.5, 2.5, 2.5, 6.0)


def exercise_inputs(seed: int = 0) -> dict:
    """The exercises' inputs as float64 numpy arrays: ``mst_points`` (5, 2), ``A`` (3, 2),
    ``B`` (2, 2), ``y`` (4,) and ``pred`` (4,). Seed 0 gives the small numbers typed above; any
    other notebook ``seed`` draws a variant of the same sizes (a prediction worse than the mean)."""
    if seed != 0:
        g = np.random.default_rng([6, seed])
        y = np.round(g.uniform(0.0, 5.0, 4), 1)
        pred = np.round(y.mean() - 1.2 * (y - y.mean()) + g.normal(0.0, 0.3, 4), 1)
        return {
            "mst_points": np.round(g.uniform(0.0, 4.0, (5, 2)), 1),
            "A": np.round(g.uniform(0.0, 3.0, (3, 2)), 1),
            "B": np.round(g.uniform(0.0, 3.0, (2, 2)), 1),
            "y": y,
            "pred": pred,
        }
    return {
        "mst_points": np.array(EX_MST, dtype=np.float64),
        "A": np.array(EX_A, dtype=np.float64),
        "B": np.array(EX_B, dtype=np.float64),
        "y": np.array(EX_Y, dtype=np.float64),
        "pred": np.array(EX_PRED, dtype=np.float64),
    }


def _close(answer, ref: float, rtol: float = 1e-6) -> bool:
    a = float(answer)
    return math.isfinite(a) and abs(a - ref) <= rtol * max(1.0, abs(ref))


@exercise(
    "ch6.mst",
    hint="scipy.spatial.distance.pdist + squareform give the distance matrix; "
    "scipy.sparse.csgraph.minimum_spanning_tree(D).sum() is the total edge length.",
    per_seed=True,
)
def _mst(answer, seed):
    ref = mst_weight(exercise_inputs(seed)["mst_points"])
    ok = _close(answer, ref)
    return ok, (f"MST weight {ref:.6f}" if ok else "not the total length of the MST")


@exercise(
    "ch6.chamfer",
    hint="Squared distances; average min over B for each point of A, plus the same from B to A.",
    per_seed=True,
)
def _chamfer(answer, seed):
    ex = exercise_inputs(seed)
    ref = chamfer_distance(ex["A"], ex["B"])
    ok = _close(answer, ref)
    return ok, (
        f"CD(A, B) = {ref:.6f} (symmetric, squared distances, each direction averaged)"
        if ok
        else "not the symmetric squared Chamfer distance of A and B"
    )


@exercise(
    "ch6.r2", hint="R^2 = 1 - sum (y - pred)^2 / sum (y - mean(y))^2; it can be < 0.", per_seed=True
)
def _r2(answer, seed):
    ex = exercise_inputs(seed)
    ref = regression_metrics(
        torch.as_tensor(ex["pred"]).reshape(-1, 1), torch.as_tensor(ex["y"]).reshape(-1, 1)
    )["r2"]
    ok = _close(answer, ref)
    return ok, (
        f"R^2 = {ref:.4f}: worse than predicting the mean of y" if ok and ref < 0 else
        f"R^2 = {ref:.4f}" if ok else "not the R^2 of these predictions"
    )  # fmt: skip
