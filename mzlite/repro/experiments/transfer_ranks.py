"""The ranks of the real-data transfer study (tab:transfer-matrix, Tier 1) as values:
MZAttn-Full's rank per setting among 7 parameter-matched models (1 = best mean test R^2),
beside the paper's. The verdict engine reads them here; chapter 10's module
(``mzlite.repro.transfer``) words and draws them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from mzlite.analysis.ranks import null_test
from mzlite.analysis.verdicts import Label, Reason
from mzlite.repro import experiments as ex
from mzlite.repro.paper import paper_value

from . import stats as _stats

LABEL = "tab:transfer-matrix"
RANKED = ("st", "st_large", "hypernet", "perceiver", "la_st", "mz_full", "mz_large")
MZ_MODELS = ("mz_full", "mz_large")  # the MZAttn models; the other ranked models are the field
SETTINGS = tuple(f"{variant}-{target}" for variant, target in ex.TRANSFER_TIER1)
MID_FIELD = (3, 5)  # the paper: "MZAttn-Full ranks 3rd-5th" where its prerequisites are absent
# profiles whose runs end by early stopping, the one the chapter reads first; cpu-converged is our
# first reading, read only while the others have no result of this table
CONVERGED = ("full", "cpu-annealed", "cpu-converged")
# what each outcome of ``rank_test`` is as a verdict, (label, reason), in the order that decides:
# the first that applies is the outcome; those with another reason than the null test of the
# ranks (``PROBLEMS``) are no reading of the ranks
OUTCOMES = {
    "smoke": (Label.PIPELINE_ONLY, Reason.PIPELINE_ONLY),
    "not run": (Label.NOT_RUN, Reason.NOT_RUN),
    "no setting": (Label.INSUFFICIENT, Reason.TOO_FEW_SEEDS),
    "few seeds": (Label.INSUFFICIENT, Reason.TOO_FEW_SEEDS),
    "unconverged": (Label.INSUFFICIENT, Reason.UNCONVERGED),
    "better": (Label.FAILS, Reason.RANK_TEST),
    "worse": (Label.FAILS, Reason.RANK_TEST),
    "floor": (Label.INSUFFICIENT, Reason.RANK_TEST),
    "holds": (Label.HOLDS, Reason.RANK_TEST),
    "holds partly": (Label.PARTLY, Reason.RANK_TEST),
}
PROBLEMS = tuple(o for o, (_, reason) in OUTCOMES.items() if reason != Reason.RANK_TEST)


def converged_profile(results_dir=None) -> str | None:
    """The first profile of ``CONVERGED`` with results of this table, or None."""
    return ex.best_profile(LABEL, CONVERGED, results_dir)


def cell_id(setting: str, model: str) -> str:
    """The id of ``model``'s cell in ``setting`` ("raw-meb"), checked (``CellKey``): a renamed
    cell raises instead of reading as one without results."""
    return ex.CellKey(LABEL, f"{setting}-{model}").cell


def r2_of(result: dict) -> float | None:  # its test R^2
    return result["metrics"]["test"].get("r2")


def seed_r2(by_cell: dict, setting: str) -> dict[str, list[float]]:
    """``{ranked model: test R^2 of each of its seeds}`` in ``setting``, models with results."""
    return {m: [r2_of(r) for r in rs] for m in RANKED if (rs := by_cell.get(cell_id(setting, m)))}


def ranks(profile: str, model: str = "mz_full", results_dir=None, statistic: str = "mean",
          substitute: dict | None = None) -> list[dict]:  # fmt: skip
    """One row per setting: ``rank`` of ``model`` among the ranked models with results (None:
    it has none) by their ``statistic`` of test R^2 over seeds (the paper's mean, or the median,
    robust to one failed seed), beside the best other model, the yardstick and the paper's
    rank. With ``missing_jobs`` of ``profile`` not on disk the rank is provisional.
    ``substitute``: ``{main cell id: ablation cell id}`` whose results stand in for the main
    cell's (``longer_cap``); completeness stays the main table's."""
    if model not in RANKED:
        raise ValueError(f"model must be one of {', '.join(RANKED)}, got {model!r}")
    if statistic not in ("mean", "median"):
        raise ValueError(f"statistic must be one of mean, median, got {statistic!r}")
    substitute = substitute or {}
    known = {c.id for c in ex.get_table(LABEL).cells}
    if unknown := sorted({*substitute, *substitute.values()} - known):
        raise ValueError(f"substitute names cells that {LABEL} does not have: {unknown}")
    by_cell = ex.results_by_cell(LABEL, profile, results_dir)
    by_cell = by_cell | {main: by_cell.get(abl, []) for main, abl in substitute.items()}
    rows = []
    for setting, (prow, pcol) in zip(SETTINGS, ex.TRANSFER_TIER1.values(), strict=True):
        r2 = seed_r2(by_cell, setting)
        means = {m: (*_stats.mean_std(v), len(v)) for m, v in r2.items()}
        means = {m: v for m, v in means.items() if v[0] is not None}
        median = statistic == "median"
        score = {m: statistics.median(r2[m]) if median else v[0] for m, v in means.items()}
        ordered = sorted(score, key=lambda m: -score[m])
        others = [m for m in ordered if m != model]
        stats = by_cell.get(cell_id(setting, ex.SET_STATS), [])
        todo = ex.jobs(LABEL, profile, cells=f"{setting}-*", results_dir=results_dir)
        missing = sum(not ex.has_result(j) for j in todo)
        rows.append({
            "setting": setting, "row": prow, "column": pcol,
            "rank": ordered.index(model) + 1 if model in means else None,
            "n_models": len(means),
            "seeds": means[model][2] if model in means else 0,
            "r2": means[model][:2] if model in means else (None, None),
            "best_other": (others[0], score[others[0]]) if others else (None, None),
            "set_stats": r2_of(stats[0]) if stats else None,
            "paper_rank": paper_value(LABEL, prow, pcol),
            "missing_jobs": missing, "complete": missing == 0,
        })  # fmt: skip
    return rows


def setting_of(cell) -> str:
    return f"{cell.options['variant']}-{cell.options['target']}"


def paper_ranks() -> list[float]:
    """The paper's rank of MZAttn-Full in each setting of the table, in ``ranks``' order."""
    return [paper_value(LABEL, prow, pcol) for prow, pcol in ex.TRANSFER_TIER1.values()]


def longer_cap(profile: str, results_dir=None) -> dict:
    """``{main cell id: ablation cell id}`` of the epoch-cap ablations (the same runs at a
    longer cap) with every seed of ``profile``: the ``substitute`` that asks whether runs that
    hit the cap decide a verdict."""
    out = {}
    for c in ex.get_table(LABEL).cells:
        if c.part == "ablation" and set(c.train) == {"epochs"}:
            todo = ex.jobs(LABEL, profile, cells=c.id, results_dir=results_dir)
            if todo and all(map(ex.has_result, todo)):
                out[cell_id(setting_of(c), c.id.rsplit("-", 1)[-1])] = c.id
    return out


@dataclass(frozen=True)
class RankTest:
    """``rank_test`` of one profile: the ranks, their null test and what keeps them from one."""

    profile: str
    observed: tuple[int, ...]  # MZAttn-Full's rank in each complete setting
    settings: tuple[str, ...]  # the complete settings, in ``SETTINGS``' order
    n_settings: int  # every setting of the table
    mid_field: int  # how many of ``observed`` are in ``MID_FIELD``
    test: dict | None  # ``null_test`` of ``observed`` (None without a complete setting)
    paper: dict  # ``null_test`` of the paper's ranks
    seeds: int  # the fewest seeds of a cell behind the ranks
    unconverged: tuple[tuple[str, int], ...]  # (cell id, seed) of the runs behind them
    results: tuple[dict, ...]  # the results behind the ranks
    substituted: dict  # {main cell id: ablation cell id} whose runs stood in
    outcome: str  # the first of ``OUTCOMES`` that applies
    label: Label

    @property
    def n_behind(self) -> int:
        return len(self.results)


def rank_test(profile: str, results_dir=None, substitute: dict | None = None) -> RankTest:
    """The paper's Tier-1 prediction, *no advantage* for MZAttn-Full on low-rank 2-D point clouds
    ("3rd-5th, not catastrophically worse, but also not ahead"), tested with ``null_test`` on the
    complete settings of ``profile``. Either one-sided p <= ``stats.ALPHA`` "does not hold here"
    (better than chance contradicts "no advantage", worse "not catastrophically worse"); a run
    behind a rank unconverged, fewer than ``stats.MIN_SEEDS`` seeds, or too few settings for any
    ranks to contradict the null (``p_floor`` > ALPHA) is "insufficient evidence" (the
    scorecard's rule for every claim). ``substitute``: as in ``ranks``, here and in the
    convergence check."""
    substitute = dict(substitute or {})
    rows = ranks(profile, results_dir=results_dir, substitute=substitute)
    complete = [r for r in rows if r["complete"] and r["n_models"] == len(RANKED)]
    observed = [r["rank"] for r in complete]
    by_cell = ex.results_by_cell(LABEL, profile, results_dir)
    cells = [substitute.get(cell_id(r["setting"], m), cell_id(r["setting"], m))
             for r in complete for m in RANKED]  # fmt: skip
    seeds = min((len(by_cell.get(c, [])) for c in cells), default=0)
    behind = [r for c in cells for r in by_cell.get(c, [])]
    unconverged = [(r["cell"], r["seed"]) for r in behind
                   if not _stats.result_convergence(r)["converged"]]  # fmt: skip
    t, alpha = null_test(observed) if observed else None, _stats.ALPHA
    applies = {  # each outcome and whether it applies, in OUTCOMES' order
        "smoke": ex.get_profile(profile).name == "smoke",
        "not run": not by_cell,
        "no setting": t is None,
        "few seeds": seeds < _stats.MIN_SEEDS,
        "unconverged": bool(unconverged),
        "better": t is not None and t["p_advantage"] <= alpha,
        "worse": t is not None and t["p_disadvantage"] <= alpha,
        "floor": t is not None and t["p_floor"] > alpha,
        "holds": len(complete) == len(rows),
    }
    outcome = next((o for o, hit in applies.items() if hit), "holds partly")
    lo, hi = MID_FIELD
    return RankTest(
        profile=profile, observed=tuple(observed), settings=tuple(r["setting"] for r in complete),
        n_settings=len(rows), mid_field=sum(lo <= k <= hi for k in observed), test=t,
        paper=null_test(paper_ranks()), seeds=seeds, unconverged=tuple(unconverged),
        results=tuple(behind), substituted={k: v for k, v in substitute.items() if v in cells},
        outcome=outcome, label=OUTCOMES[outcome][0],
    )  # fmt: skip
