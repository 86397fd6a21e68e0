"""The verdict rule on numbers: does "A beats B" hold for these seeds?

A claim that one model beats another is decided by the gap between their mean test R^2 over
seeds and Welch's two-sided t-test (the paper's test): it *holds* when the gap passes the claim's
threshold and p < ``ALPHA`` against every compared model (*holds partly* while some compared
models have not run); a gap within ``TIE`` of zero is a tie, which *holds partly*; it *does not
hold here* only where a compared model is significantly better; a gap that no test backs, either
way, is *not decided*. Chapter 9 teaches this rule and its exercises check against it; the
reproduction scorecard (``mzlite.repro.experiments.scorecard``) applies it to every claim of the
paper, adding the verdicts that come from the evidence rather than the numbers: too few seeds,
unconverged runs or smoke results; a comparison in which no model learns the target; a focal
model that memorised its training set; runs that never fitted.
"""

from __future__ import annotations

import math
import statistics
from enum import StrEnum

__all__ = [
    "ALPHA", "TIE", "VERDICTS", "Label", "Reason", "beats_verdict", "finite", "holm", "rule",
    "welch",
]  # fmt: skip

ALPHA = 0.05  # significance level of every "A beats B" test
TIE = 0.01  # an R^2 gap this small counts as a tie
# Every label a claim can get (``mzlite.repro.experiments.engine.judge`` decides which):
# "does not hold here" needs a significantly better model of the comparison; a gap beyond a tie
# that no test backs is "not decided"; a comparison in which no model learns the target is its
# own outcome; so is a focal model that fitted its training set but whose kept weights predict
# no better than the mean ("memorised"); a run that never fitted decides nothing. "reproduced" is
# not a reading of the claim as stated: the pattern the paper reports showed, with complete cells,
# under the paper's protocol on the cells that show it (``Claim.pattern``), a narrower scope than
# the claim's (one PMA baseline of six, say), so it is never counted as "holds".


class Label(StrEnum):
    """A verdict's label. A member equals its words ("holds"), so a label compares with them."""

    HOLDS = "holds"
    REPRODUCED = "reproduced"
    PARTLY = "holds partly"
    FAILS = "does not hold here"
    NOT_DECIDED = "not decided"
    NO_MODEL_LEARNS = "no model learns it"
    MEMORISED = "memorised"
    OPTIMISATION_FAILURE = "optimisation failure"
    INSUFFICIENT = "insufficient evidence"
    NOT_RUN = "not run"
    PIPELINE_ONLY = "pipeline only"


VERDICTS = tuple(label.value for label in Label)


class Reason(StrEnum):
    """Why a verdict has its label: the rule that decided it, as a code."""

    THRESHOLDS = "thresholds"  # a claim on thresholds of the mean: they decided
    SIGNIFICANT = "significant"  # beats every compared model, each with p < ALPHA
    TIE = "tie"  # passes only the weaker test (a tie)
    INCOMPLETE = "incomplete"  # passes with some of its cells not run yet
    NOT_SIGNIFICANT = "not-significant"  # a gap no Welch test backs (after Holm's correction)
    REFUTED_BY_MODEL = "refuted-by-model"  # one compared model significantly better
    REFUTED_SO_FAR = "refuted-so-far"  # the cells run so far fail even the weaker test
    REFUTED_BY_BOUND = "refuted-by-bound"  # R^2 <= 1 leaves the claim no room
    CANNOT_HOLD = "cannot-hold"  # fails even the weaker test so far, no model significantly
    PART_FAILS = "part-fails"  # one part of an "at every L" claim does not hold
    PARTS = "parts"  # every part decided; the label combines them
    NO_MODEL_LEARNS = "no-model-learns"
    MEMORISED = "memorised"
    OPTIMISATION_FAILURE = "optimisation-failure"
    TOO_FEW_SEEDS = "too-few-seeds"
    UNCONVERGED = "unconverged"
    MIXED_PROTOCOLS = "mixed-protocols"
    PATTERN = "pattern"  # the paper's pattern shows under its protocol, on complete cells
    RANK_TEST = "rank-test"  # the transfer study's exact null test of ranks
    NOT_RUN = "not-run"
    PIPELINE_ONLY = "pipeline-only"


