"""The ranks of the real-data transfer study (tab:transfer-matrix, Tier 1) as values:
MZAttn-Full's rank per setting among 7 parameter-matched models (1 = best mean test R^2),
beside the paper's. The verdict engine reads them here; chapter 10's module
(``mzlite.repro.transfer``) words and draws them.
"""

from __future__ import annotations

import statistics

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


def ranks(
    profile: str,
    model: str = "mz_full",
    results_dir=None,
    statistic: str = "mean",
    substitute: dict | None = None,
) -> list[dict]:
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
    unknown = {*(substitute or {}), *(substitute or {}).values()}
    unknown = sorted(unknown - {c.id for c in ex.get_table(LABEL).cells})
    if unknown:
        raise ValueError(f"substitute names cells that {LABEL} does not have: {unknown}")
    by_cell = ex.results_by_cell(LABEL, profile, results_dir)
    by_cell = by_cell | {main: by_cell.get(abl, []) for main, abl in (substitute or {}).items()}
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
        missing = sum(not j.result_path.exists() for j in todo)
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
            if todo and all(j.result_path.exists() for j in todo):
                out[cell_id(setting_of(c), c.id.rsplit("-", 1)[-1])] = c.id
    return out
