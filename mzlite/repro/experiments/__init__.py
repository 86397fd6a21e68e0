"""The paper's experiments as data: one spec per table (by its LaTeX label), one runner for all.

    from mzlite.repro import experiments as ex
    ex.list_tables()                                   # labels, cells, results on disk
    ex.run("tab:meb", profile="smoke")                 # a few minutes on a CPU
    ex.run("tab:meb", profile="full", seeds=range(5), device="cuda", workers=4)

A ``TableSpec`` is a list of ``Cell`` s: one (task, task options, model, training) combination
each, with the ``data/paper`` entries it reproduces (``PaperRef``: row, column, metric). Cells the
paper does not have, but the book needs (normalisation, pooling, learning rate), are marked
``part="ablation"``; every table also carries one cell per task setting of the yardstick
``set_stats`` (a ridge on set statistics, :func:`mzlite.tasks.baseline_r2`, registered in
``mzlite.nn.MODELS`` as a closed-form model), so each table shows how hard its task really is.
A ``TableSpec`` also names the book chapter that runs it; ``CellKey`` names one of its cells.

Four profiles (``PROFILES``), whose results never mix (separate directories, the profile is in
every JSON and ``mzlite.repro.experiments.report`` refuses to mix them):
- ``smoke``: tiny data (128/64/64 sets), 3 epochs, lr 1e-3, one seed: it exercises the whole
  pipeline on a CPU in minutes and shows the learning curves moving. Its numbers mean nothing.
- ``cpu-converged``: the book's CPU protocol, designed to finish training on 2 cores: targets
  standardised on the training split, at most 2K/500 training/validation sets, runs ended by
  early stopping (cap 200, patience 20), a learning rate per model family chosen on the
  validation split (``benchmarks/lr_probe.py``), 3 seeds. ``python -m mzlite plan`` prices it.
- ``cpu``: "what 30 epochs show", the first CPU protocol (raw targets, 30 epochs, one seed),
  kept as a schedule ablation so that its committed results keep their reading.
- ``full``: the paper's protocol (App. app:impl, app:task-descriptions): AdamW lr 1e-4, wd 1e-5,
  5 warm-up epochs then cosine, clip 1.0, at most 200 epochs, patience 20, the data sizes and
  seed counts of each task.

Every trained result records ``convergence`` (``mzlite.repro.experiments.stats.convergence``:
stopped by
patience, or the best validation loss improved by less than 0.1 % over its last ``patience``
epochs; with the numbers that decided it) and ``converged``, and ``protocol`` (profile, model
family, where the learning rate comes from).

The runner writes one JSON per (table, cell, seed, profile), atomically, to
``<results>/<profile>/<label-with-dashes>/<cell-id>__seed<k>.json``; a rerun skips finished
results; a killed run loses at most the epochs in flight, because every job trains with a
``fit`` checkpoint under ``<cache>/checkpoints/`` that the next run resumes.

Choices the paper leaves open, fixed here (each also stated where it is made):
- Data: one dataset per (table, task setting), generated with ``data_seed`` 0 and shared by every
  model and seed; a seed changes the initialisation, the data order and dropout. Every model is
  thus compared on the same sets (paired), and data generation (exact MEB/hull/MST targets) is
  paid once.
- Sizes the paper does not give: MEB, hull and SGSP use 10K/2K/2K (the MEB protocol of
  benchmarks/README.md, "Before the project"); the MST, rotation-matching and quadratic-TDOF
  sweeps use Task F/G's 5K/1K/2K.
- Batch size 256 for the computational-geometry targets (MEB, hull, MST, SGSP: "geom. tasks" of
  the hyperparameter table), 128 for everything else.
- Targets are raw (the paper's default, app:opt-confound) except in the ``*-normed`` tables
  and under the ``cpu-converged`` profile (standardised; its ablation cells keep raw ones). An
  ablation cell that is the same experiment as an earlier cell under a profile is run once
  (``aliases``); so is a cell that is the same experiment as a cell of a table registered
  before it (``shared``: under ``cpu-annealed`` tab:hull-normed is tab:hull, tab:mz-efficient's
  columns are tab:main-results' Tasks A, F and G), whose results it reads.
- Parameter matching: ST-Large is the paper's fixed d=80, d_ff=200; HyperNet (r=8) and LA-ST are
  ``mzlite.nn.match_width`` to the paper's 360K and 359K at the task's own d_in.
- "1-layer" models (tab:tdof-verify, tab:gen-ablation) have one ISAB encoder block
  (``n_enc=1``); "ST-4L" has four (``n_enc=4``): the paper's tab:depth counts (140K for one
  layer, 208K for two, +68K per layer) are exactly what ``n_enc`` gives.
"""

from .execute import (  # noqa: F401
    build_cell_model,
    git_info,
    is_done,
    job_splits,
    load_result,
    provenance,
    result_amp,
    run_job,
)
from .jobs import (  # noqa: F401
    Job,
    aliases,
    job,
    jobs,
    parse_seeds,
    protocol,
    result_path,
    shared,
)
from .results import (  # noqa: F401
    PROFILE_ORDER,
    UnreadableResultWarning,
    best_profile,
    list_tables,
    load_results,
    results_by_cell,
)
from .runner import run  # noqa: F401
from .specs import (  # noqa: F401
    MODEL_FAMILIES,
    PROFILES,
    RESULT_FORMAT,
    SET_STATS,
    SET_STATS_LABEL,
    Cell,
    Derived,
    PaperRef,
    Profile,
    TableSpec,
    check_model_name,
    check_task_options,
    default_cache_dir,
    default_results_dir,
    model_family,
    model_names,
)
from .tables import (  # noqa: F401
    TABLES,
    TRANSFER_TIER1,
    CellKey,
    get_profile,
    get_table,
)

__all__ = [
    "PROFILES",
    "PROFILE_ORDER",
    "TABLES",
    "Cell",
    "CellKey",
    "Derived",
    "Job",
    "PaperRef",
    "Profile",
    "TableSpec",
    "UnreadableResultWarning",
    "aliases",
    "best_profile",
    "build_cell_model",
    "check_model_name",
    "check_task_options",
    "get_profile",
    "get_table",
    "git_info",
    "job",
    "job_splits",
    "jobs",
    "list_tables",
    "load_result",
    "load_results",
    "results_by_cell",
    "model_family",
    "model_names",
    "parse_seeds",
    "protocol",
    "provenance",
    "result_amp",
    "result_path",
    "run",
    "run_job",
    "shared",
]
