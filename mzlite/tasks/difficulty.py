"""How hard is a task really? A ridge regression on simple permutation-invariant set statistics."""

from __future__ import annotations

import numpy as np

from ._build import _check_choice
from .dataset import SetData


def set_features(data: SetData, features: str = "all") -> tuple[np.ndarray, list[str]]:
    """Permutation-invariant statistics of every set, ``(N, F)`` float64, and their names.

    "basic": n, RMS spread around the centroid, max distance to the centroid (the three statistics
    that give R^2 ~ 0.99 on raw MEB sets). "all": these plus the mean element norm and the per-
    dimension mean, std, min and max (4 d_in more). "size": the set's size alone, n and 1/n, and
    for two sets packed with a 0/1 type indicator as the last feature (Tasks B, D, F) the size of
    each part and their difference |n_0 - n_1|: what a model that can count learns without
    looking at a single point."""
    _check_choice("features", features, ("basic", "all", "size"))
    x = data.x.double().numpy()  # (N, n, d_in)
    m = data.mask.numpy()[..., None]  # (N, n, 1)
    cnt = m.sum(1)  # (N, 1)
    if features == "size":
        return _size_features(x, m[..., 0], cnt)
    mean = (x * m).sum(1) / cnt  # (N, d_in)
    dev = np.where(m, x - mean[:, None], 0.0)
    dist = np.sqrt((dev**2).sum(-1))  # (N, n) distance to the centroid (0 on padding)
    rms = np.sqrt((dist**2).sum(1, keepdims=True) / cnt)
    cols = [cnt, rms, dist.max(1, keepdims=True)]
    names = ["n", "rms_spread", "max_dist_to_centroid"]
    if features == "all":
        norm = np.where(m[..., 0], np.sqrt((x**2).sum(-1)), 0.0).sum(1, keepdims=True) / cnt
        std = np.sqrt((dev**2).sum(1) / cnt)
        mn = np.where(m, x, np.inf).min(1)
        mx = np.where(m, x, -np.inf).max(1)
        cols += [norm, mean, std, mn, mx]
        d = x.shape[2]
        names += ["mean_norm"] + [
            f"{s}_{j}" for s in ("mean", "std", "min", "max") for j in range(d)
        ]
    return np.concatenate(cols, 1), names


def _size_features(x: np.ndarray, m: np.ndarray, cnt: np.ndarray) -> tuple[np.ndarray, list]:
    cols, names = [cnt, 1.0 / cnt], ["n", "1/n"]
    last = x[..., -1][m]  # the last feature of every real element
    if x.shape[2] > 1 and last.size and np.isin(last, (0.0, 1.0)).all():  # a type indicator
        n1 = (np.where(m, x[..., -1], 0.0) == 1.0).sum(1, keepdims=True).astype(np.float64)
        n0 = cnt - n1
        cols += [n0, n1, np.abs(n0 - n1)]
        names += ["n_part0", "n_part1", "|n_part0 - n_part1|"]
    return np.concatenate(cols, 1), names


_ALPHAS = tuple(10.0**k for k in range(-6, 4))


def baseline_r2(
    data_train: SetData,
    data_test: SetData,
    *,
    features: str = "all",
    alphas=_ALPHAS,
) -> dict:
    """Test R^2 of a ridge regression on :func:`set_features` (standardised on train; the ridge
    strength picked from ``alphas`` by exact leave-one-out error on train). R^2 = 1 - SSE/SST per
    output (SST around the test mean), averaged over outputs. Returns {"r2", "r2_per_output",
    "alpha", "features", "n_train", "n_test"}. Regression tasks only."""
    for nm, dset in (("data_train", data_train), ("data_test", data_test)):
        if not isinstance(dset, SetData):
            raise TypeError(f"{nm} must be a SetData, got {type(dset).__name__}")
        if dset.is_classification:
            raise ValueError(f"{nm} has class labels; baseline_r2 is for regression targets")
    if data_train.d_in != data_test.d_in or data_train.y.shape[1] != data_test.y.shape[1]:
        raise ValueError("data_train and data_test must have the same d_in and d_out")
    Xtr, names = set_features(data_train, features)
    Xte, _ = set_features(data_test, features)
    keep = Xtr.std(0) > 1e-12  # constant columns (e.g. n for fixed-size tasks) carry nothing
    mu, sd = Xtr[:, keep].mean(0), Xtr[:, keep].std(0)
    Xtr, Xte = (Xtr[:, keep] - mu) / sd, (Xte[:, keep] - mu) / sd
    names = [n for n, k in zip(names, keep, strict=True) if k]
    ytr, yte = data_train.y.double().numpy(), data_test.y.double().numpy()
    ym = ytr.mean(0)
    # LOO residual of ridge: r_i / (1 - H_ii), with H from the SVD of the centred design
    U, s, Vt = np.linalg.svd(Xtr, full_matrices=False)
    Uy = U.T @ (ytr - ym)
    best = None
    for a in alphas:
        f = s**2 / (s**2 + a)
        fit = U @ (f[:, None] * Uy)
        h = (U**2 * f).sum(1) + 1.0 / len(Xtr)  # + 1/n: the intercept
        loo = (((ytr - ym - fit) / (1 - h)[:, None]) ** 2).mean()
        if best is None or loo < best[0]:
            best = (loo, a)
    a = best[1]
    coef = Vt.T @ ((s / (s**2 + a))[:, None] * Uy)  # (F, d_out)
    pred = Xte @ coef + ym
    sst = ((yte - yte.mean(0)) ** 2).sum(0)
    r2 = 1.0 - ((yte - pred) ** 2).sum(0) / np.where(sst > 0, sst, np.nan)
    return {
        "r2": float(np.nanmean(r2)),
        "r2_per_output": [float(v) for v in r2],
        "alpha": float(a),
        "features": names,
        "n_train": len(data_train),
        "n_test": len(data_test),
    }
