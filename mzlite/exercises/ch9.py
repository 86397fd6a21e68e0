"""Chapter 9 exercises ("Reproduction scorecard"): every reference answer is computed by
:mod:`mzlite.scorecard` (its verdict rule, its tie threshold and the committed results)."""

from __future__ import annotations

import numpy as np

from ..scorecard import TIE, VERDICTS, Claim, judge, scorecard
from .checker import exercise


def claim_inputs(seed: int = 0) -> dict:
    """The ``cpu``-profile test R^2 of MZAttn-Full (``mz``) and of three baselines
    (``baselines``) in one column of a table, drawn from the notebook's ``seed`` so that the gap
    lands near the scorecard's tie threshold."""
    g = np.random.default_rng([9, seed])
    mz = round(float(g.uniform(0.3, 0.9)), 3)
    return {"mz": mz, "baselines": [round(mz + float(d), 3) for d in g.normal(-0.01, 0.015, 3)]}


def _beats_best(inputs: dict) -> Claim:
    """The scorecard's kind of claim "MZAttn-Full beats the best baseline" for those numbers."""
    cells = ("mz", "b0", "b1", "b2")
    return Claim(
        "exercise",
        "tab:main-results",
        f"MZAttn-Full beats the best baseline (R^2 gap > {TIE}; partly: a tie).",
        cells,
        lambda get: get("mz") - max(get(c) for c in cells[1:]),
        lambda v: v > TIE,
        lambda v: v >= -TIE,
    )


def _verdict_of(inputs: dict, profile: str) -> str:
    values = {"mz": inputs["mz"], **{f"b{i}": v for i, v in enumerate(inputs["baselines"])}}
    claim = _beats_best(inputs)
    return judge(claim, claim.expr(values.__getitem__), profile)


def _verdict_answer(answer) -> str:
    if not isinstance(answer, str) or answer.strip() not in VERDICTS:
        raise ValueError(f"answer with one of {list(VERDICTS)}")
    return answer.strip()


@exercise(
    "ch9.verdict",
    hint=f"Gap = MZ minus the BEST baseline; above {TIE}: holds; within {TIE} of zero: partly.",
    per_seed=True,
)
def _verdict(answer, seed):
    inputs = claim_inputs(seed)
    ref = _verdict_of(inputs, "cpu")
    gap = inputs["mz"] - max(inputs["baselines"])
    ok = _verdict_answer(answer) == ref
    return ok, (f"gap {gap:+.3f}: {ref!r}" if ok else "not the scorecard's verdict for that gap")


@exercise("ch9.smoke", hint="What can a 3-epoch run on 128 sets say about the paper?")
def _smoke(answer):
    ref = _verdict_of(claim_inputs(0), "smoke")
    ok = _verdict_answer(answer) == ref
    return ok, (
        f"{ref!r}: smoke results only show that the pipeline runs, whatever their numbers"
        if ok
        else "not the verdict the scorecard gives a smoke result"
    )


@exercise("ch9.not_run", hint="Count the rows of sc.rows whose 'verdict' is 'not run'.")
def _not_run(answer):
    ref = scorecard().counts()["not run"]
    ok = not isinstance(answer, bool) and int(answer) == answer == ref
    return ok, (
        f"{ref} claims have no cpu or full result yet" if ok else "not the number of 'not run' rows"
    )
