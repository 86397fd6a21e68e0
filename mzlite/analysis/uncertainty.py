"""Uncertainty of a set regressor: the single-pass interval-hull width (IHW) of the MZ model
against MC-Dropout and a deep ensemble (Theorem thm:ihw-calibration; Tables tab:uncertainty,
tab:unc-comparison, tab:ece-nll; Gal and Ghahramani 2016, Lakshminarayanan et al. 2017).

Three scalar uncertainties ``u`` per prediction:

- ``ihw_uncertainty(model, x, mask)``: ``IHW(Z_out) = sum_g ||G_g||_1`` of the pooled output
  zonotope of an ``MZSetTransformer`` (thm:ihw-calibration), summed over the ``k`` PMA seeds; one
  forward pass.
- ``mc_dropout_predict(model, x, mask, passes=30)``: mean and standard deviation over ``passes``
  forward passes with dropout on.
- ``ensemble_predict(models, x, mask)``: mean and standard deviation over the members.

A scalar ``u`` is not yet a predictive distribution. The paper does not say how it turned ``u``
into the sigma of its Gaussian NLL; our choice, the same for every method:
``sigma = a u + b`` with ``a >= 0, b > 0`` fitted by minimising the Gaussian NLL of the
*validation* residuals (``fit_sigma_affine``), then frozen and applied to the test split.

Metrics (all float64):

- ``spearman`` / ``pearson`` of ``u`` with the absolute error (tab:unc-comparison).
- ``gaussian_nll(y, mu, sigma)``: mean of ``0.5 log(2 pi sigma^2) + (y - mu)^2 / (2 sigma^2)``.
- ``regression_ece(y, mu, sigma, levels)``: interval-coverage calibration error. For each level
  ``p`` (default 0.05, 0.10, ..., 0.95) the central interval ``mu +- z_{(1+p)/2} sigma`` should
  hold a fraction ``p`` of the targets; ECE is the mean over levels of ``|observed - p|``
  (``coverage_curve`` gives the observed fractions, the points of a calibration plot). The paper
  does not define its ECE for regression, so its numbers are not on the same scale as ours.
- ``binned_errors(u, err, n_bins)``: equal-count bins by ``u`` with the mean ``u``, mean
  ``|error|`` and count of each (tab:uncertainty).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from .._checks import as_float_tensor, check_finite
from .._torch import eval_mode, map_batches
from ..nn import MZMAB
from ..timing import time_call

__all__ = [
    "ihw_uncertainty",
    "mc_dropout_predict",
    "ensemble_predict",
    "spearman",
    "pearson",
    "gaussian_nll",
    "coverage_curve",
    "regression_ece",
    "fit_sigma_affine",
    "binned_errors",
    "time_per_prediction",
    "DEFAULT_LEVELS",
]

DEFAULT_LEVELS = tuple(round(0.05 * i, 2) for i in range(1, 20))  # 0.05 .. 0.95


def _vec(name: str, v) -> torch.Tensor:
    """A 1-D float64 CPU tensor from ``v`` (N,) or (N, 1); anything else raises ValueError."""
    t = as_float_tensor(name, v)
    if t.ndim == 2 and t.shape[1] == 1:
        t = t[:, 0]
    if t.ndim != 1 or t.shape[0] < 1:
        raise ValueError(f"{name} must have shape (N,) or (N, 1) with N >= 1, got {tuple(t.shape)}")
    check_finite(name, t)
    return t.detach().to("cpu", torch.float64)


def _vecs(names: Sequence[str], values) -> list[torch.Tensor]:
    out = [_vec(n, v) for n, v in zip(names, values, strict=True)]
    for n, t in zip(names[1:], out[1:], strict=True):
        if t.shape != out[0].shape:
            raise ValueError(
                f"{n} must have the shape of {names[0]} ({out[0].shape[0]},), got {tuple(t.shape)}"
            )
    return out


def _positive(name: str, t: torch.Tensor) -> None:
    if bool((t <= 0).any()):
        raise ValueError(f"{name} must be > 0 everywhere")


# ----------------------------------------------------------------------------- the estimators


@torch.no_grad()
def ihw_uncertainty(
    model, x, mask=None, batch_size: int = 512
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(prediction (N, d_out), IHW (N,))`` of an ``MZSetTransformer`` in eval mode, one pass.

    IHW is ``sum_g ||G_g||_1`` of the pooled output zonotope (``details.pooled``: the tokens
    the head reads, after the last SAB), summed over the ``k`` seeds (thm:ihw-calibration)."""

    def one_batch(xb, mb):
        y, det = model(xb, mb, return_details=True)
        return y, det.pooled.ihw().sum(-1)  # (B, d_out), (B, k) -> (B,)

    with eval_mode(model):
        preds, ihws = zip(*map_batches(one_batch, x, mask, batch_size), strict=True)
    return torch.cat(preds), torch.cat(ihws)


