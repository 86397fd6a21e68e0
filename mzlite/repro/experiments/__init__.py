"""The paper's experiments as data: one spec per table (by its LaTeX label), one runner for all.

    from mzlite.repro import experiments as ex
    ex.list_tables()                                   # labels, cells, results on disk
    ex.run("tab:meb", profile="smoke")                 # a few minutes on a CPU
    ex.run("tab:meb", profile="full", seeds=range(5), device="cuda", workers=4)

A ``TableSpec`` (``tables``) is a list of ``Cell`` s: one (task, task options, model, training)
combination each, with the ``data/paper`` entries it reproduces (``PaperRef``); ``part="ablation"``
marks cells the paper does not have, and every table carries the closed-form yardstick
``set_stats`` per task setting. The profiles (``specs.PROFILES``, listed in ``run``'s docstring)
never mix: separate directories, and the profile is in every result.

The runner writes one JSON per (table, cell, seed, profile), atomically, to
``<results>/<profile>/<label-with-dashes>/<cell-id>__seed<k>.json``, recording ``convergence``,
``protocol`` and ``provenance``; a rerun skips finished results, and a killed run loses at most the
epochs in flight (every job trains with a ``fit`` checkpoint under ``<cache>/checkpoints/``). An
ablation cell that is the same experiment as an earlier cell (``aliases``) or as a cell of an
earlier table (``shared``) is run once. The choices the paper leaves open (data sizes, batch
sizes, parameter matching, what "1-layer" means) are stated where they are made: ``specs``,
``cells`` and ``tables``.
"""

from .execute import build_cell_model, git_info, is_done, job_splits, result_amp  # noqa: F401
from .jobs import Job, aliases, job, jobs, parse_seeds, protocol, result_path, shared  # noqa: F401
from .results import (  # noqa: F401
    PROFILE_ORDER,
    UnreadableResultWarning,
    best_profile,
    has_result,
    list_tables,
    load_results,
    results_by_cell,
)
from .runner import run  # noqa: F401
from .specs import (  # noqa: F401
    PROFILES,
    RESULT_FORMAT,
    SET_STATS,
    Cell,
    PaperRef,
    Profile,
    TableSpec,
    check_task_options,
    default_cache_dir,
    model_family,
)
from .tables import TABLES, TRANSFER_TIER1, CellKey, get_profile, get_table  # noqa: F401
