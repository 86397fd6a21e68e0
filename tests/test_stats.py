"""mzlite.repro.experiments.stats: convergence of one run, Welch's test and the bootstrap interval
over
seeds."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from mzlite.repro.experiments import stats


def _hist(val_loss, stop, patience=15, cap=200):
    finite = [(v, i) for i, v in enumerate(val_loss) if v is not None]
    best = min(finite)[1] + 1
    return {"val_loss": val_loss, "stop_reason": stop, "best_epoch": best,
            "config": {"patience": patience, "epochs": cap}}  # fmt: skip


def test_early_stopped_run_converged_with_its_numbers():
    h = _hist([1.0, 0.5, 0.4] + [0.45] * 15, "early_stopping")
    c = stats.convergence(h)
    assert c["converged"] and c["improvement_last_k"] == 0.0 and c["k"] == 15
    assert c["best_epoch"] == 3 and c["epochs_run"] == 18 and "early stopping" in c["rule"]


def test_capped_run_still_improving_did_not_converge():
    val = [1.0 / (1 + e) for e in range(30)]  # still falling at the cap
    c = stats.convergence(_hist(val, "completed", patience=10, cap=30))
    assert not c["converged"]
    assert c["improvement_last_k"] == pytest.approx((val[19] - val[29]) / val[19])
    assert ">=" in c["rule"]


def test_capped_run_on_a_plateau_converged():
    val = [1.0, 0.5] + [0.3 - 1e-6 * e for e in range(28)]  # 0.01 % over the last 10 epochs
    c = stats.convergence(_hist(val, "completed", patience=10, cap=30))
    assert c["converged"] and c["improvement_last_k"] < stats.CONVERGENCE_TOL


def test_diverged_or_too_short_runs_did_not_converge():
    assert not stats.convergence(_hist([1.0, 0.9, None], "diverged"))["converged"]
    short = stats.convergence(_hist([1.0, 0.9, 0.8], "completed", patience=None, cap=3))
    assert not short["converged"] and "too short" in short["rule"]
    assert short["k"] == stats.CONVERGENCE_WINDOW


def test_loss_spikes_name_the_epochs_above_twice_the_best_before():
    # the shape of a real run: a best at epoch 7, a jump to 7x it, a slow recovery
    val = [1.28, 1.18, 1.01, 0.82, 0.97, 0.85, 0.54, 3.84, 2.80, 1.16, 0.93, 0.55]
    s = stats.loss_spikes({"val_loss": val})
    assert s["spiked"] and s["epochs"] == [8, 9, 10]
    assert s["worst_ratio"] == pytest.approx(3.84 / 0.54)
    calm = stats.loss_spikes({"val_loss": [1.0, 0.5, 0.9, 0.4, 0.79]})  # rises, never > 2x
    assert not calm["spiked"] and calm["epochs"] == [] and calm["worst_ratio"] is None
    assert stats.loss_spikes({"val_loss": [1.0, 0.5, None]})["epochs"] == [3]  # non-finite
    assert not stats.loss_spikes(None)["spiked"]  # closed form
    # the footnote's factor is the rule: twice the best is not a spike, just above it is
    assert stats.SPIKE_FACTOR == s["factor"] == 2.0
    assert stats.loss_spikes({"val_loss": [1.0, 0.5, 1.0]})["epochs"] == []
    assert stats.loss_spikes({"val_loss": [1.0, 0.5, 1.01]})["epochs"] == [3]


def test_closed_form_results_count_as_converged():
    assert stats.convergence(None)["converged"]
    assert stats.result_convergence({"history": None})["converged"]
    stored = {"convergence": {"converged": False, "rule": "x"}, "history": None}
    assert stats.result_convergence(stored)["converged"] is False


def test_welch_matches_scipy_and_needs_two_values_a_side():
    a, b = [0.71, 0.69, 0.74], [0.02, 0.05, 0.01, 0.03]
    w = stats.welch(a, b)
    ref = sps.ttest_ind(a, b, equal_var=False)
    assert w["p"] == pytest.approx(ref.pvalue) and w["t"] == pytest.approx(ref.statistic)
    assert w["diff"] == pytest.approx(sum(a) / 3 - sum(b) / 4)
    assert 2 < w["df"] < 5  # Welch-Satterthwaite degrees of freedom
    one = stats.welch([0.7], b)
    assert one["p"] is None and one["diff"] == pytest.approx(0.7 - sum(b) / 4)
    assert stats.welch([1.0, 1.0], [0.0, 0.0])["p"] == 0.0
    assert stats.welch([1.0, 1.0], [1.0, 1.0])["p"] == 1.0
    # overlapping samples: no evidence of a difference
    assert stats.welch([0.5, 0.6, 0.7], [0.55, 0.65, 0.6])["p"] > 0.5


def _hand_welch_df(a, b):
    """The Welch-Satterthwaite degrees of freedom as stats.welch wrote them before scipy."""
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    return (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))


@pytest.mark.parametrize(
    "a, b",
    [([0.71, 0.69, 0.74], [0.02, 0.05, 0.01, 0.03]), ([0.5, 0.6, 0.7], [0.55, 0.65, 0.6]),
     ([0.81, 0.8, 0.79, 0.83, 0.78], [0.7, 0.9])],
)  # fmt: skip
def test_scipy_gives_the_numbers_of_the_hand_formulas(a, b):
    assert stats.welch(a, b)["df"] == pytest.approx(_hand_welch_df(a, b), rel=1e-12)


def test_summarise_drops_non_finite_values():
    s = stats.summarise([1.0, None, math.nan, 3.0])
    assert s == {"mean": 2.0, "std": pytest.approx(math.sqrt(2)), "n": 2, "values": [1.0, 3.0]}
    assert stats.summarise([]) == {"mean": None, "std": None, "n": 0, "values": []}


def test_fit_check_separates_stopped_from_fitted():
    base = {"config": {"patience": 2, "normalize_targets": True}, "stop_reason": "early_stopping",
            "val_loss": [1.0, 0.9, 0.95, 0.97], "best_epoch": 2}  # fmt: skip
    fitted = stats.convergence({**base, "train_loss": [1.0, 0.5, 0.4, 0.3]})
    assert fitted["stopped"] and fitted["fitted"] and fitted["converged"]
    assert fitted["fit_ratio"] == pytest.approx(0.3)
    stuck = stats.convergence({**base, "train_loss": [1.1, 1.0, 0.98, 0.95]})
    assert stuck["stopped"] and stuck["fitted"] is False and not stuck["converged"]
    assert stats.optimisation_failure(stuck) and not stats.optimisation_failure(fitted)
    assert "mean predictor" in stuck["rule"]
    # raw targets: the recorded variance is the yardstick; without it the fit is unknown
    raw = {**base, "config": {"patience": 2}, "train_loss": [9.0, 5.0]}
    assert stats.convergence({**raw, "train_target_var": 10.0})["fitted"] is True
    unknown = stats.convergence(raw)
    assert unknown["fitted"] is None and unknown["converged"]  # stopped; fit not known


def test_a_run_that_fitted_then_ended_at_the_mean_fell_back():
    """Fitted once, then its training loss ended at the mean predictor's: it fell back (shown
    beside its number); its convergence stands."""
    base = {"config": {"patience": 2, "normalize_targets": True}, "stop_reason": "early_stopping",
            "val_loss": [1.0, 0.8, 1.1, 1.1], "best_epoch": 2}  # fmt: skip
    fell = {**base, "train_loss": [1.0, 0.7, 1.2, 1.0]}
    assert stats.fell_back(fell) and stats.convergence(fell)["converged"]
    assert not stats.fell_back({**base, "train_loss": [1.0, 0.7, 0.6, 0.89]})  # still fitted
    assert not stats.fell_back({**base, "train_loss": [1.0, 0.95, 0.92, 1.0]})  # never fitted
    raw = {**base, "config": {"patience": 2}, "train_loss": [9.0, 5.0, 9.5]}
    assert stats.fell_back({**raw, "train_target_var": 10.0}) and not stats.fell_back(raw)
    assert not stats.fell_back({**fell, "config": {"task": "classification"}})
    assert not stats.fell_back(None)  # a closed form


def test_result_convergence_adds_the_fit_check_to_a_stored_verdict():
    history = {
        "config": {"patience": 2, "normalize_targets": True},
        "train_loss": [1.0, 0.99],
        "val_loss": [1.0, 1.1],
        "stop_reason": "early_stopping",
        "best_epoch": 1,
    }
    stored = {
        "converged": True,
        "rule": "stopped by early stopping",
        "stop_reason": "early_stopping",
    }
    out = stats.result_convergence({"convergence": stored, "history": history})
    assert out["stopped"] and out["fitted"] is False and not out["converged"]
