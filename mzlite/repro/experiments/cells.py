"""The building blocks of the paper's tables (``tables``): a model's row (``model_row``, and the
models most tables share) and ``grid_cells``, the (column x model) grid with its set-statistics
yardstick that every table and ablation is declared as: the reading ablation (``reading_cells``),
the layer's reading (``centre_adaptive_cell``) and the task-reading calibration."""

from __future__ import annotations

from mzlite.nn import model_spec
from mzlite.tasks.readings import DEFAULT_READING, reading_options

from .specs import SET_STATS, SET_STATS_LABEL, Cell, PaperRef


def model_row(name: str, label: str = "", *, mid: str = "", match: int | None = None):
    """A model of a table: (model id in cell ids, registered name, the paper's row label (its
    numbers' key in data/paper; the display name by default), config overrides, match_params)."""
    return (mid or name, name, label or model_spec(name).display, {}, match)


ST = model_row("st", "Standard")
ST_LARGE = model_row("st_large")
HYPER = model_row("hypernet", match=360_000)
PERCEIVER = model_row("perceiver")
LA_ST = model_row("la_st", match=359_000)
MZ_FULL = model_row("mz_full")
MZ_LARGE = model_row("mz_large")
GEOM_BATCH = 256  # "geom. tasks" of the hyperparameter table


# Where a cell's paper numbers are: (paper row, paper column, our metric[, scale]) with {row} the
# model's row label and {col} the column's paper name
ROW_COL = (("{row}", "{col}", "r2"),)  # models as rows, settings as columns
COL_ROW = (("{col}", "{row}", "r2"),)  # the *-normed tables: settings as rows
ABLATION = {"full_seeds": 3, "part": "ablation"}  # an ablation's cells: 3 seeds, no paper number


def grid_cells(columns, models, task, *, paper=ROW_COL, stats=True, stats_batch=None, **fields):
    """Cells for every (column, model), and one set-statistics yardstick per column (``stats``;
    its batch ``stats_batch``, default the cells'). ``columns``: (column id, our label, task
    options, paper column name or ""[, that column's own ``Cell`` fields, ``task`` among them]);
    ``models``: ``model_row``s (``match_params`` optional); ``paper``: the templates of each
    cell's paper numbers; ``fields``: every cell's ``Cell`` fields (``part`` its yardstick's)."""
    cells = []
    for col_id, col_label, opts, paper_col, *own in columns:
        f = {**fields, **(own[0] if own else {})}
        col_task = f.pop("task", task)
        for mid, name, label, kw, *match in models:
            at = {"row": label, "col": paper_col}  # what the templates of ``paper`` name
            refs = tuple(PaperRef(r.format(**at), c.format(**at), *rest)
                         for r, c, *rest in paper) if paper_col else ()  # fmt: skip
            cells.append(Cell(f"{col_id}-{mid}", col_task, opts, name, label, col_label,
                              model_kwargs={**kw, **f.get("model_kwargs", {})},
                              match_params=match[0] if match else None, paper=refs,
                              **{k: v for k, v in f.items() if k != "model_kwargs"}))  # fmt: skip
        if stats:
            cells.append(Cell(
                f"{col_id}-{SET_STATS}", col_task, opts, SET_STATS, SET_STATS_LABEL, col_label,
                sizes=f.get("sizes", (10_000, 2_000, 2_000)), full_seeds=1,
                batch_size=stats_batch or f.get("batch_size", 128), part=f.get("part", "main"),
                note="ridge on set statistics (mzlite.tasks.baseline_r2); no training, one seed",
            ))  # fmt: skip
    return cells


# The reading ablation (issue 23): on a few diagnostic cells, which of mzlite's readings of the
# paper matter, generator normalisation x schedule for the MZ model, each schedule at its
# profile's rate. (zonotope, plateau) is the main cell under cpu-annealed, not registered twice
# (mzlite.repro.experiments.reading maps it).
GEN_NORM_READINGS = ("zonotope", "none", "layernorm")
SCHEDULE_READINGS = {
    "plateau": {"schedule": "plateau", "decay_patience": 5, "decay_factor": 0.5},
    "cosine": {"schedule": "cosine"},
}


def ablation_grid(columns, models, task, sizes, batch, *, stats=False, **fields) -> list[Cell]:
    """``grid_cells`` of an ablation: 3 seeds, no paper number, a yardstick only with ``stats``."""
    return grid_cells(columns, models, task, sizes=sizes, batch_size=batch, stats=stats,
                      **ABLATION, **fields)  # fmt: skip