def _has_dropout(model) -> bool:
    return any(
        isinstance(m, (torch.nn.Dropout, MZMAB)) and m.p > 0 for m in model.modules()
    )  # an MZ block draws its own per-token masks (choice 4 of mzlite.nn), p in MZMAB.p


@torch.no_grad()
def mc_dropout_predict(
    model, x, mask=None, passes: int = 30, seed: int = 0, batch_size: int = 512
) -> tuple[torch.Tensor, torch.Tensor]:
    """MC-Dropout (Gal and Ghahramani 2016): ``(mean (N, d_out), std (N, d_out))`` over
    ``passes`` forward passes in train mode (dropout on; the models here have no BatchNorm, so
    train mode changes nothing else). ``std`` is the population std (divisor ``passes``).
    The global torch RNG is seeded with ``seed`` and restored afterwards."""
    if not isinstance(passes, int) or passes < 2:
        raise ValueError(f"passes must be an int >= 2, got {passes!r}")
    if not _has_dropout(model):
        raise ValueError("model has no dropout with p > 0; MC-Dropout would return zero spread")
    with torch.random.fork_rng(devices=[]), eval_mode(model, training=True):
        torch.manual_seed(seed)
        outs = [_predict_in_batches(model, x, mask, batch_size) for _ in range(passes)]
    s = torch.stack(outs)  # (passes, N, d_out)
    return s.mean(0), s.std(0, unbiased=False)


def _predict_in_batches(model, x, mask, batch_size: int):
    """``model(x, mask)`` over chunks of ``batch_size`` sets, concatenated: (N, d_out)."""
    return torch.cat(map_batches(model, x, mask, batch_size))


@torch.no_grad()
def ensemble_predict(models: Sequence, x, mask=None, batch_size: int = 512):
    """Deep ensemble (Lakshminarayanan et al. 2017, without their adversarial training or
    per-member variance head: members are plain MSE regressors): ``(mean, std)`` over members,
    each (N, d_out), population std."""
    if len(models) < 2:
        raise ValueError(f"models must hold at least 2 members, got {len(models)}")
    outs = []
    for model in models:
        with eval_mode(model):
            outs.append(_predict_in_batches(model, x, mask, batch_size))
    s = torch.stack(outs)  # (M, N, d_out)
    return s.mean(0), s.std(0, unbiased=False)


def time_per_prediction(fn: Callable[[], object], n_predictions: int, repeats: int = 3) -> float:
    """Seconds per prediction of ``fn()`` (which makes ``n_predictions`` of them): the best of
    ``repeats`` wall-clock timings (``time.perf_counter``) divided by ``n_predictions``."""
    if not isinstance(n_predictions, int) or n_predictions < 1:
        raise ValueError(f"n_predictions must be an int >= 1, got {n_predictions!r}")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    return min(time_call(fn) for _ in range(repeats)) / n_predictions


# ----------------------------------------------------------------------------- the metrics


def _ranks(v: torch.Tensor) -> torch.Tensor:
    """Ranks 1..N with ties given their average rank (as ``scipy.stats.rankdata``)."""
    order = torch.argsort(v, stable=True)
    sv = v[order]
    ranks = torch.empty_like(v)
    ranks[order] = torch.arange(1, len(v) + 1, dtype=v.dtype)
    # average over runs of equal values
    _, inverse, counts = torch.unique_consecutive(sv, return_inverse=True, return_counts=True)
    sums = torch.zeros(len(counts), dtype=v.dtype).index_add_(0, inverse, ranks[order])
    ranks[order] = (sums / counts.to(v.dtype))[inverse]
    return ranks


def pearson(a, b) -> float:
    """Pearson correlation of two vectors (N,), N >= 2; NaN when either is constant."""
    a, b = _vecs(("a", "b"), (a, b))
    if a.shape[0] < 2:
        raise ValueError("a and b must hold at least 2 values")
    a, b = a - a.mean(), b - b.mean()
    den = float(a.norm() * b.norm())
    return float((a * b).sum()) / den if den > 0 else math.nan


def spearman(a, b) -> float:
    """Spearman rank correlation (Pearson of the average-tie ranks) of two vectors (N,)."""
    a, b = _vecs(("a", "b"), (a, b))
    return pearson(_ranks(a), _ranks(b))


