"""Statistics over seeds: did a run converge, and is one model better than another?

    from mzlite.repro.experiments import stats
    stats.convergence(result["history"])          # {"converged": True, "rule": ..., ...}
    stats.summarise([0.71, 0.69, 0.73])           # mean, sample std, n
    stats.welch([0.71, 0.69, 0.73], [0.02, 0.01, 0.03])   # Welch's t-test of a difference

A run *stopped* when early stopping ended it, or when it reached its epoch cap with its best
validation loss over the last ``k`` epochs (its patience, else ``CONVERGENCE_WINDOW``) lower than
the best before them by less than ``CONVERGENCE_TOL`` (relative). It *fitted* its training set
when its lowest training loss fell below ``FIT_THRESHOLD`` times the variance of its training
targets (the mean predictor's loss). It *converged* when it stopped and is not known to be
unfitted: one that stopped without fitting is an optimisation failure, which says nothing about
what the architecture can represent. A *spike* (``loss_spikes``) is an epoch whose validation
loss exceeds ``SPIKE_FACTOR`` times the lowest before it: it never changes a convergence.
``welch`` is the paper's two-sided Welch test: no test with fewer than two values a side.
"""

from __future__ import annotations

import math
import statistics

from mzlite.analysis.verdicts import ALPHA, TIE, welch  # noqa: F401 (re-exported: the rule)
from mzlite.analysis.verdicts import finite as _finite

CONVERGENCE_TOL = 1e-3  # relative improvement of the best val loss over the last k epochs
CONVERGENCE_WINDOW = 10  # k for runs without early stopping (patience None)
MIN_SEEDS = 3  # a verdict needs at least this many seeds per cell
SPIKE_FACTOR = 2.0  # a validation loss above this multiple of the best before it is a spike
FIT_THRESHOLD = 0.9  # fitted: lowest training loss below this fraction of the target variance
LEARNS = 0.05  # an R^2 at most this: the model predicts no better than the mean of the targets


def fit_check(history: dict | None) -> dict:
    """``{"fitted", "fit_ratio", "fit_rule"}`` (``fit_ratio``: lowest training loss / training
    target variance); ``history`` None: a closed form, fitted by construction."""
    if history is None:
        return {"fitted": True, "fit_ratio": None, "fit_rule": "closed form (no training)"}
    cfg = history.get("config") or {}
    if cfg.get("task", "regression") != "regression":
        return {"fitted": None, "fit_ratio": None, "fit_rule": "not judged for classification"}
    ratios = _train_ratios(history)
    if not ratios:
        unknown = "unknown: the result does not record its training-target variance"
        return {"fitted": None, "fit_ratio": None, "fit_rule": unknown}
    ratio = min(ratios)
    fitted = ratio < FIT_THRESHOLD
    sign, what = ("<", "fitted") if fitted else (">=", "never left the mean predictor")
    rule = f"lowest training loss {ratio:.3g} x the target variance ({sign} {FIT_THRESHOLD:g}: "
    return {"fitted": fitted, "fit_ratio": ratio, "fit_rule": f"{rule}{what})"}


def _train_ratios(history: dict) -> list[float]:
    """Each epoch's training loss / the training targets' variance (the mean predictor's loss);
    empty for classification and where the result does not record that variance."""
    cfg = history.get("config") or {}
    if cfg.get("task", "regression") != "regression":
        return []
    var = history.get("train_target_var")
    if var is None and cfg.get("normalize_targets"):
        var = 1.0  # standardised with the training split's own mean and std
    if var is None or not var > 0:
        return []
    return [v / float(var) for v in _finite(history.get("train_loss", []))]


def fell_back(history: dict | None) -> bool:
    """Whether a run's training loss, once below ``FIT_THRESHOLD`` times the target variance,
    ended at or above it: back to the mean predictor (as a rule, a rate too high for the model).
    Its convergence stands: the weights kept are its best epoch's."""
    ratios = _train_ratios(history or {})
    return bool(ratios) and min(ratios) < FIT_THRESHOLD <= ratios[-1]


