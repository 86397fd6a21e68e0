"""The reading ablation as values: per diagnostic cell, MZ's test R² under each reading of the
paper (the first reading, each generator normalisation and schedule, the signed readout, the
paper's training-set size) beside the Set Transformer of its protocol, and the readings that
read "MZ beats the Set Transformer" otherwise. The verdict engine reads it here; the reading
page (``reading``) words and tabulates it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from mzlite.analysis.verdicts import Label
from mzlite.nn import MZSetTransformerConfig

from . import stats as _stats
from .cells import GEN_NORM_READINGS, SCHEDULE_READINGS
from .results import load_results
from .tables import get_table

# (table, column id of the rd- cells, the main MZ cell, the Set Transformer cell, what it is)
DIAGNOSTIC_CELLS = (
    ("tab:main-results", "F", "F-mz_full", "F-st", "Task F (rotation matching)"),
    ("tab:main-results", "B", "B-mz_full", "B-st", "Task B (Chamfer matching)"),
    ("tab:meb", "d8", "d8-mz_full", "d8-st", "MEB radius, d = 8, raw sets"),
    ("tab:meb", "d8-scale", "abl-d8-scale-ynorm-mz_full", "abl-d8-scale-ynorm-st",
     "MEB radius, d = 8, per-set normalised"),
    ("tab:tdof-verify", "L16", "L16-mz_1l", "L16-st_4l", "Quadratic TDOF, L = 16"),
)  # fmt: skip
PROFILE = "cpu-annealed"  # the profile the reading ablation runs under
FIRST_READING = "cpu-converged"  # mzlite's first reading: per-row LayerNorm, cosine, lr 3e-3
DEFAULT_READING_ROW = "generators: zonotope, schedule: plateau"  # the main cells' reading


class Versus(StrEnum):
    """MZ against the Set Transformer under one reading. A member equals its words."""

    MZ_BETTER = "MZ better"
    MZ_AHEAD = "MZ ahead, not significant"
    TIE = "tie"
    ST_AHEAD = "ST ahead, not significant"
    ST_BETTER = "ST better"
    TOO_FEW_SEEDS = "too few seeds"
    OPTIMISATION_FAILURE = "optimisation failure"


# "MZ beats the Set Transformer" under a reading, in the scorecard's labels (others: None)
_CLAIM_VERDICTS = {
    Versus.MZ_BETTER: Label.HOLDS, Versus.TIE: Label.PARTLY, Versus.ST_BETTER: Label.FAILS,
    Versus.MZ_AHEAD: Label.NOT_DECIDED, Versus.ST_AHEAD: Label.NOT_DECIDED,
}  # fmt: skip


class SeedsR2:
    """``seeds``, ``mean`` and ``std`` (sample) of a row's test R² per seed, ``r2``."""

    seeds = property(lambda self: len(self.r2))
    mean = property(lambda self: _stats.summarise(self.r2).get("mean"))
    std = property(lambda self: _stats.summarise(self.r2).get("std"))


@dataclass(frozen=True)
class AblationRow(SeedsR2):
    """One reading of one diagnostic cell: MZ's test R² per seed (``r2``), how many of its runs
    ``stopped`` and ``fitted`` their training set, the Set Transformer's R² per seed on the same
    cell and protocol (``st_r2``) and how many of its runs stopped without fitting."""

    cell: str
    reading: str
    stopped: int
    fitted: int
    r2: tuple[float, ...] = ()
    st_r2: tuple[float, ...] = ()
    st_failures: int = 0

    st_mean = property(lambda self: _stats.summarise(self.st_r2).get("mean"))
    optimisation_failures = property(lambda self: self.stopped - self.fitted if self.seeds else 0)

    @property
    def versus_st(self) -> tuple[Versus, float | None]:
        """(MZ against the Set Transformer, Welch's p) by the scorecard's rules: ``MIN_SEEDS``
        seeds a side, gaps within ``TIE`` tie, "better" needs p < ``ALPHA``."""
        if min(len(self.r2), len(self.st_r2)) < _stats.MIN_SEEDS:
            return Versus.TOO_FEW_SEEDS, None
        if self.optimisation_failures or self.st_failures:
            return Versus.OPTIMISATION_FAILURE, None
        test = _stats.welch(self.r2, self.st_r2)
        if abs(test["diff"]) <= _stats.TIE:
            return Versus.TIE, test["p"]
        significant = test["p"] is not None and test["p"] < _stats.ALPHA
        if test["diff"] > 0:
            return (Versus.MZ_BETTER if significant else Versus.MZ_AHEAD), test["p"]
        return (Versus.ST_BETTER if significant else Versus.ST_AHEAD), test["p"]

    @property
    def claim_verdict(self) -> Label | None:
        """ "MZ beats the Set Transformer" under this reading; None when it decides nothing."""
        return _CLAIM_VERDICTS.get(self.versus_st[0])


