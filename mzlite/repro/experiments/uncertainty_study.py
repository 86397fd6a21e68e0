"""The paper's uncertainty comparison as runnable cells: IHW against MC-Dropout and a deep ensemble.

Tables tab:uncertainty, tab:unc-comparison and tab:ece-nll come from one set of models on set
matching (Task B): MZAttn-Full read by its interval-hull width (IHW, one pass), a Set Transformer
read by MC-Dropout (30 passes) and a deep ensemble of five Set Transformers, the cells of
``tab:ece-nll``. After training such a job, ``job_metrics`` returns the method's metrics on the
validation and test splits, which the runner adds to the result's test metrics:

- ``unc_mse``: the method's test MSE (the MC mean, the ensemble mean, MZ's prediction);
- ``unc_spearman``, ``unc_pearson``: correlation of the uncertainty ``u`` with ``|error|``
  (tab:unc-comparison);
- ``ece``, ``nll``: interval-coverage ECE and Gaussian NLL with ``sigma = a u + b`` fitted on the
  validation residuals (``analysis.uncertainty.fit_sigma_affine``; the paper does not say how it
  made a sigma, nor define its regression ECE: chapter 8), and ``nll_const``, the NLL of the same
  predictions with a constant sigma (an uncertainty that does not beat it carries nothing);
- ``bin_err_ratio``: mean ``|error|`` of the highest-``u`` fifth of the test sets over that of
  the lowest fifth (tab:uncertainty's bins; ``uncertainty["bins"]`` holds all five).

The ensemble cell's job trains its five members itself (seeds: the job's, then
``ENSEMBLE_SEED0 + 4 seed + k``), so each of its seeds is one ensemble and statistics over seeds
apply to every method alike; ``models_per_job`` tells ``plan`` its price.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from mzlite.analysis import uncertainty as U
from mzlite.train import fit

TABLE = "tab:ece-nll"
PASSES = 30  # MC-Dropout passes (tab:ece-nll)
MEMBERS = 5  # deep-ensemble members (tab:ece-nll)
ENSEMBLE_SEED0 = 1000  # members 2..5 of the ensemble of seed s: 1000 + 4 s + k, k = 0..3
N_BINS = 5  # tab:uncertainty
# cell id -> (method, the paper's row)
METHODS = {
    "B-ihw-mz_full": ("ihw", "MZAttn (IHW)"),
    "B-mcdropout-st": ("mc_dropout", "MC-Dropout"),
    "B-ensemble-st": ("ensemble", "Deep Ensemble"),
}


def models_per_job(table: str, cell_id: str) -> int:
    """How many models one (cell, seed) job of ``table`` trains: the ensemble's members, else 1."""
    return MEMBERS if table == TABLE and METHODS.get(cell_id, ("",))[0] == "ensemble" else 1


def _estimates(method: str, models: list, split, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(prediction (N,), uncertainty u (N,)) of ``method`` on ``split`` in the targets' units
    (the models carry their target scaling: ``mzlite.train.fit``)."""
    dev = next(models[0].parameters()).device
    x, mask = split.x.to(dev), split.mask.to(dev)
    if method == "ihw":
        pred, u = U.ihw_uncertainty(models[0], x, mask)
    elif method == "mc_dropout":
        pred, u = U.mc_dropout_predict(models[0], x, mask, passes=PASSES, seed=seed)
    else:
        pred, u = U.ensemble_predict(models, x, mask)
    pred, u = pred.reshape(len(split), -1)[:, 0], u.reshape(len(split), -1)[:, 0]
    return pred.detach().double().cpu(), u.detach().double().cpu()


def uncertainty_metrics(method, models, val, test, seed: int = 0) -> dict:
    """The metrics of the module doc for ``method`` ("ihw", "mc_dropout", "ensemble") of trained
    ``models`` (one, or the ensemble's members) on the ``val`` and ``test`` splits:
    ``{"metrics": {...}, "detail": {...}}``."""
    if method not in {m for m, _ in METHODS.values()}:
        raise ValueError(f"method must be one of ihw, mc_dropout, ensemble, got {method!r}")
    (pv, uv), (pt, ut) = (_estimates(method, models, s, seed) for s in (val, test))
    yv, yt = val.y[:, 0].double(), test.y[:, 0].double()
    a, b = U.fit_sigma_affine(uv, yv - pv)
    sigma = a * ut + b
    _, b0 = U.fit_sigma_affine(torch.zeros_like(uv), yv - pv)
    err = (yt - pt).abs()
    bins = U.binned_errors(ut, yt - pt, N_BINS)
    metrics = {
        "unc_mse": float(((yt - pt) ** 2).mean()),
        "unc_spearman": U.spearman(ut, err),
        "unc_pearson": U.pearson(ut, err),
        "ece": U.regression_ece(yt, pt, sigma),
        "nll": U.gaussian_nll(yt, pt, sigma),
        "nll_const": U.gaussian_nll(yt, pt, torch.full_like(pt, b0)),
        "bin_err_ratio": bins[-1]["abs_err_mean"] / bins[0]["abs_err_mean"],
    }
    detail = {"method": method, "sigma_affine": [a, b], "sigma_const": b0, "bins": bins,
              "passes": PASSES if method == "mc_dropout" else 1, "models": len(models)}  # fmt: skip
    return {"metrics": metrics, "detail": detail}


def job_metrics(job, model, splits, cfg, build=None) -> dict:
    """After training ``model`` for a job of ``TABLE``: its method's ``uncertainty_metrics``,
    the ensemble's other members trained first (``build``: the runner's ``build_cell_model``,
    ``cfg`` at their seeds); ``{}`` for a job of any other table."""
    if job.table != TABLE or job.cell.id not in METHODS:
        return {}
    (tr, va, te), method = splits, METHODS[job.cell.id][0]
    models, t0 = [model], time.perf_counter()
    if method == "ensemble":
        dev = next(model.parameters()).device
        for k in range(MEMBERS - 1):
            seed = ENSEMBLE_SEED0 + (MEMBERS - 1) * job.seed + k
            member = build(job.cell, tr.d_in, tr.d_out, seed, dev)
            fit(member, tr, va, replace(cfg, seed=seed), progress=False)
            models.append(member)
    out = uncertainty_metrics(method, models, va, te, seed=job.seed)
    out["detail"]["members_wall_s"] = time.perf_counter() - t0
    return out
