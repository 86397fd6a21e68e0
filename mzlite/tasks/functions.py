"""Targets that are one fixed random function of the set, shared by every split (drawn from
``function_seed``): the quadratic-TDOF target and few-shot meta-regression."""

from __future__ import annotations

import math

import numpy as np

from ._build import (
    _check_choice,
    _check_common,
    _check_float,
    _check_int,
    _check_normalise,
    _finish,
    _opts,
    _sizes,
    _to32,
)
from .dataset import SetData


def quadratic_basis(L: int, d: int, function_seed: int = 0, basis: str = "random"):
    """The fixed function of :func:`quadratic_tdof_dataset`: (w (d,), M0 (d, d), M (L, d, d)).

    "random": L + 1 Gaussian matrices Frobenius-orthonormalised together (QR of their vec's), then
    scaled by sqrt(d) so each w^T M_l mu has unit variance; w is a uniform unit vector. "witness":
    Lemma lem:comp-orth's M_l = e_l e_d^T, M_0 = 0 (needs L <= d - 1)."""
    rng = np.random.default_rng(function_seed)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    if basis == "witness":
        M = np.zeros((L, d, d))
        for l in range(L):
            M[l, l, d - 1] = 1.0
        return w, np.zeros((d, d)), M
    G = rng.normal(size=(d * d, L + 1))
    Q, _ = np.linalg.qr(G)  # (d^2, L+1) orthonormal columns = Frobenius-orthonormal matrices
    Ms = Q.T.reshape(L + 1, d, d) * math.sqrt(d)
    return w, Ms[0], Ms[1:]


def quadratic_tdof_dataset(
    n_sets: int,
    *,
    L: int = 8,
    d: int = 32,
    n_min: int = 10,
    n_max: int = 30,
    within_std: float = 1.0,
    basis: str = "random",
    m0: str = "basis",
    scale: str = "unit_variance",
    function_seed: int = 0,
    seed: int = 0,
    normalise: str = "none",
) -> SetData:
    """Quadratic-TDOF target (eq:quadratic-tdof; tab:tdof-verify, tab:egnn-comparison,
    tab:gen-ablation): f(S) = w^T (M_0 + sum_{l=1}^L mu(S)_l M_l) mu(S), mu(S) the set mean, {M_l}
    Frobenius-orthogonal, so TDOF(f) = L.

    Sets are drawn so that mu(S) has exactly i.i.d. standard-Gaussian coordinates, the input
    distribution of thm:tdof-depth: mu ~ N(0, I_d), x_i = mu + within_std (e_i - mean_j e_j), e_i ~
    N(0, I_d); the deviations are centred so the sample mean IS mu. n ~ U{10..30}.

    Open choices: d = 32 (L must be <= d since the gates are coordinates of mu; tab:tdof-verify goes
    up to L = 32); w, M_0, M_l from ``function_seed`` (shared by all splits; see
    :func:`quadratic_basis`); "random" basis includes M_0 orthogonal to all M_l and divides f by
    sqrt(L + 1), so Var(f) ~ 1 for every L (the paper calls the task scale-free); "witness" is
    lem:comp-orth (M_0 = 0) divided by ||w_{1..L}||.

    The paper states none of d, M_0 or a scale for tab:tdof-verify (``TASK_READINGS`` names the
    combinations): ``m0="basis"`` (v1) keeps the basis's M_0 (random: a unit-variance linear term;
    witness: 0), ``m0="zero"`` sets M_0 = 0 (thm:tdof-depth's witness "with M_0 = 0");
    ``scale="unit_variance"`` (v1) divides f by about its standard deviation (sqrt(L + 1), or
    sqrt(L) without M_0, for the random basis; ||w_{1..L}|| for the witness), ``scale="none"`` is
    eq:quadratic-tdof as printed."""
    _check_common(n_sets, d, n_min, n_max, seed)
    _check_choice("basis", basis, ("random", "witness"))
    _check_choice("m0", m0, ("basis", "zero"))
    _check_choice("scale", scale, ("unit_variance", "none"))
    _check_int("L", L, 1, d - 1 if basis == "witness" else d)
    _check_float("within_std", within_std, 0.0)
    _check_int("function_seed", function_seed, 0)
    _check_normalise(normalise, allowed=False)
    opts = _opts(locals())
    w, M0, M = quadratic_basis(L, d, function_seed, basis)
    linear = basis == "random" and m0 == "basis"  # the only case with a linear term
    if m0 == "zero":
        M0 = np.zeros_like(M0)
    if scale == "none":
        norm = 1.0
    elif basis == "random":
        norm = math.sqrt(L + linear)  # each w^T M_l mu (and w^T M_0 mu) has unit variance
    else:
        norm = float(np.linalg.norm(w[:L]))
    rng = np.random.default_rng(seed)
    sets, y = [], []
    for n in _sizes(rng, n_sets, n_min, n_max):
        mu = rng.normal(size=d)
        e = rng.normal(size=(n, d))
        s = _to32(mu + within_std * (e - e.mean(0)))
        m = s.mean(0)  # the rounded set's own mean: the target is exact for the stored input
        T = M0 + np.einsum("l,lij->ij", m[:L], M)  # (d, d)
        sets.append(s)
        y.append(w @ T @ m / norm)
    return _finish("quadratic_tdof", opts, seed, sets, y, n_max)