def recorded_reading(result: dict) -> tuple[str, str]:
    """(generator normalisation, schedule) a result was trained under (a config written before
    a field existed takes the value the code then had)."""
    model = result.get("model_config") or {}
    gen_norm = {**MZSetTransformerConfig.LEGACY, **model}.get("gen_norm", "")
    return gen_norm, (result.get("train_config") or {}).get("schedule", "cosine")


def _summary(results: list[dict], expect: tuple[str, str] | None = None):
    """(stopped, fitted, R² values) of a cell's results, each trained under reading ``expect``
    (gen_norm, schedule) where given."""
    for r in results if expect else ():
        if (got := recorded_reading(r)) != expect:
            raise ValueError(f"{r.get('table')} {r.get('cell')} seed {r.get('seed')} was trained "
                             f"under generators {got[0]!r}, schedule {got[1]!r}, not the {expect} "
                             "its row says")  # fmt: skip
    conv = [_stats.result_convergence(r) for r in results]
    stopped = sum(bool(c.get("stopped", c.get("converged"))) for c in conv)
    fitted = sum(c.get("fitted") is True for c in conv)
    return stopped, fitted, tuple(metric_values(results, "r2"))


def metric_values(results: list[dict], key: str) -> list[float]:  # test metric, where recorded
    values = [((r.get("metrics") or {}).get("test") or {}).get(key) for r in results]
    return [v for v in values if v is not None]


def ablation_row(what, reading, by_cell, mz: str, st: str, expect=None, check=list) -> AblationRow:
    """MZ's cell ``mz`` beside the Set Transformer's ``st``, each cell's results ``check``ed."""
    stopped, fitted, st_r2 = _summary(check(by_cell.get(st, [])))
    mz_side = _summary(check(by_cell.get(mz, [])), expect)
    return AblationRow(what, reading, *mz_side, st_r2, stopped - fitted)


def results_per_cell(table: str, profile: str, results_dir) -> dict[str, list[dict]]:
    """``load_results`` grouped by cell id, as written (no aliases, no other table's runs)."""
    by_cell: dict[str, list[dict]] = {}
    for r in load_results(table, profile, results_dir=results_dir):
        by_cell.setdefault(r["cell"], []).append(r)
    return by_cell


def ablation(results_dir=None, cell: str | None = None) -> list[AblationRow]:
    """The reading ablation from the result files: per diagnostic cell (or only ``cell``, by its
    description), the first reading, one row per (generator normalisation, schedule) under
    ``PROFILE``, the signed readout and the paper's training-set size, each beside the Set
    Transformer of its protocol. A result trained under another reading than its row raises."""
    rows = []
    for table, col, main, st_cell, what in DIAGNOSTIC_CELLS:
        if cell is not None and what != cell:
            continue
        ids, mid = {c.id for c in get_table(table).cells}, main.rsplit("-", 1)[1]
        first = results_per_cell(table, FIRST_READING, results_dir)
        reading = "first reading: per-row LayerNorm, cosine, lr 3e-3"
        rows.append(ablation_row(what, reading, first, main, st_cell, ("layernorm", "cosine")))
        by_cell = results_per_cell(table, PROFILE, results_dir)
        for gen_norm in GEN_NORM_READINGS:
            for sched in SCHEDULE_READINGS:
                main_reading = (gen_norm, sched) == ("zonotope", "plateau")
                cid = main if main_reading else f"rd-{col}-{gen_norm}-{sched}-{mid}"
                if cid not in ids:
                    raise KeyError(f"{table} has no cell {cid!r}: the reading ablation names it")
                reading = f"generators: {gen_norm}, schedule: {sched}"
                rows.append(ablation_row(what, reading, by_cell, cid, st_cell, (gen_norm, sched)))
        paper = f"rd-{col}-paper-size"
        for cid, reading, st in (
            (f"rd-{col}-signed-{mid}", "signed readout", st_cell),
            (f"{paper}-{mid}", "the paper's training-set size", f"{paper}-st"),
        ):
            if cid in ids:
                rows.append(ablation_row(what, reading, by_cell, cid, st, ("zonotope", "plateau")))
    return rows


def dependence(cell: str, rows: list[AblationRow] | None = None,
               results_dir=None) -> list[tuple[str, str, float | None]]:  # fmt: skip
    """The readings under which "MZ beats the Set Transformer" on diagnostic cell ``cell`` (its
    description) reads otherwise than under the default reading, as (reading, MZ against ST,
    Welch p) (``AblationRow.versus_st``); empty where none does or the default decides nothing."""
    known = [c[-1] for c in DIAGNOSTIC_CELLS]
    if cell not in known:
        raise ValueError(f"cell must be one of the diagnostic cells {known}, got {cell!r}")
    rows = [r for r in (ablation(results_dir, cell) if rows is None else rows) if r.cell == cell]
    default = next(r for r in rows if r.reading == DEFAULT_READING_ROW).claim_verdict
    return [(r.reading, *r.versus_st) for r in rows
            if default is not None and r.reading != DEFAULT_READING_ROW
            and r.claim_verdict not in (None, default)]  # fmt: skip