def finite(values) -> list[float]:
    """The finite floats of ``values`` (a run that diverged or never ran is None or NaN)."""
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def welch(a, b) -> dict:
    """Welch's two-sided t-test of mean(a) - mean(b) over seeds (``scipy.stats.ttest_ind`` with
    ``equal_var=False``).

    Returns ``{"diff", "t", "df", "p", "n_a", "n_b", "test"}``; ``t``/``df``/``p`` are None when a
    side has fewer than two finite values. Two samples with zero variance each: p is 0 when the
    means differ, 1 when they are equal (scipy returns NaN there, and a verdict needs a number)."""
    from scipy import stats as sps  # scipy's import costs ~0.3 s; only a test needs it

    xa, xb = finite(a), finite(b)
    out = {"test": "Welch t-test (two-sided)", "n_a": len(xa), "n_b": len(xb)}
    out["diff"] = statistics.fmean(xa) - statistics.fmean(xb) if xa and xb else None
    if len(xa) < 2 or len(xb) < 2:
        return {**out, "t": None, "df": None, "p": None}
    if statistics.variance(xa) + statistics.variance(xb) == 0:
        same = out["diff"] == 0
        return {**out, "t": None if same else math.copysign(math.inf, out["diff"]),
                "df": None, "p": 1.0 if same else 0.0}  # fmt: skip
    r = sps.ttest_ind(xa, xb, equal_var=False)
    return {**out, "t": float(r.statistic), "df": float(r.df), "p": float(r.pvalue)}


def rule(
    holds: bool,
    partly: bool,
    significant: bool = True,
    complete: bool = True,
    better: bool | None = None,
) -> Label:
    """The verdict from a claim's two tests on our value (``holds``: its threshold; ``partly``:
    its weaker one), whether the gap is ``significant`` (p < ``ALPHA`` against every compared
    model), whether every cell of the claim ran, and whether a compared model is significantly
    ``better``. ``better`` None: a claim on thresholds of the mean, which compares no models and
    which its thresholds alone decide."""
    if better is None:
        if holds:
            return Label.HOLDS if complete else Label.PARTLY
        return Label.PARTLY if partly else Label.FAILS
    if holds:
        return (Label.HOLDS if complete else Label.PARTLY) if significant else Label.NOT_DECIDED
    if partly:
        return Label.PARTLY  # a tie
    return Label.FAILS if better else Label.NOT_DECIDED


def beats_verdict(
    gap: float,
    p_max: float | None,
    p_better: float | None = None,
    *,
    tie: float = TIE,
    alpha: float = ALPHA,
) -> str:
    """The verdict on "A beats the best of the others" from ``gap`` (mean of A minus the mean of
    the best other), ``p_max`` (the largest Welch p of A against each other) and ``p_better``
    (the smallest Welch p among the others more than ``tie`` better than A; None: none is): "holds"
    for a gap beyond ``tie`` with ``p_max < alpha``, "holds partly" for a tie, "does not hold
    here" where another is significantly better, else "not decided"."""
    significant = p_max is not None and p_max < alpha
    better = p_better is not None and p_better < alpha
    return rule(gap > tie, gap >= -tie, significant, better=better)


def holm(p_values) -> list[float]:
    """Holm's step-down adjusted p-values of a family of tests, in the order given: sorted
    ascending, the i-th smallest (from 0) is multiplied by ``m - i``, made non-decreasing and
    capped at 1. Rejecting where the adjusted p < ALPHA controls the family-wise error rate."""
    ps = [float(p) for p in p_values]
    if any(not 0.0 <= p <= 1.0 for p in ps):
        raise ValueError(f"p_values must lie in [0, 1], got {ps}")
    m, out, running = len(ps), [0.0] * len(ps), 0.0
    for i, k in enumerate(sorted(range(m), key=ps.__getitem__)):
        running = max(running, min(1.0, (m - i) * ps[k]))
        out[k] = running
    return out
