"""The paper's synthetic tasks against its words (``TASK_REVIEW``, ``review_table``: what mzlite
generates, what the paper leaves open and the alternatives its words allow), and the calibration
of their readings (issue 49): the Set Transformer at the paper's sizes on each reading beside the
paper's number, with the yardstick and the set-size-only ridge (``calibration``). A reading is
chosen by the Set Transformer's number, never by MZ's: those cells run no MZ."""

from __future__ import annotations

from dataclasses import dataclass

from mzlite.repro.paper import name_labels, paper_cell
from mzlite.repro.render import comparison_table, plain_math
from mzlite.tasks import readings_of, task_reading
from mzlite.tasks.readings import DEFAULT_READING

from .cells import calibration_cell_id
from .reading import campaign_caption, html_table, num, r2_text
from .reading_ablation import SeedsR2, metric_values, results_per_cell
from .results import PAPER_SIZED, caught_up
from .specs import SET_STATS, prose_data
from .stats import TIE
from .tables import TASK_B_READINGS, TASK_F_READINGS, TDOF_READINGS, get_table

GAP = 0.1  # the rule: a reading is calibrated where our ST lands further than this


@dataclass(frozen=True)
class TaskReview:
    """One synthetic task (task_review.yaml): the paper's ``words`` at ``label``, what the v1
    generator ``task`` makes (``ours``), what the paper leaves ``open`` and the ``alternatives``
    (reading names where they exist), what set size alone gives (``leak``) and the (table, cell)
    of the v1 yardstick that records the set-size-only ridge."""

    name: str
    task: str
    tables: str
    label: str
    words: str
    ours: str
    open: str
    alternatives: str
    leak: str
    yardstick: tuple[str, str]


TASK_REVIEW: tuple[TaskReview, ...] = tuple(
    TaskReview(**{**t, "yardstick": tuple(t["yardstick"])}) for t in prose_data("task_review.yaml")
)


def yardsticks(results_dir=None) -> dict[str, tuple]:
    """Per reviewed task (its generator): (the set-statistics ridge's R^2, the set-size-only
    ridge's) of its v1 yardstick in the ``campaign``, None where not run or not recorded."""
    tables, profile = dict.fromkeys(t.yardstick[0] for t in TASK_REVIEW), campaign(results_dir)
    by_table = {t: results_per_cell(t, profile, results_dir) for t in tables}
    out = {}
    for t in TASK_REVIEW:
        mine = _checked(by_table[t.yardstick[0]].get(t.yardstick[1], []), DEFAULT_READING)
        out[t.task] = (_metric(mine, "r2"), _metric(mine, "set_size_r2"))
    return out


def review_table(results_dir=None) -> str:
    """``TASK_REVIEW`` as the reading page's table, with the ``yardsticks``."""
    ridges = yardsticks(results_dir)
    rows = [{"task": name_labels(t.name), "ours": t.ours,
             "paper": f"“{plain_math(t.words)}” ({name_labels(t.label)})",
             "open": f"{t.open.rstrip('.')}. Alternatives: {t.alternatives}",
             "leak": f"{t.leak.rstrip('.')}. Ridge R^2 at the paper's sizes: set size alone "
             f"{num(ridges[t.task][1])}, set statistics {num(ridges[t.task][0])}",
             "note": name_labels(f"{t.name}: used by {t.tables}; generator mzlite.tasks.{t.task}")}
            for t in TASK_REVIEW]  # fmt: skip
    cols = [("task", "Task", 12), ("paper", "The paper says", 22), ("ours", "We generate", 24),
            ("open", "Not stated (and the alternatives)", 26),
            ("leak", "What set size alone gives", 16)]  # fmt: skip
    title = "The tables that use each task, and its generator"
    return str(comparison_table(rows, cols, footnote_key="note", footnote_title=title))


# The calibration


@dataclass(frozen=True)
class Calibrated:
    """A column whose ``readings`` (v1 first) the Set Transformer (model ``st``) calibrates."""

    what: str
    table: str
    col: str
    st: str
    readings: tuple[str, ...]

    def cells(self, reading: str) -> tuple[str, str]:
        """(the Set Transformer's cell, the yardstick's) of ``reading``."""
        v1 = reading == "v1"
        return tuple(f"{self.col}-{m}" if v1 else calibration_cell_id(self.col, reading, m)
                     for m in (self.st, SET_STATS))  # fmt: skip


CALIBRATED: tuple[Calibrated, ...] = (
    Calibrated("Task B", "tab:main-results", "B", "st", ("v1", *TASK_B_READINGS)),
    Calibrated("Task F", "tab:main-results", "F", "st", ("v1", *TASK_F_READINGS)),
    Calibrated("Task G", "tab:main-results", "G", "st", ("v1",)),
    Calibrated("tab:tdof-verify L = 16", "tab:tdof-verify", "L16", "st_4l", ("v1", *TDOF_READINGS)),
    Calibrated("tab:tdof-verify L = 32", "tab:tdof-verify", "L32", "st_4l", ("v1", *TDOF_READINGS)),
)


@dataclass(frozen=True)
class CalibrationRow(SeedsR2):
    """One reading of one calibrated column: the Set Transformer's test R^2 per seed (``r2``) and
    targets' variance (MSE / (1 - R^2) of its first seed) beside the paper's, the yardstick's R^2
    (``stats_r2``) and the set-size-only ridge's (``size_r2``), from the campaign ``profile``."""

    what: str
    reading: str
    st_cell: str
    r2: tuple[float, ...]
    paper_r2: float | None
    paper_std: float | None
    paper_var: float | None
    target_var: float | None
    stats_r2: float | None
    size_r2: float | None
    profile: str = PAPER_SIZED[0]  # the campaign its runs come from

    @property
    def gap(self) -> float | None:  # our ST's mean R^2 minus the paper's
        return None if self.mean is None or self.paper_r2 is None else self.mean - self.paper_r2


