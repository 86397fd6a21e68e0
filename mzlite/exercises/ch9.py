"""Chapter 9 exercises ("Reproduction scorecard"): every reference answer is computed by the
verdict rule of :mod:`mzlite.analysis.verdicts` (Welch's test, its tie threshold), the rule the
scorecard applies (tests/test_exercises.py checks that they agree). The exercise on the live
scorecard (ch9.not_run) reads the committed results, so it lives in the reproduction layer:
:mod:`mzlite.repro.exercises`."""

from __future__ import annotations

import numpy as np

from ..analysis.verdicts import ALPHA, TIE, VERDICTS, beats_verdict, welch
from .checker import exercise, student_inputs

BASELINES = ("b0", "b1", "b2")


# How far every quantity the verdict compares stays from its threshold: the inputs are rounded
# to 4 decimals, and a student's float32 or differently ordered sum must reach the same verdict.
GAP_MARGIN = 1e-3  # R^2 (a mean of three 4-decimal numbers moves by < 1e-4)
P_MARGIN = 5e-3  # Welch's p


def _rule_inputs(inputs: dict) -> dict:
    """What the verdict rule and its named slips read from one column's seeds: ``gap`` (MZ
    minus the best baseline), ``gap_to_mean`` (MZ minus the baselines' mean: the slip),
    ``gaps`` (MZ minus each baseline), ``p`` (Welch's p of MZ against each baseline),
    ``p_max`` and ``p_better`` (the smallest p of a baseline more than TIE above MZ, None if
    none is)."""
    mean = {k: float(np.mean(v)) for k, v in inputs.items()}
    p = [welch(inputs["mz"], inputs[b])["p"] for b in BASELINES]
    ahead = [welch(inputs[b], inputs["mz"])["p"] for b in BASELINES if mean[b] - mean["mz"] > TIE]
    return {
        "gap": mean["mz"] - max(mean[b] for b in BASELINES),
        "gap_to_mean": mean["mz"] - float(np.mean([mean[b] for b in BASELINES])),
        "gaps": [mean["mz"] - mean[b] for b in BASELINES],
        "p": p,
        "p_max": max(p),
        "p_better": min(ahead) if ahead else None,
    }


def _clear_of_thresholds(inputs: dict) -> bool:
    """No gap within GAP_MARGIN of +-TIE and no Welch p within P_MARGIN of ALPHA: a draw on a
    boundary would make the right verdict depend on rounding."""
    q = _rule_inputs(inputs)
    gaps = [*q["gaps"], q["gap"], q["gap_to_mean"]]
    return all(abs(abs(g) - TIE) > GAP_MARGIN for g in gaps) and all(
        abs(p - ALPHA) > P_MARGIN for p in q["p"]
    )


def _draw_claim(g: np.random.Generator) -> dict:
    """One column's results, redrawn (from the same generator, so a seed still fixes them) until
    no quantity of the verdict rule sits on its threshold: ties and boundary cases are excluded
    by construction."""
    while True:
        mz = float(g.uniform(0.3, 0.9))
        means = {"mz": mz, **{b: mz + float(g.normal(-0.015, 0.015)) for b in BASELINES}}
        spread = float(g.uniform(0.002, 0.012))
        inputs = {
            k: [round(m + float(e), 4) for e in g.normal(0.0, spread, 3)] for k, m in means.items()
        }
        if _clear_of_thresholds(inputs):
            return inputs


def claim_inputs(seed: int = 0) -> dict:
    """Test R^2 of three seeds each, all converged, in one column of a table: MZAttn-Full
    (``"mz"``) and three baselines (``"b0"``..``"b2"``), drawn from the notebook's ``seed`` so
    that the gap lands near the tie threshold and the test near significance."""
    return student_inputs(9, seed, _draw_claim)


def _verdict_of(inputs: dict, profile: str) -> str:
    """The scorecard's verdict on "MZAttn-Full beats the best baseline" for these seeds (three
    converged seeds per model, one protocol) trained under ``profile``."""
    if profile == "smoke":
        return "pipeline only"  # a smoke run's numbers mean nothing, whatever they say
    q = _rule_inputs(inputs)
    return beats_verdict(q["gap"], q["p_max"], q["p_better"])


def _verdict_answer(answer) -> str:
    if not isinstance(answer, str) or answer.strip() not in VERDICTS:
        raise ValueError(f"answer with one of {list(VERDICTS)}")
    return answer.strip()


@exercise(
    "ch9.verdict",
    hint=f"Gap = mean of MZ minus the mean of the BEST baseline. Holds: gap > {TIE} and Welch's "
    f"p < {ALPHA} against every baseline; a tie (|gap| <= {TIE}) holds partly; 'does not hold "
    "here' needs a baseline significantly better; any other gap is not decided.",
    per_seed=True,
)
def _verdict(answer, seed):
    inputs = claim_inputs(seed)
    ref = _verdict_of(inputs, "cpu-annealed")
    got = _verdict_answer(answer)
    if got == ref:
        return True, repr(getattr(ref, "value", ref))  # the label as the student wrote it
    q = _rule_inputs(inputs)
    gap, p_max, p_better = q["gap"], q["p_max"], q["p_better"]
    slips = [  # the chapter's rule with a slip in one of its parts
        (
            beats_verdict(q["gap_to_mean"], p_max, p_better),
            "the gap to the MEAN of the baselines: the claim is against the best one",
        ),
        (
            beats_verdict(gap, 0.0, p_better),
            "'holds' without Welch's test: it also needs p < 0.05 against every baseline",
        ),
        (
            beats_verdict(gap, p_max, 0.0 if gap < -TIE else None),
            "'does not hold' without Welch's test: it needs a baseline significantly better",
        ),
    ]
    for wrong, name in slips:
        if got == wrong != ref:
            return False, f"that is {name}"
    return False, "not the scorecard's verdict for these seeds"


def smoke_inputs(seed: int = 0) -> tuple[dict, str]:
    """``(results, profile)`` of exercise ch9.smoke for the notebook's ``seed``: test R^2 of a
    column like exercise 1's and the profile that trained them. Seed 0: exercise 1's numbers
    from a ``smoke`` run; else numbers of the student's own from ``smoke`` or from
    ``cpu-annealed`` (the verdict depends on both)."""
    if seed == 0:
        return claim_inputs(0), "smoke"
    g = np.random.default_rng([9, 2, seed])
    profile = "smoke" if g.random() < 0.5 else "cpu-annealed"
    return _draw_claim(g), profile


@exercise(
    "ch9.smoke",
    hint="What can a 3-epoch run on 128 sets say about the paper? And what do converged runs of "
    "three seeds say (exercise 1's rule)?",
    per_seed=True,
)
def _smoke(answer, seed):
    inputs, profile = smoke_inputs(seed)
    ref = _verdict_of(inputs, profile)
    got = _verdict_answer(answer)
    if got == ref:
        why = (
            "smoke results only show that the pipeline runs, whatever their numbers"
            if profile == "smoke"
            else "converged runs of three seeds: the rule of exercise 1 applies"
        )
        return True, f"{ref!r}: {why}"
    if profile == "smoke" and got == _verdict_of(inputs, "cpu-annealed"):
        return False, "that is the verdict of converged runs: these come from a smoke run"
    if profile != "smoke" and got == "pipeline only":
        return False, f"these runs are {profile}'s, not smoke: the scorecard judges them"
    return False, f"not the verdict the scorecard gives these {profile} results"
