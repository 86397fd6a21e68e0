"""mzlite.analysis.uncertainty against scipy and hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from mzlite.analysis import uncertainty as U
from mzlite.nn import build_model


def test_correlations_match_scipy_with_ties():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 5, size=40).astype(float)  # many ties
    b = a + rng.normal(size=40)
    assert U.spearman(a, b) == pytest.approx(stats.spearmanr(a, b).statistic, abs=1e-12)
    assert U.pearson(a, b) == pytest.approx(stats.pearsonr(a, b).statistic, abs=1e-12)
    assert U.spearman([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == pytest.approx(-1.0)
    assert math.isnan(U.pearson([1.0, 1.0], [1.0, 2.0]))


def test_gaussian_nll_matches_scipy():
    rng = np.random.default_rng(1)
    y, mu, s = rng.normal(size=20), rng.normal(size=20), rng.uniform(0.5, 2, size=20)
    assert U.gaussian_nll(y, mu, s) == pytest.approx(-stats.norm.logpdf(y, mu, s).mean(), abs=1e-12)
    with pytest.raises(ValueError, match="sigma"):
        U.gaussian_nll(y, mu, -s)


def test_coverage_and_ece_by_hand():
    # residuals 0.5, 1.5, 3.0 with sigma 1: the 68.27 % interval (z = 1) holds one of three
    y, mu, s = [0.5, 1.5, -3.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]
    p = 2 * stats.norm.cdf(1.0) - 1
    lv, obs = U.coverage_curve(y, mu, s, levels=[p, 0.99])
    assert obs.tolist() == pytest.approx([1 / 3, 2 / 3])  # z(0.99) = 2.576 holds 0.5 and 1.5
    assert U.regression_ece(y, mu, s, levels=[p, 0.99]) == pytest.approx(
        (abs(1 / 3 - p) + abs(2 / 3 - 0.99)) / 2
    )
    # a calibrated Gaussian predictor has a small ECE
    rng = np.random.default_rng(2)
    sig = rng.uniform(0.5, 3, size=20000)
    yy = rng.normal(0, sig)
    assert U.regression_ece(yy, np.zeros_like(yy), sig) < 0.01
    with pytest.raises(ValueError, match="levels"):
        U.coverage_curve(y, mu, s, levels=[1.2])


def test_fit_sigma_affine_recovers_heteroscedastic_noise():
    rng = np.random.default_rng(3)
    u = rng.uniform(0, 4, size=20000)
    err = rng.normal(0, 0.5 * u + 0.2)
    a, b = U.fit_sigma_affine(u, err)
    assert a == pytest.approx(0.5, abs=0.03) and b == pytest.approx(0.2, abs=0.03)
    # the fit minimises the NLL: perturbing it makes the NLL worse
    base = U.gaussian_nll(err, np.zeros_like(err), a * u + b)
    for da, db in [(0.05, 0), (-0.05, 0), (0, 0.05), (0, -0.05)]:
        assert U.gaussian_nll(err, np.zeros_like(err), (a + da) * u + b + db) > base
    with pytest.raises(ValueError, match="u must be >= 0"):
        U.fit_sigma_affine(-u, err)


def test_binned_errors_by_hand():
    u = [5.0, 1.0, 3.0, 2.0, 4.0, 0.0]
    err = [-6.0, 2.0, 4.0, 3.0, 5.0, -1.0]
    rows = U.binned_errors(u, err, n_bins=3)
    assert [r["count"] for r in rows] == [2, 2, 2]
    assert [r["u_mean"] for r in rows] == [0.5, 2.5, 4.5]
    assert [r["abs_err_mean"] for r in rows] == [1.5, 3.5, 5.5]


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match="b must have the shape"):
        U.pearson([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"\(N,\)"):
        U.spearman(np.zeros((3, 2)), np.zeros((3, 2)))


def test_estimators_on_tiny_models():
    torch.manual_seed(0)
    x = torch.randn(6, 5, 4)
    mask = torch.ones(6, 5, dtype=torch.bool)
    mask[0, 3:] = False
    kw = dict(d_model=8, n_heads=2, d_ff=8, n_inducing=2, n_enc=1)
    mz = build_model("mz_slim", 4, device="cpu", seed=0, **kw)
    pred, ihw = U.ihw_uncertainty(mz, x, mask, batch_size=4)
    det = mz.inspect(x, mask)
    G = det.pooled.generators  # (B, k, n_g, d)
    assert torch.allclose(ihw, G.abs().sum(dim=(1, 2, 3)))  # sum_g ||G_g||_1 by hand
    assert torch.allclose(pred, mz.eval()(x, mask))
    st = build_model("standard", 4, device="cpu", seed=0, **kw)
    mean, std = U.mc_dropout_predict(st, x, mask, passes=5, seed=1, batch_size=4)
    assert mean.shape == std.shape == (6, 1) and bool((std > 0).all())
    st.eval()
    again = U.mc_dropout_predict(st, x, mask, passes=5, seed=1, batch_size=4)
    assert torch.allclose(mean, again[0]) and not st.training  # seeded, mode restored
    members = [build_model("standard", 4, device="cpu", seed=s, **kw) for s in range(3)]
    mean, std = U.ensemble_predict(members, x, mask)
    outs = torch.stack([m.eval()(x, mask) for m in members])
    assert torch.allclose(mean, outs.mean(0)) and torch.allclose(std, outs.std(0, unbiased=False))
    with pytest.raises(ValueError, match="dropout"):
        U.mc_dropout_predict(build_model("standard", 4, device="cpu", dropout=0.0, **kw), x)
    assert U.time_per_prediction(lambda: None, 10, repeats=2) >= 0
