"""Chapter 8 exercises ("Uncertainty"): the inputs are typed here, every reference answer is
computed with scipy (independently of ``mzlite.analysis.uncertainty``, which the solutions use)."""

from __future__ import annotations

import numpy as np

from .checker import number_exercise, student_inputs

# Five predictions of a regressor: targets, predicted means, predicted sigmas, and an uncertainty.
EX_Y = [2.0, -1.0, 0.5, 4.0, 1.0]
EX_MU = [1.5, -0.5, 0.0, 1.0, 1.2]
EX_SIGMA = [0.5, 1.0, 0.25, 2.0, 0.5]
EX_U = [0.3, 0.9, 0.1, 2.5, 0.2]
EX_LEVEL = 0.9


def _draw(g: np.random.Generator) -> dict:
    mu = np.round(g.normal(1.0, 1.5, 5), 2)
    sigma = np.round(g.uniform(0.25, 2.0, 5), 2)
    y = np.round(mu + sigma * g.normal(0.0, 1.3, 5), 2)
    u = np.round(np.abs(y - mu) * g.uniform(0.3, 1.5, 5) + g.uniform(0.0, 0.5, 5), 2)
    return {"y": y, "mu": mu, "sigma": sigma, "u": u, "level": EX_LEVEL}


def exercise_inputs(seed: int = 0) -> dict:
    """``y, mu, sigma, u`` (five predictions each, float64 numpy arrays) and ``level``: the values
    typed above for seed 0, a variant of the same kind for any other notebook ``seed``."""
    typed = {"y": EX_Y, "mu": EX_MU, "sigma": EX_SIGMA, "u": EX_U, "level": EX_LEVEL}
    return student_inputs(8, seed, _draw, typed)


def _nll(ex: dict) -> float:
    from scipy.stats import norm

    return float(-norm.logpdf(ex["y"], ex["mu"], ex["sigma"]).mean())


def _coverage(ex: dict) -> float:
    from scipy.stats import norm

    z = norm.ppf((1 + EX_LEVEL) / 2)
    return float(np.mean(np.abs(ex["y"] - ex["mu"]) <= z * ex["sigma"]))


def _spearman(ex: dict) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(ex["u"], np.abs(ex["y"] - ex["mu"])).statistic)


def _nll_slips(ex: dict) -> list[tuple[float, str]]:
    from scipy.stats import norm

    y, mu, sigma = ex["y"], ex["mu"], ex["sigma"]
    nll = -norm.logpdf(y, mu, sigma)
    return [
        (float((nll - 0.5 * np.log(2 * np.pi)).mean()), "the constant 0.5 log(2 pi) left out"),
        (float(-norm.logpdf(y, mu, sigma**2).mean()), "sigma^2 used as the standard deviation"),
        (float(nll.sum()), "the sum over the five predictions: the mean is asked for"),
        (float(norm.logpdf(y, mu, sigma).mean()), "the log-likelihood: its negative is asked for"),
    ]


def _coverage_slips(ex: dict) -> list[tuple[float, str]]:
    from scipy.stats import norm

    err = np.abs(ex["y"] - ex["mu"])
    inside = lambda z: float(np.mean(err <= z * ex["sigma"]))  # noqa: E731
    z = norm.ppf((1 + EX_LEVEL) / 2)
    return [
        (inside(1.96), "the 95 % interval (z = 1.96): the level asked is 90 % (z = 1.645)"),
        (inside(1.0), "one sigma (z = 1): a 90 % interval is mu +- 1.645 sigma"),
        (1 - inside(z), "the fraction outside the interval"),
    ]


def _spearman_slips(ex: dict) -> list[tuple[float, str]]:
    from scipy.stats import pearsonr, spearmanr

    err = np.abs(ex["y"] - ex["mu"])
    return [
        (
            float(pearsonr(ex["u"], err).statistic),
            "Pearson's correlation of the raw values: Spearman's ranks them first",
        ),  # fmt: skip
        (
            float(spearmanr(ex["u"], ex["y"] - ex["mu"]).statistic),
            "the signed errors y - mu: take |y - mu|",
        ),  # fmt: skip
    ]


number_exercise(
    "ch8.nll",
    _nll,
    hint="Average -log N(y | mu, sigma^2) over the five predictions.",
    inputs=exercise_inputs,
    right="mean NLL = {:.4f} nats",
    wrong="not the mean Gaussian NLL",
    mistakes=_nll_slips,
)
number_exercise(
    "ch8.coverage",
    _coverage,
    hint="The central 90 % interval is mu +- z sigma with z = Phi^-1(0.95) = 1.645.",
    inputs=exercise_inputs,
    right=f"observed coverage {{:.2f}} at nominal {EX_LEVEL}",
    wrong="not the coverage",
    mistakes=_coverage_slips,
)
number_exercise(
    "ch8.spearman",
    _spearman,
    hint="Rank u and |y - mu|, then take the Pearson correlation of ranks.",
    inputs=exercise_inputs,
    right="Spearman = {:.3f}",
    wrong="not Spearman's rank correlation of u and |error|",
    mistakes=_spearman_slips,
)