def reading_cells(col, task, options, column, mz, sizes, batch, train=None, paper_size=()):
    """The reading-ablation cells of one diagnostic column (``reading`` reads them). ``mz``: the
    MZ model's row (model id, name, label, kwargs); ``train``: the column's own protocol (e.g.
    standardised targets); ``paper_size``: rows trained at the cell's own sizes
    (``Cell.paper_size``) beside the capped main cells."""
    train = dict(train or {})
    readings = [
        (f"rd-{col}-{gen_norm}-{sched}", f"{column}, generators: {gen_norm}, schedule: {sched}",
         options, "", {"model_kwargs": {"gen_norm": gen_norm}, "train": {**train, **sched_train}})
        for gen_norm in GEN_NORM_READINGS
        for sched, sched_train in SCHEDULE_READINGS.items()
        if (gen_norm, sched) != ("zonotope", "plateau")
    ]  # fmt: skip
    paper_col = (f"rd-{col}-paper-size", f"{column}, the paper's training-set size", options, "")
    return ablation_grid(readings, [mz], task, sizes, batch) + ablation_grid(
        [paper_col], paper_size, task, sizes, batch, train=train, paper_size=True
    )


def standardised_twin_cells(col, task, options, column, models, sizes, batch):
    """The standardised-target twins (app:opt-confound; metrics in original units) of a column
    whose paper protocol trains on raw targets of a large scale (Task F's Chamfer distances: mean
    ~425, std ~83). Under a profile that standardises targets they are the main cells
    (``jobs.aliases``); under ``full`` they say whether its raw targets decide a verdict."""
    twin = (f"std-{col}", f"{column}, targets standardised", options, "")
    return ablation_grid([twin], models, task, sizes, batch, train={"normalize_targets": True})


# The layer's reading (issue 49, item 3c): MZ under def:relop's o_c = M(mu) c_hat beside the
# literal Eq. eq:mz-main cell of the same column (mzlite.nn, choice 9). Registered as a model of
# its own, so its results carry model_config.layer_reading and never mix with the literal ones.
CENTRE_ADAPTIVE_MODEL = "mz_full_centre_adaptive"


def centre_adaptive_cell(col, task, options, column, mz, sizes, batch) -> Cell:
    """The centre-adaptive twin ``ca-<col>-<mid>`` of the MZ cell ``<col>-<mid>`` (``mz``: its
    model row, overrides such as ``n_enc`` kept), an ablation of 3 seeds at its sizes."""
    mid, _, label, kw = mz[:4]
    twin = (f"ca-{col}", f"{column}, layer: centre-adaptive (def:relop)", options, "")
    model = (mid, CENTRE_ADAPTIVE_MODEL, f"{label} (centre-adaptive)", kw)
    note = "o_c = M(mu) c_hat (def:relop) in place of Eq. eq:mz-main's o_c = M_c c_hat"
    (cell,) = ablation_grid([twin], [model], task, sizes, batch, note=note)
    return cell


# The task-reading calibration (issue 49): the Set Transformer on each reading of a task's words
# at the paper's sizes, against the paper's own number for it, and the yardstick on each. Never
# MZ: a task reading is chosen by the baseline.
def calibration_cell_id(col: str, reading: str, mid: str) -> str:
    return f"cal-{col}-{reading}-{mid}"


def reading_columns(prefix, task, readings, column, options=None) -> list[tuple]:
    """The ``grid_cells`` columns ``<prefix>-<reading>`` of ``column`` on each task reading in
    ``readings`` (v1 is the column's main cells), the reading's options added to ``options``."""
    if DEFAULT_READING in readings:
        raise ValueError(f"reading {DEFAULT_READING!r} is the column's main cells")
    return [(f"{prefix}-{r}", f"{column}, task reading {r}",
             {**(options or {}), **reading_options(task, r)}, "") for r in readings]  # fmt: skip


def calibration_cells(col, task, readings, column, st, sizes, batch, options=None):
    """The Set Transformer row ``st`` and the yardstick on each of ``readings``, at ``sizes``."""
    columns = reading_columns(f"cal-{col}", task, readings, column, options)
    note = "calibration of the task reading by the Set Transformer (issue 49)"
    return ablation_grid(columns, [st], task, sizes, batch, stats=True, note=note)