def _paper_numbers(table: str, st_cell: str) -> tuple[float | None, float | None, float | None]:
    """(R^2, its std, the target variance MSE / (1 - R^2)) of the paper's ST cell ``st_cell``."""
    refs = {r.metric: r for r in get_table(table).cell(st_cell).paper}
    if "r2" not in refs:
        return None, None, None
    r2 = paper_cell(table, refs["r2"].row, refs["r2"].column)
    mse = paper_cell(table, refs["mse"].row, refs["mse"].column)["mean"] if "mse" in refs else None
    scaled = None if mse is None else mse / refs["mse"].scale
    return r2["mean"], r2.get("std"), _variance(scaled, r2["mean"])


def _variance(mse: float | None, r2: float | None) -> float | None:  # MSE / (1 - R^2)
    return None if mse is None or r2 is None or r2 >= 1 else mse / (1 - r2)


def _checked(results: list[dict], reading: str) -> list[dict]:
    """``results``, each made under task ``reading`` (recorded, or read from its options)."""
    for r in results:
        if (got := r.get("task_reading") or task_reading(r["task"], r["task_options"])) != reading:
            raise ValueError(f"{r.get('table')} {r.get('cell')} seed {r.get('seed')} was made "
                             f"under task reading {got!r}, not the {reading!r} its calibration "
                             "row says")  # fmt: skip
    return results


def campaign(results_dir=None) -> str:
    """The campaign at the paper's sizes that the review reads whole, as the verdicts it informs
    (``results.caught_up``): every calibrated reading's cells and the reviewed yardsticks."""
    cells = [(c.table, cid) for c in CALIBRATED for r in c.readings for cid in c.cells(r)]
    return caught_up([*cells, *(t.yardstick for t in TASK_REVIEW)], results_dir=results_dir)


def _metric(results: list[dict], key: str) -> float | None:  # the first result's that has it
    return next(iter(metric_values(results, key)), None)


def calibration(results_dir=None) -> list[CalibrationRow]:
    """The calibration from the results of the ``campaign``, a row per calibrated column and
    reading; a result made under another task reading than its row raises."""
    rows = []
    tables, profile = dict.fromkeys(c.table for c in CALIBRATED), campaign(results_dir)
    by_table = {t: results_per_cell(t, profile, results_dir) for t in tables}
    for c in CALIBRATED:
        v1_st = c.cells("v1")[0]
        paper = _paper_numbers(c.table, v1_st)
        for reading in c.readings:
            if reading not in readings_of(get_table(c.table).cell(v1_st).task):
                raise KeyError(f"{c.what}: no task reading {reading!r}")
            st_id, stats_id = c.cells(reading)
            st = _checked(by_table[c.table].get(st_id, []), reading)
            stats = _checked(by_table[c.table].get(stats_id, []), reading)
            r2 = tuple(metric_values(st, "r2"))
            var = _variance(_metric(st, "mse"), r2[0] if r2 else None)
            stats_r2, size_r2 = _metric(stats, "r2"), _metric(stats, "set_size_r2")
            rows.append(CalibrationRow(c.what, reading, st_id, r2, *paper, var, stats_r2, size_r2,
                                       profile))  # fmt: skip
    return rows


def closest_readings(rows: list[CalibrationRow]) -> dict:
    """Per calibrated column run: ``{"reading"`` whose Set Transformer lands nearest the paper's,
    ``"gap", "seeds"`` of it, ``"v1_gap"``, ``"needed"``: v1 further than ``GAP``}. Another
    reading is nearer than v1 only by more than a tie (``TIE``, one seed's noise)."""
    out = {}
    for what in dict.fromkeys(r.what for r in rows):
        mine = [r for r in rows if r.what == what and r.gap is not None]
        if not mine:
            continue
        v1 = next((r for r in mine if r.reading == "v1"), None)
        best = min(mine, key=lambda r: abs(r.gap))
        if v1 is not None and abs(v1.gap) - abs(best.gap) <= TIE:
            best = v1
        out[what] = {"reading": best.reading, "gap": best.gap, "seeds": best.seeds,
                     "v1_gap": None if v1 is None else v1.gap,
                     "needed": v1 is None or abs(v1.gap) > GAP}  # fmt: skip
    return out


def calibration_table(rows: list[CalibrationRow] | None = None) -> str:
    """The calibration as an HTML table; the reading nearest the paper's number is marked with
    the seeds it rests on (one seed against three is no choice yet)."""
    rows = calibration() if rows is None else rows
    best = {w: (c["reading"], c["seeds"]) for w, c in closest_readings(rows).items()}
    body = []
    for r in rows:
        reading, (nearest, seeds) = r.reading, best.get(r.what, (None, 0))
        if nearest == r.reading:
            reading += f" (nearest the paper, {seeds} seed{'s' if seeds != 1 else ''})"
        var = f"{num(r.target_var, '.4g')} / {num(r.paper_var, '.4g')}"
        body.append((name_labels(r.what), reading, r2_text(r.mean, r.std), str(r.seeds),
                     r2_text(r.paper_r2, r.paper_std, "–"), num(r.gap, "+.3f"), var,
                     num(r.stats_r2), num(r.size_r2)))  # fmt: skip
    heads = ("Column", "Task reading", "Our ST R²", "Seeds", "Paper's ST R²", "Gap",
             "Target variance (ours / paper's)", "Set statistics R²",
             "Set size alone R²")  # fmt: skip
    caption = campaign_caption(rows[0].profile) if rows else ""
    return html_table("mz-task-calibration", heads, body, caption)
