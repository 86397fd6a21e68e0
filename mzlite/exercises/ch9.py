"""Chapter 9 exercises ("Reproduction scorecard"): every reference answer is computed by
:mod:`mzlite.repro.experiments.scorecard` (its verdict rule ``judge``, its tie threshold) and
:mod:`mzlite.repro.experiments.stats` (Welch's test), or read from the committed results."""

from __future__ import annotations

import numpy as np

from ..repro.experiments import stats
from ..repro.experiments.scorecard import TIE, VERDICTS, Claim, judge, scorecard
from .checker import exercise, named_mistake, same_integer, student_inputs

BASELINES = ("b0", "b1", "b2")


def _draw_claim(g: np.random.Generator) -> dict:
    mz = float(g.uniform(0.3, 0.9))
    means = {"mz": mz, **{b: mz + float(g.normal(-0.015, 0.015)) for b in BASELINES}}
    spread = float(g.uniform(0.002, 0.012))
    return {k: [round(m + float(e), 4) for e in g.normal(0.0, spread, 3)] for k, m in means.items()}


def claim_inputs(seed: int = 0) -> dict:
    """Test R^2 of three seeds each, all converged, in one column of a table: MZAttn-Full
    (``"mz"``) and three baselines (``"b0"``..``"b2"``), drawn from the notebook's ``seed`` so
    that the gap lands near the tie threshold and the test near significance."""
    return student_inputs(9, seed, _draw_claim)


# The exercise's column as cells of a registered table: a Claim checks that its cells exist
_CELLS = {"mz": "A-mz_full", "b0": "A-st", "b1": "A-st_large", "b2": "A-deepsets"}


def _verdict_of(inputs: dict, profile: str) -> str:
    """The scorecard's verdict on "MZAttn-Full beats the best baseline" for these seeds."""
    mz, rivals = _CELLS["mz"], tuple(_CELLS[b] for b in BASELINES)
    claim = Claim(
        "exercise",
        "tab:main-results",
        f"MZAttn-Full beats the best baseline (R^2 gap > {TIE}, p < {stats.ALPHA}; partly: a tie).",
        (mz, *rivals),
        lambda get: get(mz) - max(get(b) for b in rivals),
        lambda v: v > TIE,
        lambda v: v >= -TIE,
        compare=(mz, rivals),
    )
    mean = {_CELLS[k]: float(np.mean(v)) for k, v in inputs.items()}
    p_max = max(stats.welch(inputs["mz"], inputs[b])["p"] for b in BASELINES)
    evidence = {"problems": [], "p_max": p_max}  # three converged seeds per cell, one protocol
    return judge(claim, claim.expr(mean.__getitem__), profile, evidence=evidence)


def _verdict_answer(answer) -> str:
    if not isinstance(answer, str) or answer.strip() not in VERDICTS:
        raise ValueError(f"answer with one of {list(VERDICTS)}")
    return answer.strip()


@exercise(
    "ch9.verdict",
    hint=f"Gap = mean of MZ minus the mean of the BEST baseline. Holds: gap > {TIE} and Welch's "
    f"p < {stats.ALPHA} against every baseline; else partly when the gap >= -{TIE}.",
    per_seed=True,
)
def _verdict(answer, seed):
    inputs = claim_inputs(seed)
    ref = _verdict_of(inputs, "cpu-converged")
    got = _verdict_answer(answer)
    if got == ref:
        return True, f"{ref!r}"
    mean = {k: float(np.mean(v)) for k, v in inputs.items()}
    gap = mean["mz"] - max(mean[b] for b in BASELINES)
    gap_to_mean = mean["mz"] - float(np.mean([mean[b] for b in BASELINES]))
    p_max = max(stats.welch(inputs["mz"], inputs[b])["p"] for b in BASELINES)

    def rule(g, p_ok):  # the chapter's rule with a slip in one of its parts
        return "holds" if g > TIE and p_ok else "holds partly" if g >= -TIE else VERDICTS[2]

    slips = [
        (
            rule(gap_to_mean, p_max < stats.ALPHA),
            "the gap to the MEAN of the baselines: the claim is against the best one",
        ),  # fmt: skip
        (
            rule(gap, True),
            "'holds' without Welch's test: it also needs p < 0.05 against every baseline",
        ),  # fmt: skip
    ]
    for wrong, name in slips:
        if got == wrong != ref:
            return False, f"that is {name}"
    return False, "not the scorecard's verdict for these seeds"


def smoke_inputs(seed: int = 0) -> tuple[dict, str]:
    """``(results, profile)`` of exercise ch9.smoke for the notebook's ``seed``: test R^2 of a
    column like exercise 1's and the profile that trained them. Seed 0: exercise 1's numbers
    from a ``smoke`` run; else numbers of the student's own from ``smoke`` or from
    ``cpu-converged`` (the verdict depends on both)."""
    if seed == 0:
        return claim_inputs(0), "smoke"
    g = np.random.default_rng([9, 2, seed])
    profile = "smoke" if g.random() < 0.5 else "cpu-converged"
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
    if profile == "smoke" and got == _verdict_of(inputs, "cpu-converged"):
        return False, "that is the verdict of converged runs: these come from a smoke run"
    if profile != "smoke" and got == "pipeline only":
        return False, f"these runs are {profile}'s, not smoke: the scorecard judges them"
    return False, f"not the verdict the scorecard gives these {profile} results"


def not_run_table(seed: int = 0) -> str | None:
    """The table of exercise ch9.not_run for the notebook's ``seed``: ``None`` (every table) for
    seed 0, else one of the tables the scorecard has claims on."""
    if seed == 0:
        return None
    from ..repro.experiments.claims import claims

    tables = sorted({c.table for c in claims()})
    return tables[int(np.random.default_rng([9, 3, seed]).integers(len(tables)))]


@exercise(
    "ch9.not_run",
    hint="Count the rows of sc.rows whose 'verdict' is 'not run' (and whose 'table' is yours).",
    per_seed=True,
)
def _not_run(answer, seed):
    table = not_run_table(seed)
    rows = scorecard().rows
    mine = [r for r in rows if table is None or r["table"] == table]
    ref = sum(r["verdict"] == "not run" for r in mine)
    where = "in every table" if table is None else f"of {table}"
    if same_integer(answer, ref):
        return True, f"{ref} claims {where} have no result under any profile yet"
    slips = [(len(mine) - ref, "the rows that HAVE a verdict: count those that are 'not run'")]
    if table is not None:
        slips.append((sum(r["verdict"] == "not run" for r in rows), "every table's count"))
    return False, named_mistake(
        answer,
        [(v, why) for v, why in slips if v != ref],
        f"not the number of 'not run' rows {where}",
        integer=True,
    )
