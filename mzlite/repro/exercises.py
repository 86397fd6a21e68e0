"""Exercises on the live scorecard: their reference answers read the committed results through
:mod:`mzlite.repro.experiments.scorecard`, so they sit here, above the teaching library (whose
checkers in :mod:`mzlite.exercises` compute from numbers alone). Importing this module registers
them with :func:`mzlite.exercises.exercise`; chapter 9 imports it for ``not_run_table``, and the
grader (:mod:`mzlite.grading.grader`) imports it to judge them."""

from __future__ import annotations

import numpy as np

from mzlite.analysis.verdicts import Label
from mzlite.exercises.checker import exercise, named_mistake, same_integer
from mzlite.repro.experiments.claims import claims
from mzlite.repro.experiments.findings import once
from mzlite.repro.experiments.scorecard import scorecard

__all__ = ["not_run_table"]  # what a student's copy keeps (mzlite.grading.student_view)


def prepare() -> None:
    """Evaluate what these exercises judge against (the scorecard), so that a process forked
    after this call judges with it at no cost (the grader's judge, :func:`mzlite.grading.judge.
    preload`): ``once`` keeps it while no result file changes."""
    once(scorecard)


def not_run_table(seed: int = 0) -> str | None:
    """The table of exercise ch9.not_run for the notebook's ``seed``: ``None`` (every table) for
    seed 0, else one of the tables the scorecard has claims on."""
    if seed == 0:
        return None
    tables = sorted({c.table for c in claims()})
    return tables[int(np.random.default_rng([9, 3, seed]).integers(len(tables)))]


@exercise(
    "ch9.not_run",
    hint="Count the rows of sc.rows whose 'verdict' is 'not run' (and whose 'table' is yours).",
    per_seed=True,
)
def _not_run(answer, seed):
    table = not_run_table(seed)
    rows = once(scorecard).rows  # the scorecard chapter 9 read already, not judged again
    mine = [r for r in rows if table is None or r["table"] == table]
    ref = sum(r["verdict"] == Label.NOT_RUN for r in mine)
    where = "in every table" if table is None else f"of {table}"
    if same_integer(answer, ref):
        return True, f"{ref} claims {where} have no result under any profile yet"
    slips = [(len(mine) - ref, "the rows that HAVE a verdict: count those that are 'not run'")]
    if table is not None:
        slips.append((sum(r["verdict"] == Label.NOT_RUN for r in rows), "every table's count"))
    slips = [(v, why) for v, why in slips if v != ref]
    return False, named_mistake(
        answer, slips, f"not the number of 'not run' rows {where}", integer=True
    )