def meta_basis(L: int, d: int, function_seed: int = 0) -> np.ndarray:
    """The fixed basis of :func:`meta_regression_dataset`: (L, d, d), i.i.d. N(0, 1/d) entries."""
    return np.random.default_rng(function_seed).normal(0.0, 1.0 / math.sqrt(d), size=(L, d, d))


def meta_regression_dataset(
    n_sets: int,
    *,
    L: int = 32,
    d: int = 8,
    k_support: int = 30,
    function_seed: int = 0,
    seed: int = 0,
    normalise: str = "none",
) -> SetData:
    """Few-shot meta-regression (tab:meta-reg, app:meta-regression): a shared basis M_1..M_L (d x
    d), per task c ~ N(0, I_L) and A = sum_l c_l M_l; K = 30 support pairs (x_i, A x_i) and one
    query x_q; y = A x_q (d_out = d = 8). L in {4, 8, 16, 32}.

    Tokens: support [x_i, A x_i, 1], query [x_q, 0, 0] (d_in = 2d + 1), rows shuffled. Open choices:
    x ~ N(0, I_d); basis entries N(0, 1/d) from ``function_seed`` (shared by all splits). Then
    Var(y_j) = L, i.e. 32 at L = 32: the paper's non-learning baselines sit at MSE ~ 30.8, which is
    what predicting 0 gives, so this scale matches the paper's."""
    _check_common(n_sets, d, 1, 1, seed)
    _check_int("L", L, 1)
    _check_int("k_support", k_support, 1)
    _check_int("function_seed", function_seed, 0)
    _check_normalise(normalise, allowed=False)
    opts = _opts(locals())
    M = meta_basis(L, d, function_seed)
    rng = np.random.default_rng(seed)
    sets, y = [], []
    for _ in range(n_sets):
        A = np.einsum("l,lij->ij", rng.normal(size=L), M)  # (d, d)
        xs = rng.normal(size=(k_support, d))
        xq = rng.normal(size=d)
        support = np.concatenate([xs, xs @ A.T, np.ones((k_support, 1))], 1)  # (K, 2d+1)
        query = np.concatenate([xq, np.zeros(d + 1)])[None]  # (1, 2d+1)
        s = np.concatenate([support, query])
        sets.append(_to32(s[rng.permutation(len(s))]))
        y.append(_to32(A) @ _to32(xq))
    return _finish("meta_regression", opts, seed, sets, y, k_support + 1)
