"""mzlite.analysis.agreement: chapter 7's comparison of a trained layer with the paper's
numbers, one rule per quantity, checked on its verdicts."""

from __future__ import annotations

import pytest

from mzlite.analysis.agreement import Agreement, inside, layer_agreement, within_factor


def test_within_factor_and_inside_are_closed_intervals():
    assert within_factor(2.0, 1.0) and within_factor(0.5, 1.0) and not within_factor(2.01, 1.0)
    assert within_factor(3.0, 1.0, k=3) and not within_factor(0.3, 1.0, k=3)
    assert inside(1.0, 1.0, 2.0) and inside(2.0, 1.0, 2.0) and not inside(2.5, 1.0, 2.0)
    with pytest.raises(ValueError, match="paper must be > 0"):
        within_factor(1.0, 0.0)
    with pytest.raises(ValueError, match="k must be >= 1"):
        within_factor(1.0, 1.0, k=0.5)


OURS = {"rel": (0.02, 0.05, 0.09), "flips": (1, 2, 4), "L": 8, "cos": 0.05, "cos_random": 0.06,
        "norms": (0.2, 0.5), "cv": 0.10, "ratio": 3.0, "active": 0.70, "gate_mean": 0.3,
        "p95": 1.5, "saturates": {4: True, 8: True}, "sublinear": None}  # fmt: skip
PAPER = {"rel": 5.0, "flips": 3, "n_gates": 8, "cos_bound": 0.1, "norms": (0.4, 0.9), "cv": 8.0,
         "ratio": 5.0, "threshold": 0.1, "active": 75.0, "gate_mean": 0.25, "p95": 2.0}  # fmt: skip


def test_layer_agreement_applies_each_rule():
    rows = layer_agreement(OURS, PAPER)
    assert all(isinstance(r, Agreement) for r in rows) and len(rows) == 11
    verdicts = [r.verdict for r in rows]
    assert verdicts == ["agrees"] * 10 + ["not run"]  # sublinear: not tested
    assert rows[0].rule == "paper value inside our p5-p95"
    changed = {**OURS, "rel": (0.06, 0.08, 0.1), "cos": 0.2, "norms": (0.95, 1.2), "cv": 0.2,
               "active": 0.5, "p95": 0.5, "saturates": {4: True, 8: False},
               "sublinear": True}  # fmt: skip
    by_quantity = {r.quantity: r for r in layer_agreement(changed, PAPER)}
    assert by_quantity["relative change ||dM||_F/||M_c||_F"].agrees is False  # 5% below p5
    assert by_quantity["mean |cos| between generators"].agrees is False
    assert by_quantity["generator norms ||M_l||_F"].agrees is False  # no overlap
    assert by_quantity["CV of generator norms"].agrees is False  # 20% > 2 x 8%
    assert by_quantity["gates active (|gamma| > 0.1)"].agrees is False  # 25 points off
    assert by_quantity["p95 |gamma|"].agrees is False
    assert by_quantity["effective rank saturates for L <= TDOF"].agrees is False
    sub = by_quantity["effective rank sublinear for L > TDOF"]
    assert (sub.verdict, sub.ours) == ("agrees", "yes")  # worded, as the other rows are
    assert set(rows[0].row()) == {"quantity", "paper", "ours", "verdict", "rule"}


def test_layer_agreement_names_what_is_missing():
    with pytest.raises(ValueError, match=r"ours lacks \['cv'\]"):
        layer_agreement({k: v for k, v in OURS.items() if k != "cv"}, PAPER)
