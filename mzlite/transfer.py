"""The real-data transfer study (tab:transfer-matrix, Tier 1): MZAttn-Full's rank per cell,
beside the paper's, and the paper's own prediction put to a test.

The paper reports, for each (construction, target) cell, the rank of MZAttn-Full among 7
parameter-matched models (1 = best test R^2, seed means), and predicts no advantage on low-rank
2-D point clouds: "on every cell where any one of these [prerequisites] is absent, MZAttn-Full
ranks 3rd-5th", against an expected rank of 4 under the no-advantage null. ``ranks`` computes
our ranks from the result JSONs; ``null_test`` asks how surprising our mean rank would be if
MZAttn had no advantage (each cell's rank uniform on 1..7, cells independent).
"""

from __future__ import annotations

from fractions import Fraction

from . import experiments as ex
from .experiments.report import mean_std
from .paper import paper_value

__all__ = ["LABEL", "ranks", "null_test", "converged_profile"]

LABEL = "tab:transfer-matrix"
RANKED = ("st", "st_large", "hypernet", "perceiver", "la_st", "mz_full", "mz_large")
CONVERGED = ("full", "cpu-converged")  # profiles whose runs end by early stopping


def converged_profile(results_dir=None) -> str | None:
    """The first profile of ``CONVERGED`` that exists and has results of this table, or None."""
    for p in CONVERGED:
        if p in ex.PROFILES and ex.load_results(LABEL, p, results_dir):
            return p
    return None


def ranks(profile: str, model: str = "mz_full", results_dir=None) -> list[dict]:
    """One row per setting of the table: ``setting`` (column id), the paper's ``row`` and
    ``column``, ``rank`` of ``model`` among the ranked models that have results (None when
    ``model`` has none), ``n_models`` ranked, ``seeds`` of ``model``, ``r2`` (model's mean, std),
    ``best_other`` (the best other model and its mean R^2), ``set_stats`` (the yardstick's R^2),
    ``paper_rank``, ``missing_jobs`` (the setting's (cell, seed) jobs of ``profile`` with no
    result on disk yet) and ``complete`` (none missing: every ranked model has all the profile's
    seeds, and the yardstick is there). A rank from an incomplete setting is provisional: a
    model still to run can take any place."""
    if model not in RANKED:
        raise ValueError(f"model must be one of {', '.join(RANKED)}, got {model!r}")
    by_cell = ex.results_by_cell(LABEL, profile, results_dir)
    rows = []
    for (variant, target), (prow, pcol) in ex.TRANSFER_TIER1.items():
        setting = f"{variant}-{target}"
        means = {}
        for m in RANKED:
            runs = by_cell.get(f"{setting}-{m}", [])
            mean, std = mean_std([r["metrics"]["test"].get("r2") for r in runs])
            if mean is not None:
                means[m] = (mean, std, len(runs))
        ordered = sorted(means, key=lambda m: -means[m][0])
        stats = by_cell.get(f"{setting}-{ex.SET_STATS}", [])
        todo = ex.jobs(LABEL, profile, cells=f"{setting}-*", results_dir=results_dir)
        missing = sum(not j.result_path.exists() for j in todo)
        others = [m for m in ordered if m != model]
        rows.append(
            {
                "setting": setting,
                "row": prow,
                "column": pcol,
                "rank": ordered.index(model) + 1 if model in means else None,
                "n_models": len(means),
                "seeds": means[model][2] if model in means else 0,
                "r2": means[model][:2] if model in means else (None, None),
                "best_other": (others[0], means[others[0]][0]) if others else (None, None),
                "set_stats": stats[0]["metrics"]["test"]["r2"] if stats else None,
                "paper_rank": paper_value(LABEL, prow, pcol),
                "missing_jobs": missing,
                "complete": missing == 0,
            }
        )
    return rows


def null_test(observed_ranks, n_models: int = 7) -> dict:
    """The no-advantage null: each rank uniform on ``1..n_models``, independent. Returns the mean
    rank, its expectation under the null, the exact one-sided probabilities of a mean rank at
    most (``p_advantage``) and at least (``p_disadvantage``) the observed one, and ``p_floor``,
    the smallest ``p_advantage`` any ranks of this many cells can give (rank 1 everywhere): with
    one cell it is 1/7, so one cell alone can never contradict the null at the 5 % level."""
    obs = [int(r) for r in observed_ranks]
    if not obs or any(not 1 <= r <= n_models for r in obs):
        raise ValueError(f"observed_ranks must be ranks in 1..{n_models}, got {observed_ranks!r}")
    dist = {0: Fraction(1)}  # the exact distribution of the sum of len(obs) uniform ranks
    for _ in obs:
        nxt: dict[int, Fraction] = {}
        for s, p in dist.items():
            for r in range(1, n_models + 1):
                nxt[s + r] = nxt.get(s + r, Fraction(0)) + p / n_models
        dist = nxt
    total = sum(obs)
    return {
        "n_cells": len(obs),
        "mean_rank": total / len(obs),
        "null_mean": (n_models + 1) / 2,
        "p_advantage": float(sum(p for s, p in dist.items() if s <= total)),
        "p_disadvantage": float(sum(p for s, p in dist.items() if s >= total)),
        "p_floor": float(Fraction(1, n_models) ** len(obs)),
    }
