"""Chapter 8 exercises ("Uncertainty"): the inputs are typed here, every reference answer is
computed with scipy (independently of ``mzlite.analysis.uncertainty``, which the solutions use)."""

from __future__ import annotations

import numpy as np

from .checker import exercise

# Five predictions of a regressor: targets, predicted means, predicted sigmas, and an uncertainty.
EX_Y = [2.0, -1.0, 0.5, 4.0, 1.0]
EX_MU = [1.5, -0.5, 0.0, 1.0, 1.2]
EX_SIGMA = [0.5, 1.0, 0.25, 2.0, 0.5]
EX_U = [0.3, 0.9, 0.1, 2.5, 0.2]
EX_LEVEL = 0.9


def exercise_inputs(seed: int = 0) -> dict:
    """``y, mu, sigma, u`` (five predictions each, float64 numpy arrays) and ``level``: the values
    typed above for seed 0, a variant of the same kind for any other notebook ``seed``."""
    if seed == 0:
        y, mu, sigma, u = (np.array(v, dtype=np.float64) for v in (EX_Y, EX_MU, EX_SIGMA, EX_U))
    else:
        g = np.random.default_rng([8, seed])
        mu = np.round(g.normal(1.0, 1.5, 5), 2)
        sigma = np.round(g.uniform(0.25, 2.0, 5), 2)
        y = np.round(mu + sigma * g.normal(0.0, 1.3, 5), 2)
        u = np.round(np.abs(y - mu) * g.uniform(0.3, 1.5, 5) + g.uniform(0.0, 0.5, 5), 2)
    return {"y": y, "mu": mu, "sigma": sigma, "u": u, "level": EX_LEVEL}


def _close(answer, ref: float, rel: float = 1e-6) -> bool:
    return abs(float(answer) - ref) <= rel * max(1.0, abs(ref))


@exercise(
    "ch8.nll", hint="Average -log N(y | mu, sigma^2) over the five predictions.", per_seed=True
)
def _nll(answer, seed):
    from scipy.stats import norm

    ex = exercise_inputs(seed)
    ref = float(-norm.logpdf(ex["y"], ex["mu"], ex["sigma"]).mean())
    ok = _close(answer, ref)
    return ok, (f"mean NLL = {ref:.4f} nats" if ok else "not the mean Gaussian NLL")


@exercise(
    "ch8.coverage",
    hint="The central 90 % interval is mu +- z sigma with z = Phi^-1(0.95) = 1.645.",
    per_seed=True,
)
def _coverage(answer, seed):
    from scipy.stats import norm

    ex = exercise_inputs(seed)
    z = norm.ppf((1 + EX_LEVEL) / 2)
    err = np.abs(ex["y"] - ex["mu"])
    ref = float(np.mean(err <= z * ex["sigma"]))
    ok = _close(answer, ref)
    return ok, (f"observed coverage {ref:.2f} at nominal {EX_LEVEL}" if ok else "not the coverage")


@exercise(
    "ch8.spearman",
    hint="Rank u and |y - mu|, then take the Pearson correlation of ranks.",
    per_seed=True,
)
def _spearman(answer, seed):
    from scipy.stats import spearmanr

    ex = exercise_inputs(seed)
    ref = float(spearmanr(ex["u"], np.abs(ex["y"] - ex["mu"])).statistic)
    ok = _close(answer, ref)
    return ok, (
        f"Spearman = {ref:.3f}" if ok else "not Spearman's rank correlation of u and |error|"
    )