def gaussian_nll(y, mu, sigma) -> float:
    """Mean Gaussian negative log-likelihood (nats) of ``y`` under ``N(mu, sigma^2)``, all (N,)."""
    y, mu, sigma = _vecs(("y", "mu", "sigma"), (y, mu, sigma))
    _positive("sigma", sigma)
    return float((0.5 * torch.log(2 * math.pi * sigma**2) + (y - mu) ** 2 / (2 * sigma**2)).mean())


def _levels(levels) -> torch.Tensor:
    lv = torch.as_tensor(levels, dtype=torch.float64).flatten()
    if lv.numel() < 1 or bool(((lv <= 0) | (lv >= 1)).any()):
        raise ValueError(f"levels must be confidence levels in (0, 1), got {lv.tolist()}")
    return lv


def coverage_curve(y, mu, sigma, levels=DEFAULT_LEVELS) -> tuple[torch.Tensor, torch.Tensor]:
    """``(levels (K,), observed (K,))``: the fraction of ``y`` inside the central interval
    ``mu +- z_{(1+p)/2} sigma`` of ``N(mu, sigma^2)`` for every level ``p``. A calibrated
    predictor has ``observed == levels``."""
    from scipy.stats import norm

    y, mu, sigma = _vecs(("y", "mu", "sigma"), (y, mu, sigma))
    _positive("sigma", sigma)
    lv = _levels(levels)
    z = torch.as_tensor(norm.ppf((1 + lv.numpy()) / 2), dtype=torch.float64)  # (K,)
    inside = (y - mu).abs()[None, :] <= z[:, None] * sigma[None, :]  # (K, N)
    return lv, inside.double().mean(1)


def regression_ece(y, mu, sigma, levels=DEFAULT_LEVELS) -> float:
    """Interval-coverage ECE: mean over ``levels`` of ``|observed coverage - level|`` (see
    ``coverage_curve``). 0 is perfect; the worst possible value is below 1."""
    lv, obs = coverage_curve(y, mu, sigma, levels)
    return float((obs - lv).abs().mean())


def fit_sigma_affine(u, err, min_sigma: float = 1e-6) -> tuple[float, float]:
    """``(a, b)`` with ``a >= 0``, ``b >= min_sigma`` minimising the Gaussian NLL of the residuals
    ``err = y - mu`` (N,) under ``sigma = a u + b`` (``u`` (N,) >= 0, one scalar uncertainty per
    prediction). Fit on a validation split, apply unchanged to the test split. L-BFGS-B from the
    least-squares fit of ``|err| ~ sqrt(2/pi) (a u + b)`` (the mean of a half-normal)."""
    from scipy.optimize import minimize

    u, err = _vecs(("u", "err"), (u, err))
    if bool((u < 0).any()):
        raise ValueError("u must be >= 0 (a spread, a width or a standard deviation)")
    un, e2 = u.numpy(), (err**2).numpy()
    A = np.stack([un, np.ones_like(un)], 1) * math.sqrt(2 / math.pi)
    x0 = np.linalg.lstsq(A, err.abs().numpy(), rcond=None)[0]
    x0 = np.array([max(x0[0], 0.0), max(x0[1], float(err.abs().mean()) * 0.1, min_sigma)])

    def nll(p):
        s = p[0] * un + p[1]
        val = np.mean(np.log(s) + e2 / (2 * s**2))
        grad_s = (1 / s - e2 / s**3) / len(s)
        return val, np.array([np.sum(grad_s * un), np.sum(grad_s)])

    res = minimize(nll, x0, jac=True, method="L-BFGS-B", bounds=[(0.0, None), (min_sigma, None)])
    return float(res.x[0]), float(res.x[1])


def binned_errors(u, err, n_bins: int = 5) -> list[dict]:
    """tab:uncertainty: sort by ``u``, cut into ``n_bins`` equal-count bins (``np.array_split``:
    sizes differ by at most one), and report per bin ``{"bin", "u_mean", "abs_err_mean",
    "count"}``, lowest ``u`` first."""
    u, err = _vecs(("u", "err"), (u, err))
    if not isinstance(n_bins, int) or not 1 <= n_bins <= u.shape[0]:
        raise ValueError(f"n_bins must be an int in [1, N={u.shape[0]}], got {n_bins!r}")
    order = torch.argsort(u, stable=True).numpy()
    rows = []
    for i, idx in enumerate(np.array_split(order, n_bins), start=1):
        idx = torch.as_tensor(idx)
        rows.append(
            {
                "bin": i,
                "u_mean": float(u[idx].mean()),
                "abs_err_mean": float(err[idx].abs().mean()),
                "count": int(len(idx)),
            }
        )
    return rows
