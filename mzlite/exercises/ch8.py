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


def _close(answer, ref: float, rel: float = 1e-6) -> bool:
    return abs(float(answer) - ref) <= rel * max(1.0, abs(ref))


@exercise("ch8.nll", hint="Average -log N(y | mu, sigma^2) over the five predictions.")
def _nll(answer):
    from scipy.stats import norm

    ref = float(-norm.logpdf(EX_Y, EX_MU, EX_SIGMA).mean())
    ok = _close(answer, ref)
    return ok, (f"mean NLL = {ref:.4f} nats" if ok else "not the mean Gaussian NLL")


@exercise(
    "ch8.coverage",
    hint="The central 90 % interval is mu +- z sigma with z = Phi^-1(0.95) = 1.645.",
)
def _coverage(answer):
    from scipy.stats import norm

    z = norm.ppf((1 + EX_LEVEL) / 2)
    err = np.abs(np.subtract(EX_Y, EX_MU))
    ref = float(np.mean(err <= z * np.asarray(EX_SIGMA)))
    ok = _close(answer, ref)
    return ok, (f"observed coverage {ref:.2f} at nominal {EX_LEVEL}" if ok else "not the coverage")


@exercise("ch8.spearman", hint="Rank u and |y - mu|, then take the Pearson correlation of ranks.")
def _spearman(answer):
    from scipy.stats import spearmanr

    ref = float(spearmanr(EX_U, np.abs(np.subtract(EX_Y, EX_MU))).statistic)
    ok = _close(answer, ref)
    return ok, (
        f"Spearman = {ref:.3f}" if ok else "not Spearman's rank correlation of u and |error|"
    )
