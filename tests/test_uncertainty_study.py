"""mzlite.repro.experiments.uncertainty_study: the uncertainty cells' metrics, against a
recomputation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats as sps

from mzlite.analysis.uncertainty import fit_sigma_affine, ihw_uncertainty
from mzlite.nn import build_model
from mzlite.repro import experiments as ex
from mzlite.repro.experiments import uncertainty_study as U
from mzlite.tasks import make_splits

SMALL = dict(d_model=16, n_heads=2, d_ff=32, n_inducing=4, n_enc=1)


@pytest.fixture(scope="module")
def data():
    return make_splits("chamfer_matching", 32, 48, 60, seed=0)


def test_ihw_metrics_match_a_recomputation(data):
    _, val, test = data
    torch.manual_seed(0)
    mz = build_model("mz_med", val.d_in, device="cpu", **SMALL)
    out = U.uncertainty_metrics("ihw", [mz], val, test)
    m, det = out["metrics"], out["detail"]
    pred, u = (
        t.double().reshape(len(test), -1)[:, 0] for t in ihw_uncertainty(mz, test.x, test.mask)
    )
    y = test.y[:, 0].double()
    err = (y - pred).abs().numpy()
    assert m["unc_mse"] == pytest.approx(float(((y - pred) ** 2).mean()), rel=1e-9)
    assert m["unc_spearman"] == pytest.approx(sps.spearmanr(u.numpy(), err).statistic, abs=1e-9)
    assert m["unc_pearson"] == pytest.approx(sps.pearsonr(u.numpy(), err).statistic, abs=1e-9)
    a, b = det["sigma_affine"]
    pv, uv = (t.double().reshape(len(val), -1)[:, 0] for t in ihw_uncertainty(mz, val.x, val.mask))
    assert (a, b) == pytest.approx(fit_sigma_affine(uv, val.y[:, 0].double() - pv))
    s = a * u.numpy() + b
    nll = np.mean(0.5 * np.log(2 * math.pi * s**2) + (y.numpy() - pred.numpy()) ** 2 / (2 * s**2))
    assert m["nll"] == pytest.approx(nll, rel=1e-9)
    order = np.argsort(u.numpy(), kind="stable")
    lo, hi = np.array_split(order, 5)[0], np.array_split(order, 5)[-1]
    assert m["bin_err_ratio"] == pytest.approx(err[hi].mean() / err[lo].mean(), rel=1e-9)
    assert 0 <= m["ece"] <= 1 and det["models"] == 1 and det["passes"] == 1


def test_ensemble_and_mc_dropout(data):
    _, val, test = data
    members = []
    for k in range(3):
        torch.manual_seed(k)
        members.append(build_model("st", val.d_in, device="cpu", **SMALL))
    ens = U.uncertainty_metrics("ensemble", members, val, test)["metrics"]
    with torch.no_grad():
        for m in members:
            m.eval()
        preds = torch.stack([m(test.x, test.mask)[:, 0].double() for m in members])
    mean = preds.mean(0)
    assert ens["unc_mse"] == pytest.approx(float(((test.y[:, 0].double() - mean) ** 2).mean()))
    mc = U.uncertainty_metrics("mc_dropout", members[:1], val, test, seed=3)
    assert mc["detail"]["passes"] == U.PASSES and mc["metrics"]["nll"] > 0
    with pytest.raises(ValueError, match="method must be one of"):
        U.uncertainty_metrics("bayes", members, val, test)


def test_the_cells_and_their_price():
    spec = ex.get_table(U.TABLE)
    assert {c.id for c in spec.cells} >= set(U.METHODS) and spec.chapter == "08_uncertainty"
    assert U.models_per_job(U.TABLE, "B-ensemble-st") == U.MEMBERS
    assert U.models_per_job(U.TABLE, "B-ihw-mz_full") == 1
    assert U.models_per_job("tab:meb", "B-ensemble-st") == 1
    assert ex.aliases(U.TABLE, "cpu-annealed") == {}  # every method runs its own jobs
    job = ex.job("tab:meb", "d8-st", "smoke")
    assert U.job_metrics(job, None, None, None) == {}