def convergence(history: dict | None) -> dict:
    """Whether a run converged (module doc), with the numbers that decided it; ``history`` None:
    a closed form, converged by construction."""
    if history is None:
        closed = {"rule": "closed form (no training)", "stop_reason": "closed_form"}
        return {"converged": True, "stopped": True, **closed, **fit_check(None)}
    cfg = history.get("config") or {}
    patience = cfg.get("patience")
    k = int(patience) if patience else CONVERGENCE_WINDOW
    val = [math.inf if v is None else float(v) for v in history.get("val_loss", [])]
    n, stop = len(val), history.get("stop_reason", "running")
    out = {"stop_reason": stop, "epochs_run": n, "epoch_cap": cfg.get("epochs"),
           "best_epoch": history.get("best_epoch"), "patience": patience, "k": k,
           "tol": CONVERGENCE_TOL, "improvement_last_k": None}  # fmt: skip
    if n > k:
        before, after = min(val[: n - k]), min(val)
        if math.isfinite(before) and before > 0:
            out["improvement_last_k"] = max(0.0, (before - after) / before)
    if stop == "diverged":
        verdict, rule = False, "diverged (non-finite training loss)"
    elif stop == "early_stopping":
        verdict = True
        rule = f"stopped by early stopping: no new best validation loss in {patience} epochs"
    elif (rel := out["improvement_last_k"]) is None:
        verdict, rule = False, f"too short to judge: {n} epochs, needs more than k={k}"
    else:
        verdict = rel < CONVERGENCE_TOL
        rule = (f"reached {n} epochs ({stop}); best validation loss improved by {rel:.2%} over the "
                f"last {k} epochs ({'<' if verdict else '>='} {CONVERGENCE_TOL:.1%})")  # fmt: skip
    return _with_fit(out, bool(verdict), rule, fit_check(history))


def _with_fit(out: dict, stopped: bool, rule: str, fit: dict) -> dict:
    """``out`` with ``stopped``, the fit check and ``converged`` = stopped and not unfitted."""
    out.update(fit)
    out["stopped"] = stopped
    out["converged"] = stopped and fit["fitted"] is not False
    out["rule"] = rule if fit["fitted"] is not False else f"{rule}; {fit['fit_rule']}"
    return out


def optimisation_failure(conv: dict) -> bool:
    """A run that stopped without fitting its training set (see the module doc)."""
    return bool(conv.get("stopped", conv.get("converged"))) and conv.get("fitted") is False


def memorised(history: dict | None) -> bool | None:
    """Whether a run fitted its training set while its kept (best-epoch) weights predict the
    validation set no better than the mean (``val_r2 <= LEARNS``); None where it cannot tell."""
    if history is None:
        return None
    fitted, best = fit_check(history)["fitted"], history.get("best_epoch")
    metrics = history.get("val_metrics") or []
    if fitted is None or not best or best > len(metrics):
        return None
    r2 = metrics[best - 1].get("r2")
    return None if r2 is None else fitted and r2 <= LEARNS


def loss_spikes(history: dict | None) -> dict:
    """``{"spiked", "epochs", "worst_ratio", "factor"}``: the epochs (1-based) whose validation
    loss exceeds ``SPIKE_FACTOR`` times the lowest before them (a non-finite one after a finite
    one counts); a closed form (``history`` None) has none. One factor, so that the reports'
    footnote, which names it, is true of every count."""
    out = {"spiked": False, "epochs": [], "worst_ratio": None, "factor": SPIKE_FACTOR}
    best = math.inf
    for epoch, v in enumerate((history or {}).get("val_loss", []), start=1):
        v = math.inf if v is None else float(v)
        if math.isfinite(best) and best > 0:
            ratio = v / best if math.isfinite(v) else math.inf
            if ratio > SPIKE_FACTOR:
                out["epochs"].append(epoch)
                out["worst_ratio"] = max(out["worst_ratio"] or 0.0, ratio)
        best = min(best, v)
    out["spiked"] = bool(out["epochs"])
    return out


def result_convergence(result: dict) -> dict:
    """``convergence`` of a result JSON: its stored ``"convergence"``, else from its history."""
    if (stored := result.get("convergence")) is None:
        return convergence(result.get("history"))
    if "fitted" in stored:
        return stored
    # written before the fit check existed: its stop verdict, then the fit check
    return _with_fit(dict(stored), bool(stored["converged"]), stored.get("rule", ""),
                     fit_check(result.get("history")))  # fmt: skip


def summarise(values) -> dict:
    """``{"mean", "std", "n", "values"}`` of the finite ``values`` (sample std; None for fewer
    than two values, mean None for none)."""
    vals = _finite(values)
    return {"mean": statistics.fmean(vals) if vals else None,
            "std": statistics.stdev(vals) if len(vals) > 1 else None, "n": len(vals),
            "values": vals}  # fmt: skip


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """(mean, sample std) of ``summarise(values)``."""
    s = summarise(values)
    return s["mean"], s["std"]
