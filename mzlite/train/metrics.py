"""The metrics every result reports: MSE, MAE and R^2 for regression, accuracy and cross-entropy
for classification, computed in float64."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def regression_metrics(pred: torch.Tensor, y: torch.Tensor) -> dict:
    """MSE, MAE (both averaged over samples and outputs) and R^2, computed in float64.

    R^2 is ``1 - SSE/SST`` per output with SST taken around the *evaluated set's own* mean
    (sklearn's ``r2_score`` convention), then averaged over outputs (``multioutput=
    "uniform_average"``). An output with SST = 0 gives NaN. ``r2_per_output`` is added when
    there is more than one output."""
    if pred.shape != y.shape:
        raise ValueError(f"predictions have shape {tuple(pred.shape)} but targets {tuple(y.shape)}")
    p, t = pred.detach().double().cpu(), y.detach().double().cpu()  # (N, d_out)
    err = p - t
    sse = (err**2).sum(0)  # (d_out,)
    sst = ((t - t.mean(0)) ** 2).sum(0)  # (d_out,)
    r2 = torch.where(sst > 0, 1 - sse / sst.clamp_min(1e-300), torch.full_like(sst, math.nan))
    out = {
        "mse": float((err**2).mean()),
        "mae": float(err.abs().mean()),
        "r2": float(r2.mean()),
        "n": int(t.shape[0]),
    }
    if t.shape[1] > 1:
        out["r2_per_output"] = [float(v) for v in r2]
    return out


def classification_metrics(logits: torch.Tensor, y: torch.Tensor) -> dict:
    """Accuracy (fraction, not percent) and mean cross-entropy (nats) of logits ``(N, C)``."""
    logits, y = logits.detach().double().cpu(), y.detach().cpu()
    return {
        "accuracy": float((logits.argmax(1) == y).double().mean()),
        "cross_entropy": float(F.cross_entropy(logits, y)),
        "n": int(y.shape[0]),
    }
